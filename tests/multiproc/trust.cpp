// The trust program: scenarios of issue "Trust" (a busy process is never
// declared dead, tags guard every byte, no wait without a way out), one per
// run, chosen by argv[1] and run under clumprun by trust_test.cpp. Every
// failed check prints what was expected and what happened, and the program
// exits non-zero.

#include <clump/clump.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "check.hpp"

namespace {

using clump::test::failures;
using clump::test::my_rank;
using steady = std::chrono::steady_clock;

double seconds_since(steady::time_point t) { return std::chrono::duration<double>(steady::now() - t).count(); }

/// Computes for `seconds` without a single clump call (a volatile loop, so
/// that the compiler keeps it).
void compute_without_polling(double seconds) {
  const auto until = steady::now() + std::chrono::duration<double>(seconds);
  volatile uint64_t x = 0;
  while (steady::now() < until)
    for (int i = 0; i < 10000; ++i) x = x + static_cast<uint64_t>(i);
}

// ---- slow is not dead ---------------------------------------------------------

// Rank 0 sends `count` requests to every other rank, which computes for
// `quiet` seconds without any clump call and only then polls and replies.
// Every reply must arrive and nothing may come back to handler 0.
int scenario_quiet(clump::runtime& rt, double quiet, int count) {
  clump::endpoint& ep = rt.endpoint();
  std::atomic<int> replies{0}, handled{0};
  int returned = 0;
  ep.on_returned([&](const clump::returned_message& m) {
    ++returned;
    std::fprintf(stderr, "rank %d: a message came back: %s\n", rt.rank(), clump::to_string(m.reason));
  });
  auto pong = ep.on_reply([&](clump::token&, uint32_t) { replies.fetch_add(1); });
  auto ping = ep.on_request([&](clump::token& t, uint32_t i) {
    handled.fetch_add(1);
    (void)t.reply(pong, i);
  });
  rt.barrier();
  const auto t0 = steady::now();
  if (rt.rank() == 0) {
    for (int r = 1; r < rt.size(); ++r)
      for (int i = 0; i < count; ++i) CHECK(ep.request(r, ping, static_cast<uint32_t>(i)) == clump::status::ok, "send");
    const int want = count * (rt.size() - 1);
    rt.bundle().wait_until([&] { return replies.load() + returned >= want; });
    CHECK(replies.load() == want, "%d of %d replies arrived", replies.load(), want);
  } else {
    compute_without_polling(quiet);
    rt.bundle().wait_until([&] { return handled.load() >= count; });
  }
  CHECK(returned == 0, "%d messages came back to handler 0", returned);
  const clump::network_stats s = clump::network_statistics();
  CHECK(s.peers_unreachable == 0, "%llu peers were declared unreachable", (unsigned long long)s.peers_unreachable);
  std::printf("rank %d: quiet for %.1f s: %d replies, %d returned, %llu retransmissions, %llu pings, covered %llu "
              "times, %.1f s in all\n",
              rt.rank(), quiet, replies.load(), returned, (unsigned long long)s.retransmits,
              (unsigned long long)s.pings_sent, (unsigned long long)s.covered, seconds_since(t0));
  rt.barrier();
  return failures;
}

// A link cut between two hosts (a command that takes a veth down, run by
// rank 0 once traffic flows): rank 0's later requests to rank 1 come back
// unreachable within the timeout (plus a second for scheduling), and every
// request is either answered or returned, never lost.
int scenario_cut(clump::runtime& rt, const char* command) {
  clump::endpoint& ep = rt.endpoint();
  const char* budget = std::getenv("CLUMP_NET_TIMEOUT_MS");
  const double timeout = budget ? std::atof(budget) / 1000 : 10;
  std::atomic<int> replies{0};
  int unreachable = 0, other = 0;
  ep.on_returned([&](const clump::returned_message& m) {
    if (m.reason == clump::return_reason::unreachable)
      ++unreachable;
    else
      ++other;
  });
  auto pong = ep.on_reply([&](clump::token&, uint32_t) { replies.fetch_add(1); });
  auto ping = ep.on_request([&](clump::token& t, uint32_t i) { (void)t.reply(pong, i); });
  rt.barrier();
  if (rt.rank() == 0) {
    for (uint32_t i = 0; i < 100; ++i) {
      const int before = replies.load();
      CHECK(ep.request(1, ping, i) == clump::status::ok, "send");
      rt.bundle().wait_until([&] { return replies.load() > before; });
    }
    const int rc = std::system(command);
    CHECK(rc == 0, "'%s' failed (%d)", command, rc);
    const auto cut = steady::now();
    const int sent = 20;
    for (int i = 0; i < sent; ++i) CHECK(ep.request(1, ping, 1000u + static_cast<uint32_t>(i)) == clump::status::ok, "send");
    rt.bundle().wait_until([&] { return replies.load() - 100 + unreachable + other >= sent; });
    const double took = seconds_since(cut);
    CHECK(unreachable > 0, "nothing came back after the cut");
    CHECK(other == 0, "%d came back for another reason", other);
    CHECK(replies.load() - 100 + unreachable == sent, "%d answered and %d returned of %d", replies.load() - 100,
          unreachable, sent);
    CHECK(took <= timeout + 1, "the cut was found after %.2f s (CLUMP_NET_TIMEOUT_MS: %.2f s)", took, timeout);
    std::printf("rank 0: after the cut, %d requests answered and %d returned unreachable within %.2f s\n",
                replies.load() - 100, unreachable, took);
  }
  rt.barrier();
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: trust quiet SECONDS [COUNT] | cut COMMAND\n");
    return 2;
  }
  try {
    clump::runtime rt{argc, argv};
    my_rank = rt.rank();
    const std::string what = argv[1];
    int failed = 0;
    if (what == "quiet" && argc >= 3)
      failed = scenario_quiet(rt, std::atof(argv[2]), argc > 3 ? std::atoi(argv[3]) : 200);
    else if (what == "cut" && argc >= 3 && rt.size() >= 2)
      failed = scenario_cut(rt, argv[2]);
    else {
      std::fprintf(stderr, "unknown scenario or missing argument: %s\n", what.c_str());
      return 2;
    }
    if (failed) std::fprintf(stderr, "rank %d: %d checks failed\n", rt.rank(), failed);
    else std::printf("rank %d: %s passed\n", rt.rank(), what.c_str());
    return failed ? 1 : 0;
  } catch (const clump::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
