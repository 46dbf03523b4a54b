// The trust suite: runs the scenarios of trust.cpp as real jobs through
// clumprun, over shared memory, emulated nodes and the network protocol.

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "am_job.hpp"

namespace {

using clump::test::cmd_result;
using clump::test::program_job;

struct setup {
  const char* name;
  int ranks;
  std::vector<std::string> env;
  std::vector<std::string> launcher;  // clumprun options
};

void PrintTo(const setup& s, std::ostream* os) { *os << s.name; }

// ---- slow is not dead ---------------------------------------------------------

// A peer computes for three times CLUMP_NET_TIMEOUT_MS without a single
// clump call, with requests waiting for it: its library acknowledges them and
// answers keep-alives, so nothing comes back and every reply arrives once it
// polls. Three ranks over the network put two quiet spinners on two cores,
// so the library's thread must get its turn on a busy machine.
const setup quiet_setups[] = {
    {"nodes2", 2, {}, {"-N", "2"}},
    {"nodes2_progress_thread", 2, {"CLUMP_PROGRESS=thread"}, {"-N", "2"}},
    {"net3", 3, {"CLUMP_PROTOCOL=net"}, {}},
    {"net3_progress_thread", 3, {"CLUMP_PROTOCOL=net", "CLUMP_PROGRESS=thread"}, {}},
    {"lossy_net3", 3, {"CLUMP_PROTOCOL=net", "CLUMP_NET_FAULT=drop=0.05,dup=0.02,reorder=0.02,seed=3"}, {}},
};

class quiet_peer : public ::testing::TestWithParam<setup> {};

TEST_P(quiet_peer, computing_for_three_timeouts_without_polling_is_not_death) {
  const setup& s = GetParam();
  std::vector<std::string> env = s.env;
  env.push_back("CLUMP_NET_TIMEOUT_MS=1000");
  // Repeated: a failure that depends on scheduling shows up in one run of a few.
  for (int round = 0; round < 3; ++round) {
    cmd_result r = program_job(TRUST, s.ranks, {"quiet", "3"}, env, s.launcher);
    ASSERT_EQ(r.exit_code, 0) << "round " << round << ":\n" << r.output;
    EXPECT_NE(r.output.find("rank 0: quiet for 3.0 s: " + std::to_string(200 * (s.ranks - 1)) + " replies, 0 returned"),
              std::string::npos)
        << r.output;
  }
}

INSTANTIATE_TEST_SUITE_P(setups, quiet_peer, ::testing::ValuesIn(quiet_setups),
                         [](const ::testing::TestParamInfo<setup>& i) { return std::string(i.param.name); });

}  // namespace
