// clumprun and clump::boot::job, end to end: real jobs of boot_probe
// processes started by the built clumprun, including the ways a job can end
// badly (a rank that crashes, exits early, is killed; clumprun itself killed
// or interrupted). After every test no rank may be left running and no
// clump file may be left in /dev/shm.

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "launcher_test_support.hpp"

namespace {

using namespace clump::test;

class launcher_sizes : public launcher, public ::testing::WithParamInterface<int> {};

TEST_P(launcher_sizes, hello_gives_every_rank_the_job) {
  const int n = GetParam();
  cmd_result r = run_cmd(job(n, {"hello"}), job_timeout);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::set<int> ranks;
  std::set<std::string> ids, tags;
  for (const auto& line : lines_of(r.output)) {
    int rank = -1, size = -1;
    char id[17] = {}, tag[17] = {};
    if (std::sscanf(line.c_str(), "hello rank %d of %d job %16[0-9a-f] tag %16[0-9a-f]", &rank, &size, id, tag) != 4)
      continue;
    ranks.insert(rank);
    EXPECT_EQ(size, n) << line;
    EXPECT_EQ(std::string(id).size(), 16u) << line;
    ids.insert(id);
    tags.insert(tag);
  }
  EXPECT_EQ(ranks.size(), static_cast<size_t>(n)) << r.output;
  EXPECT_EQ(ids.size(), 1u) << "one job id for all ranks\n" << r.output;
  EXPECT_EQ(tags.size(), static_cast<size_t>(n)) << "a distinct tag per rank\n" << r.output;
  EXPECT_EQ(r.output.find("FAIL"), std::string::npos) << r.output;
  expect_no_ranks_left(r.output, static_cast<size_t>(n));
}

// 6 is more ranks than these 2-core machines have cores (no binding then).
INSTANTIATE_TEST_SUITE_P(sizes, launcher_sizes, ::testing::Values(1, 2, 4, 6));

TEST_F(launcher, barriers_complete_and_run_progress) {
  cmd_result r = run_cmd(job(4, {"barrier", "200"}), job_timeout);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(count(r.output, "barrier ok"), 4) << r.output;
}

TEST_F(launcher, allgather_of_0_bytes_to_4_mib) {
  cmd_result r = run_cmd(job(4, {"allgather"}), job_timeout);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(count(r.output, "allgather ok"), 4) << r.output;
}

TEST_F(launcher, broadcast_from_every_root) {
  cmd_result r = run_cmd(job(3, {"broadcast"}), job_timeout);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(count(r.output, "broadcast ok"), 3) << r.output;
}

TEST_F(launcher, getenv_master_reads_the_launchers_environment) {
  cmd_result r = run_cmd(job(2, {"getenv", "PROBE_MASTER_VALUE"}), job_timeout, {"PROBE_MASTER_VALUE=from clumprun"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(count(r.output, "getenv PROBE_MASTER_VALUE=from clumprun"), 2) << r.output;
  r = run_cmd(job(1, {"getenv", "PROBE_MASTER_VALUE"}), job_timeout, {"PROBE_MASTER_VALUE"});
  EXPECT_EQ(count(r.output, "getenv PROBE_MASTER_VALUE unset"), 1) << r.output;
}

TEST_F(launcher, arguments_after_the_program_are_the_programs) {
  cmd_result r = run_cmd({clumprun, "-n", "1", probe, "args", "-n", "5", "--label", "--", "-v"}, job_timeout);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("arg 1 -n\narg 2 5\narg 3 --label\narg 4 --\narg 5 -v\n"), std::string::npos) << r.output;
}

TEST_F(launcher, label_prefixes_every_line_with_the_rank) {
  cmd_result r = run_cmd(job(3, {"hello"}, {"--label"}), job_timeout);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  int hellos = 0;
  for (const auto& line : lines_of(r.output)) {
    auto [rank, text] = split_label(line);
    ASSERT_GE(rank, 0) << "unlabelled line: " << line << "\n" << r.output;
    int said = -1;
    if (std::sscanf(text.c_str(), "hello rank %d ", &said) == 1) {
      EXPECT_EQ(said, rank) << line;
      ++hellos;
    }
  }
  EXPECT_EQ(hellos, 3) << r.output;
}

TEST_F(launcher, exit_code_of_a_failing_rank_is_the_jobs) {
  cmd_result r = run_cmd(job(3, {"exitcode", "3", "1"}), job_timeout);
  EXPECT_EQ(r.exit_code, 3) << r.output;
  auto pids = rank_pids(r.output);
  EXPECT_NE(r.output.find("clumprun: rank 1 (pid " + std::to_string(pids[1]) + ") exited with code 3; ending the job"),
            std::string::npos)
      << r.output;
  expect_no_ranks_left(r.output, 3);
}

TEST_F(launcher, exit_job_ends_the_job_with_its_code) {
  auto start = std::chrono::steady_clock::now();
  cmd_result r = run_cmd(job(3, {"exit", "5", "2"}), job_timeout);
  EXPECT_EQ(r.exit_code, 5) << r.output;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << "the others block in a barrier; they must be ended";
  EXPECT_NE(r.output.find("rank 2 (pid"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ended the job with exit code 5"), std::string::npos) << r.output;
  expect_no_ranks_left(r.output, 3);
}

TEST_F(launcher, exit_job_with_zero_ends_the_job_quietly) {
  cmd_result r = run_cmd(job(3, {"exit", "0", "0"}), job_timeout);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("clumprun:"), std::string::npos) << r.output;
  expect_no_ranks_left(r.output, 3);
}

// The ranks waiting in a barrier are told to end and exit themselves, so the
// output still in their stdio buffers is not lost to a SIGTERM.
TEST_F(launcher, exit_job_lets_waiting_ranks_flush_their_output) {
  cmd_result r = run_cmd(job(3, {"exit", "0", "0"}), job_timeout);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("unflushed rank 1\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("unflushed rank 2\n"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("unflushed rank 0\n"), std::string::npos) << r.output;
}

TEST_F(launcher, crashing_rank_ends_the_job_and_is_named) {
  cmd_result r = run_cmd(job(3, {"crash", "1"}), job_timeout);
  EXPECT_EQ(r.exit_code, 128 + SIGSEGV) << r.output;
  EXPECT_NE(r.output.find("clumprun: rank 1 (pid "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("was killed by signal 11 (Segmentation fault)"), std::string::npos) << r.output;
  expect_no_ranks_left(r.output, 3);
}

TEST_F(launcher, rank_that_exits_before_joining_does_not_leave_the_others_waiting) {
  auto start = std::chrono::steady_clock::now();
  child_process c(job(3, {"early", "1", "0"}, {"-v"}));
  cmd_result r = c.wait(job_timeout);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_NE(r.output.find("clumprun: rank 1 (pid "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("exited without joining the job"), std::string::npos) << r.output;
  // The others may be ended before they print anything: find them by their launcher.
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!processes_of_job(c.pid()).empty() && std::chrono::steady_clock::now() < deadline) ::usleep(10000);
  EXPECT_TRUE(processes_of_job(c.pid()).empty()) << r.output;
}

TEST_F(launcher, killing_one_rank_ends_the_job) {
  child_process c(job(3, {"hang"}));
  ASSERT_TRUE(c.wait_for_output("ready rank", 3, 20s)) << c.output();
  auto pids = rank_pids(c.output());
  ASSERT_EQ(pids.size(), 3u) << c.output();
  ASSERT_EQ(::kill(pids[1], SIGKILL), 0);
  cmd_result r = c.wait(20s);
  EXPECT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.output;
  EXPECT_NE(r.output.find("clumprun: rank 1 (pid " + std::to_string(pids[1]) + ") was killed by signal 9 (Killed)"),
            std::string::npos)
      << r.output;
  expect_no_ranks_left(r.output, 3);
}

TEST_F(launcher, killing_clumprun_kills_every_rank) {
  child_process c(job(3, {"hang"}));
  ASSERT_TRUE(c.wait_for_output("ready rank", 3, 20s)) << c.output();
  auto pids = rank_pids(c.output());
  ASSERT_EQ(pids.size(), 3u) << c.output();
  ASSERT_EQ(::kill(c.pid(), SIGKILL), 0);
  cmd_result r = c.wait(20s);
  EXPECT_EQ(r.signal, SIGKILL) << r.output;
  auto alive = survivors(pids);
  EXPECT_TRUE(alive.empty()) << alive.size() << " rank(s) outlived clumprun\n" << r.output;
}

TEST_F(launcher, interrupting_clumprun_ends_the_ranks) {
  for (int sig : {SIGINT, SIGTERM}) {
    child_process c(job(3, {"hang"}));
    ASSERT_TRUE(c.wait_for_output("ready rank", 3, 20s)) << c.output();
    ASSERT_EQ(::kill(c.pid(), sig), 0);
    cmd_result r = c.wait(20s);
    EXPECT_FALSE(r.timed_out) << r.output;
    EXPECT_EQ(r.exit_code, 128 + sig) << r.output;
    expect_no_ranks_left(r.output, 3);
  }
}

TEST_F(launcher, timeout_ends_the_job_with_124) {
  // 1.5 s (a fraction of a second is accepted too): every rank must have
  // started and said its pid before it ends (see the same test over ssh).
  cmd_result r = run_cmd(job(2, {"hang"}, {"--timeout", "1.5"}), job_timeout);
  EXPECT_EQ(r.exit_code, 124) << r.output;
  EXPECT_NE(r.output.find("--timeout 1.5"), std::string::npos) << r.output;
  expect_no_ranks_left(r.output, 2);
}

TEST_F(launcher, program_that_does_not_exist_is_refused_before_starting) {
  cmd_result r = run_cmd({clumprun, "-n", "2", "/nonexistent/clump-probe"}, job_timeout);
  EXPECT_EQ(r.exit_code, 127) << r.output;
  EXPECT_NE(r.output.find("clumprun: cannot run '/nonexistent/clump-probe': No such file or directory"),
            std::string::npos)
      << r.output;
  r = run_cmd({clumprun, "-n", "2", "no-such-program-clump"}, job_timeout);
  EXPECT_EQ(r.exit_code, 127) << r.output;
  EXPECT_NE(r.output.find("cannot run 'no-such-program-clump': No such file or directory"), std::string::npos)
      << r.output;
}

TEST_F(launcher, program_that_is_not_executable_is_refused) {
  char path[] = "/tmp/clump-notexec-XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  cmd_result r = run_cmd({clumprun, "-n", "1", path}, job_timeout);
  ::unlink(path);
  EXPECT_EQ(r.exit_code, 126) << r.output;
  EXPECT_NE(r.output.find("Permission denied"), std::string::npos) << r.output;
}

TEST_F(launcher, bad_rank_counts_are_refused_clearly) {
  for (std::string n : {"0", "-3", "abc", "4x"}) {
    cmd_result r = run_cmd({clumprun, "-n", n, probe, "hello"}, job_timeout);
    EXPECT_EQ(r.exit_code, 2) << n << ": " << r.output;
    EXPECT_NE(r.output.find("clumprun: -n " + n + ": the number of ranks must"), std::string::npos)
        << n << ": " << r.output;
  }
  cmd_result r = run_cmd({clumprun, probe, "hello"}, job_timeout);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("required"), std::string::npos) << r.output;
  r = run_cmd({clumprun, "-n", "2"}, job_timeout);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("no program to run"), std::string::npos) << r.output;
}

TEST_F(launcher, jobs_too_big_for_the_machine_are_refused_with_numbers) {
  // 2 x 1 GiB of medium rings per rank cannot fit 200 times.
  cmd_result r = run_cmd(job(200, {"hello"}), job_timeout, {"CLUMP_SHM_MEDIUM_RING=1G"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("clumprun: -n 200 needs ~"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("CLUMP_SHM_MEDIUM_RING"), std::string::npos) << r.output;
  EXPECT_TRUE(rank_pids(r.output).empty()) << "nothing may start\n" << r.output;
  // Some limit (descriptors, processes or memory) stops this one up front.
  r = run_cmd(job(100000, {"hello"}), job_timeout);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("clumprun: -n 100000 needs "), std::string::npos) << r.output;
}

TEST_F(launcher, binding_is_reported_with_verbose) {
  cmd_result r = run_cmd(job(1, {"hello"}, {"-v", "--bind", "core"}), job_timeout);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("binding: core"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("bound to core 0"), std::string::npos) << r.output;
  // What the kernel says each rank may run on is the core clumprun named.
  r = run_cmd({clumprun, "-n", "2", "-v", "--label", "--bind", "core", "sh", "-c",
               "grep Cpus_allowed_list /proc/self/status"},
              job_timeout);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (int rank : {0, 1}) {
    std::string named = "clumprun: rank " + std::to_string(rank) + ": pid ";
    size_t at = r.output.find(named);
    ASSERT_NE(at, std::string::npos) << r.output;
    size_t pus = r.output.find("(PUs ", at);
    ASSERT_NE(pus, std::string::npos) << r.output;
    std::string list = r.output.substr(pus + 5, r.output.find(')', pus) - pus - 5);
    EXPECT_NE(r.output.find("[" + std::to_string(rank) + "] Cpus_allowed_list:\t" + list + "\n"), std::string::npos)
        << "rank " << rank << " should run on PUs " << list << "\n" << r.output;
  }
  r = run_cmd(job(2, {"hello"}, {"-v", "--bind", "none"}), job_timeout);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("binding: none"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("bound to"), std::string::npos) << r.output;
}

// Without clumprun a program is a job of one, collectives included.
TEST_F(launcher, program_started_alone_is_a_job_of_one) {
  for (std::vector<std::string> args : {std::vector<std::string>{"hello"}, {"barrier", "3"}, {"allgather"},
                                        {"broadcast"}}) {
    std::vector<std::string> argv{probe};
    argv.insert(argv.end(), args.begin(), args.end());
    cmd_result r = run_cmd(argv, job_timeout);
    EXPECT_EQ(r.exit_code, 0) << args[0] << ": " << r.output;
    EXPECT_EQ(r.output.find("FAIL"), std::string::npos) << r.output;
  }
  cmd_result r = run_cmd({probe, "hello"}, job_timeout);
  EXPECT_NE(r.output.find("hello rank 0 of 1 job "), std::string::npos) << r.output;
  r = run_cmd({probe, "getenv", "PROBE_MASTER_VALUE"}, job_timeout, {"PROBE_MASTER_VALUE=alone"});
  EXPECT_NE(r.output.find("getenv PROBE_MASTER_VALUE=alone"), std::string::npos) << r.output;
  r = run_cmd({probe, "exit", "7", "0"}, job_timeout);
  EXPECT_EQ(r.exit_code, 7) << r.output;
}

TEST_F(launcher, ranks_that_disagree_about_a_collective_end_the_job) {
  cmd_result r = run_cmd(job(3, {"mismatch"}), job_timeout);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("clumprun: ranks disagree about a collective"), std::string::npos) << r.output;
  expect_no_ranks_left(r.output, 3);
}

TEST_F(launcher, garbage_on_the_boot_socket_ends_the_job) {
  // The rank would run for 30 s; clumprun must end it at once.
  auto start = std::chrono::steady_clock::now();
  cmd_result r = run_cmd({clumprun, "-n", "1", "sh", "-c", "echo garbage-garbage-garbage >&$CLUMP_BOOT_FD; sleep 30"},
                         job_timeout);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("garbage on the boot socket"), std::string::npos) << r.output;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

TEST_F(launcher, programs_that_do_not_use_clump_run_too) {
  EXPECT_EQ(run_cmd({clumprun, "-n", "2", "true"}, job_timeout).exit_code, 0);
  cmd_result r = run_cmd({clumprun, "-n", "2", "false"}, job_timeout);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(") exited with code 1; ending the job"), std::string::npos) << r.output;
}

TEST_F(launcher, label_flushes_partial_last_lines) {
  cmd_result r = run_cmd({clumprun, "-n", "2", "--label", "sh", "-c", "printf partial; printf 'err\\n' >&2"},
                         job_timeout);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (std::string line : {"[0] partial\n", "[1] partial\n", "[0] err\n", "[1] err\n"})
    EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
}

TEST_F(launcher, ranks_that_ignore_sigterm_are_killed_after_the_grace_period) {
  child_process c(job(2, {"hang", "ignore-term"}));
  ASSERT_TRUE(c.wait_for_output("ready rank", 2, 20s)) << c.output();
  auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(c.pid(), SIGTERM), 0);
  cmd_result r = c.wait(20s);
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.output;
  EXPECT_NE(r.output.find("did not end within 2 s of SIGTERM (--kill-grace); sending SIGKILL"), std::string::npos)
      << r.output;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 8s);
  expect_no_ranks_left(r.output, 2);
}

// Ranks whose SIGTERM handler never returns (AM-2 programs' handlers may
// sleep) are killed after --kill-grace, and the job still exits with the
// code of the rank that failed first, not with the kill's.
TEST_F(launcher, kill_grace_is_a_setting_and_the_first_failure_keeps_its_code) {
  for (const char* grace : {"0.3", "3"}) {
    auto start = std::chrono::steady_clock::now();
    cmd_result r = run_cmd(job(3, {"exitcode", "5", "1", "stubborn"}, {"--kill-grace", grace}), job_timeout);
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_EQ(r.exit_code, 5) << grace << ": " << r.output;
    EXPECT_NE(r.output.find(std::string("did not end within ") + grace + " s of SIGTERM (--kill-grace); sending SIGKILL"),
              std::string::npos)
        << grace << ": " << r.output;
    const double wanted = std::stod(grace);
    EXPECT_GE(took, std::chrono::duration<double>(wanted)) << grace << ": " << r.output;
    EXPECT_LT(took, std::chrono::duration<double>(wanted + 6)) << grace << ": " << r.output;
    expect_no_ranks_left(r.output, 3);
  }
  for (std::string bad : {"-1", "abc", "3601", "nan", ""}) {
    cmd_result r = run_cmd({clumprun, "--kill-grace", bad, "-n", "2", probe, "hello"}, job_timeout);
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.output;
    EXPECT_NE(r.output.find("--kill-grace"), std::string::npos) << bad << ": " << r.output;
  }
}

// A memory cgroup of our own, under this process's, limited to `bytes` (no
// swap): its directory, or "" where this machine does not let us make one
// (not root, no writable memory controller).
std::string limited_memory_cgroup(size_t bytes) {
  std::ifstream self("/proc/self/cgroup");
  std::string line, v1, v2;
  while (std::getline(self, line)) {
    // "ID:CONTROLLERS:PATH": cgroup v1 names its controllers; v2 is "0::PATH".
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controllers == "memory") v1 = "/sys/fs/cgroup/memory" + path;
    if (controllers.empty()) v2 = path;
  }
  auto write = [](const std::string& file, const std::string& text) {
    std::ofstream out(file);
    out << text;
    out.flush();
    return static_cast<bool>(out);
  };
  const std::string leaf = "/clump-oom-test-" + std::to_string(::getpid());
  if (!v1.empty() && ::mkdir((v1 + leaf).c_str(), 0755) == 0) {
    if (write(v1 + leaf + "/memory.limit_in_bytes", std::to_string(bytes))) {
      write(v1 + leaf + "/memory.memsw.limit_in_bytes", std::to_string(bytes));  // where swap accounting is on
      return v1 + leaf;
    }
    ::rmdir((v1 + leaf).c_str());
  }
  for (const char* root : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
    const std::string dir = root + v2 + leaf;
    if (v2.empty() || ::mkdir(dir.c_str(), 0755) != 0) continue;
    if (write(dir + "/memory.max", std::to_string(bytes))) {
      write(dir + "/memory.swap.max", "0");
      return dir;
    }
    ::rmdir(dir.c_str());
  }
  return "";
}

// A rank the kernel's OOM killer ends: clumprun says that memory ran out,
// not only "killed by signal 9".
TEST_F(launcher, a_rank_the_oom_killer_ends_is_reported_as_out_of_memory) {
  const std::string cgroup = limited_memory_cgroup(size_t{96} << 20);
  if (cgroup.empty()) GTEST_SKIP() << "cannot make a memory cgroup here (needs root and a writable memory controller)";
  std::vector<std::string> argv{"sh", "-c", "echo $$ > \"$0\"/cgroup.procs && exec \"$@\"", cgroup};
  for (const auto& w : job(2, {"eat", "1", "1024"})) argv.push_back(w);
  cmd_result r = run_cmd(argv, job_timeout);
  ::rmdir(cgroup.c_str());
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.output;
  EXPECT_NE(r.output.find("was killed by signal 9 (Killed): memory ran out (the kernel's out-of-memory killer"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("ate "), std::string::npos) << r.output;
  expect_no_ranks_left(r.output, 2);
}

TEST_F(launcher, rank_ends_itself_when_clumprun_goes_away) {
  fake_launcher fake;
  child_process c({probe, "barrier", "1"}, fake.env(1));
  fake.rank_started();
  auto hello = fake.receive(10s);
  ASSERT_TRUE(hello && hello->type == clump::boot::wire::msg::hello && hello->fds.size() == 1) << c.output();
  fake.send_job(clump::boot::wire::protocol_version, 42, c.pid(), hello->fds[0]);
  ::close(hello->fds[0]);
  auto barrier = fake.receive(10s);
  ASSERT_TRUE(barrier && barrier->type == clump::boot::wire::msg::collective) << c.output();
  fake.close_socket();  // clumprun "dies" while the rank waits in the barrier
  cmd_result r = c.wait(10s);
  EXPECT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("clump[0]: error: barrier: the socket to clumprun closed"), std::string::npos) << r.output;
}

TEST_F(launcher, rank_refuses_a_launcher_of_another_protocol_version) {
  fake_launcher fake;
  child_process c({probe, "hello"}, fake.env(1));
  fake.rank_started();
  auto hello = fake.receive(10s);
  ASSERT_TRUE(hello && hello->fds.size() == 1) << c.output();
  fake.send_job(99, 42, c.pid(), hello->fds[0]);
  ::close(hello->fds[0]);
  cmd_result r = c.wait(10s);
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("join failed: clump: joining the job"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("clumprun speaks boot protocol version 99"), std::string::npos) << r.output;
}

TEST_F(launcher, joining_fails_clearly_when_clumprun_goes_away_at_the_start) {
  fake_launcher fake;
  child_process c({probe, "hello"}, fake.env(2));
  fake.rank_started();
  auto hello = fake.receive(10s);
  ASSERT_TRUE(hello) << c.output();
  for (int fd : hello->fds) ::close(fd);
  fake.close_socket();
  cmd_result r = c.wait(10s);
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("the socket to clumprun closed"), std::string::npos) << r.output;
}

TEST_F(launcher, boot_fd_that_is_not_a_socket_is_explained) {
  cmd_result r = run_cmd({probe, "hello"}, job_timeout, {"CLUMP_BOOT_FD=0", "CLUMP_SIZE=1", "CLUMP_RANK=0"});
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("CLUMP_BOOT_FD=0 is not an open socket"), std::string::npos) << r.output;
}

}  // namespace
