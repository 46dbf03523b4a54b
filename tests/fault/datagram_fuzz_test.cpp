// A running job under fire: datagram_fuzzer sends random and mutated
// datagrams at rank 0 of a fault_target job whose two ranks sit on different
// emulated nodes (so that they talk over the network protocol). The job must
// refuse and count every one of them by reason (those that are well formed
// as not coming from the address of the rank they name), deliver none, run no
// handler, say once and clearly that it saw another wire-format version, and
// afterwards still exchange requests and replies with exact payloads. See
// fault_target.cpp and datagram_fuzzer.cpp for what each side checks.
//
// CLUMP_FUZZ_SEED=N picks the fuzzer's seed (default 1; a failure prints it).

#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "run_cmd.hpp"

namespace {

using namespace std::chrono_literals;
using clump::test::child_process;
using clump::test::cmd_result;
using clump::test::run_cmd;

/// A fresh directory for the target's go file, removed afterwards.
struct scratch_dir {
  std::string path;
  scratch_dir() {
    std::string t = (std::filesystem::temp_directory_path() / "clump-fuzz-XXXXXX").string();
    path = ::mkdtemp(t.data()) ? t : std::string();
  }
  ~scratch_dir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};

struct target_address {
  std::string address, job, slot;
};

/// Waits for rank 0's "listening at" line and takes it apart.
bool wait_for_address(child_process& job, target_address& out, std::chrono::milliseconds most) {
  const std::string start = "fault_target: listening at ";
  if (!job.wait_for_output(start, 1, most)) return false;
  // clumprun forwards whole lines, so the line is complete once it shows at all.
  const std::string& text = job.output();
  char address[64] = {}, id[17] = {};
  unsigned slot = 0;
  if (std::sscanf(text.c_str() + text.find(start),
                  "fault_target: listening at %63[0-9.:] job %16[0-9a-f] rank 0 of 2 slot %u", address, id, &slot) != 3)
    return false;
  out = {address, id, std::to_string(slot)};
  return true;
}

std::string seed() {
  const char* s = std::getenv("CLUMP_FUZZ_SEED");
  return s && *s ? s : "1";
}

/// Runs a fault_target job and the fuzzer at it with `extra` options;
/// returns how the job and the fuzzer ended.
std::pair<cmd_result, cmd_result> fuzz_a_job(const std::vector<std::string>& extra) {
  scratch_dir dir;
  EXPECT_FALSE(dir.path.empty()) << "mkdtemp failed";
  // A small datagram size, so that the exchange afterwards cuts mediums into fragments.
  child_process job({CLUMPRUN, "-n", "2", "-N", "2", FAULT_TARGET, dir.path}, {"CLUMP_NET_MTU=1500"});
  target_address t;
  if (!wait_for_address(job, t, 20s)) {
    ADD_FAILURE() << "fault_target did not say where it listens:\n" << job.output();
    return {job.wait(5s), {}};
  }
  std::vector<std::string> argv = {DATAGRAM_FUZZER, "--to", t.address, "--job", t.job, "--rank", "0", "--size", "2",
                                   "--slot", t.slot, "--seed", seed(), "--report", dir.path + "/go"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  cmd_result fuzzer = run_cmd(argv, 30s);
  if (fuzzer.exit_code != 0) {
    // No report will come: do not make the target wait for it.
    cmd_result r = job.wait(0s);
    return {r, fuzzer};
  }
  return {job.wait(30s), fuzzer};
}

TEST(datagram_fuzz, a_job_refuses_counts_and_survives_fuzzed_datagrams) {
  auto [job, fuzzer] = fuzz_a_job({});
  ASSERT_EQ(fuzzer.exit_code, 0) << "seed " << seed() << "\n" << fuzzer.output;
  EXPECT_FALSE(job.timed_out) << job.output;
  EXPECT_EQ(job.exit_code, 0) << "seed " << seed() << "\n" << job.output << "\nfuzzer:\n" << fuzzer.output;
  EXPECT_NE(job.output.find("fault_target: rank 0 ok"), std::string::npos) << job.output;
  EXPECT_NE(job.output.find("fault_target: rank 1 ok"), std::string::npos) << job.output;
  // Another wire version is refused with a message that says so and what to do, once.
  const std::string clear = "it speaks clump wire format version";
  const size_t first = job.output.find(clear);
  EXPECT_NE(first, std::string::npos) << job.output;
  EXPECT_EQ(job.output.find(clear, first + 1), std::string::npos) << "said more than once:\n" << job.output;
  EXPECT_NE(job.output.find("run the same clump build on every node"), std::string::npos) << job.output;
}

// Datagrams of the right job, well formed, as from the peer's rank and with
// the sequence number the receiver expects next, sent from the fuzzer's own
// socket: only the check of the sender's address tells them from real ones.
// Without it they ran rank 0's handler 0 (a forged returned message), sent a
// message back to rank 1's handler 0 (a forged request with a wrong tag), and
// took the sequence numbers of rank 1's next real request and reply, which
// rank 0 then dropped as duplicates while rank 1 took them as delivered: the
// exchange after the fuzzing hung.
TEST(datagram_fuzz, forged_in_window_datagrams_are_refused) {
  auto [job, fuzzer] = fuzz_a_job({"--forge"});
  ASSERT_EQ(fuzzer.exit_code, 0) << fuzzer.output;
  EXPECT_EQ(job.exit_code, 0) << job.output << "\nfuzzer:\n" << fuzzer.output;
  EXPECT_NE(job.output.find("fault_target: rank 0 ok"), std::string::npos) << job.output;
  EXPECT_NE(job.output.find("fault_target: rank 1 ok"), std::string::npos) << job.output;
}

}  // namespace
