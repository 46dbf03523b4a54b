// When poll() looks at the network: the counts of the adaptive, fractional
// and always modes, the quiet period, and adaptive mode's time bound
// (CLUMP_NET_POLL_US), which makes a program that polls rarely still look at
// the network soon.

#include <gtest/gtest.h>

#include <chrono>

#include "am/adaptive_poller.hpp"

namespace {

using clump::am::adaptive_poller;
using mode = adaptive_poller::mode;

/// Polls until due() says to look at the network; returns how many polls that took (at most `most`).
unsigned polls_until_due(adaptive_poller& p, unsigned most) {
  for (unsigned i = 1; i <= most; ++i)
    if (p.due()) return i;
  return most + 1;
}

/// Spins (no sleep: the poller reads the same clock) until `us` microseconds have passed.
void let_time_pass(int us) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  while (std::chrono::steady_clock::now() < until) {
  }
}

TEST(AdaptivePoller, AlwaysModeLooksEveryTime) {
  adaptive_poller p(mode::always, 8, 32, 50);
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(p.due());
    p.found(0);
  }
}

TEST(AdaptivePoller, FractionalModeLooksOnceInMin) {
  adaptive_poller p(mode::fractional, 8, 32, 50);
  p.found(0);
  EXPECT_EQ(polls_until_due(p, 100), 8u);
  p.found(1);
  EXPECT_EQ(polls_until_due(p, 100), 8u);
}

TEST(AdaptivePoller, AdaptivePeriodFollowsWhatTheLast32NetworkPollsFound) {
  adaptive_poller p(mode::adaptive, 8, 32, 0);
  for (int i = 0; i < 32; ++i) p.found(1);  // every one found something: the minimum period
  EXPECT_EQ(polls_until_due(p, 2000), 8u);
  p.found(0);  // 31 of 32: almost the minimum
  EXPECT_EQ(polls_until_due(p, 2000), 32u - 24u * 31u / 32u);
  for (int i = 0; i < 32; ++i) p.found(0);  // quiet: the doorbell, and a look every 32 x max polls
  EXPECT_TRUE(p.quiet());
  EXPECT_EQ(polls_until_due(p, 2000), 32u * 32u);
}

TEST(AdaptivePoller, NotQuietWhileAnAnswerIsExpected) {
  adaptive_poller p(mode::adaptive, 8, 32, 0);
  // Nothing found in 32 polls, but a datagram of ours waits for its ack: the
  // link is polled directly, once in max polls, and the doorbell is not used.
  for (int i = 0; i < 32; ++i) p.found(0, true);
  EXPECT_FALSE(p.quiet());
  EXPECT_EQ(polls_until_due(p, 2000), 32u);
  // Acked, and still nothing found: quiet again.
  p.found(0, false);
  EXPECT_TRUE(p.quiet());
  EXPECT_EQ(polls_until_due(p, 2000), 32u * 32u);
  // Expecting does not lengthen a period that finds messages.
  for (int i = 0; i < 32; ++i) p.found(1, true);
  EXPECT_EQ(polls_until_due(p, 2000), 8u);
  // The other modes keep their periods.
  adaptive_poller f(mode::fractional, 8, 32, 0);
  f.found(0, true);
  EXPECT_EQ(polls_until_due(f, 2000), 8u);
  EXPECT_FALSE(f.quiet());
}

TEST(AdaptivePoller, RarePollsStillLookAtTheNetworkWithinTheTimeBound) {
  // A bound of 20 ms (not the default 50 us), so that a busy machine pausing
  // this thread between two calls does not pass it by accident.
  adaptive_poller p(mode::adaptive, 8, 32, 20'000);
  for (int i = 0; i < 32; ++i) p.found(0);  // quiet: 1024 polls by count
  ASSERT_TRUE(p.quiet());
  // Polls that come often: the count decides (the bound has not passed yet
  // within the first few polls).
  EXPECT_FALSE(p.due());
  // Then the program computes for longer than the bound between polls: a
  // network poll is due within 8 polls, long before the count of 1024.
  let_time_pass(25'000);
  EXPECT_LE(polls_until_due(p, 1024), 8u);
  p.found(0);
  // Right after a network poll the bound starts again.
  EXPECT_GT(polls_until_due(p, 6), 6u);
}

TEST(AdaptivePoller, NoTimeBoundWhenItIsZeroOrTheModeIsNotAdaptive) {
  adaptive_poller none(mode::adaptive, 8, 32, 0);
  adaptive_poller fractional(mode::fractional, 8, 32, 50);
  for (int i = 0; i < 32; ++i) none.found(0);
  fractional.found(0);
  let_time_pass(200);
  EXPECT_EQ(polls_until_due(none, 2000), 32u * 32u);
  EXPECT_EQ(polls_until_due(fractional, 2000), 8u);
}

}  // namespace
