// Runs every gas scenario against its reference with 1, 2, 3 and 4 ranks, on
// one node (shared memory: direct loads and stores), on two emulated nodes
// (both at once), and over the network protocol alone (messages only).

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "run_cmd.hpp"

namespace {

using namespace std::chrono_literals;
using clump::test::cmd_result;
using clump::test::run_cmd;

struct setup {
  const char* name;
  int ranks;
  std::vector<std::string> env;
  std::vector<std::string> launcher;
};

void PrintTo(const setup& s, std::ostream* os) { *os << s.name; }

const setup setups[] = {
    {"one_rank", 1, {}, {}},
    {"two_ranks", 2, {}, {}},
    {"three_ranks", 3, {}, {}},
    {"four_ranks", 4, {}, {}},
    {"nodes2_of_3", 3, {}, {"-N", "2"}},
    {"nodes2_of_4", 4, {}, {"-N", "2"}},
    {"net_2", 2, {"CLUMP_PROTOCOL=net"}, {}},
    {"net_3", 3, {"CLUMP_PROTOCOL=net"}, {}},
#if defined(CLUMP_HAVE_OFI)
    {"ofi_tcp_nodes2_of_3", 3, {"CLUMP_NET=ofi", "FI_PROVIDER=tcp"}, {"-N", "2"}},
    {"ofi_udp_nodes2_of_3", 3, {"CLUMP_NET=ofi", "FI_PROVIDER=udp"}, {"-N", "2"}},
    // Two ranks, the shape of the benchmarks, where a larger rxd window was tried (docs/net-protocol.md).
    {"ofi_udp_nodes2_of_2", 2, {"CLUMP_NET=ofi", "FI_PROVIDER=udp"}, {"-N", "2"}},
#endif
};

class gas_suite : public ::testing::TestWithParam<setup> {
 protected:
  cmd_result run(const std::string& scenario) {
    const setup& s = GetParam();
    std::vector<std::string> argv{CLUMPRUN, "-n", std::to_string(s.ranks), "--timeout", "120", "--bind", "none"};
    argv.insert(argv.end(), s.launcher.begin(), s.launcher.end());
    argv.push_back(GAS_CONFORMANCE);
    argv.push_back(scenario);
    std::vector<std::string> env = s.env;
    env.push_back("CLUMP_GAS_SEGMENT=16M");
    env.push_back("CLUMP_SEGMENT_SIZE=8M");
    cmd_result r = run_cmd(argv, 150s, env);
    int passed = 0;
    for (size_t at = r.output.find(scenario + " passed"); at != std::string::npos;
         at = r.output.find(scenario + " passed", at + 1))
      ++passed;
    EXPECT_EQ(passed, s.ranks) << r.output;
    return r;
  }
};

#define EXPECT_GAS_OK(r) EXPECT_EQ((r).exit_code, 0) << (r).output

TEST_P(gas_suite, single_values_of_every_type_read_and_write_exactly) { EXPECT_GAS_OK(run("values")); }
TEST_P(gas_suite, bulk_puts_and_gets_of_0_bytes_to_3_mib_at_odd_alignments) { EXPECT_GAS_OK(run("bulk")); }
TEST_P(gas_suite, stores_are_counted_and_all_store_sync_sees_every_one) { EXPECT_GAS_OK(run("store")); }
TEST_P(gas_suite, sync_and_store_sync_never_return_before_the_data_is_there) { EXPECT_GAS_OK(run("late")); }
TEST_P(gas_suite, symmetric_and_private_allocation_and_pointer_arithmetic) { EXPECT_GAS_OK(run("memory")); }
TEST_P(gas_suite, bad_pointers_are_refused_with_the_reason_and_write_nothing) { EXPECT_GAS_OK(run("errors")); }
TEST_P(gas_suite, atomics_and_atomic_procedures_under_contention_are_exact) { EXPECT_GAS_OK(run("atomics")); }
TEST_P(gas_suite, collectives_with_every_root_and_odd_sizes_match_the_reference) { EXPECT_GAS_OK(run("collectives")); }
TEST_P(gas_suite, spread_arrays_cyclic_and_blocked_place_and_find_every_element) { EXPECT_GAS_OK(run("spread")); }
TEST_P(gas_suite, traffic_counts_node_operations_and_network_messages_apart) { EXPECT_GAS_OK(run("traffic")); }

INSTANTIATE_TEST_SUITE_P(layouts, gas_suite, ::testing::ValuesIn(setups),
                         [](const ::testing::TestParamInfo<setup>& i) { return std::string(i.param.name); });

}  // namespace
