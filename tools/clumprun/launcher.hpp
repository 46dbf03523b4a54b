#pragma once
// The running job: clumprun's processes, its rendezvous and collectives, and
// how a job ends. Everything happens in one thread and one poll() loop over a
// signalfd (SIGCHLD and the signals clumprun forwards), every rank's boot
// socket and, with --label, every rank's output pipes. Nothing in the loop
// blocks, and every wait has a deadline, so a dead or stuck rank can delay the
// end of a job by at most the grace period.

#include <sched.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "nodes.hpp"

namespace clumprun {

struct launch_options {
  int nranks = 0;
  std::vector<std::string> argv;  ///< the program's arguments; argv[0] as the user wrote it
  std::string program;            ///< the resolved path that is executed: PROG, or the spawn template's first word
  bool label = false;
  bool keep_going = false;  ///< a failed rank does not end the job (its exit code is still reported)
  int verbose = 0;
  double timeout_seconds = 0;              ///< 0: no limit
  double kill_grace_seconds = 2;           ///< how long ranks get after SIGTERM before SIGKILL (--kill-grace)
  std::vector<cpu_set_t> cpu_sets;         ///< one per rank, or empty: do not bind
  std::vector<std::string> bind_descriptions;
  uint64_t job_id = 0;
  std::vector<uint64_t> tags;  ///< one per rank: distinct, never 0 or 1
  /// CLUMP_NET_AUTH: the ranks authenticate their datagrams with net_key (on
  /// by default when the job spans hosts). The key goes to the ranks in
  /// their job message; to an agent, on its standard input.
  bool net_auth = false;
  std::array<unsigned char, 32> net_key{};
  node_plan nodes;             ///< which node each rank is on, and how it is started there

  // Remote launch (tools/clumprun/remote.cpp): with --hosts and ssh (or
  // --remote), clumprun starts one agent per host through the spawn template
  // and the agents start the ranks; the boot protocol goes over TCP.
  bool remote = false;
  std::string boot_address;                ///< where the agents connect: an IPv4 address, or "auto"
  std::string self;                        ///< this clumprun's path, run on every host
  std::vector<std::string> own_arguments;  ///< clumprun's command line, handed to the agents
  bool quote_for_shell = false;            ///< the template is ssh: a remote shell parses the words
  // An agent (--agent): starts the ranks of one host for the clumprun at `head`.
  std::string head;  ///< "a.b.c.d:port"; empty: not an agent
  int agent_node = -1;
};

/// Starts the job, serves it until every rank has ended, and returns
/// clumprun's exit code: 0 when all ranks exited 0; the code of the first rank
/// that failed (128 + signal when killed); the code passed to exit_job; 124 on
/// --timeout; 128 + signal when clumprun itself was interrupted; 1 when the
/// job could not start or could not go on (a rank left the others waiting).
int run_job(const launch_options& options);

/// Writes "clumprun: <text>\n" to stderr in one write ("clumprun on HOST: "
/// in an agent, see set_say_prefix).
void say(const std::string& text);
void set_say_prefix(const std::string& prefix);

}  // namespace clumprun
