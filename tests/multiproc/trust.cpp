// The trust program: scenarios of issue "Trust" (a busy process is never
// declared dead, tags guard every byte, no wait without a way out), one per
// run, chosen by argv[1] and run under clumprun by trust_test.cpp. Every
// failed check prints what was expected and what happened, and the program
// exits non-zero.

#include <clump/clump.hpp>
#include <clump/gas.hpp>

#include "am/endpoint_impl.hpp"  // the garbage scenario claims lines in a peer's queue itself
#include "am/process.hpp"
#include "net/fault.hpp"
#include "shm/queue.hpp"
#include "shm/wake.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <thread>
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

// ---- idle is idle -----------------------------------------------------------------

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);  // every thread: the program's, the network's, the boot watcher's
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// Rank 0 sleeps for `seconds` (no clump call at all) while the others wait
// for it: first in a barrier, then in wait_until for a message rank 0 sends
// when it wakes. A waiting rank sleeps: its process uses under 1% of a core
// (the target is 0.1%; the bound leaves room for a loaded machine), and it
// still wakes at once (the barrier ends promptly, and the message's handler
// runs within 0.5 s of its send: the message carries the time it was sent,
// on the clock every process of this host shares, so that a rank 0 whose
// own sleep ends late on a loaded machine is not taken for a late wake-up).
int scenario_idle(clump::runtime& rt, double seconds) {
  clump::endpoint& ep = rt.endpoint();
  std::atomic<int> woken{0};
  std::atomic<int64_t> delivered_after_ns{0};
  auto wake_up = ep.on_request([&](clump::token&, uint64_t sent_ns) {
    delivered_after_ns.store(steady::now().time_since_epoch().count() - static_cast<int64_t>(sent_ns));
    woken.fetch_add(1);
  });
  rt.barrier();
  for (const char* how : {"barrier", "wait_until"}) {
    const bool barrier = std::string(how) == "barrier";
    if (rt.rank() == 0) {
      std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
      if (barrier)
        rt.barrier();
      else
        for (int r = 1; r < rt.size(); ++r)
          CHECK(ep.request(r, wake_up, static_cast<uint64_t>(steady::now().time_since_epoch().count())) ==
                    clump::status::ok,
                "send");
    } else {
      const double cpu0 = process_cpu_seconds();
      const auto t0 = steady::now();
      if (barrier)
        rt.barrier();
      else
        rt.wait_until([&] { return woken.load() > 0; });
      const double wall = seconds_since(t0), cpu = process_cpu_seconds() - cpu0;
      CHECK(cpu < 0.01 * wall, "waiting %.2f s in %s used %.1f ms of CPU (%.2f%% of a core)", wall, how, cpu * 1e3,
            100 * cpu / wall);
      if (barrier) {
        CHECK(wall < seconds + 0.5, "the %s ended %.2f s after it began (rank 0 slept %.2f s)", how, wall, seconds);
      } else {
        const double late = static_cast<double>(delivered_after_ns.load()) * 1e-9;
        CHECK(late < 0.5, "the message's handler ran %.3f s after it was sent (the wait_until took %.2f s)", late,
              wall);
        CHECK(wall > seconds * 0.9, "the wait_until ended after %.2f s, before rank 0 sent", wall);
      }
      std::printf("rank %d: idle in %s for %.2f s: %.2f ms of CPU (%.3f%% of a core)%s\n", rt.rank(), how, wall,
                  cpu * 1e3, 100 * cpu / wall,
                  barrier ? ""
                          : (", the handler ran " +
                             std::to_string(static_cast<double>(delivered_after_ns.load()) * 1e-6) + " ms after the send")
                                .c_str());
    }
    if (!barrier) rt.barrier();
  }
  return failures;
}

// ---- tags and identity guard every byte ---------------------------------------

constexpr size_t payload_sizes[] = {0, 1, 8192, 65536, 300000, 1u << 20};
constexpr size_t segment_bytes = 4u << 20;

std::byte canary(size_t i, uint32_t seed) { return static_cast<std::byte>((i * 131 + seed * 17 + (i >> 12)) & 0xff); }

void fill(std::span<std::byte> s, uint32_t seed) {
  for (size_t i = 0; i < s.size(); ++i) s[i] = canary(i, seed);
}

/// Index of the first byte of `s` that is not the pattern, or -1.
long first_changed(std::span<const std::byte> s, uint32_t seed) {
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] != canary(i, seed)) return static_cast<long>(i);
  return -1;
}

/// Counts what comes back to handler 0, by reason.
struct returns {
  int count = 0, expected_reason = 0, other = 0;
  clump::return_reason want;
  explicit returns(clump::return_reason w) : want(w) {}
  void operator()(const clump::returned_message& m) {
    ++count;
    if (m.reason == want) ++expected_reason;
    else {
      ++other;
      std::fprintf(stderr, "rank %d: came back for another reason: %s\n", my_rank, clump::to_string(m.reason));
    }
  }
};

/// Sends one message of every kind and size (and gets of every size) through
/// translation `dest`, each of which must come back; returns how many went.
int send_every_kind(clump::runtime& rt, clump::endpoint& ep, int dest, clump::request_handler<uint32_t> s,
                    clump::payload_request_handler<uint32_t> p, clump::payload_reply_handler<uint32_t> got) {
  std::vector<std::byte> data(payload_sizes[std::size(payload_sizes) - 1], std::byte{0x3c});
  int sent = 0;
  auto ok = [&](clump::status st, const char* what, size_t n) {
    CHECK(st == clump::status::ok, "%s of %zu bytes: %s", what, n, clump::to_string(st));
    ++sent;
  };
  ok(ep.request(dest, s, 1u), "short request", 0);
  for (size_t n : payload_sizes) {
    const std::span<const std::byte> payload(data.data(), n);
    if (n <= clump::max_medium()) ok(ep.request(dest, p, payload, 2u), "medium request", n);
    ok(ep.request_long(dest, p, payload, 4096, 3u), "long request", n);
    clump::status st;
    while ((st = ep.request_long_async(dest, p, payload, 8192, 4u)) == clump::status::in_use) rt.bundle().poll();
    ok(st, "asynchronous long request", n);
    ok(ep.get(dest, got, 0, 4096, n, 5u), "get", n);
  }
  return sent;
}

// Rank 0 sends every kind of message and size to rank 1 under a tag rank 1
// does not take (and gets from it under that tag): each comes back with
// bad_tag, no handler runs, and neither rank's segment changes by a byte.
// With `private_segment`, rank 1's segment is its own memory (long payloads
// travel in pieces through the queues).
int scenario_wrong_tag(clump::runtime& rt, bool private_segment) {
  clump::endpoint& ep = rt.endpoint();
  std::vector<std::byte> own;
  if (private_segment && rt.rank() == 1) {
    own.resize(segment_bytes);
    ep.set_segment(own.data(), own.size());
  }
  std::span<std::byte> seg = ep.segment();
  CHECK(seg.size() >= segment_bytes, "the segment has %zu bytes (set CLUMP_SEGMENT_SIZE=8M)", seg.size());
  if (seg.size() < segment_bytes) return failures;
  fill(seg, 10 + static_cast<uint32_t>(rt.rank()));
  returns back(clump::return_reason::bad_tag);
  ep.on_returned([&](const clump::returned_message& m) { back(m); });
  std::atomic<int> delivered{0};
  auto s = ep.on_request([&](clump::token&, uint32_t) { delivered.fetch_add(1); });
  auto p = ep.on_request([&](clump::token&, std::span<const std::byte>, uint32_t) { delivered.fetch_add(1); });
  auto got = ep.on_reply([&](clump::token&, std::span<const std::byte>, uint32_t) { delivered.fetch_add(1); });
  rt.barrier();
  if (rt.rank() == 0) {
    const int wrong = ep.map_any(ep.translation_name(1), ep.translation_tag(1) ^ 0x40);
    const int sent = send_every_kind(rt, ep, wrong, s, p, got);
    const auto deadline = steady::now() + std::chrono::seconds(30);
    rt.bundle().wait_until([&] { return back.count >= sent || steady::now() > deadline; });
    CHECK(back.expected_reason == sent && back.other == 0, "%d of %d came back with bad_tag, %d for another reason",
          back.expected_reason, sent, back.other);
    std::printf("rank 0: %d messages under a wrong tag, %d came back with bad_tag\n", sent, back.expected_reason);
  }
  rt.barrier();
  CHECK(delivered.load() == 0, "%d handlers ran for messages under a wrong tag", delivered.load());
  const long at = first_changed(seg, 10 + static_cast<uint32_t>(rt.rank()));
  CHECK(at < 0, "rank %d's segment changed at byte %ld", rt.rank(), at);
  rt.barrier();
  return failures;
}

/// A second endpoint of this process, named to every rank (collective).
struct extra_endpoint {
  std::unique_ptr<clump::endpoint> ep;
  std::vector<clump::endpoint_name> names;
  extra_endpoint(clump::runtime& rt, clump::tag_t tag, uint32_t seed) {
    ep = std::make_unique<clump::endpoint>(rt.bundle());
    ep->set_tag(tag);
    fill(ep->allocate_segment(segment_bytes), seed);
    names.resize(static_cast<size_t>(rt.size()));
    const clump::endpoint_name mine = ep->name();
    rt.allgather(&mine, names.data(), sizeof mine);
  }
};

// Rank 1 frees an endpoint and makes a new one, which takes the same slot
// (with a new generation), the same tag and a segment in the same place;
// rank 0 then sends every kind and size under the old name: each comes back
// with bad_endpoint, and the new endpoint sees nothing of it, neither a
// handler call nor a byte in its segment.
int scenario_freed(clump::runtime& rt) {
  constexpr clump::tag_t tag = 0x7a6b5c4d3e2f1001ull;
  extra_endpoint x(rt, tag, 20);
  const clump::endpoint_name old_name = x.names[1];
  clump::endpoint& ep = rt.endpoint();
  returns back(clump::return_reason::bad_endpoint);
  ep.on_returned([&](const clump::returned_message& m) { back(m); });
  auto s = ep.on_request([&](clump::token&, uint32_t) {});
  auto p = ep.on_request([&](clump::token&, std::span<const std::byte>, uint32_t) {});
  auto got = ep.on_reply([&](clump::token&, std::span<const std::byte>, uint32_t) {});
  rt.barrier();
  std::atomic<int> wrongly{0};
  if (rt.rank() == 1) {
    const uint32_t slot = x.ep->name().slot;
    x.ep.reset();
    x.ep = std::make_unique<clump::endpoint>(rt.bundle());
    x.ep->set_tag(tag);
    fill(x.ep->allocate_segment(segment_bytes), 21);
    CHECK(x.ep->name().slot == slot && x.ep->name().generation > old_name.generation,
          "the new endpoint took slot %u generation %llu (the old: slot %u generation %llu)", x.ep->name().slot,
          (unsigned long long)x.ep->name().generation, slot, (unsigned long long)old_name.generation);
    // The same handler indices as ep's: a message under the old name would find them.
    x.ep->on_returned([](const clump::returned_message&) {});
    x.ep->set_raw_handler(s.index, [](void* c, clump::token_base&, const uint32_t*, unsigned, std::byte*, size_t) {
      static_cast<std::atomic<int>*>(c)->fetch_add(1);
    }, &wrongly, clump::detail::role::any, -1, -1);
    x.ep->set_raw_handler(p.index, [](void* c, clump::token_base&, const uint32_t*, unsigned, std::byte*, size_t) {
      static_cast<std::atomic<int>*>(c)->fetch_add(1);
    }, &wrongly, clump::detail::role::any, -1, -1);
  }
  rt.barrier();
  if (rt.rank() == 0) {
    const int old = ep.map_any(old_name, tag);
    const int sent = send_every_kind(rt, ep, old, s, p, got);
    const auto deadline = steady::now() + std::chrono::seconds(30);
    rt.bundle().wait_until([&] { return back.count >= sent || steady::now() > deadline; });
    CHECK(back.expected_reason == sent && back.other == 0,
          "%d of %d came back with bad_endpoint, %d for another reason", back.expected_reason, sent, back.other);
    std::printf("rank 0: %d messages to a freed endpoint, %d came back with bad_endpoint\n", sent,
                back.expected_reason);
  }
  rt.barrier();
  if (rt.rank() == 1) {
    CHECK(wrongly.load() == 0, "the endpoint in the freed one's slot ran %d handlers", wrongly.load());
    const long at = first_changed(x.ep->segment(), 21);
    CHECK(at < 0, "the new endpoint's segment changed at byte %ld", at);
  }
  rt.barrier();
  return failures;
}

// Rank 1 frees an endpoint while rank 0 streams requests to it: every
// request is either answered by it or comes back (bad_endpoint), none is
// lost and none reaches the endpoint that takes the slot next. Repeated,
// freeing after a different number of requests each round. With
// `long_bytes`, every third request is a long one of that size into the
// endpoint's segment (over libfabric from 32 KiB: read into the segment
// while it is freed).
int scenario_free_race(clump::runtime& rt, int rounds, size_t long_bytes) {
  clump::endpoint& ep = rt.endpoint();
  int returned = 0;
  ep.on_returned([&](const clump::returned_message& m) {
    ++returned;
    CHECK(m.reason == clump::return_reason::bad_endpoint, "came back: %s", clump::to_string(m.reason));
  });
  std::atomic<int> replies{0};
  auto pong = ep.on_reply([&](clump::token&, uint32_t) { replies.fetch_add(1); });
  constexpr int per_round = 400;
  std::vector<std::byte> payload(long_bytes ? long_bytes : 3000, std::byte{7});
  int total_wrong = 0, total_returned = 0, total_replies = 0;
  for (int round = 0; round < rounds; ++round) {
    constexpr clump::tag_t tag = 0x1122334455667788ull;
    extra_endpoint x(rt, tag, 30);
    std::atomic<int> handled{0}, wrongly{0};
    clump::request_handler<uint32_t> ping{};
    clump::payload_request_handler<uint32_t> pping{};
    auto install = [&](clump::endpoint& e, std::atomic<int>& count, bool answer) {
      ping = e.on_request(100, [&count, pong, answer](clump::token& t, uint32_t i) {
        count.fetch_add(1);
        if (answer) (void)t.reply(pong, i);
      });
      pping = e.on_request(101, [&count, pong, answer](clump::token& t, std::span<const std::byte>, uint32_t i) {
        count.fetch_add(1);
        if (answer) (void)t.reply(pong, i);
      });
    };
    install(*x.ep, handled, true);
    returned = 0;
    replies = 0;
    rt.barrier();
    if (rt.rank() == 0) {
      const int to = ep.map_any(x.names[1], tag);
      for (int i = 0; i < per_round; ++i) {
        const auto u = static_cast<uint32_t>(i);
        const clump::status s = i % 3            ? ep.request(to, ping, u)
                                : long_bytes ? ep.request_long(to, pping, payload, 0, u)
                                             : ep.request(to, pping, payload, u);
        CHECK(s == clump::status::ok, "send");
      }
      const auto deadline = steady::now() + std::chrono::seconds(20);
      rt.bundle().wait_until([&] { return replies.load() + returned >= per_round || steady::now() > deadline; });
      CHECK(replies.load() + returned == per_round, "round %d: %d answered + %d returned of %d", round, replies.load(),
            returned, per_round);
      total_returned += returned;
      total_replies += replies.load();
      ep.unmap(to);
    } else if (rt.rank() == 1) {
      // Answer a different number each round, then free the endpoint with
      // the rest still coming in.
      const int answer = (round * 97) % per_round;
      rt.bundle().wait_until([&] { return handled.load() >= answer; });
      x.ep.reset();
      x.ep = std::make_unique<clump::endpoint>(rt.bundle());
      x.ep->set_tag(tag);
      x.ep->allocate_segment(segment_bytes);
      install(*x.ep, wrongly, false);
    }
    rt.barrier();
    total_wrong += wrongly.load();
  }
  if (rt.rank() == 1) CHECK(total_wrong == 0, "the endpoints in freed slots ran %d handlers", total_wrong);
  if (rt.rank() == 0)
    std::printf("rank 0: %d rounds: %d answered, %d came back, none lost\n", rounds, total_replies, total_returned);
  return failures;
}

// ---- garbage in the queues ------------------------------------------------------

/// The library's seeded generator (the same seed, the same garbage), with a bound.
struct random64 : clump::net::random_source {
  using random_source::random_source;
  uint32_t below(uint32_t n) { return static_cast<uint32_t>(next() % n); }
};

// Rank 0 claims lines in rank 1's queues, as any sender does, and writes
// garbage into them: random bytes, and packets that look right but for one
// field (a length past the ring, an offset past the segment, a line count
// that does not fit, a kind for the other queue, a payload for a kind that
// has none...), with rank 1's real tag or not. Rank 1 refuses and counts
// every malformed one, reads and writes nothing outside its queues and
// segment, drops a shared copy whose sender never finishes it, and
// afterwards still takes ordinary messages byte for byte (or sends them
// back while it cannot tell where their payload is).
int scenario_garbage(clump::runtime& rt, int count) {
  namespace shm = clump::shm;
  clump::endpoint& ep = rt.endpoint();
  std::atomic<int> valid{0}, returned{0};
  std::atomic<bool> done{false};
  auto echo = ep.on_reply([&](clump::token&, std::span<const std::byte> d, uint32_t seed) {
    CHECK(first_changed(d, seed) < 0, "an echo came back changed");
    valid.fetch_add(1);
  });
  auto ask = ep.on_request([&](clump::token& t, std::span<const std::byte> d, uint32_t seed) {
    CHECK(first_changed(d, seed) < 0, "a request arrived changed");
    valid.fetch_add(1);
    (void)t.reply(echo, d, seed);
  });
  auto stop = ep.on_request([&](clump::token&, uint32_t) { done = true; });
  std::vector<uint32_t> congested;  // ordinary requests that came back: rank 1 could not place their payload
  ep.on_returned([&](const clump::returned_message& m) {
    returned.fetch_add(1);
    if (m.reason == clump::return_reason::congestion && m.handler == ask.index && m.args.size() == 1 &&
        m.args[0] < 100)
      congested.push_back(m.args[0]);
  });
  rt.barrier();
  if (rt.rank() == 0) {
    clump::am::process& proc = clump::am::process::get();
    const clump::endpoint_name victim = ep.translation_name(1);
    clump::am::remote_endpoint* to = proc.remote(clump::am::source_id(1, victim.slot));
    CHECK(to && to->kind == clump::am::transport_kind::shm,
          "rank 1 is not reached through shared memory: run on one node");
    if (!to || to->kind != clump::am::transport_kind::shm) return failures;
    const clump::tag_t real_tag = ep.translation_tag(1);
    random64 rnd(0x5eed);
    for (int i = 0; i < count; ++i) {
      const bool reply_queue = rnd.below(2);
      const shm::queue_ref& q = reply_queue ? to->view.reply : to->view.request;
      shm::head_cache& cache = reply_queue ? to->reply_cache : to->request_cache;
      const uint32_t lines = 1 + rnd.below(3);
      const size_t payload = rnd.below(4) ? 0 : rnd.below(q.ring_lines * 64 / 2);
      shm::claim c;
      while (!shm::try_claim(q, cache, lines, payload, c)) rt.bundle().poll();
      // Every claimed line: random bytes, but for the seq word of each line
      // after the first, which holds its own index + 1 as any sender's does.
      // (A writer that never makes a line it claimed ready stalls the queue
      // at that line, as a sender killed halfway does: that is another test.)
      for (uint32_t l = 0; l < lines; ++l) {
        auto* w = reinterpret_cast<uint64_t*>(&shm::line_at(q, c.line + l));
        for (int k = 0; k < 8; ++k) w[k] = rnd.next();
        if (l) shm::tail_at(q, c.line + l).seq.store(c.line + l + 1, std::memory_order_relaxed);
      }
      if (payload) std::memset(shm::ring_at(q, c.ring_line), static_cast<int>(rnd.below(256)), payload);
      shm::packet& p = shm::line_at(q, c.line);
      if (rnd.below(2)) {
        // Plausible: a real kind, sound line seqs, one field wrong or random.
        const auto kind = static_cast<shm::packet_kind>(1 + rnd.below(10));
        p.kind = kind;
        p.nargs = static_cast<uint8_t>(rnd.below(24));
        p.flags = static_cast<uint8_t>(shm::line_flags(kind, p.nargs) | (rnd.below(2) ? shm::flag_ring : 0) |
                                       (rnd.below(4) ? 0 : shm::flag_staged) | (rnd.below(16) ? 0 : 0x40));
        p.tag = rnd.below(2) ? real_tag : rnd.next();
        p.source = rnd.below(2) ? clump::am::source_id(0, ep.name().slot) : static_cast<uint32_t>(rnd.next());
        p.src_gen = rnd.below(2) ? static_cast<uint32_t>(ep.name().generation) : static_cast<uint32_t>(rnd.next());
        p.dst_gen = rnd.below(8) ? static_cast<uint32_t>(victim.generation) : static_cast<uint32_t>(rnd.next());
        p.handler = static_cast<uint8_t>(rnd.below(2) ? ask.index : rnd.below(256));
        p.length = rnd.below(2) ? static_cast<uint32_t>(rnd.next()) : rnd.below(1u << 20);
        if (lines >= 2) {
          shm::packet_tail& t = shm::tail_at(q, c.line + 1);
          t.offset = rnd.below(2) ? rnd.below(static_cast<uint32_t>(segment_bytes)) : rnd.next();
          t.piece = rnd.below(2) ? rnd.below(p.length + 1) : static_cast<uint32_t>(rnd.next());
        }
      }
      shm::publish(q, c);
      if (c.wake) shm::wake(shm::wake_word(q));
      if (i % 64 == 0) rt.bundle().poll();
    }
    {
      // A shared copy (packet.hpp: flag_shared_copy) that names us as its
      // sender, with rank 1's real tag and generation, whose front we never
      // write: rank 1 waits for our bit only so long (10 s), then drops it.
      // The ordinary messages below queue up behind it, and rank 1 may read
      // them before the ring's position is known again after the malformed
      // ones (dispatch.cpp, resync_ring): those come back (congestion), and
      // are sent again.
      const shm::queue_ref& q = to->view.request;
      shm::claim c;
      while (!shm::try_claim(q, to->request_cache, 3, 0, c)) rt.bundle().poll();
      shm::packet& p = shm::line_at(q, c.line);
      p.kind = shm::packet_kind::long_request;
      p.handler = static_cast<uint8_t>(ask.index);
      p.nargs = 1;
      p.flags = shm::flag_two_lines | shm::flag_three_lines | shm::flag_shared_copy;
      p.source = clump::am::source_id(0, ep.name().slot);
      p.length = 4096;
      p.dst_gen = static_cast<uint32_t>(victim.generation);
      p.src_gen = static_cast<uint32_t>(ep.name().generation);
      p.tag = real_tag;
      p.args[0] = 1;
      shm::packet_tail& t = shm::tail_at(q, c.line + 1);
      t.seq.store(c.line + 2, std::memory_order_relaxed);
      t.piece = 4096;  // all of it is the sender's to write
      t.offset = 0;
      t.aux = 0;
      shm::packet_extra& x = shm::extra_at(q, c.line + 2);
      x.seq.store(c.line + 3, std::memory_order_relaxed);
      x.shared.store(0, std::memory_order_relaxed);
      shm::publish(q, c);
      if (c.wake) shm::wake(shm::wake_word(q));
    }
    // Ordinary traffic still flows, byte for byte.
    std::vector<std::byte> data(5000);
    auto send = [&](uint32_t k) {
      fill(std::span(data).first(100 + 49 * k), k);
      CHECK(ep.request(1, ask, std::span<const std::byte>(data.data(), 100 + 49 * k), k) == clump::status::ok, "send");
    };
    for (uint32_t k = 0; k < 100; ++k) send(k);
    int again = 0;
    while (valid.load() < 100) {
      rt.bundle().wait_until([&] { return valid.load() >= 100 || !congested.empty(); });
      std::vector<uint32_t> now;
      now.swap(congested);
      for (uint32_t k : now) send(k);
      again += static_cast<int>(now.size());
    }
    CHECK(ep.request(1, stop, 0u) == clump::status::ok, "stop");
    std::printf("rank 0: %d garbage packets written into rank 1's queues, then 100 ordinary ones echoed intact "
                "(%d came back; %d ordinary ones sent again after coming back with congestion)\n",
                count, returned.load(), again);
  } else if (rt.rank() == 1) {
    rt.bundle().wait_until([&] { return done.load(); });
    const clump::endpoint_stats s = ep.stats();
    CHECK(s.corrupt > 0, "no packet was refused as malformed");
    CHECK(valid.load() >= 100, "%d ordinary requests arrived", valid.load());
    std::printf("rank 1: refused %llu malformed packets; %d ordinary requests arrived intact\n",
                (unsigned long long)s.corrupt, valid.load());
  }
  rt.barrier();
  return failures;
}

// ---- a segment replaced under a stream --------------------------------------------

// Rank 0 streams long messages of 32 MiB into rank 1's segment without a
// pause, while rank 1 replaces its segment again and again; each time
// another endpoint takes the released memory at once and fills it with a
// pattern. No byte of the stream may land there: the owner releases a
// segment only once no process is still copying into it. `own_memory`: rank
// 1's segments are its own memory (set_segment, as AM_SetSeg with malloc'd
// memory), which the stream reaches by cross-memory attach; the memory it
// leaves is filled with the pattern as soon as set_segment returns (the
// program may free it then).
int scenario_replace(clump::runtime& rt, int rounds, bool own_memory) {
  clump::endpoint& ep = rt.endpoint();
  // Static: the handlers stay registered until the runtime ends, and the
  // stream's last messages may still arrive (or come back) after we return;
  // so may they land in the segment, which therefore outlives us too.
  static std::atomic<bool> stop{false};
  static std::atomic<int> arrived{0};
  static int returned = 0;
  static std::vector<std::byte> buffers[2];
  ep.on_returned([&](const clump::returned_message&) { ++returned; });
  auto take = ep.on_request([&](clump::token&, std::span<const std::byte>, uint32_t) { arrived.fetch_add(1); });
  auto halt = ep.on_request([&](clump::token&, uint32_t) { stop = true; });
  constexpr size_t chunk = 32u << 20;  // a copy of a few milliseconds: a wide window
  ep.allocate_segment(chunk);
  rt.barrier();
  if (rt.rank() == 0) {
    std::vector<std::byte> data(chunk, std::byte{0xee});
    int sent = 0;
    while (!stop.load()) {
      CHECK(ep.request_long(1, take, data, 0, 0u) == clump::status::ok, "send");
      ++sent;
      rt.bundle().poll();
    }
    std::printf("rank 0: streamed %d long messages of 32 MiB (%d came back while the segment changed)\n", sent,
                returned);
  } else if (rt.rank() == 1 && own_memory) {
    for (auto& b : buffers) b.resize(chunk);
    ep.set_segment(buffers[0].data(), chunk);
    int damaged = 0;
    for (int round = 0; round < rounds; ++round) {
      std::vector<std::byte>& left = buffers[round % 2];
      ep.set_segment(buffers[(round + 1) % 2].data(), chunk);  // `left` is the program's again
      for (size_t i = left.size(); i-- > 0;) left[i] = canary(i, 40 + static_cast<uint32_t>(round));  // as below
      const int before = arrived.load();
      rt.bundle().wait_until([&] { return arrived.load() >= before + 2; });  // the stream goes on meanwhile
      if (first_changed(left, 40 + static_cast<uint32_t>(round)) >= 0) ++damaged;
    }
    CHECK(damaged == 0, "in %d of %d rounds the stream wrote into memory that was no longer the segment", damaged,
          rounds);
    CHECK(ep.request(0, halt, 0u) == clump::status::ok, "halt");
    std::printf("rank 1: replaced its own-memory segment %d times under the stream, %d damaged\n", rounds, damaged);
  } else if (rt.rank() == 1) {
    int damaged = 0;
    for (int round = 0; round < rounds; ++round) {
      ep.allocate_segment(chunk);  // the old one is released
      clump::endpoint other(rt.bundle());
      std::span<std::byte> s = other.allocate_segment(chunk);  // takes the released memory
      // Back to front: a copy still running front to back would then write
      // over the pattern after it is in place (filled the other way, the
      // pattern would simply overtake it).
      for (size_t i = s.size(); i-- > 0;) s[i] = canary(i, 40 + static_cast<uint32_t>(round));
      const int before = arrived.load();
      rt.bundle().wait_until([&] { return arrived.load() >= before + 2; });  // the stream goes on meanwhile
      if (first_changed(s, 40 + static_cast<uint32_t>(round)) >= 0) ++damaged;
    }
    CHECK(damaged == 0, "in %d of %d rounds the stream wrote into a released segment", damaged, rounds);
    CHECK(ep.request(0, halt, 0u) == clump::status::ok, "halt");
    std::printf("rank 1: replaced its segment %d times under the stream, %d damaged\n", rounds, damaged);
  }
  rt.barrier();
  return failures;
}

// ---- a segment of own memory that is gone -------------------------------------------

// Rank 1 unmaps the memory it gave set_segment (a program's bug: freed
// without setting another segment). Long messages into it, blocking and
// asynchronous, of sizes up to CLUMP_CMA_MAX, come back to rank 0's handler
// 0 (bad_segment_offset); neither process crashes, and no handler runs for
// a payload that did not land.
int scenario_unmapped_own(clump::runtime& rt) {
  clump::endpoint& ep = rt.endpoint();
  static returns back(clump::return_reason::bad_segment_offset);  // static: handlers outlive the scenario
  static std::atomic<int> arrived{0};
  ep.on_returned([](const clump::returned_message& m) { back(m); });
  auto take = ep.on_request([](clump::token&, std::span<const std::byte>) { arrived.fetch_add(1); });
  constexpr size_t bytes = 1u << 20;
  void* mem = nullptr;
  if (rt.rank() == 1) {
    mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(mem != MAP_FAILED, "mmap");
    ep.set_segment(mem, bytes);
    ::munmap(mem, bytes);  // the bug: the segment's memory is gone
  }
  rt.barrier();
  if (rt.rank() == 0) {
    std::vector<std::byte> data(bytes, std::byte{0x5a});
    int sent = 0;
    for (size_t n : {size_t{1}, size_t{4096}, size_t{64} << 10, size_t{512} << 10}) {
      CHECK(ep.request_long(1, take, std::span(data).first(n), 0) == clump::status::ok, "request_long of %zu", n);
      ++sent;
      clump::status st;
      while ((st = ep.request_long_async(1, take, std::span(data).first(n), 0)) == clump::status::in_use)
        rt.bundle().poll();
      CHECK(st == clump::status::ok, "request_long_async of %zu: %s", n, clump::to_string(st));
      ++sent;
    }
    rt.bundle().wait_until([&] { return back.count >= sent; });
    CHECK(back.expected_reason == sent && back.other == 0, "%d of %d came back with bad_segment_offset, %d otherwise",
          back.expected_reason, sent, back.other);
    // (Past CLUMP_CMA_MAX the payload goes through the ring, and the
    // receiver's own copy would fault in its process: the program's bug,
    // which this scenario does not provoke.)
    std::printf("rank 0: %d long messages into unmapped memory, %d came back\n", sent, back.expected_reason);
  }
  rt.barrier();
  CHECK(arrived.load() == 0, "%d handlers ran for payloads that did not land", arrived.load());
  if (rt.rank() == 1) ep.set_segment(nullptr, 0);
  rt.barrier();
  return failures;
}

// ---- no wait without a way out ------------------------------------------------------

std::atomic<bool> die_in_procedure{false};

// The last rank dies (SIGKILL) at `point`; every other rank is then in a
// wait that depends on it, which must end with a clump::error (or, for a
// message, with the message back at handler 0) within a few seconds, never
// wait for ever. Run under clumprun --keep-going: without it, clumprun ends
// the whole job at once, which is the other way out. The survivors leave
// without the final barriers (the dead rank cannot join them).
int scenario_dies(clump::runtime& rt, const std::string& point) {
  namespace gas = clump::gas;
  const int victim = rt.size() - 1;
  const bool dying = rt.rank() == victim;
  gas::space gs{rt};
  gas::global_ptr<uint64_t> word = gas::all_alloc<uint64_t>(1);
  // An atomic procedure that kills its caller while it holds the lock of the memory it works on.
  const int die_holding = gas::register_atomic_procedure([](std::byte* p, uint64_t) -> uint64_t {
    if (die_in_procedure) ::raise(SIGKILL);
    uint64_t v;
    std::memcpy(&v, p, sizeof v);
    ++v;
    std::memcpy(p, &v, sizeof v);
    return v;
  });
  clump::endpoint& ep = rt.endpoint();
  int returned = 0;
  ep.on_returned([&](const clump::returned_message&) { ++returned; });
  std::atomic<int> answers{0};
  ep.on_reply([&](clump::token&, std::span<const std::byte>, uint32_t) { answers.fetch_add(1); });  // never comes
  auto take = ep.on_request([](clump::token&, std::span<const std::byte>, uint32_t) {});
  // (The victim dies once it is past the barrier below: asked earlier, while
  // still in it, it would fail the barrier for the others too.)
  std::atomic<bool> asked{false};
  auto die = ep.on_request([&](clump::token&, std::span<const std::byte>, uint32_t) { asked = true; });
  std::atomic<bool> go{false};
  auto ready = ep.on_request([&](clump::token&, uint32_t) { go = true; });
  std::atomic<int> past{0};
  auto passed = ep.on_request([&](clump::token&, uint32_t) { past.fetch_add(1); });
  gas::barrier();
  // The victim dies only once every survivor is out of that barrier: leaving
  // it first and dying at once, its last barrier message could still be on
  // its way to a survivor, which then (rightly) finds the barrier failed.
  if (dying)
    rt.wait_until([&] { return past.load() == victim; });
  else
    CHECK(ep.request(victim, passed, 0u) == clump::status::ok, "past the barrier");
  auto kill_me = [] {
    std::fflush(nullptr);
    ::raise(SIGKILL);
  };
  const auto t0 = steady::now();
  std::string ended;
  try {
    if (point == "gas_lock") {
      // Every survivor keeps taking rank 0's lock; the victim (of the same
      // node) dies holding it.
      if (dying) {
        die_in_procedure = true;
        (void)gas::call_atomic(die_holding, word.on(0), 0);
      }
      for (;;) (void)gas::call_atomic(die_holding, word.on(0), 0);
    } else if (point == "gas_barrier") {
      if (dying) kill_me();
      gas::barrier();
    } else if (point == "gas_broadcast") {
      if (dying) kill_me();
      uint64_t v = 0;
      gas::broadcast(&v, 1, victim);
    } else if (point == "gas_read") {
      if (dying) kill_me();
      (void)gas::read(word.on(victim));  // over the network: a message that never comes back answered
      ended = "the read of a failed rank's memory went through (its memory is mapped here)";
    } else if (point == "gas_call") {
      // The victim dies running an atomic procedure for a survivor on its
      // own memory (over the network: its handler runs it).
      // (Only once it says it will: a call that came earlier, while it was
      // still in the barrier, would be answered.)
      if (dying) {
        die_in_procedure = true;
        for (int r = 0; r < victim; ++r) CHECK(ep.request(r, ready, 0u) == clump::status::ok, "ready");
        for (;;) rt.bundle().poll();
      }
      rt.wait_until([&] { return go.load(); });
      (void)gas::call_atomic(die_holding, word.on(victim), 0);
      ended = "the procedure's answer came";
    } else if (point == "wait_until") {
      // The victim dies instead of answering a request.
      if (dying) {
        rt.wait_until([&] { return asked.load(); });
        kill_me();
      }
      CHECK(ep.request(victim, die, std::span<const std::byte>(), 0u) == clump::status::ok, "send");
      rt.wait_until([&] { return answers.load() > 0; });
      ended = "an answer came";
    } else if (point == "seqlock") {
      // The victim dies in the middle of changing its segment (its seqlock
      // odd); a long message to it must not wait for ever for the change.
      if (dying) {
        ep.impl()->own.header->segment_version.fetch_add(1, std::memory_order_seq_cst);
        kill_me();
      }
      std::vector<std::byte> data(4096, std::byte{1});
      rt.wait_until([&] { return clump::rank_failed(victim); });
      CHECK(ep.request_long(victim, take, data, 0, 0u) == clump::status::ok, "send");
      rt.wait_until([&] { return returned > 0; });
      ended = "the long message came back (" + std::to_string(returned) + ")";
    } else {
      std::fprintf(stderr, "unknown point %s\n", point.c_str());
      return 1;
    }
  } catch (const clump::error& e) {
    ended = e.what();
  }
  const double took = seconds_since(t0);
  CHECK(!ended.empty(), "nothing ended the wait");
  CHECK(took < 8, "the wait at %s took %.2f s to end", point.c_str(), took);
  std::printf("rank %d: the wait at %s ended after %.2f s: %s\n", rt.rank(), point.c_str(), took, ended.c_str());
  std::fflush(nullptr);
  std::_Exit(failures ? 1 : 0);  // no final barriers: the dead rank cannot join them
}

// ---- authenticated jobs ----------------------------------------------------------

// Rank 1 streams requests to rank 0 (numbered, with a payload that checks
// itself) for `seconds` while an attacker replays, truncates and forges the
// job's datagrams (datagram_attacker, started by trust_test.cpp once rank 0
// says where it listens). Every request is handled once and answered once,
// every payload arrives intact, and rank 0 says what it refused.
int scenario_auth_stream(clump::runtime& rt, double seconds) {
  clump::endpoint& ep = rt.endpoint();
  constexpr uint32_t most = 1 << 20;
  std::vector<uint8_t> handled(most), answered(most);
  int twice = 0, damaged = 0;
  std::atomic<uint32_t> replies{0};
  auto ack = ep.on_reply([&](clump::token&, uint32_t i) {
    if (i < most && answered[i]++) ++twice;
    replies.fetch_add(1);
  });
  auto req = ep.on_request([&](clump::token& t, std::span<const std::byte> d, uint32_t i) {
    if (i < most && handled[i]++) ++twice;
    if (first_changed(d, i) >= 0) ++damaged;
    (void)t.reply(ack, i);
  });
  rt.barrier();
  if (rt.rank() == 0) {
    std::printf("auth: listening at %s\n", clump::network_address().c_str());
    std::fflush(stdout);
  }
  const auto until = steady::now() + std::chrono::duration<double>(seconds);
  uint32_t sent = 0;
  if (rt.rank() == 1) {
    std::vector<std::byte> data(700);
    while (steady::now() < until && sent < most) {
      fill(data, sent);
      CHECK(ep.request(0, req, data, sent) == clump::status::ok, "send %u", sent);
      ++sent;
      if (sent - replies.load() > 200) rt.bundle().wait_until([&] { return sent - replies.load() <= 100; });
    }
    rt.bundle().wait_until([&] { return replies.load() >= sent; });
    for (uint32_t i = 0; i < sent; ++i) CHECK(answered[i] == 1, "request %u answered %d times", i, answered[i]);
  } else {
    rt.wait_until([&] { return steady::now() >= until; });  // serving meanwhile
  }
  rt.barrier();
  CHECK(twice == 0, "%d messages were handled twice", twice);
  CHECK(damaged == 0, "%d payloads arrived changed", damaged);
  const clump::network_stats s = clump::network_statistics();
  std::printf("auth: rank %d sent %u requests; refused %llu unauthenticated, %llu replayed, %llu truncated, "
              "%llu malformed, %llu not from their rank's address; %llu retransmissions; %llu not clump's, %llu "
              "of another job or rank\n",
              rt.rank(), sent, (unsigned long long)s.refused_unauthenticated, (unsigned long long)s.refused_replayed,
              (unsigned long long)s.refused_truncated, (unsigned long long)s.refused_malformed,
              (unsigned long long)s.refused_source, (unsigned long long)s.retransmits,
              (unsigned long long)s.refused_foreign,
              (unsigned long long)(s.refused_other_job + s.refused_bad_rank + s.refused_version));
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
    std::fprintf(stderr,
                 "usage: trust quiet SECONDS [COUNT] | cut COMMAND | wrong_tag | wrong_tag_private | freed | "
                 "free_race [ROUNDS] | garbage [COUNT] | replace [ROUNDS] | replace_own [ROUNDS] | unmapped_own\n");
    return 2;
  }
  try {
    clump::runtime rt{argc, argv};
    my_rank = rt.rank();
    const std::string what = argv[1];
    int failed = 0;
    if (what == "quiet" && argc >= 3)
      failed = scenario_quiet(rt, std::atof(argv[2]), argc > 3 ? std::atoi(argv[3]) : 200);
    else if (what == "idle" && rt.size() >= 2)
      failed = scenario_idle(rt, argc > 2 ? std::atof(argv[2]) : 2.0);
    else if (what == "dies" && argc >= 3 && rt.size() >= 2)
      failed = scenario_dies(rt, argv[2]);
    else if (what == "auth_stream" && rt.size() == 2)
      failed = scenario_auth_stream(rt, argc > 2 ? std::atof(argv[2]) : 3.0);
    else if (what == "cut" && argc >= 3 && rt.size() >= 2)
      failed = scenario_cut(rt, argv[2]);
    else if (what == "unmapped_own" && rt.size() >= 2)
      failed = scenario_unmapped_own(rt);
    else if (what == "wrong_tag" && rt.size() >= 2)
      failed = scenario_wrong_tag(rt, false);
    else if (what == "wrong_tag_private" && rt.size() >= 2)
      failed = scenario_wrong_tag(rt, true);
    else if (what == "freed" && rt.size() >= 2)
      failed = scenario_freed(rt);
    else if (what == "free_race" && rt.size() >= 2)
      failed = scenario_free_race(rt, argc > 2 ? std::atoi(argv[2]) : 20,
                                  argc > 3 ? static_cast<size_t>(std::atol(argv[3])) : 0);
    else if (what == "garbage" && rt.size() >= 2)
      failed = scenario_garbage(rt, argc > 2 ? std::atoi(argv[2]) : 3000);
    else if ((what == "replace" || what == "replace_own") && rt.size() >= 2)
      failed = scenario_replace(rt, argc > 2 ? std::atoi(argv[2]) : 30, what == "replace_own");
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
