// clumprun: starts the P processes of one clump job, on this machine or across hosts.
//
//   clumprun -n P [-N NODES | --hosts H1,H2,... [--spawn TEMPLATE] [--remote] [--boot-address A]]
//            [--bind none|core] [--label] [--keep-going] [--timeout SECONDS] [--kill-grace SECONDS] [-v]
//            prog [args...]
//
// Options stop at `prog`: everything after it belongs to the program. What
// clumprun does, in order: checks the request against the machine (program
// runnable, file descriptors, processes, shared memory) before starting
// anything; places the ranks on nodes (tools/clumprun/nodes.hpp); plans core
// binding with hwloc; forks the ranks with their boot
// sockets (tools/clumprun/launcher.cpp); serves the rendezvous and the
// collectives (src/boot/wire.hpp describes the protocol); and ends the whole
// job as soon as one rank fails, with that rank's exit code.

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <clump/status.hpp>

#include "boot/wire.hpp"
#include "core/settings.hpp"
#include "net/link.hpp"
#include "clumprun/binding.hpp"
#include "clumprun/handshake.hpp"
#include "clumprun/launcher.hpp"
#include "clumprun/nodes.hpp"
#include "clumprun/preflight.hpp"

namespace {

constexpr int exit_usage = 2;
constexpr int exit_refused = 1;

// CLI11 would print "clumprun [OPTIONS]"; the program and its arguments matter as much.
class usage_formatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App*, std::string) const override {
    return "Usage: clumprun -n P [-N NODES | --hosts H1,H2,... [--spawn TEMPLATE] [--remote] [--boot-address A]]\n"
           "                [--bind none|core] [--label] [--keep-going] [--timeout SECONDS] [--kill-grace SECONDS]\n"
           "                [-v] PROG [ARGS...]\n";
  }
};

int usage_error(const std::string& text) {
  clumprun::say(text + " (clumprun --help shows the usage)");
  return exit_usage;
}

// "-n 4" -> 4; anything but a positive integer is refused with a sentence.
bool parse_ranks(const std::string& text, int& out, std::string& why) {
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end == text.c_str() || *end != '\0') {
    why = fmt::format("-n {}: the number of ranks must be a whole number, e.g. -n 4", text);
    return false;
  }
  if (v < 1) {
    why = fmt::format("-n {}: the number of ranks must be at least 1", text);
    return false;
  }
  if (errno == ERANGE || v > INT_MAX) {
    why = fmt::format("-n {}: too many ranks", text);
    return false;
  }
  out = static_cast<int>(v);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Starts the P processes of one clump job on this machine, binds them to cores, hands out the job's "
               "names and tags, and ends the whole job when one process fails.",
               "clumprun"};
  app.footer(
      "Options stop at PROG: the arguments after it are PROG's.\n"
      "Exit code: 0 when every rank exits 0; else the code of the first rank that failed (128+N when killed by "
      "signal N), the code given to AMX_SPMDExit, 124 on --timeout, 126/127 when PROG cannot be run, 2 for a bad "
      "command line, 1 when the job cannot start or a rank left the others waiting.\n"
      "Rank 0 reads clumprun's standard input unless it is a terminal; the other ranks read /dev/null.\n"
      "Nodes: rank r of P is on node r*NODES/P (groups of consecutive ranks); ranks of one node share memory, "
      "ranks of different nodes use the network. Without --hosts clumprun sets CLUMP_NET_ADDRESS=127.0.0.1 "
      "unless it is set. With --hosts, rank r runs as TEMPLATE PROG ARGS... with {host} replaced by its node's "
      "host, and the wrapper must keep the environment and inherited descriptors (ip netns exec {host}, env "
      "HOST={host}). With ssh (the default template) or --remote, clumprun runs TEMPLATE clumprun --agent ... "
      "once per host instead: that clumprun (at the same path there, as PROG) connects back over TCP to "
      "--boot-address, gets the job's CLUMP_* settings and starts the host's ranks; their stdin is /dev/null.");
  app.prefix_command();
  app.formatter(std::make_shared<usage_formatter>());
  std::string ranks_text, bind_text, timeout_text;
  clumprun::node_request nodes;
  bool label = false;
  bool keep_going = false;
  int verbose = 0;
  app.add_option("-n,--np", ranks_text, "number of processes (ranks) to start")->required()->type_name("P");
  app.add_option("-N,--nodes", nodes.nodes,
                 "split the ranks into NODES groups of consecutive ranks that act as separate machines (shared "
                 "memory inside a group, the network between groups); 1 <= NODES <= P; default 1")
      ->type_name("NODES");
  app.add_option("--hosts", nodes.hosts, "one node per host: rank r runs on host r*HOSTS/P, started through --spawn")
      ->type_name("H1,H2,...");
  auto* spawn = app.add_option("--spawn", nodes.spawn,
                               "how to start a rank on {host}: words put before PROG (no quoting); default "
                               "\"ssh {host}\" (one clumprun agent per host); e.g. \"ip netns exec {host}\"")
                    ->type_name("TEMPLATE");
  bool remote = false;
  app.add_flag("--remote", remote,
               "start each host's ranks through one clumprun agent there, which connects back over TCP (what ssh "
               "templates do anyway)");
  std::string boot_address = "auto";
  app.add_option("--boot-address", boot_address,
                 "with agents: the IPv4 address of this machine they connect to; default: the first interface "
                 "that is up and not loopback")
      ->type_name("A");
  // The agent's side, set by the head (hidden).
  std::string agent_head, agent_node_text, agent_dir;
  app.add_option("--agent", agent_head)->group("");
  app.add_option("--agent-dir", agent_dir)->group("");
  app.add_option("--agent-node", agent_node_text)->group("");
  app.add_option("--bind", bind_text,
                 "core: rank r runs on core r % cores (all its hardware threads); none: no binding; default: core "
                 "when P <= cores, else none")
      ->type_name("none|core");
  app.add_flag("--label", label, "prefix every line of a rank's output with \"[rank] \"");
  app.add_flag("--keep-going", keep_going,
               "a rank that fails does not end the job: the others go on (messages to it come back unreachable); "
               "the exit code is still the first failure's");
  app.add_option("--timeout", timeout_text, "end the job after SECONDS (exit code 124)")->type_name("SECONDS");
  std::string grace_text;
  auto* grace_option = app.add_option("--kill-grace", grace_text,
                 "when the job ends early, ranks get SECONDS after SIGTERM to exit before SIGKILL (0 to 3600; "
                 "default 2); the exit code stays the first failure's")
      ->type_name("SECONDS");
  app.add_flag("-v,--verbose", verbose, "say what clumprun decides and sees (binding, pids, nodes, exits); -v -v: more");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return usage_error(e.what());
  }

  std::vector<std::string> prog_argv = app.remaining();
  if (!prog_argv.empty() && prog_argv[0] == "--") prog_argv.erase(prog_argv.begin());
  if (prog_argv.empty()) return usage_error("no program to run: clumprun -n P prog [args...]");
  if (prog_argv[0].size() > 1 && prog_argv[0][0] == '-')
    return usage_error(fmt::format("unknown option {}", prog_argv[0]));

  clumprun::launch_options o;
  std::string why;
  if (!parse_ranks(ranks_text, o.nranks, why)) return usage_error(why);
  if (!bind_text.empty() && bind_text != "none" && bind_text != "core")
    return usage_error(fmt::format("--bind {}: say none or core", bind_text));
  double timeout = 0;
  if (!timeout_text.empty()) {
    char* end = nullptr;
    timeout = std::strtod(timeout_text.c_str(), &end);
    if (end == timeout_text.c_str() || *end != '\0' || !(timeout > 0) || timeout > 1e9)
      return usage_error(fmt::format("--timeout {}: give the limit in seconds, greater than 0", timeout_text));
  }

  double kill_grace = 2;
  if (grace_option->count() > 0) {
    char* end = nullptr;
    kill_grace = std::strtod(grace_text.c_str(), &end);
    if (end == grace_text.c_str() || *end != '\0' || !(kill_grace >= 0) || kill_grace > 3600)
      return usage_error(fmt::format("--kill-grace {}: give the time in seconds, from 0 to 3600", grace_text));
  }

  nodes.spawn_given = spawn->count() > 0;
  nodes.remote = remote;
  bool bad_usage = true;
  auto plan = clumprun::plan_nodes(o.nranks, nodes, why, bad_usage);
  if (!plan) {
    if (bad_usage) return usage_error(why);
    clumprun::say(why);
    return exit_refused;
  }
  const bool agent = !agent_head.empty();
  if (agent) {
    char* end = nullptr;
    long node = std::strtol(agent_node_text.c_str(), &end, 10);
    if (!plan->remote || end == agent_node_text.c_str() || *end || node < 0 || node >= plan->node_count)
      return usage_error("--agent is clumprun's own, for the hosts of a job started over ssh or with --remote");
    o.head = agent_head;
    o.agent_node = static_cast<int>(node);
    plan->spawn.clear();  // this is the host: the ranks start here, directly
    clumprun::set_say_prefix(fmt::format("clumprun on {}: ", plan->hosts[static_cast<size_t>(node)]));
    // Where clumprun was started, when this host has that directory too (a
    // shared file system): relative paths then mean the same everywhere.
    if (!agent_dir.empty() && ::chdir(agent_dir.c_str()) != 0 && verbose)
      clumprun::say(fmt::format("no directory {} here ({}); running in {}", agent_dir, std::strerror(errno),
                                std::getenv("HOME") ? std::getenv("HOME") : "the login directory"));
  } else if (plan->remote) {
    o.remote = true;
    o.boot_address = boot_address;
    o.quote_for_shell = plan->through_shell;
    char self[PATH_MAX];
    ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
      clumprun::say(fmt::format("cannot find this clumprun's own path: {}", std::strerror(errno)));
      return exit_refused;
    }
    o.self.assign(self, static_cast<size_t>(n));
    char dir[PATH_MAX];
    if (::getcwd(dir, sizeof dir)) o.own_arguments = {"--agent-dir", dir};
    o.own_arguments.insert(o.own_arguments.end(), argv + 1, argv + argc);
  }

  // A local wrapper starts the rank on this machine, so PROG must be
  // runnable here too: checked before anything starts, like the wrapper. (On
  // other hosts, their agents check it there.)
  int err = 0;
  auto program = o.remote ? std::optional<std::string>(prog_argv[0]) : clumprun::resolve_program(prog_argv[0], err, why);
  if (!program) {
    clumprun::say(fmt::format("cannot run '{}': {}", prog_argv[0], why));
    return err == ENOENT ? 127 : 126;
  }
  // What is executed: PROG itself, or the wrapper, which is given PROG as the
  // user wrote it (it searches PATH itself).
  std::optional<std::string> executed = program;
  if (!plan->spawn.empty()) {
    executed = clumprun::resolve_program(plan->spawn[0], err, why);
    if (!executed) {
      clumprun::say(fmt::format("--spawn: cannot run '{}': {}", plan->spawn[0], why));
      return err == ENOENT ? 127 : 126;
    }
  }
  if (auto refusal = clumprun::check_capacity(o.nranks, label)) {
    clumprun::say(*refusal);
    return exit_refused;
  }

  clumprun::bind_mode mode = bind_text == "none"   ? clumprun::bind_mode::none
                             : bind_text == "core" ? clumprun::bind_mode::core
                                                   : clumprun::bind_mode::automatic;
  // An agent binds its host's ranks to its host's cores, by their local ranks.
  int bound = o.nranks;
  if (agent) bound = static_cast<int>(std::count(plan->node_of.begin(), plan->node_of.end(), o.agent_node));
  clumprun::binding_plan binding = o.remote ? clumprun::binding_plan{} : clumprun::plan_binding(mode, bound);
  if (agent && binding.bind) {
    std::vector<cpu_set_t> sets(static_cast<size_t>(o.nranks));
    std::vector<std::string> descriptions(static_cast<size_t>(o.nranks));
    for (size_t r = 0; r < sets.size(); ++r) {
      if (plan->node_of[r] != o.agent_node) continue;
      sets[r] = binding.cpu_sets[static_cast<size_t>(plan->local_rank[r])];
      descriptions[r] = binding.descriptions[static_cast<size_t>(plan->local_rank[r])];
    }
    binding.cpu_sets = std::move(sets);
    binding.descriptions = std::move(descriptions);
  }

  o.argv = std::move(prog_argv);
  o.program = *executed;
  o.label = label;
  o.keep_going = keep_going;
  o.verbose = verbose;
  o.timeout_seconds = agent ? 0 : timeout;  // the head keeps the time, and says 124
  o.kill_grace_seconds = kill_grace;
  o.nodes = std::move(*plan);
  if (binding.bind) {
    o.cpu_sets = std::move(binding.cpu_sets);
    o.bind_descriptions = std::move(binding.descriptions);
  }
  std::set<uint64_t> seen;
  if (agent) return clumprun::run_job(o);  // the head hands out the job id and tags
  if (!clump::boot::wire::random_u64(o.job_id) || !clumprun::handshake::random(o.net_key.data(), o.net_key.size())) {
    clumprun::say(fmt::format("getrandom failed: {}", std::strerror(errno)));
    return exit_refused;
  }
  // CLUMP_NET_AUTH: datagrams authenticated when the job spans hosts (auto:
  // --hosts, through agents or not), always (on: emulated nodes and the net
  // protocol on one machine too), or never (off).
  const int auth = clump::core::settings().net_auth;
  o.net_auth = auth == 1 || (auth == 0 && !o.nodes.hosts.empty());
  if (o.net_auth && !clumprun::handshake::available()) {
    clumprun::say("CLUMP_NET_AUTH asks for authenticated datagrams, but this clump was built without libsodium: "
                  "install libsodium-dev and rebuild, or set CLUMP_NET_AUTH=off to run on a network you trust");
    return exit_refused;
  }
  while (o.tags.size() < static_cast<size_t>(o.nranks)) {
    uint64_t tag = 0;
    if (!clump::boot::wire::random_tag(tag)) {
      clumprun::say(fmt::format("getrandom failed: {}", std::strerror(errno)));
      return exit_refused;
    }
    if (seen.insert(tag).second) o.tags.push_back(tag);
  }
  if (verbose) {
    clumprun::say(fmt::format("job {:016x}: {} rank(s) on {} node(s) of {}; binding: {}; datagrams {}", o.job_id,
                              o.nranks, o.nodes.node_count, *program, binding.why,
                              o.net_auth ? "authenticated" : "not authenticated"));
    // What the ranks' network goes over, as this host would open it (CLUMP_NET).
    const auto& cfg = clump::core::settings();
    if (o.nranks > 1 && (o.nodes.node_count > 1 || cfg.force_net)) {
      try {
        const std::unique_ptr<clump::net::link> link = clump::net::open_link(cfg);
        clumprun::say(fmt::format("network between nodes: {}{}", link ? link->kind() : std::string("udp"),
                                  link ? "; " + clump::net::reads_text(*link, cfg) : std::string()));
      } catch (const clump::error& e) {
        clumprun::say(fmt::format("network between nodes: cannot be opened here: {}", e.what()));
      }
    }
  }
  return clumprun::run_job(o);
}
