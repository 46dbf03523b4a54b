#pragma once
// pingpong over clump's network protocol: how rank 0 reaches rank 1, the raw
// UDP sockets the network limits run on (see udp_limits.hpp), clump's
// network counters as JSON, and the peers the issue quotes for the network.

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "pingpong_driver.hpp"
#include "report.hpp"
#include "udp_limits.hpp"

namespace pingpong {

/// How rank 0 reaches rank 1.
enum class path {
  self,           ///< a job of one: rank 0 talks to itself
  shared_memory,  ///< rank 1 shares rank 0's node
  network,        ///< clump's network protocol (CLUMP_PROTOCOL=net, or another node)
};
const char* to_string(path p) noexcept;

/// Rank 0: sends rank 1 one short request and spins for its reply (rank 1
/// must be polling, e.g. in a barrier); the path is the network when clump's
/// network counted the message.
path probe_path(clump::runtime& rt, state& st, handlers& h);

/// The raw UDP socket of rank 0 or 1, connected to the other's.
struct udp_partner {
  std::unique_ptr<bench::udp_link> link;
  std::string ip;                 ///< the address it is bound to: clump's socket's, else 127.0.0.1
  bench::socket_buffers wanted;   ///< clump's socket's buffers, or as clump would size them
  bool wanted_from_clump = false; ///< read off clump's own socket (else computed from the settings)
};

/// Collective (every rank calls it, `open` the same everywhere): ranks 0 and
/// 1 open their raw sockets when `open`, exchange addresses and connect.
/// Throws std::runtime_error.
void set_up_udp(clump::runtime& rt, bool open, udp_partner& u);

/// CLUMP_NET_MTU as clump reads it (65000 when unset): the raw stream's datagram size.
size_t clump_net_mtu();

/// Adds what the network and the raw UDP sockets mean to the report: the
/// path and address in the job, the sockets in the config, notes, and over
/// the network the legend and the peers the issue quotes.
void describe_net(bench::report& rep, path to_peer, const udp_partner& u, int ranks);

/// Network counters as JSON.
nlohmann::json to_json(const clump::network_stats& s);
/// Adds the counters of `now` minus those of `before` to `sum`.
void add_difference(clump::network_stats& sum, const clump::network_stats& now, const clump::network_stats& before);

/// Figures the issue quotes for the network (other machines; not measured here).
extern const char* const net_peers_latency;
extern const char* const net_peers_bandwidth;
nlohmann::json net_peers_reference();

}  // namespace pingpong
