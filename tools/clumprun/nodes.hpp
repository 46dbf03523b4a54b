#pragma once
// Which node each rank runs on, and how a rank is started on its node.
//
// -N NODES splits the P ranks of one machine into NODES groups of consecutive
// ranks that the ranks treat as separate machines (shared memory inside a
// group, the network between groups): how the multi-protocol layer is tested
// and measured on one machine. --hosts h1,h2,... makes each host a node and
// starts every rank through a spawn template ("ip netns exec {host}"), or,
// when the template is ssh (or with --remote), starts one clumprun agent per
// host through it, which starts that host's ranks (see remote.cpp).

#include <optional>
#include <string>
#include <vector>

namespace clumprun {

struct node_plan {
  int node_count = 1;
  std::vector<int> node_of;        ///< per rank: r * node_count / P, so consecutive groups
  std::vector<int> local_rank;     ///< per rank: its index among the ranks of its node
  std::vector<std::string> hosts;  ///< per node with --hosts; empty: all on this machine
  std::vector<std::string> spawn;  ///< the template's words with --hosts, "{host}" still in them
  bool remote = false;             ///< one agent per host starts its ranks (ssh, or --remote)
  bool through_shell = false;      ///< the template is ssh: a shell on the host parses the command
};

/// What the command line asked for; the texts are empty when not given.
struct node_request {
  std::string nodes;  ///< -N
  std::string hosts;  ///< --hosts, comma-separated
  std::string spawn;  ///< --spawn
  bool spawn_given = false;
  bool remote = false;  ///< --remote
};

/// Default of --spawn.
inline constexpr const char* default_spawn = "ssh {host}";

/// Plans `nranks` ranks on nodes. Returns nothing and a sentence in `why` when
/// the request is refused; `bad_usage` then tells a malformed command line
/// (exit 2) from a well-formed request clumprun cannot carry out (exit 1).
std::optional<node_plan> plan_nodes(int nranks, const node_request& request, std::string& why, bool& bad_usage);

/// The words that start a rank on `node`: the spawn template with every
/// "{host}" replaced by the node's host; empty without --hosts.
std::vector<std::string> spawn_words(const node_plan& plan, int node);

}  // namespace clumprun
