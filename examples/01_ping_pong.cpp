// 01_ping_pong: rank 0 sends a request, rank 1's handler replies, rank 0's
// reply handler counts. Prints the average round trip.
//
//   clumprun -n 2 ./01_ping_pong [iterations]

#include <clump/clump.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) try {
  clump::runtime rt{argc, argv};
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 100000;
  clump::endpoint& ep = rt.endpoint();
  const int peer = rt.size() > 1 ? 1 - rt.rank() : 0;  // alone, a rank talks to itself
  uint32_t last = 0;
  auto pong = ep.on_reply([&](clump::token&, uint32_t v) { last = v; });
  auto ping = ep.on_request([&](clump::token& t, uint32_t v) { (void)t.reply(pong, v + 1); });
  rt.barrier();
  if (rt.rank() == 0) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i) {
      const uint32_t want = static_cast<uint32_t>(2 * i + 1);
      if (ep.request(peer, ping, want - 1) != clump::status::ok) return 1;
      rt.wait_until([&] { return last == want; });
    }
    std::chrono::duration<double, std::micro> us = std::chrono::steady_clock::now() - start;
    std::printf("ping-pong: %d round trips, %.3f us each (%.3f us one way)\n", iterations, us.count() / iterations,
                us.count() / iterations / 2);
  }
  rt.barrier();  // rank 1 keeps serving until rank 0 is done
  return 0;
} catch (const clump::error& e) {  // setup failed: say why (the message has the fix), exit 1
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
