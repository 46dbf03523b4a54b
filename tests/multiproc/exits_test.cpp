// The exit and crash suite: every way of tests/multiproc/exits.cpp to end a
// job (collective and non-collective exits, exits inside handlers and before
// the first message, a rank that leaves or never joins, abort, segmentation
// fault and kill -9 of a rank in each phase, SIGINT, SIGTERM and kill -9 of
// clumprun), over shared memory, two emulated nodes and the net protocol.
// After each: clumprun's exit code is the documented one (docs/guide.md,
// "clumprun"), the job ended within 5 s of the event, no process of the job
// is left, and nothing was left in /dev/shm or /tmp.

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "launcher_test_support.hpp"

namespace {

using namespace clump::test;
using steady = std::chrono::steady_clock;

struct setup {
  const char* name;
  int ranks;
  std::vector<std::string> env;
  std::vector<std::string> options;  // clumprun's
};

enum class act { none, kill_victim, signal_clumprun };

struct ending {
  const char* name;
  const char* scenario;
  int code;           // what the victim exits with, where it chooses
  int expected;       // clumprun's exit code; -1: clumprun itself is killed (by `sig`)
  const char* says;   // what clumprun must say, or nullptr
  act action = act::none;
  int sig = 0;
};

const setup setups[] = {
    {"shm", 3, {}, {}},
    {"nodes2", 4, {}, {"-N", "2"}},
    {"net", 3, {"CLUMP_PROTOCOL=net"}, {}},
};

const ending endings[] = {
    {"return_0", "return", 0, 0, nullptr},
    {"return_3", "return", 3, 3, "exited with code 3"},
    {"all_exit_5", "all_exit", 5, 5, "ended the job with exit code 5"},
    {"one_exits_7", "one_exits", 7, 7, "ended the job with exit code 7"},
    {"leaves", "leaves", 0, 1, "exited while"},
    {"exit_in_request_handler", "in_request", 9, 9, "ended the job with exit code 9"},
    {"exit_in_reply_handler", "in_reply", 11, 11, "ended the job with exit code 11"},
    {"exit_before_first_message", "first", 13, 13, "ended the job with exit code 13"},
    {"never_calls_startup", "no_startup", 0, 1, "exited without joining the job"},
    {"abort_at_startup", "abort_startup", 0, 128 + SIGABRT, "was killed by signal 6"},
    {"abort_in_traffic", "abort_traffic", 0, 128 + SIGABRT, "was killed by signal 6"},
    {"abort_in_barrier", "abort_barrier", 0, 128 + SIGABRT, "was killed by signal 6"},
    {"abort_at_exit", "abort_exit", 0, 128 + SIGABRT, "was killed by signal 6"},
    {"segv_at_startup", "segv_startup", 0, 128 + SIGSEGV, "was killed by signal 11"},
    {"segv_in_traffic", "segv_traffic", 0, 128 + SIGSEGV, "was killed by signal 11"},
    {"segv_in_barrier", "segv_barrier", 0, 128 + SIGSEGV, "was killed by signal 11"},
    {"segv_at_exit", "segv_exit", 0, 128 + SIGSEGV, "was killed by signal 11"},
    {"kill_at_startup", "wait_startup", 0, 128 + SIGKILL, "was killed by signal 9", act::kill_victim},
    {"kill_in_traffic", "wait_traffic", 0, 128 + SIGKILL, "was killed by signal 9", act::kill_victim},
    {"kill_in_barrier", "wait_barrier", 0, 128 + SIGKILL, "was killed by signal 9", act::kill_victim},
    {"kill_at_exit", "wait_exit", 0, 128 + SIGKILL, "was killed by signal 9", act::kill_victim},
    {"sigint_to_clumprun", "wait_traffic", 0, 128 + SIGINT, nullptr, act::signal_clumprun, SIGINT},
    {"sigterm_to_clumprun", "wait_traffic", 0, 128 + SIGTERM, nullptr, act::signal_clumprun, SIGTERM},
    {"kill_9_of_clumprun", "wait_traffic", 0, -1, nullptr, act::signal_clumprun, SIGKILL},
};

struct exit_case {
  setup s;
  ending e;
};

void PrintTo(const exit_case& c, std::ostream* os) { *os << c.s.name << "/" << c.e.name; }

std::vector<exit_case> all_cases() {
  std::vector<exit_case> out;
  for (const auto& s : setups)
    for (const auto& e : endings) out.push_back({s, e});
  return out;
}

/// When the first "exits: event" line says the event happened.
std::optional<steady::time_point> event_time(const std::string& output) {
  const size_t at = output.find("exits: event rank ");
  if (at == std::string::npos) return std::nullopt;
  int rank = 0, pid = 0;
  long long ns = 0;
  if (std::sscanf(output.c_str() + at, "exits: event rank %d pid %d at %lld", &rank, &pid, &ns) != 3)
    return std::nullopt;
  return steady::time_point(std::chrono::nanoseconds(ns));
}

class exits : public ::testing::TestWithParam<exit_case> {};

TEST_P(exits, the_job_ends_as_documented_within_5_s_and_leaves_nothing) {
  const setup& s = GetParam().s;
  const ending& e = GetParam().e;
  const int victim = s.ranks - 1;  // on the other node with -N 2; reached over the network with the net protocol
  const auto shm_before = dir_entries("/dev/shm");
  const auto tmp_before = dir_entries("/tmp", "clump");

  std::vector<std::string> argv{clumprun, "-n", std::to_string(s.ranks), "--timeout", "60"};
  argv.insert(argv.end(), s.options.begin(), s.options.end());
  argv.insert(argv.end(), {EXITS, e.scenario, std::to_string(victim), std::to_string(e.code)});
  // Under ASan or TSan, a SIGSEGV is the sanitizer's to report (it exits 1): let the signal kill the process.
  std::vector<std::string> env = s.env;
  for (const char* var : {"ASAN_OPTIONS", "TSAN_OPTIONS"}) {
    const char* had = std::getenv(var);
    env.push_back(std::string(var) + "=" + (had && *had ? std::string(had) + ":" : "") + "handle_segv=0");
  }
  child_process job(argv, env);
  std::optional<steady::time_point> event;
  if (e.action != act::none) {
    // The victim (at startup only it; else every rank) says it is in the phase.
    const bool only_victim = std::string(e.scenario) == "wait_startup";
    const std::string ready = only_victim ? "exits: ready rank " + std::to_string(victim) + " " : "exits: ready rank ";
    ASSERT_TRUE(job.wait_for_output(ready, only_victim ? 1 : s.ranks, 30s)) << job.output();
    if (e.action == act::kill_victim) {
      pid_t pid = 0;
      const size_t at = job.output().find("exits: ready rank " + std::to_string(victim) + " ");
      ASSERT_EQ(std::sscanf(job.output().c_str() + at, "exits: ready rank %*d pid %d", &pid), 1) << job.output();
      // In the traffic phase, let it get into the thick of it first.
      if (std::string(e.scenario) == "wait_traffic") ::usleep(200 * 1000);
      event = steady::now();
      ASSERT_EQ(::kill(pid, SIGKILL), 0);
    } else {
      ::usleep(200 * 1000);
      event = steady::now();
      ASSERT_EQ(::kill(job.pid(), e.sig), 0);
    }
  }
  cmd_result r = job.wait(60s);
  ASSERT_FALSE(r.timed_out) << r.output;
  if (!event) event = event_time(r.output);
  ASSERT_TRUE(event.has_value()) << "no event line\n" << r.output;

  if (e.expected >= 0) {
    EXPECT_EQ(r.exit_code, e.expected) << r.output;
  } else {
    EXPECT_EQ(r.signal, e.sig) << r.output;
  }
  if (e.says) {
    EXPECT_NE(r.output.find(e.says), std::string::npos) << r.output;
  }
  EXPECT_EQ(r.output.find("exits rank "), std::string::npos) << "a rank saw something go wrong\n" << r.output;
  const auto took = r.ended - *event;
  EXPECT_LT(took, 5s) << std::chrono::duration<double>(took).count() << " s after the event\n" << r.output;

  // No process of the job is left (ranks outliving a killed clumprun get
  // until 5 s after the event).
  std::vector<pid_t> left = processes_of_job(job.pid());
  while (!left.empty() && steady::now() < *event + 5s) {
    ::usleep(20 * 1000);
    left = processes_of_job(job.pid());
  }
  EXPECT_TRUE(left.empty()) << left.size() << " process(es) of the job left, e.g. pid " << (left.empty() ? 0 : left[0])
                            << "\n"
                            << r.output;
  for (pid_t pid : left) ::kill(pid, SIGKILL);
  // Nothing left behind in /dev/shm (clump's memory is memfds) or /tmp.
  for (const auto& name : dir_entries("/dev/shm"))
    EXPECT_TRUE(shm_before.count(name)) << "/dev/shm/" << name << " appeared during the job";
  for (const auto& name : dir_entries("/tmp", "clump"))
    EXPECT_TRUE(tmp_before.count(name)) << "/tmp/" << name << " appeared during the job";
}

INSTANTIATE_TEST_SUITE_P(all, exits, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<exit_case>& i) {
                           return std::string(i.param.s.name) + "_" + i.param.e.name;
                         });

}  // namespace
