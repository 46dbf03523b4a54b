// The AM-II conformance suite over shared memory, with real processes started
// by clumprun: every message kind at its limits, returned messages with their
// reasons, floods with more processes than cores, request storms with tiny
// queues, the blocking wait's CPU use, AM_PAR with several threads, and the
// examples. Each job must end with exit code 0 and leave nothing in /dev/shm.

#include <gtest/gtest.h>


#include <string>
#include <vector>

#include "am_job.hpp"

namespace {

using namespace std::chrono_literals;
using clump::test::cmd_result;
using clump::test::job;
using clump::test::run_cmd;


class kinds : public ::testing::TestWithParam<int> {};

TEST_P(kinds, every_message_kind_at_its_limits_arrives_byte_exact) {
  auto r = job(GetParam(), {"kinds"});
  EXPECT_JOB_OK(r);
}

TEST_P(kinds, long_messages_to_private_segments_arrive_in_pieces_byte_exact) {
  auto r = job(GetParam(), {"private"});
  EXPECT_JOB_OK(r);
}

TEST_P(kinds, undeliverable_messages_return_to_handler_0_with_the_reason) {
  auto r = job(GetParam(), {"errors"});
  EXPECT_JOB_OK(r);
}

INSTANTIATE_TEST_SUITE_P(ranks, kinds, ::testing::Values(1, 2, 3));

// TSan checks every byte of each copy (the 3-rank storm took 110 s, the
// 8-rank one 52 s): fewer rounds there, the same pattern.
#ifdef __SANITIZE_THREAD__
constexpr int storm_scale = 3;
#else
constexpr int storm_scale = 1;
#endif

// The storm's rounds, and the line that says the last of `ranks` ranks sent
// all of its messages (one to each rank a round).
std::string storm_rounds(int rounds) { return std::to_string(rounds / storm_scale); }
std::string storm_sent(int ranks, int rounds) {
  return "shared_storm: rank " + std::to_string(ranks - 1) + " sent " +
         std::to_string(ranks * (rounds / storm_scale)) + " long messages of 64 KiB to 1 MiB, 0 wrong";
}

TEST(shared_copies, long_messages_into_malloced_segments_all_to_all_arrive_before_the_sender_returns) {
  auto r = job(3, {"shared_storm", storm_rounds(400)}, {}, {"--bind", "none"});
  EXPECT_JOB_OK(r);
  EXPECT_NE(r.output.find(storm_sent(3, 400)), std::string::npos) << r.output;
}

TEST(shared_copies, a_sender_does_not_wait_for_a_receiver_that_computes_without_polling) {
  auto r = job(2, {"shared_quiet"});
  EXPECT_JOB_OK(r);
  EXPECT_NE(r.output.find("shared_quiet: the call returned after"), std::string::npos) << r.output;
}

TEST(shared_copies, with_more_processes_than_cores) {
  auto r = job(8, {"shared_storm", storm_rounds(30)}, {}, {"--bind", "none"});
  EXPECT_JOB_OK(r);
  EXPECT_NE(r.output.find(storm_sent(8, 30)), std::string::npos) << r.output;
}

TEST(flood, many_to_one_with_more_processes_than_cores_arrives_exactly_once) {
  auto r = job(6, {"flood", "20000"}, {}, {"--bind", "none"});
  EXPECT_JOB_OK(r);
  EXPECT_NE(r.output.find("flood: 120000 messages from 6 ranks arrived exactly once"), std::string::npos) << r.output;
}

TEST(flood, many_to_one_with_tiny_queues) {
  auto r = job(4, {"flood", "5000"}, {"CLUMP_SHM_QUEUE_DEPTH=16", "CLUMP_SHM_MEDIUM_RING=16K", "CLUMP_MAX_MEDIUM=8K"},
               {"--bind", "none"});
  EXPECT_JOB_OK(r);
}

TEST(storm, requests_in_every_direction_with_full_queues_do_not_deadlock) {
  auto r = job(3, {"storm", "3000"}, {"CLUMP_SHM_QUEUE_DEPTH=16", "CLUMP_SHM_MEDIUM_RING=16K", "CLUMP_MAX_MEDIUM=8K"},
               {"--bind", "none"});
  EXPECT_JOB_OK(r);
  EXPECT_NE(r.output.find("waited"), std::string::npos);
}

TEST(storm, two_ranks_default_queues) {
  auto r = job(2, {"storm", "20000"});
  EXPECT_JOB_OK(r);
}

// More ranks than cores on the host (CLUMP_YIELD=auto): clumprun tells each
// rank how many ranks and cores the host has (here: the one core taskset
// leaves it), and the ranks' blocking waits give the core away between polls.
TEST(crowded, a_host_with_more_ranks_than_cores_is_told_and_its_waits_give_way) {
  const std::vector<std::string> one_core{"taskset", "-c", "0"};
  auto on_one_core = [&](std::vector<std::string> argv, std::vector<std::string> env = {}) {
    argv.insert(argv.begin(), one_core.begin(), one_core.end());
    return run_cmd(argv, 150s, env);
  };
  cmd_result r = on_one_core({CLUMPRUN, "-n", "4", "-N", "2", "--label", "sh", "-c",
                              "echo host $CLUMP_HOST_RANKS $CLUMP_HOST_CPUS"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* line : {"[0] host 4 1\n", "[1] host 4 1\n", "[2] host 4 1\n", "[3] host 4 1\n"})
    EXPECT_NE(r.output.find(line), std::string::npos) << r.output;  // the emulated nodes share the host

  const std::string said = "crowded host: 3 ranks of the job on 1 core;";
  // Over the network and over shared memory, every message kind with its
  // replies, and the returned messages, while every wait gives way.
  for (const char* protocol : {"CLUMP_PROTOCOL=net", "CLUMP_PROTOCOL=auto"})
    for (const char* scenario : {"kinds", "errors"}) {
      r = on_one_core({CLUMPRUN, "-n", "3", "--timeout", "120", AM_CONFORMANCE, scenario},
                      {protocol, "CLUMP_VERBOSE=1", "CLUMP_SEGMENT_SIZE=8M"});
      EXPECT_JOB_OK(r);
      EXPECT_NE(r.output.find(said), std::string::npos) << protocol << " " << scenario << "\n" << r.output;
    }
  // A crowded wait that starts with sends held back for packing sends them
  // and gives the core away before it polls (bundle::wait_until): the held
  // messages still leave together, and arrive once and in order.
  r = on_one_core({CLUMPRUN, "-n", "2", "--timeout", "120", AM_CONFORMANCE, "unhurried", "200"},
                  {"CLUMP_PROTOCOL=net", "CLUMP_VERBOSE=1"});
  EXPECT_JOB_OK(r);
  EXPECT_NE(r.output.find("crowded host: 2 ranks of the job on 1 core;"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("unhurried: rank 0 sent"), std::string::npos) << r.output;
  // Not crowded: one rank on one core; crowded waits turned off.
  r = on_one_core({CLUMPRUN, "-n", "1", AM_CONFORMANCE, "kinds"}, {"CLUMP_VERBOSE=1", "CLUMP_SEGMENT_SIZE=8M"});
  EXPECT_JOB_OK(r);
  EXPECT_EQ(r.output.find("crowded host"), std::string::npos) << r.output;
  r = on_one_core({CLUMPRUN, "-n", "3", AM_CONFORMANCE, "kinds"},
                  {"CLUMP_VERBOSE=1", "CLUMP_YIELD=off", "CLUMP_SEGMENT_SIZE=8M"});
  EXPECT_JOB_OK(r);
  EXPECT_EQ(r.output.find("crowded host"), std::string::npos) << r.output;
  // Turned on by hand, and a value that means nothing.
  r = run_cmd({CLUMPRUN, "-n", "1", AM_CONFORMANCE, "kinds"}, 150s,
              {"CLUMP_VERBOSE=1", "CLUMP_YIELD=on", "CLUMP_SEGMENT_SIZE=8M"});
  EXPECT_JOB_OK(r);
  EXPECT_NE(r.output.find("(CLUMP_YIELD=on)"), std::string::npos) << r.output;
  r = run_cmd({CLUMPRUN, "-n", "1", AM_CONFORMANCE, "kinds"}, 150s, {"CLUMP_YIELD=sometimes"});
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("CLUMP_YIELD=sometimes must be auto, on or off"), std::string::npos) << r.output;
}

TEST(threads, a_barrier_polls_only_its_own_bundle_not_a_worker_threads) {
  auto r = job(2, {"worker"});
  EXPECT_JOB_OK(r);
}

TEST(dead_peer, sends_to_an_exited_process_come_back_unreachable_without_hanging) {
  auto r = job(2, {"dead_peer"});
  EXPECT_JOB_OK(r);
  EXPECT_NE(r.output.find("came back unreachable"), std::string::npos) << r.output;
}

TEST(memory, a_process_maps_only_the_regions_of_the_processes_it_talks_to) {
  auto r = job(8, {"lazy"});
  EXPECT_JOB_OK(r);
  EXPECT_NE(r.output.find("lazy: rank 0 maps 3 regions of 8"), std::string::npos) << r.output;
}

TEST(wait, an_idle_wait_sleeps_and_wakes_promptly) {
  auto r = job(2, {"idle"});
  EXPECT_JOB_OK(r);
  EXPECT_NE(r.output.find("idle wait:"), std::string::npos) << r.output;
}

TEST(parallel, several_threads_send_and_poll_one_bundle) {
  auto r = job(2, {"parallel", "3", "3000"});
  EXPECT_JOB_OK(r);
}

TEST(parallel, with_small_queues_and_three_ranks) {
  auto r = job(3, {"parallel", "2", "2000"}, {"CLUMP_SHM_QUEUE_DEPTH=16"}, {"--bind", "none"});
  EXPECT_JOB_OK(r);
}

#ifdef HAVE_EXAMPLES
cmd_result example(int ranks, const std::string& name, std::vector<std::string> args = {},
                   std::vector<std::string> launcher = {}) {
  std::vector<std::string> argv{CLUMPRUN, "-n", std::to_string(ranks), "--timeout", "60"};
  argv.insert(argv.end(), launcher.begin(), launcher.end());
  argv.push_back(std::string(EXAMPLES_DIR) + "/" + name);
  argv.insert(argv.end(), args.begin(), args.end());
  return run_cmd(argv, 90s);
}

TEST(examples, hello_greets_rank_0_from_every_rank) {
  auto r = example(4, "00_hello");
  EXPECT_JOB_OK(r);
  EXPECT_NE(r.output.find("all 4 ranks said hello"), std::string::npos) << r.output;
}

TEST(examples, ping_pong_reports_its_round_trip) {
  auto r = example(2, "01_ping_pong", {"20000"});
  EXPECT_JOB_OK(r);
  EXPECT_NE(r.output.find("ping-pong: 20000 round trips"), std::string::npos) << r.output;
}

TEST(examples, remote_read_reads_split_phase) {
  auto r = example(3, "02_remote_read");
  EXPECT_JOB_OK(r);
  EXPECT_NE(r.output.find("read 8 values from rank"), std::string::npos) << r.output;
}

TEST(examples, c_api_example_runs) {
  auto r = example(2, "03_c_api");
  EXPECT_JOB_OK(r);
}

TEST(examples, every_example_runs_across_two_emulated_nodes) {
  auto hello = example(4, "00_hello", {}, {"-N", "2"});
  EXPECT_JOB_OK(hello);
  EXPECT_NE(hello.output.find("all 4 ranks said hello"), std::string::npos) << hello.output;
  auto ping = example(2, "01_ping_pong", {"20000"}, {"-N", "2"});
  EXPECT_JOB_OK(ping);
  EXPECT_NE(ping.output.find("ping-pong: 20000 round trips"), std::string::npos) << ping.output;
  auto read = example(3, "02_remote_read", {}, {"-N", "3"});
  EXPECT_JOB_OK(read);
  EXPECT_NE(read.output.find("read 8 values from rank"), std::string::npos) << read.output;
  EXPECT_JOB_OK(example(2, "03_c_api", {}, {"-N", "2"}));
}

// The gas examples, each on one node, on two emulated nodes and over the
// network alone: the same program, direct memory or messages underneath.
TEST(examples, gas_and_rpc_examples_run_on_one_node_on_two_nodes_and_over_the_network) {
  struct ex {
    const char* name;
    int ranks;
    const char* says;
    int says_times;
  };
  const ex all[] = {{"04_gas_remote_rw", 4, "(ok)", 4},
                    {"05_gas_spread_sum", 3, "spread sum of 100000 elements on 3 ranks: 4999950000 (expected", 1},
                    {"06_gas_histogram", 4, "every count exact", 1},
                    {"07_gas_store_pipeline", 4, "every value right", 1},
                    {"08_rpc_hash_table", 4, "every value right", 4},
                    {"09_coroutine_graph", 3, "every distance right", 3}};
  for (const ex& e : all) {
    for (std::vector<std::string> how : {std::vector<std::string>{}, {"-N", "2"}, {"NET"}}) {
      const bool net = !how.empty() && how[0] == "NET";
      std::vector<std::string> argv{CLUMPRUN, "-n", std::to_string(e.ranks), "--timeout", "60"};
      if (!net) argv.insert(argv.end(), how.begin(), how.end());
      argv.push_back(std::string(EXAMPLES_DIR) + "/" + e.name);
      auto r = run_cmd(argv, 90s, net ? std::vector<std::string>{"CLUMP_PROTOCOL=net"} : std::vector<std::string>{});
      EXPECT_JOB_OK(r);
      int times = 0;
      for (size_t at = r.output.find(e.says); at != std::string::npos; at = r.output.find(e.says, at + 1)) ++times;
      EXPECT_EQ(times, e.says_times) << e.name << "\n" << r.output;
    }
  }
}

// Setup that fails (a gas segment of 1 byte, an address that is not this
// host's, a region too small) is said, with the fix, and the job ends with
// exit code 1: never an uncaught exception's abort (134).
TEST(examples, setup_errors_are_printed_and_end_the_job_with_code_1) {
  struct bad {
    const char* setting;
    const char* says;
  };
  const bad all[] = {{"CLUMP_GAS_SEGMENT=1", "do not fit in the segment"},
                     {"CLUMP_NET_ADDRESS=10.1.2.3", "set CLUMP_NET_ADDRESS to an address of this host"},
                     {"CLUMP_SHM_REGION_SIZE=16M", "CLUMP_SEGMENT_SIZE=64M is out of range"}};
  for (const bad& b : all) {
    std::vector<std::string> argv{CLUMPRUN, "-n", "2", "-N", "2", "--timeout", "60",
                                  std::string(EXAMPLES_DIR) + "/04_gas_remote_rw"};
    auto r = run_cmd(argv, 90s, {b.setting});
    EXPECT_EQ(r.exit_code, 1) << b.setting << "\n" << r.output;
    EXPECT_NE(r.output.find(b.says), std::string::npos) << b.setting << "\n" << r.output;
    EXPECT_EQ(r.output.find("signal"), std::string::npos) << b.setting << "\n" << r.output;
  }
}

TEST(examples, a_program_started_alone_is_a_job_of_one) {
  auto r = run_cmd({std::string(EXAMPLES_DIR) + "/00_hello"}, 60s);
  EXPECT_JOB_OK(r);
  EXPECT_NE(r.output.find("all 1 ranks said hello"), std::string::npos) << r.output;
}
#endif

}  // namespace
