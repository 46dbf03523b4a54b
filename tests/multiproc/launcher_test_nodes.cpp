// Multi-node jobs through the built clumprun (boot protocol version 2 and on): -N
// places ranks on nodes, --hosts starts them through a spawn template, every
// rank's network address reaches every rank byte for byte, and both sides
// refuse a peer of another protocol version or a malformed message with a
// sentence. The spawn templates here are local wrappers (env, a script, and a
// stand-in for ssh that runs the hosts' agents here): the namespaces of
// tests/netns/run need root and are not used by unit tests.

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "launcher_test_support.hpp"

namespace {

using namespace clump::test;
namespace wire = clump::boot::wire;

class launcher_nodes : public launcher {};

// What the probe's "nodes" command printed, per rank.
struct node_line {
  int node = -1, count = -1;
  std::string map, local;
};

std::map<int, node_line> node_lines(const std::string& output) {
  std::map<int, node_line> out;
  for (const auto& line : lines_of(output)) {
    int rank = -1;
    node_line n;
    char map[4096] = {}, local[32] = {};
    if (std::sscanf(line.c_str(), "nodes rank %d node %d of %d map %4095s local %31s", &rank, &n.node, &n.count, map,
                    local) == 5) {
      n.map = map;
      n.local = local;
      out[rank] = n;
    }
  }
  return out;
}

// rank -> value of `name` from the probe's "env rank R NAME=VALUE" lines
// ("unset" when it said so).
std::map<int, std::string> env_lines(const std::string& output, const std::string& name) {
  std::map<int, std::string> out;
  for (const auto& line : lines_of(output)) {
    int rank = -1, used = 0;
    if (std::sscanf(line.c_str(), "env rank %d %n", &rank, &used) != 1 || used == 0) continue;
    std::string rest = line.substr(static_cast<size_t>(used));
    if (rest == name + " unset") out[rank] = "unset";
    else if (rest.compare(0, name.size() + 1, name + "=") == 0) out[rank] = rest.substr(name.size() + 1);
  }
  return out;
}

// What clumprun -v says of `rank`'s node: "1" or "1 (beta)", from
// "clumprun: rank R: pid P, node 1 (beta), bound to ...".
std::string verbose_node(const std::string& output, int rank) {
  const std::string start = "clumprun: rank " + std::to_string(rank) + ": pid ";
  for (const auto& line : lines_of(output)) {
    if (line.compare(0, start.size(), start) != 0) continue;
    size_t at = line.find(", node ");
    if (at == std::string::npos) return "no node in: " + line;
    at += 7;
    size_t end = line.find(", ", at);
    return line.substr(at, end == std::string::npos ? std::string::npos : end - at);
  }
  return "no line for rank " + std::to_string(rank);
}

// The placement clumprun promises: rank r on node r * nodes / ranks.
int expected_node(int r, int nodes, int ranks) { return r * nodes / ranks; }

std::string expected_map(int nodes, int ranks) {
  std::string map;
  for (int r = 0; r < ranks; ++r) {
    if (r) map += ',';
    map += std::to_string(expected_node(r, nodes, ranks));
  }
  return map;
}

void expect_placement(const std::string& output, int nodes, int ranks) {
  auto lines = node_lines(output);
  ASSERT_EQ(lines.size(), static_cast<size_t>(ranks)) << output;
  int first = 0;
  for (int r = 0; r < ranks; ++r) {
    const node_line& n = lines[r];
    int node = expected_node(r, nodes, ranks);
    if (r == 0 || node != expected_node(r - 1, nodes, ranks)) first = r;
    EXPECT_EQ(n.node, node) << "rank " << r << "\n" << output;
    EXPECT_EQ(n.count, nodes) << output;
    EXPECT_EQ(n.map, expected_map(nodes, ranks)) << "rank " << r << "\n" << output;
    EXPECT_EQ(n.local, std::to_string(r - first)) << "CLUMP_LOCAL_RANK of rank " << r << "\n" << output;
  }
}

struct shape {
  int ranks, nodes;
};

class launcher_node_shapes : public launcher, public ::testing::WithParamInterface<shape> {};

TEST_P(launcher_node_shapes, ranks_are_split_into_consecutive_groups) {
  auto [ranks, nodes] = GetParam();
  cmd_result r = run_cmd(job(ranks, {"nodes"}, {"-N", std::to_string(nodes)}), job_timeout);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_placement(r.output, nodes, ranks);
  expect_no_ranks_left(r.output, static_cast<size_t>(ranks));
}

// 5 ranks on 2 and 3 nodes: groups of unequal size (3+2, 2+2+1).
INSTANTIATE_TEST_SUITE_P(shapes, launcher_node_shapes,
                         ::testing::Values(shape{4, 2}, shape{5, 2}, shape{4, 3}, shape{5, 3}, shape{4, 1},
                                           shape{4, 4}, shape{1, 1}),
                         [](const auto& info) {
                           return std::to_string(info.param.ranks) + "_ranks_on_" + std::to_string(info.param.nodes);
                         });

TEST_F(launcher_nodes, one_node_is_the_default) {
  cmd_result r = run_cmd(job(3, {"nodes"}), job_timeout);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_placement(r.output, 1, 3);
}

TEST_F(launcher_nodes, verbose_names_the_node_of_every_rank) {
  cmd_result r = run_cmd(job(5, {"hello"}, {"-N", "2", "-v"}), job_timeout);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (int rank = 0; rank < 5; ++rank)
    EXPECT_EQ(verbose_node(r.output, rank), std::to_string(expected_node(rank, 2, 5))) << r.output;
  EXPECT_NE(r.output.find("5 rank(s) on 2 node(s)"), std::string::npos) << r.output;
}

TEST_F(launcher_nodes, bad_node_counts_are_refused_before_starting) {
  for (std::string n : {"0", "5", "-1"}) {
    cmd_result r = run_cmd(job(4, {"nodes"}, {"-N", n}), job_timeout);
    EXPECT_EQ(r.exit_code, 2) << n << ": " << r.output;
    EXPECT_NE(r.output.find("clumprun: -N " + n +
                            ": the number of nodes must be between 1 and the number of ranks (4)"),
              std::string::npos)
        << n << ": " << r.output;
    EXPECT_TRUE(rank_pids(r.output).empty()) << "nothing may start\n" << r.output;
  }
  cmd_result r = run_cmd(job(4, {"nodes"}, {"--nodes", "two"}), job_timeout);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("-N two: the number of nodes must be a whole number"), std::string::npos) << r.output;
}

TEST_F(launcher_nodes, every_rank_sees_every_ranks_network_address_exactly) {
  // 7 ranks cover every length the probe uses, 0 and 64 bytes included.
  for (std::vector<std::string> options : {std::vector<std::string>{}, {"-N", "3"}}) {
    cmd_result r = run_cmd(job(7, {"address"}, options), job_timeout);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(count(r.output, "address ok rank"), 7) << r.output;
    EXPECT_EQ(r.output.find("FAIL"), std::string::npos) << r.output;
  }
}

TEST_F(launcher_nodes, a_network_address_over_64_bytes_is_refused) {
  cmd_result r = run_cmd(job(2, {"longaddress"}), job_timeout);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(count(r.output, "long address refused: clump: joining the job: bad argument: a network address of 65 "
                            "bytes is longer than the 64 bytes"),
            2)
      << r.output;
  EXPECT_EQ(count(r.output, "address ok rank"), 2) << r.output;
  r = run_cmd({probe, "longaddress"}, job_timeout);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("long address refused"), std::string::npos) << r.output;
}

TEST_F(launcher_nodes, a_job_of_one_has_one_node_and_its_own_address) {
  for (std::string cmd : {"nodes", "address"}) {
    cmd_result r = run_cmd({probe, cmd}, job_timeout);
    EXPECT_EQ(r.exit_code, 0) << cmd << ": " << r.output;
    EXPECT_EQ(r.output.find("FAIL"), std::string::npos) << r.output;
  }
  cmd_result r = run_cmd({probe, "nodes"}, job_timeout);
  EXPECT_NE(r.output.find("nodes rank 0 node 0 of 1 map 0 "), std::string::npos) << r.output;
}

TEST_F(launcher_nodes, local_jobs_get_the_loopback_address_unless_one_is_set) {
  cmd_result r = run_cmd(job(2, {"nodes", "CLUMP_NET_ADDRESS"}, {"-N", "2"}), job_timeout, {"CLUMP_NET_ADDRESS"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto env = env_lines(r.output, "CLUMP_NET_ADDRESS");
  EXPECT_EQ(env[0], "127.0.0.1") << r.output;
  EXPECT_EQ(env[1], "127.0.0.1") << r.output;
  r = run_cmd(job(2, {"nodes", "CLUMP_NET_ADDRESS"}), job_timeout, {"CLUMP_NET_ADDRESS=127.0.0.7"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  env = env_lines(r.output, "CLUMP_NET_ADDRESS");
  EXPECT_EQ(env[0], "127.0.0.7") << r.output;
  EXPECT_EQ(env[1], "127.0.0.7") << r.output;
}

TEST_F(launcher_nodes, hosts_start_each_rank_through_the_spawn_template) {
  cmd_result r = run_cmd(job(5, {"nodes", "PROBE_HOST", "CLUMP_NET_ADDRESS"},
                             {"-v", "--hosts", "alpha,beta,gamma", "--spawn", "env PROBE_HOST={host}"}),
                         job_timeout, {"CLUMP_NET_ADDRESS"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_placement(r.output, 3, 5);
  const std::vector<std::string> hosts{"alpha", "beta", "gamma"};
  auto host = env_lines(r.output, "PROBE_HOST");
  auto address = env_lines(r.output, "CLUMP_NET_ADDRESS");
  for (int rank = 0; rank < 5; ++rank) {
    int node = expected_node(rank, 3, 5);
    EXPECT_EQ(host[rank], hosts[static_cast<size_t>(node)]) << "rank " << rank << "\n" << r.output;
    // Each rank finds its own host's address: clumprun cannot know it.
    EXPECT_EQ(address[rank], "unset") << "rank " << rank << "\n" << r.output;
    EXPECT_EQ(verbose_node(r.output, rank), std::to_string(node) + " (" + hosts[static_cast<size_t>(node)] + ")")
        << r.output;
  }
  expect_no_ranks_left(r.output, 5);
}

TEST_F(launcher_nodes, a_wrapper_script_gets_the_host_and_runs_the_rank) {
  char path[] = "/tmp/clump-spawn-XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  // Not exec: the rank is the wrapper's child, as with many real wrappers.
  std::string script = "#!/bin/sh\nhost=$1; shift\nPROBE_HOST=wrapped-$host \"$@\"\n";
  ASSERT_EQ(::write(fd, script.data(), script.size()), static_cast<ssize_t>(script.size()));
  ::close(fd);
  ::chmod(path, 0700);
  cmd_result r = run_cmd(job(4, {"hello"}, {"--hosts", "h0,h1", "--spawn", std::string(path) + " {host}"}),
                         job_timeout);
  cmd_result n = run_cmd(job(4, {"nodes", "PROBE_HOST"}, {"--hosts", "h0,h1", "--spawn", std::string(path) + " {host}"}),
                         job_timeout);
  ::unlink(path);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(count(r.output, "hello rank"), 4) << r.output;
  EXPECT_EQ(r.output.find("FAIL"), std::string::npos) << r.output;
  expect_no_ranks_left(r.output, 4);
  ASSERT_EQ(n.exit_code, 0) << n.output;
  expect_placement(n.output, 2, 4);
  auto host = env_lines(n.output, "PROBE_HOST");
  for (int rank = 0; rank < 4; ++rank)
    EXPECT_EQ(host[rank], "wrapped-h" + std::to_string(rank / 2)) << n.output;
}

TEST_F(launcher_nodes, hosts_and_a_matching_node_count_agree) {
  cmd_result r = run_cmd(job(2, {"nodes"}, {"-N", "2", "--hosts", "a,b", "--spawn", "env H={host}"}), job_timeout);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_placement(r.output, 2, 2);
}

TEST_F(launcher_nodes, bad_host_requests_are_refused_before_starting) {
  struct bad {
    std::vector<std::string> options;
    std::string says;
  };
  const std::vector<bad> cases{
      {{"-N", "3", "--hosts", "a,b", "--spawn", "env H={host}"}, "-N 3 conflicts with --hosts, which names 2 host(s)"},
      {{"--spawn", "env H={host}"}, "--spawn says how to start a rank on a host, so it needs --hosts"},
      {{"--hosts", "a,,b", "--spawn", "env H={host}"}, "--hosts a,,b: give host names separated by commas"},
      {{"--hosts", "a,b,a", "--spawn", "env H={host}"}, "a is named twice"},
      {{"--hosts", "a,b,c,d,e", "--spawn", "env H={host}"}, "--hosts names 5 hosts but the job has 4 rank(s)"},
      {{"--hosts", "a,b", "--spawn", "env"}, "does not contain {host}"},
      {{"--hosts", "a,b", "--spawn", " "}, "--spawn is empty"},
  };
  for (const auto& c : cases) {
    cmd_result r = run_cmd(job(4, {"nodes"}, c.options), job_timeout);
    EXPECT_EQ(r.exit_code, 2) << c.says << "\n" << r.output;
    EXPECT_NE(r.output.find("clumprun: "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(c.says), std::string::npos) << c.says << "\n" << r.output;
    EXPECT_TRUE(rank_pids(r.output).empty()) << "nothing may start\n" << r.output;
  }
  cmd_result r = run_cmd(job(2, {"nodes"}, {"--hosts", "a,b", "--spawn", "/nonexistent/wrapper {host}"}),
                         job_timeout);
  EXPECT_EQ(r.exit_code, 127) << r.output;
  EXPECT_NE(r.output.find("clumprun: --spawn: cannot run '/nonexistent/wrapper'"), std::string::npos) << r.output;
}

// A stand-in for ssh, first in PATH: it skips ssh's options and the host and
// runs the command as sshd does, through a shell, in a fresh environment
// (ssh carries none). So a job "over ssh" runs its agents on this machine,
// through everything the real thing goes through except the wire.
class fake_ssh {
 public:
  fake_ssh() {
    char dir[] = "/tmp/clump-ssh-XXXXXX";
    if (::mkdtemp(dir)) dir_ = dir;
    std::ofstream f(dir_ + "/ssh");
    f << "#!/bin/sh\n"
         "while [ $# -gt 0 ]; do case $1 in -o|-i|-p|-l) shift 2 ;; -*) shift ;; *) break ;; esac; done\n"
         "shift\n"
         "exec env -i PATH=\"$PATH\" sh -c \"$*\"\n";
    f.close();
    ::chmod((dir_ + "/ssh").c_str(), 0700);
  }
  ~fake_ssh() {
    ::unlink((dir_ + "/ssh").c_str());
    ::rmdir(dir_.c_str());
  }
  /// The environment of a clumprun that finds this ssh.
  std::vector<std::string> env(std::vector<std::string> more = {}) const {
    const char* path = std::getenv("PATH");
    more.push_back("PATH=" + dir_ + ":" + (path ? path : "/usr/bin:/bin"));
    return more;
  }

 private:
  std::string dir_;
};

const std::vector<std::string> over_ssh = {"--boot-address", "127.0.0.1"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST_F(launcher_nodes, over_ssh_one_agent_per_host_starts_its_ranks_with_the_jobs_settings) {
  fake_ssh ssh;
  cmd_result r = run_cmd(job(5, {"nodes", "CLUMP_NET_TIMEOUT_MS", "PROBE_OUTSIDE"},
                             with({"-v", "--hosts", "alpha,beta,gamma"}, over_ssh)),
                         job_timeout, ssh.env({"CLUMP_NET_TIMEOUT_MS=4321", "PROBE_OUTSIDE=x"}));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_placement(r.output, 3, 5);
  auto setting = env_lines(r.output, "CLUMP_NET_TIMEOUT_MS");
  auto outside = env_lines(r.output, "PROBE_OUTSIDE");
  const std::vector<std::string> hosts{"alpha", "beta", "gamma"};
  for (int rank = 0; rank < 5; ++rank) {
    // The CLUMP_* settings travel with the job; nothing else does (ssh carries no environment).
    EXPECT_EQ(setting[rank], "4321") << "rank " << rank << "\n" << r.output;
    EXPECT_EQ(outside[rank], "unset") << "rank " << rank << "\n" << r.output;
    const std::string& host = hosts[static_cast<size_t>(expected_node(rank, 3, 5))];
    EXPECT_NE(r.output.find("clumprun on " + host + ": rank " + std::to_string(rank) + ": pid "), std::string::npos)
        << r.output;
  }
  for (const auto& host : hosts) EXPECT_NE(r.output.find("host " + host + ": agent connected"), std::string::npos);
  expect_no_ranks_left(r.output, 5);
}

TEST_F(launcher_nodes, over_ssh_the_programs_arguments_arrive_word_for_word) {
  fake_ssh ssh;
  const std::vector<std::string> words{"it's", "a b", "$HOME", "; echo injected", "\"q\"", ""};
  std::vector<std::string> args{"args"};
  args.insert(args.end(), words.begin(), words.end());
  cmd_result r = run_cmd(job(2, args, with({"--hosts", "a,b"}, over_ssh)), job_timeout, ssh.env());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (size_t i = 0; i < words.size(); ++i)
    EXPECT_EQ(count(r.output, "arg " + std::to_string(i + 1) + " " + words[i] + "\n"), 2) << words[i] << "\n" << r.output;
  EXPECT_EQ(r.output.find("\ninjected\n"), std::string::npos) << r.output;
}

TEST_F(launcher_nodes, over_ssh_a_failing_rank_ends_the_job_with_its_exit_code) {
  fake_ssh ssh;
  cmd_result r = run_cmd(job(3, {"exitcode", "3", "1"}, with({"--hosts", "a,b"}, over_ssh)), job_timeout, ssh.env());
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("clumprun: rank 1 (pid "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("exited with code 3"), std::string::npos) << r.output;
  expect_no_ranks_left(r.output, 3);

  child_process c(job(3, {"hang"}, with({"--hosts", "a,b"}, over_ssh)), ssh.env());
  ASSERT_TRUE(c.wait_for_output("ready rank", 3, 20s)) << c.output();
  auto pids = rank_pids(c.output());
  ASSERT_EQ(pids.size(), 3u) << c.output();
  ASSERT_EQ(::kill(pids[2], SIGKILL), 0);
  cmd_result k = c.wait(20s);
  EXPECT_EQ(k.exit_code, 128 + SIGKILL) << k.output;
  EXPECT_NE(k.output.find("clumprun: rank 2 (pid " + std::to_string(pids[2]) + ") was killed by signal 9"),
            std::string::npos)
      << k.output;
  expect_no_ranks_left(k.output, 3);

  // The head keeps the time (the agents do not end their ranks on their own).
  // 3 s: every rank must have started (and said its pid) before it ends; under
  // TSan on a loaded machine two ranks over ssh once took more than 0.5 s.
  cmd_result t = run_cmd(job(2, {"hang"}, with({"--hosts", "a,b", "--timeout", "3"}, over_ssh)), job_timeout, ssh.env());
  EXPECT_EQ(t.exit_code, 124) << t.output;
  expect_no_ranks_left(t.output, 2);
}

TEST_F(launcher_nodes, over_ssh_interrupting_or_killing_clumprun_ends_every_rank) {
  fake_ssh ssh;
  for (int sig : {SIGTERM, SIGKILL}) {
    child_process c(job(4, {"hang"}, with({"--hosts", "a,b"}, over_ssh)), ssh.env());
    ASSERT_TRUE(c.wait_for_output("ready rank", 4, 20s)) << c.output();
    auto pids = rank_pids(c.output());
    ASSERT_EQ(pids.size(), 4u) << c.output();
    ASSERT_EQ(::kill(c.pid(), sig), 0);
    cmd_result r = c.wait(20s);
    if (sig == SIGTERM) {
      EXPECT_EQ(r.exit_code, 128 + sig) << r.output;
    }
    // The agents end their ranks (after SIGKILL: the agents die with their
    // ssh, and their ranks with them); give them the grace period.
    EXPECT_TRUE(survivors(pids, 10s).empty()) << "signal " << sig << "\n" << r.output;
  }
}

TEST_F(launcher_nodes, an_agent_that_never_connects_is_reported_with_what_to_check) {
  cmd_result r = run_cmd(job(2, {"hello"}, with({"--remote", "--hosts", "a,b", "--spawn", "/bin/false {host}"},
                                                over_ssh)),
                         job_timeout);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  // (Host a or b: whichever agent is found dead first.)
  EXPECT_NE(r.output.find(": the command that starts clumprun there exited with code 1 before it connected back to "
                          "127.0.0.1:"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("--boot-address"), std::string::npos) << r.output;
  cmd_result bad = run_cmd(job(2, {"hello"}, {"--hosts", "a,b", "--boot-address", "192.0.2.77"}), job_timeout);
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("cannot listen for the hosts' agents on 192.0.2.77"), std::string::npos) << bad.output;
  cmd_result alone = run_cmd(job(2, {"hello"}, {"--remote"}), job_timeout);
  EXPECT_EQ(alone.exit_code, 2) << alone.output;
  EXPECT_NE(alone.output.find("--remote starts the ranks of each host through an agent, so it needs --hosts"),
            std::string::npos)
      << alone.output;
}

TEST_F(launcher_nodes, labels_and_output_come_back_through_the_agents) {
  fake_ssh ssh;
  cmd_result r = run_cmd(job(4, {"hello"}, with({"--label", "--hosts", "a,b"}, over_ssh)), job_timeout, ssh.env());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (int rank = 0; rank < 4; ++rank)
    EXPECT_NE(r.output.find("[" + std::to_string(rank) + "] hello rank " + std::to_string(rank)), std::string::npos)
        << r.output;
}

TEST_F(launcher_nodes, help_describes_nodes_hosts_and_spawn) {
  cmd_result r = run_cmd({clumprun, "--help"}, job_timeout);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (std::string text : {"-N NODES", "--hosts H1,H2,...", "--spawn TEMPLATE", "r*NODES/P", "CLUMP_NET_ADDRESS",
                           "--remote", "--boot-address", "clumprun --agent"})
    EXPECT_NE(r.output.find(text), std::string::npos) << text << "\n" << r.output;
}

// clumprun's side: a rank of another version, or with a malformed hello.
TEST_F(launcher_nodes, clumprun_refuses_a_rank_of_another_protocol_version) {
  struct bad {
    std::vector<std::string> hello;
    std::string says;
  };
  const std::string v = std::to_string(wire::protocol_version), next = std::to_string(wire::protocol_version + 1);
  const std::vector<bad> cases{
      {{"1", "none"}, "the program speaks boot protocol version 1 and this clumprun version " + v},
      {{next, "0"}, "the program speaks boot protocol version " + next + " and this clumprun version " + v},
      {{v, "none"}, "hello of 16 bytes, expected 88"},
      {{v, "65"}, "malformed network address in the hello (length 65, at most 64 bytes"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args{"rawhello"};
    args.insert(args.end(), c.hello.begin(), c.hello.end());
    cmd_result r = run_cmd(job(1, args), job_timeout);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    // The rank is sent the same text, but also SIGTERM at once, so whether it
    // prints it is a race; clumprun's own line is certain.
    auto pids = rank_pids(r.output);
    EXPECT_NE(r.output.find("clumprun: rank 0 (pid " + std::to_string(pids[0]) + "): " + c.says), std::string::npos)
        << c.says << "\n" << r.output;
    expect_no_ranks_left(r.output, 1);
  }
}

// The rank's side, against a fake clumprun.
TEST_F(launcher_nodes, hello_carries_the_ranks_network_address) {
  fake_launcher fake;
  child_process c({probe, "address"}, fake.env(1));
  fake.rank_started();
  auto hello = fake.receive(10s);
  ASSERT_TRUE(hello && hello->type == wire::msg::hello && hello->fds.size() == 1) << c.output();
  ASSERT_EQ(hello->payload.size(), wire::hello_length);
  wire::hello_body body{};
  wire::net_address_slot slot{};
  std::memcpy(&body, hello->payload.data(), sizeof body);
  std::memcpy(&slot, hello->payload.data() + sizeof body, sizeof slot);
  EXPECT_EQ(body.version, wire::protocol_version);
  EXPECT_EQ(slot.length, 64u) << "rank 0 of the probe uses 64 bytes";
  EXPECT_EQ(slot.bytes[0], std::byte{0}) << "the first byte names the rank";
  // Handing the address back as it came lets the probe's check pass.
  fake.send_job(fake_launcher::job_message(wire::protocol_version, 42, static_cast<int32_t>(c.pid()), 0, slot),
                hello->fds[0]);
  ::close(hello->fds[0]);
  cmd_result r = c.wait(10s);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("address ok rank 0"), std::string::npos) << r.output;
}

TEST_F(launcher_nodes, rank_refuses_malformed_job_messages) {
  struct bad {
    std::vector<std::byte> job;
    std::string says;
  };
  std::vector<bad> cases;
  const int32_t pid_placeholder = 0;  // the probe fails before it compares pids
  // A version-1 clumprun: its job message is shorter, and the version says why.
  auto v1 = fake_launcher::job_message(1, 42, pid_placeholder);
  v1.resize(sizeof(wire::job_body) + 12);
  cases.push_back({v1, "clumprun speaks boot protocol version 1, this program version " +
                           std::to_string(wire::protocol_version)});
  auto short_job = fake_launcher::job_message(wire::protocol_version, 42, pid_placeholder);
  short_job.resize(sizeof(wire::job_body) + 12);
  cases.push_back({short_job, "job message of " + std::to_string(sizeof(wire::job_body) + 12) +
                                  " bytes from clumprun, expected " + std::to_string(wire::job_length(1)) +
                                  " for 1 ranks"});
  cases.push_back({fake_launcher::job_message(wire::protocol_version, 42, pid_placeholder, 1),
                   "clumprun put rank 0 on node 1, outside 0..0"});
  wire::net_address_slot long_slot{};
  long_slot.length = 65;
  cases.push_back({fake_launcher::job_message(wire::protocol_version, 42, pid_placeholder, 0, long_slot),
                   "clumprun sent a malformed network address for rank 0"});
  wire::net_address_slot dirty_slot{};
  dirty_slot.length = 1;
  dirty_slot.bytes[5] = std::byte{1};
  cases.push_back({fake_launcher::job_message(wire::protocol_version, 42, pid_placeholder, 0, dirty_slot),
                   "clumprun sent a malformed network address for rank 0"});
  for (const auto& k : cases) {
    fake_launcher fake;
    child_process c({probe, "hello"}, fake.env(1));
    fake.rank_started();
    auto hello = fake.receive(10s);
    ASSERT_TRUE(hello && hello->fds.size() == 1) << c.output();
    fake.send_job(k.job, hello->fds[0]);
    ::close(hello->fds[0]);
    cmd_result r = c.wait(10s);
    EXPECT_EQ(r.exit_code, 3) << k.says << "\n" << r.output;
    EXPECT_NE(r.output.find("join failed: clump: joining the job"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(k.says), std::string::npos) << k.says << "\n" << r.output;
  }
}

}  // namespace
