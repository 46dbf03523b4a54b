// netprobe: bare loops for looking inside the network protocol with perf or
// strace, without pingpong's limits and round-robin sampling around them.
//
//   clumprun -n 2 ./netprobe pingpong [N]                   N round trips of a 2-word short request
//   clumprun -n 2 ./netprobe echo [N] [BYTES] [SMALL]       N round trips of a BYTES medium request,
//       echoed by a medium reply (beyond max_medium(), a long request into
//       rank 1's segment echoed by a long reply into rank 0's, as
//       bench/loggp's echo); with SMALL, each round trip of BYTES
//       follows one of SMALL bytes (as the size sweeps of bench/pingpong
//       and bench/loggp change sizes)
//   clumprun -n 2 ./netprobe stream [N] [BYTES] [PAUSE_MS] [BURSTS]
//       BURSTS bursts of N long requests of BYTES into rank 1's segment, each
//       ended by a flush; with PAUSE_MS, before each burst both ranks stop
//       polling clump for that long (as a program that computes does)
//
// Rank 0 drives and spins on poll(); rank 1 answers; ranks 2 and up (under
// clumprun -N) wait asleep. Prints the time per one-way message or the
// bandwidth over the timed bursts, and rank 0's network counters over them,
// e.g. under
//   CLUMP_PROTOCOL=net perf stat -e syscalls:sys_enter_sendmmsg,syscalls:sys_enter_recvmmsg -- clumprun ...

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "pingpong_driver.hpp"  // clump's headers, with GCC 12's false warning silenced

namespace {

using steady = std::chrono::steady_clock;

void spin_for(int ms) {
  const auto until = steady::now() + std::chrono::milliseconds(ms);
  while (steady::now() < until) {
  }
}

/// What a rank's network still waits for once the loops end (both 0 when settled).
void print_settled(int rank, const clump::network_stats& s) {
  std::printf("rank %d at the end: channels unacknowledged %llu, partway through a message %llu\n", rank,
              static_cast<unsigned long long>(s.unacknowledged), static_cast<unsigned long long>(s.partial));
}

void print_counters(const clump::network_stats& a, const clump::network_stats& b) {
  std::printf("rank 0 network counters: datagrams sent %llu, received %llu; explicit acks %llu; retransmits %llu\n",
              static_cast<unsigned long long>(b.datagrams_sent - a.datagrams_sent),
              static_cast<unsigned long long>(b.datagrams_received - a.datagrams_received),
              static_cast<unsigned long long>(b.acks_sent - a.acks_sent),
              static_cast<unsigned long long>(b.retransmits - a.retransmits));
  print_settled(0, b);
}

}  // namespace

int main(int argc, char** argv) {
  clump::runtime rt{argc, argv};
  const bool stream = argc > 1 && std::strcmp(argv[1], "stream") == 0;
  const bool echo = argc > 1 && std::strcmp(argv[1], "echo") == 0;
  if (argc > 1 && !stream && !echo && std::strcmp(argv[1], "pingpong") != 0) {
    if (rt.rank() == 0)
      std::fprintf(stderr,
                   "usage: netprobe pingpong [N] | echo [N] [BYTES] [SMALL] | stream [N] [BYTES] [PAUSE_MS] [BURSTS]\n");
    return 2;
  }
  const long n = argc > 2 ? std::atol(argv[2]) : (stream ? 1000 : 100000);
  const size_t bytes = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : size_t{1} << 20;
  const int pause_ms = argc > 4 ? std::atoi(argv[4]) : 0;
  const long bursts = argc > 5 ? std::atol(argv[5]) : 1;

  clump::endpoint& ep = rt.endpoint();
  bool done = false, stop = false, pause = false, acked = false;
  uint64_t count = 0;
  auto pong = ep.on_reply([&](clump::token&, uint64_t) { done = true; });
  auto ping = ep.on_request([&](clump::token& t, uint64_t v) { (void)t.reply(pong, v); });
  auto echoed = ep.on_reply([&](clump::token&, std::span<const std::byte>) { done = true; });
  auto echo_back = ep.on_request([&](clump::token& t, std::span<const std::byte> p) { (void)t.reply(echoed, p); });
  auto echo_long = ep.on_request([&](clump::token& t, std::span<const std::byte> p) {
    if (const clump::status s = t.reply_long(echoed, p, 0); s != clump::status::ok) {
      std::fprintf(stderr, "netprobe echo: the long reply of %zu bytes failed: %s\n", p.size(), clump::to_string(s));
      std::exit(1);
    }
  });
  auto ack = ep.on_reply([&](clump::token&, uint64_t) { acked = true; });
  auto sink = ep.on_request([&](clump::token&, std::span<const std::byte>) { ++count; });
  auto flush = ep.on_request([&](clump::token& t) {
    (void)t.reply(ack, count);
    count = 0;
  });
  auto rest = ep.on_request([&](clump::token&) { pause = true; });
  auto quit = ep.on_request([&](clump::token&) { stop = true; });
  rt.barrier();
  if (rt.rank() == 1) {
    while (!stop) {
      rt.bundle().poll();
      if (pause) {
        pause = false;
        spin_for(pause_ms);
      }
    }
    print_settled(1, clump::network_statistics());
  } else if (rt.rank() >= 2) {
    rt.wait_until([&] { return stop; });
  } else if (echo) {
    const size_t small = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 0;
    const size_t most = std::max(bytes, small);
    if (most > clump::max_medium() && ep.segment().size() < most) {
      std::fprintf(stderr,
                   "netprobe echo: %zu bytes is more than a medium message carries (max_medium() = %zu) and than the "
                   "segment holds for a long one (%zu bytes; set CLUMP_SEGMENT_SIZE)\n",
                   most, clump::max_medium(), ep.segment().size());
      for (int r = 1; r < rt.size(); ++r) (void)ep.request(r, quit);
      rt.barrier();
      return 2;
    }
    const std::vector<std::byte> big(bytes, std::byte{0x5a}), little(small, std::byte{0x3c});
    auto once = [&](const std::vector<std::byte>& payload) {
      const std::span<const std::byte> p(payload);
      const bool medium = p.size() <= clump::max_medium();
      if (const clump::status s = medium ? ep.request(1, echo_back, p) : ep.request_long(1, echo_long, p, 0);
          s != clump::status::ok) {
        std::fprintf(stderr, "netprobe echo: the request of %zu bytes failed: %s\n", payload.size(), clump::to_string(s));
        std::exit(1);
      }
      while (!done) rt.bundle().poll();
      done = false;
    };
    std::vector<double> one_way;  // us, each timed round trip's half
    one_way.reserve(static_cast<size_t>(std::max(0L, n)));
    auto round_trips = [&](long k, bool timed, double& secs) {
      for (long i = 0; i < k; ++i) {
        if (small) once(little);
        const auto t0 = steady::now();
        once(big);
        if (!timed) continue;
        const double s = std::chrono::duration<double>(steady::now() - t0).count();
        secs += s;
        one_way.push_back(s / 2 * 1e6);
      }
    };
    double secs = 0;
    round_trips(std::min(n, 1000L), false, secs);
    const clump::network_stats s0 = clump::network_statistics();
    round_trips(n, true, secs);
    std::sort(one_way.begin(), one_way.end());
    auto at = [&](double q) { return one_way.empty() ? 0.0 : one_way[static_cast<size_t>(q * static_cast<double>(one_way.size() - 1))]; };
    std::printf("one way %.3f us for %zu B over %ld round trips%s (each: median %.3f, 10%% %.3f, 90%% %.3f, 99%% %.3f)\n",
                secs / static_cast<double>(n) / 2 * 1e6, bytes, n, small ? " (each after one of the small size)" : "",
                at(0.5), at(0.1), at(0.9), at(0.99));
    print_counters(s0, clump::network_statistics());
  } else if (!stream) {
    auto round_trips = [&](long k) {
      for (long i = 0; i < k; ++i) {
        (void)ep.request(1, ping, static_cast<uint64_t>(i));
        while (!done) rt.bundle().poll();
        done = false;
      }
    };
    round_trips(1000);
    const clump::network_stats s0 = clump::network_statistics();
    const auto t0 = steady::now();
    round_trips(n);
    const double secs = std::chrono::duration<double>(steady::now() - t0).count();
    std::printf("one way %.3f us over %ld round trips\n", secs / static_cast<double>(n) / 2 * 1e6, n);
    print_counters(s0, clump::network_statistics());
  } else {
    std::vector<std::byte> source(bytes, std::byte{0x5a});
    auto burst = [&](long k) {
      for (long i = 0; i < k; ++i)
        (void)ep.request_long(1, sink, std::span<const std::byte>(source), static_cast<uint64_t>(i & 1) * bytes);
      (void)ep.request(1, flush);
      while (!acked) rt.bundle().poll();
      acked = false;
    };
    burst(std::max(1L, n / 10));
    const clump::network_stats s0 = clump::network_statistics();
    double secs = 0;
    for (long b = 0; b < bursts; ++b) {
      if (pause_ms) {
        (void)ep.request(1, rest);
        spin_for(pause_ms);
      }
      const auto t0 = steady::now();
      burst(n);
      secs += std::chrono::duration<double>(steady::now() - t0).count();
    }
    std::printf("%.2f GB/s: %ld bursts of %ld x %zu B in %.3f s (pauses of %d ms between bursts not counted)\n",
                static_cast<double>(bursts * n) * static_cast<double>(bytes) / secs / 1e9, bursts, n, bytes, secs,
                pause_ms);
    print_counters(s0, clump::network_statistics());
  }
  if (rt.rank() == 0)
    for (int r = 1; r < rt.size(); ++r) (void)ep.request(r, quit);
  rt.barrier();
  return 0;
}
