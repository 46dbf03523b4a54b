// The AM conformance program: one scenario per run, chosen by argv[1], run
// under clumprun by am_test.cpp. Every check that fails prints what was
// expected and what happened, and the program exits non-zero.

#include <clump/clump.hpp>

#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "check.hpp"

namespace {

using clump::test::failures;
using clump::test::my_rank;

std::byte pattern(size_t i, uint32_t seed) { return static_cast<std::byte>((i * 131 + seed * 7 + (i >> 8)) & 0xff); }

std::vector<std::byte> make_payload(size_t n, uint32_t seed) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = pattern(i, seed);
  return v;
}

bool payload_ok(std::span<const std::byte> p, uint32_t seed) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != pattern(i, seed)) return false;
  return true;
}

// How long this thread has waited for a core while it could run, in µs
// (the second field of /proc/thread-self/schedstat; 0 where there is none).
double queued_us() {
  std::FILE* f = std::fopen("/proc/thread-self/schedstat", "r");
  if (!f) return 0;
  unsigned long long on_cpu = 0, waited = 0;
  const int got = std::fscanf(f, "%llu %llu", &on_cpu, &waited);
  std::fclose(f);
  return got == 2 ? static_cast<double>(waited) / 1e3 : 0;
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// ---- every message kind at its limits ------------------------------------

// Raw handler for short messages of any argument count: checks the words.
struct short_state {
  std::atomic<int> received{0};
  int bad = 0;
};
void short_any(void* ctx, clump::token_base& t, const uint32_t* args, unsigned nargs, std::byte*, size_t) {
  auto* s = static_cast<short_state*>(ctx);
  for (unsigned i = 0; i < nargs; ++i)
    if (args[i] != 0x1000u * nargs + i * 3 + 1) ++s->bad;
  uint32_t echo[1] = {nargs};
  (void)t.reply_raw(clump::message_kind::short_message, 250, echo, 1, nullptr, 0, 0);
  s->received.fetch_add(1);
}

int scenario_kinds(clump::runtime& rt, bool private_segment) {
  clump::endpoint& ep = rt.endpoint();
  const int n = rt.size();
  const int peer = (rt.rank() + 1) % n;
  const size_t seg = ep.segment().size();
  std::vector<std::byte> own_private;
  if (private_segment) {
    // A segment in the program's own memory: long payloads arrive by cross-memory attach (up to
    // CLUMP_CMA_MAX) or through the ring in pieces.
    own_private.resize(seg);
    ep.set_segment(own_private.data(), own_private.size());
  }

  short_state ss;
  std::atomic<int> short_replies{0};
  ep.set_raw_handler(1, &short_any, &ss, clump::detail::role::request, -1, 0);
  ep.on_reply(250, [&](clump::token&, uint32_t nargs) {
    (void)nargs;
    short_replies.fetch_add(1);
  });
  // Typed handlers with mixed argument types.
  struct point {
    int32_t x, y, z;
  };
  int typed_ok = 0;
  auto typed_reply = ep.on_reply([&](clump::token&, double d, uint64_t big, point p, char c) {
    if (d == 2.5 && big == 0x123456789abcdefull && p.x == -1 && p.y == 2 && p.z == 3 && c == 'q') ++typed_ok;
  });
  auto typed = ep.on_request([&](clump::token& t, double d, uint64_t big, point p, char c) {
    (void)t.reply(typed_reply, d, big, p, c);
  });
  // Medium: echo the payload back.
  int medium_ok = 0, medium_bad = 0;
  auto medium_back = ep.on_reply([&](clump::token&, std::span<const std::byte> p, uint32_t len, uint32_t seed) {
    if (p.size() == len && payload_ok(p, seed)) ++medium_ok;
    else ++medium_bad;
  });
  auto medium = ep.on_request([&](clump::token& t, std::span<const std::byte> p, uint32_t len, uint32_t seed) {
    if (p.size() != len || !payload_ok(p, seed)) ++medium_bad;
    (void)t.reply(medium_back, p, len, seed);
  });
  // Long: check the bytes in the segment where the handler is told they are,
  // then answer with a long reply into the sender's segment. Requests land in
  // the upper half of a segment and replies in the lower half, since a rank
  // receives both at once (requests from one neighbour, replies from the other).
  const uint64_t half = seg / 2;
  int long_ok = 0, long_bad = 0;
  auto long_back = ep.on_reply([&](clump::token&, std::span<const std::byte> p, uint64_t off, uint32_t seed) {
    bool where = p.data() == ep.segment().data() + off;
    if (where && payload_ok(p, seed)) ++long_ok;
    else ++long_bad;
  });
  auto long_req = ep.on_request([&](clump::token& t, std::span<const std::byte> p, uint64_t off, uint32_t seed) {
    bool where = p.data() == ep.segment().data() + off;
    if (!where || !payload_ok(p, seed)) {
      ++long_bad;
      std::fprintf(stderr, "rank %d: long request of %zu bytes at %llu is wrong\n", my_rank, p.size(),
                   static_cast<unsigned long long>(off));
    }
    // Reply with the same bytes into the lower half of the sender's segment.
    (void)t.reply_long(long_back, p, off - half, off - half, seed);
  });
  int got_ok = 0, got_count = 0;
  auto got = ep.on_reply([&](clump::token&, std::span<const std::byte> p, uint64_t off, uint32_t seed) {
    ++got_count;
    if (p.data() == ep.segment().data() + off && p.size() == 300000 && payload_ok(p, seed)) ++got_ok;
  });
  rt.barrier();

  // Short: every argument count from 0 to max_args.
  for (unsigned k = 0; k <= clump::max_args; ++k) {
    uint32_t w[clump::max_args];
    for (unsigned i = 0; i < k; ++i) w[i] = 0x1000u * k + i * 3 + 1;
    CHECK(ep.send_raw(peer, clump::message_kind::short_message, 1, w, k, nullptr, 0, 0, false) == clump::status::ok,
          "short with %u args", k);
  }
  CHECK(ep.request(peer, typed, 2.5, 0x123456789abcdefull, point{-1, 2, 3}, 'q') == clump::status::ok, "typed");
  rt.wait_until([&] { return short_replies.load() == static_cast<int>(clump::max_args) + 1 && typed_ok == 1; });

  // Medium: 0, 1, around a cache line, 8 KiB and the maximum.
  const size_t mm = clump::max_medium();
  const size_t medium_sizes[] = {0, 1, 63, 64, 65, 1000, 8192, mm - 1, mm};
  int sent = 0;
  for (size_t len : medium_sizes) {
    auto p = make_payload(len, static_cast<uint32_t>(len));
    CHECK(ep.request(peer, medium, p, static_cast<uint32_t>(len), static_cast<uint32_t>(len)) == clump::status::ok,
          "medium %zu", len);
    ++sent;
  }
  rt.wait_until([&] { return medium_ok + medium_bad == sent; });
  CHECK(medium_bad == 0 && medium_ok == sent, "medium echoes: %d ok, %d bad", medium_ok, medium_bad);
  // One past the maximum is refused at the call site.
  auto too_big = make_payload(mm + 1, 0);
  CHECK(ep.request(peer, medium, too_big, 0u, 0u) == clump::status::bad_arg, "medium over max_medium");

  // Long: at the start of the upper half, in the middle, ending exactly at the
  // segment's end, crossing the medium size, and the whole upper half.
  struct {
    uint64_t off;
    size_t len;
  } longs[] = {{0, 0}, {0, 1}, {4096, 4096}, {half - 8, 8}, {1000, mm + 17}, {half - 3 * mm - 5, 3 * mm + 5},
               {0, 1 << 20}, {0, half}};
  int long_sent = 0;
  for (auto [o, len] : longs) {
    const uint64_t off = half + o;
    auto p = make_payload(len, static_cast<uint32_t>(off + len));
    CHECK(ep.request_long(peer, long_req, p, off, off, static_cast<uint32_t>(off + len)) == clump::status::ok,
          "long %zu at %llu", len, static_cast<unsigned long long>(off));
    // The payload may be reused once the call returns: what arrives must not
    // change (over the network a big one is lent, not copied, until acknowledged).
    std::fill(p.begin(), p.end(), std::byte{0xee});
    ++long_sent;
    // The next request may overwrite this one's area: wait for its reply.
    rt.wait_until([&] { return long_ok + long_bad == long_sent; });
  }
  // The asynchronous variant.
  {
    auto p = make_payload(5000, 77);
    clump::status s;
    while ((s = ep.request_long_async(peer, long_req, p, half + 64, half + 64, 77u)) == clump::status::in_use)
      rt.bundle().poll();
    CHECK(s == clump::status::ok, "async long: %s", clump::to_string(s));
    ++long_sent;
    rt.wait_until([&] { return long_ok + long_bad == long_sent; });
  }
  CHECK(long_bad == 0 && long_ok == long_sent, "long: %d ok, %d bad of %d", long_ok, long_bad, long_sent);

  // Get: the peer prepared a pattern in its segment at 1 MiB; pull it.
  rt.barrier();
  {
    auto mine = make_payload(300000, 1234 + static_cast<uint32_t>(rt.rank()));
    std::memcpy(ep.segment().data() + (1 << 20), mine.data(), mine.size());
  }
  rt.barrier();
  CHECK(ep.get(peer, got, 1 << 20, 2 << 20, 300000, 2ull << 20, 1234u + static_cast<uint32_t>(peer)) ==
            clump::status::ok,
        "get");
  rt.wait_until([&] { return got_count == 1; });
  CHECK(got_ok == 1, "get: the data that arrived is wrong");
  rt.barrier();
  CHECK(ss.bad == 0, "%d short argument words arrived wrong", ss.bad);
  CHECK(ss.received.load() == static_cast<int>(clump::max_args) + 1, "short received %d", ss.received.load());
  auto st = ep.stats();
  CHECK(st.requests_sent[0] > 0 && st.requests_sent[1] > 0 && st.requests_sent[2] > 0, "stats counted sends");
  CHECK(st.returned == 0, "no message came back (%llu did)", static_cast<unsigned long long>(st.returned));
  if (private_segment) ep.set_segment(nullptr, 0);
  rt.barrier();
  return failures;
}

// ---- undeliverable messages come back with the right reason -----------------

int scenario_errors(clump::runtime& rt) {
  clump::endpoint& ep = rt.endpoint();
  const int peer = (rt.rank() + 1) % rt.size();
  std::vector<clump::returned_message> back;
  std::vector<std::vector<uint32_t>> back_args;
  ep.on_returned([&](const clump::returned_message& m) {
    back.push_back(m);
    back_args.emplace_back(m.args.begin(), m.args.end());
  });
  std::atomic<int> ran{0};
  auto target = ep.on_request([&](clump::token&, uint32_t, uint32_t) { ran.fetch_add(1); });
  auto target_payload = ep.on_request([&](clump::token&, std::span<const std::byte>, uint32_t) { ran.fetch_add(1); });
  auto a_reply = ep.on_reply([&](clump::token&, uint32_t, uint32_t) { ran.fetch_add(1); });
  rt.barrier();

  const int wrong_tag = rt.size();  // an entry naming the peer with a wrong tag
  ep.map(wrong_tag, ep.translation_name(peer), ep.translation_tag(peer) ^ 0x5a5a);
  size_t seen = 0;
  auto expect_back = [&](clump::return_reason why, unsigned handler, std::vector<uint32_t> args, const char* what) {
    rt.wait_until([&] { return back.size() > seen; });
    const auto& m = back[seen];
    CHECK(m.reason == why, "%s: reason %d (%s), expected %d", what, static_cast<int>(m.reason), clump::to_string(m.reason),
          static_cast<int>(why));
    CHECK(m.handler == handler, "%s: handler %u expected %u", what, m.handler, handler);
    CHECK(back_args[seen] == args, "%s: arguments differ", what);
    ++seen;
  };
  // Wrong tag.
  CHECK(ep.request(wrong_tag, target, 11u, 12u) == clump::status::ok, "send with wrong tag");
  expect_back(clump::return_reason::bad_tag, target.index, {11, 12}, "wrong tag");
  // No handler at that index.
  clump::request_handler<uint32_t, uint32_t> unset{200};
  CHECK(ep.request(peer, unset, 21u, 22u) == clump::status::ok, "send to unset handler");
  expect_back(clump::return_reason::bad_handler, 200, {21, 22}, "unset handler");
  // A request to a reply handler.
  clump::request_handler<uint32_t, uint32_t> to_reply{a_reply.index};
  CHECK(ep.request(peer, to_reply, 31u, 32u) == clump::status::ok, "request to reply handler");
  expect_back(clump::return_reason::bad_handler, a_reply.index, {31, 32}, "request to a reply handler");
  // Wrong argument count for a typed handler.
  clump::request_handler<uint32_t> one_arg{target.index};
  CHECK(ep.request(peer, one_arg, 41u) == clump::status::ok, "wrong arg count");
  expect_back(clump::return_reason::bad_args, target.index, {41}, "wrong argument count");
  // Segment overrun: one byte past the end, and an offset past the end.
  const size_t seg = ep.segment().size();
  std::vector<std::byte> buf(64);
  CHECK(ep.request_long(peer, target_payload, buf, seg - 63, 51u) == clump::status::ok, "overrun");
  expect_back(clump::return_reason::bad_segment_offset, target_payload.index, {51}, "segment overrun");
  CHECK(ep.request_long(peer, target_payload, std::span<const std::byte>(), seg + 1, 52u) == clump::status::ok, "offset");
  expect_back(clump::return_reason::bad_segment_offset, target_payload.index, {52}, "offset past the end");
  // Unmapped entry.
  const int unmapped = rt.size() + 1;
  CHECK(!ep.is_mapped(unmapped), "entry should be unmapped");
  CHECK(ep.request(unmapped, target, 61u, 62u) == clump::status::ok, "unmapped");
  expect_back(clump::return_reason::bad_entry, target.index, {61, 62}, "unmapped entry");
  // Call-site errors return a status and send nothing.
  CHECK(ep.request(-1, target, 1u, 2u) == clump::status::bad_arg, "negative index");
  CHECK(ep.request(ep.translation_count(), target, 1u, 2u) == clump::status::bad_arg, "index past the table");
  // A request from inside a handler is refused (handlers may only reply).
  clump::status inner = clump::status::ok;
  auto nested = ep.on_request([&](clump::token&) { inner = ep.request(peer, target, 0u, 0u); });
  rt.barrier();
  CHECK(ep.request(peer, nested) == clump::status::ok, "nested trigger");
  rt.barrier();
  rt.wait_until([&] { return inner != clump::status::ok; });
  CHECK(inner == clump::status::bad_arg, "request from a handler: %s", clump::to_string(inner));
  rt.barrier();
  // The destination handlers never ran for any of the bad messages.
  CHECK(ran.load() == 0, "a destination handler ran %d times for undeliverable messages", ran.load());
  CHECK(ep.stats().returned == seen, "returned counter");
  rt.barrier();
  return failures;
}

// ---- floods and storms ---------------------------------------------------------

int scenario_flood(clump::runtime& rt, int per_rank) {
  clump::endpoint& ep = rt.endpoint();
  const int n = rt.size();
  std::vector<int> next(static_cast<size_t>(n), 0);
  int total = 0, out_of_order = 0, bad_payload = 0;
  auto count = ep.on_request([&](clump::token& t, uint32_t seq) {
    auto from = static_cast<size_t>(t.source().rank);
    if (static_cast<int>(seq) != next[from]) ++out_of_order;
    next[from] = static_cast<int>(seq) + 1;
    ++total;
  });
  auto count_medium = ep.on_request([&](clump::token& t, std::span<const std::byte> p, uint32_t seq) {
    auto from = static_cast<size_t>(t.source().rank);
    if (static_cast<int>(seq) != next[from]) ++out_of_order;
    next[from] = static_cast<int>(seq) + 1;
    if (!payload_ok(p, seq)) ++bad_payload;
    ++total;
  });
  rt.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  // Every rank, rank 0 included, floods rank 0; a tenth are medium messages.
  for (int i = 0; i < per_rank; ++i) {
    clump::status s;
    if (i % 10 == 0) {
      auto p = make_payload(static_cast<size_t>(i % 3000), static_cast<uint32_t>(i));
      s = ep.request(0, count_medium, p, static_cast<uint32_t>(i));
    } else {
      s = ep.request(0, count, static_cast<uint32_t>(i));
    }
    CHECK(s == clump::status::ok, "flood send %d: %s", i, clump::to_string(s));
  }
  if (rt.rank() == 0) {
    rt.wait_until([&] { return total >= n * per_rank; });  // (more: duplicates, found below)
    CHECK(total == n * per_rank, "%d messages arrived, %d sent", total, n * per_rank);
    CHECK(out_of_order == 0, "%d messages out of order", out_of_order);
    CHECK(bad_payload == 0, "%d payloads corrupted", bad_payload);
    for (int r = 0; r < n; ++r) CHECK(next[static_cast<size_t>(r)] == per_rank, "from rank %d: %d", r, next[static_cast<size_t>(r)]);
    std::printf("flood: %d messages from %d ranks arrived exactly once in %.3f s\n", total, n,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  rt.barrier();
  // What the network did, where it was used (the tests of packing read it).
  if (const clump::network_stats s = clump::network_statistics(); s.messages_sent || s.messages_delivered)
    std::printf("flood net: rank %d sent %llu messages in %llu datagrams; %llu stalls\n", rt.rank(),
                static_cast<unsigned long long>(s.messages_sent), static_cast<unsigned long long>(s.datagrams_sent),
                static_cast<unsigned long long>(s.stalls));
  // Once the traffic ends every datagram is acknowledged (the acks are
  // delayed a little, and lost ones sent again): a channel still counted as
  // waiting would keep this process's polls off the doorbell for good.
  const auto settle = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  uint64_t unacked;
  while ((unacked = clump::network_statistics().unacknowledged) != 0 && std::chrono::steady_clock::now() < settle)
    rt.bundle().poll();
  CHECK(unacked == 0, "%llu send channels still wait for an ack 10 s after the flood", (unsigned long long)unacked);
  rt.barrier();
  CHECK(rt.rank() == 0 || total == 0, "a non-root received %d", total);
  return failures;
}

int scenario_fragments(clump::runtime& rt, int per_rank, int quiet_ms) {
  // Ranks 1.. send rank 0 medium messages of sizes that take one datagram
  // to many (run it with a small CLUMP_NET_MTU), while rank 0 computes for
  // quiet_ms (300 by default) without calling clump: its queues fill, and what arrives then is
  // kept by its network and offered again once it polls, the last fragment
  // of a message from its datagram. Every payload must arrive whole, once
  // and in order.
  clump::endpoint& ep = rt.endpoint();
  const int n = rt.size();
  const size_t mm = clump::max_medium();
  auto size_of = [mm](uint32_t i) {
    const size_t sizes[] = {1, 1400, 1500, 2900, 4000, 20000, mm - 1, mm};
    return std::min(sizes[i % std::size(sizes)], mm);
  };
  std::vector<int> next(static_cast<size_t>(n), 0);
  int total = 0, out_of_order = 0, bad = 0;
  auto got = ep.on_request([&](clump::token& t, std::span<const std::byte> p, uint32_t seq) {
    auto from = static_cast<size_t>(t.source().rank);
    if (static_cast<int>(seq) != next[from]) ++out_of_order;
    next[from] = static_cast<int>(seq) + 1;
    if (p.size() != size_of(seq) || !payload_ok(p, seq)) ++bad;
    ++total;
  });
  rt.barrier();
  if (rt.rank() == 0) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(quiet_ms);
    while (std::chrono::steady_clock::now() < until) {
    }
    rt.wait_until([&] { return total >= (n - 1) * per_rank; });
    CHECK(total == (n - 1) * per_rank, "%d messages arrived, %d sent", total, (n - 1) * per_rank);
    CHECK(out_of_order == 0, "%d messages out of order", out_of_order);
    CHECK(bad == 0, "%d payloads wrong", bad);
    std::printf("fragments: %d medium messages arrived whole and once; %llu stalls\n", total,
                static_cast<unsigned long long>(clump::network_statistics().stalls));
    // Every message arrived whole: no channel may still count as partway
    // through one (it would keep this process's polls off the doorbell for good).
    const uint64_t partial = clump::network_statistics().partial;
    CHECK(partial == 0, "%llu receive channels still partway through a message after every one arrived",
          static_cast<unsigned long long>(partial));
  } else {
    for (int i = 0; i < per_rank; ++i) {
      const auto seq = static_cast<uint32_t>(i);
      const std::vector<std::byte> p = make_payload(size_of(seq), seq);
      CHECK(ep.request(0, got, p, seq) == clump::status::ok, "medium %d", i);
    }
  }
  rt.barrier();
  return failures;
}

int scenario_storm(clump::runtime& rt, int per_peer) {
  // Every rank sends requests to every rank (itself included) as fast as it
  // can, every handler replies with a medium message: both queues of every
  // endpoint fill up in both directions. Nothing may deadlock or be lost.
  clump::endpoint& ep = rt.endpoint();
  const int n = rt.size();
  int replies = 0, requests = 0;
  auto back = ep.on_reply([&](clump::token&, std::span<const std::byte> p, uint32_t seq) {
    if (!payload_ok(p, seq)) ++failures;
    ++replies;
  });
  auto req = ep.on_request([&](clump::token& t, uint32_t seq) {
    ++requests;
    auto p = make_payload(seq % 700, seq);
    (void)t.reply(back, p, seq);
  });
  rt.barrier();
  for (int i = 0; i < per_peer; ++i)
    for (int d = 0; d < n; ++d) CHECK(ep.request((rt.rank() + d) % n, req, static_cast<uint32_t>(i)) == clump::status::ok, "storm send");
  rt.wait_until([&] { return replies == n * per_peer; });
  std::printf("storm: rank %d got %d replies, waited %llu times for room\n", rt.rank(), replies,
              static_cast<unsigned long long>(ep.stats().send_waits));
  rt.barrier();
  CHECK(requests == n * per_peer, "served %d requests, expected %d", requests, n * per_peer);
  return failures;
}

int scenario_shared_storm(clump::runtime& rt, int rounds) {
  // Long requests of 64 KiB to 1 MiB (shared copies: each side copies a
  // part) into malloc'd segments, from every rank to every rank at once,
  // each answered by a short reply that has to get through while its sender
  // is inside another copy. The sender scribbles over its buffer as soon as
  // a call returns: the receiver must have pulled its part by then.
  clump::endpoint& ep = rt.endpoint();
  const int n = rt.size(), me = rt.rank();
  constexpr size_t slot = size_t{1} << 20;
  std::vector<std::byte> own(slot * static_cast<size_t>(n));
  ep.set_segment(own.data(), own.size());
  std::vector<int> sent(static_cast<size_t>(n)), acked(static_cast<size_t>(n));
  static int bad = 0;  // static: a late reply may run after this scenario returns
  auto ack = ep.on_reply([&](clump::token& t, uint32_t ok) {
    if (!ok) ++bad;
    ++acked[static_cast<size_t>(t.source().rank)];
  });
  auto land = ep.on_request([&](clump::token& t, std::span<const std::byte> p, uint32_t seed) {
    const size_t from = static_cast<size_t>(t.source().rank);
    const bool ok = p.data() == ep.segment().data() + from * slot && payload_ok(p, seed);
    if (!ok) std::fprintf(stderr, "rank %d: %zu bytes from rank %zu are wrong\n", me, p.size(), from);
    (void)t.reply(ack, static_cast<uint32_t>(ok));
  });
  rt.barrier();
  std::vector<std::byte> buf(slot);
  for (int r = 0; r < rounds; ++r)
    for (int k = 1; k <= n; ++k) {
      const int d = (me + k) % n;
      const size_t len = (size_t{64} << 10) + (static_cast<size_t>(r) * 7919 + static_cast<size_t>(d) * 104729) %
                                                  (slot - (size_t{64} << 10) + 1);
      rt.wait_until([&] { return acked[static_cast<size_t>(d)] == sent[static_cast<size_t>(d)]; });
      const auto seed = static_cast<uint32_t>(r * 1000 + me * 31 + d);
      for (size_t i = 0; i < len; ++i) buf[i] = pattern(i, seed);
      CHECK(ep.request_long(d, land, std::span<const std::byte>(buf.data(), len), static_cast<uint64_t>(me) * slot,
                            seed) == clump::status::ok,
            "long of %zu bytes to rank %d", len, d);
      std::fill(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(len), std::byte{0xee});
      ++sent[static_cast<size_t>(d)];
    }
  rt.wait_until([&] {
    for (int d = 0; d < n; ++d)
      if (acked[static_cast<size_t>(d)] != sent[static_cast<size_t>(d)]) return false;
    return true;
  });
  std::printf("shared_storm: rank %d sent %d long messages of 64 KiB to 1 MiB, %d wrong\n", me, rounds * n, bad);
  rt.barrier();
  ep.set_segment(nullptr, 0);
  return failures + bad;
}

int scenario_pull_refused(clump::runtime& rt) {
  // Rank 0 (undumpable) sends 4 MiB long requests to rank 1, which polls
  // without pause: it claims their rest before rank 0 has written the front
  // half (a few hundred µs) and tries to pull it, which the kernel refuses;
  // rank 0 then writes it. (When the two do not run at once, rank 0 takes
  // the rest first: tests/multiproc/as_nobody runs the job again.) Each
  // arrives whole.
  clump::endpoint& ep = rt.endpoint();
  constexpr size_t len = size_t{4} << 20;
  constexpr int count = 100;
  std::vector<std::byte> own(len);
  ep.set_segment(own.data(), own.size());
  static std::atomic<int> landed{0}, wrong{0}, acked{0};  // static: handlers may run after this scenario
  auto ack = ep.on_reply([&](clump::token&) { ++acked; });
  auto land = ep.on_request([&](clump::token& t, std::span<const std::byte> p, uint32_t seed) {
    if (p.size() != len || !payload_ok(p, seed)) ++wrong;
    ++landed;
    (void)t.reply(ack);
  });
  rt.barrier();
  if (rt.rank() == 0) {
    for (int i = 0; i < count; ++i) {
      auto buf = make_payload(len, static_cast<uint32_t>(i));
      CHECK(ep.request_long(1, land, buf, 0, static_cast<uint32_t>(i)) == clump::status::ok, "long request");
      rt.wait_until([&] { return acked.load() == i + 1; });
    }
  } else if (rt.rank() == 1) {
    while (landed.load() < count) rt.bundle().poll();
    CHECK(wrong.load() == 0, "%d of %d messages of 4 MiB from rank 0 arrived wrong", wrong.load(), count);
  }
  rt.barrier();
  ep.set_segment(nullptr, 0);
  return failures;
}

int scenario_shared_quiet(clump::runtime& rt) {
  // A 1 MiB long request into a malloc'd segment of a rank that computes
  // for 2 s without polling: the sender copies all of it itself and returns
  // at once; the handler runs, with every byte, once the receiver polls.
  clump::endpoint& ep = rt.endpoint();
  constexpr size_t len = size_t{1} << 20;
  std::vector<std::byte> own(len);
  ep.set_segment(own.data(), own.size());
  static std::atomic<int> landed{0}, wrong{0};  // static: the handler may run after this scenario
  auto land = ep.on_request([&](clump::token&, std::span<const std::byte> p, uint32_t seed) {
    if (p.size() != len || !payload_ok(p, seed)) ++wrong;
    ++landed;
  });
  rt.barrier();
  if (rt.rank() == 1) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (std::chrono::steady_clock::now() < until) {
    }
    rt.wait_until([&] { return landed.load() == 1; });
    CHECK(wrong.load() == 0, "the 1 MiB message arrived wrong");
  } else if (rt.rank() == 0) {
    auto buf = make_payload(len, 77);
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(ep.request_long(1, land, buf, 0, 77u) == clump::status::ok, "long request");
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fill(buf.begin(), buf.end(), std::byte{0xee});
    std::printf("shared_quiet: the call returned after %.3f s while rank 1 computed\n", secs);
    CHECK(secs < 1.0, "the call waited %.3f s for a receiver that does not poll", secs);
  }
  rt.barrier();
  ep.set_segment(nullptr, 0);
  return failures;
}

// ---- the blocking wait ------------------------------------------------------------

/// How many distinct clump regions (memfd:clump-region) this process maps.
int mapped_regions() {
  std::FILE* f = std::fopen("/proc/self/maps", "r");
  if (!f) return -1;
  int n = 0;
  char line[512];
  while (std::fgets(line, sizeof line, f))
    if (std::strstr(line, "/memfd:clump-region")) ++n;
  std::fclose(f);
  return n;
}

/// A process maps another's region only once messages flow between them:
/// each rank sends to its right neighbour only (and answers its left one),
/// so it maps its own region and theirs, whatever the job's size, although
/// its runtime's translation table names every rank. (One node: -n only.)
int scenario_lazy(clump::runtime& rt) {
  int failures = 0;
  clump::endpoint& ep = rt.endpoint();
  const int n = rt.size(), me = rt.rank();
  static int replies = 0;
  auto pong = ep.on_reply([](clump::token&, uint32_t) { ++replies; });
  auto ping = ep.on_request([pong](clump::token& t, uint32_t v) { (void)t.reply(pong, v); });
  // Before the barrier: nobody has sent yet (they send after it).
  const int before = mapped_regions();
  CHECK(before == 1, "%d regions mapped after start-up (want 1: its own)", before);
  rt.barrier();
  if (n > 1) {
    CHECK(ep.request((me + 1) % n, ping, 7u) == clump::status::ok, "request");
    rt.wait_until([] { return replies == 1; });
  }
  rt.barrier();  // the left neighbour's request has been answered
  const int after = mapped_regions(), want = std::min(n, 3);
  CHECK(after == want, "%d regions mapped after talking to two neighbours (want %d)", after, want);
  std::printf("lazy: rank %d maps %d regions of %d\n", me, after, n);
  return failures;
}

int scenario_idle(clump::runtime& rt) {
  clump::endpoint& ep = rt.endpoint();
  std::atomic<bool> arrived{false};
  std::chrono::steady_clock::time_point sent_at{};
  double wake_us = 0, queued_at_handler = 0;
  auto wake = ep.on_request([&](clump::token&, int64_t sent_ns) {
    auto now = std::chrono::steady_clock::now().time_since_epoch();
    wake_us = static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count() - sent_ns) / 1e3;
    queued_at_handler = queued_us();
    arrived = true;
  });
  rt.barrier();  // every rank has its handler
  // A first message each way makes the connections where the network has
  // them, and what a provider sets up at a process's first send: what is
  // timed is the wake-up. (tcp;ofi_rxm zeroes 17 MB of send buffers at the
  // first send; left to the wait, rank 1's first ack took 50-90 ms of its
  // CPU there, 13% of the wait once in CI.)
  if (rt.rank() == 0) {
    CHECK(ep.request(1, wake, int64_t{0}) == clump::status::ok, "first send");
    rt.wait_until([&] { return arrived.load(); });
    arrived = false;
  } else if (rt.rank() == 1) {
    rt.wait_until([&] { return arrived.load(); });
    arrived = false;
    CHECK(ep.request(0, wake, int64_t{0}) == clump::status::ok, "first send back");
  }
  rt.barrier();
  if (rt.rank() == 1) {
    // Wait for a message that comes in about a second: the wait must sleep.
    // `queued`: what the thread waited for a core during the wait, up to the
    // handler (every wake-up's share: more than the last one's on a busy
    // machine, nothing on a quiet one).
    const double queued_before = queued_us(), cpu0 = cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    rt.wait_until([&] { return arrived.load(); });
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = cpu_seconds() - cpu0, queued = queued_at_handler - queued_before;
    std::printf("idle wait: %.3f s wall, %.4f s cpu (%.1f%%), woke %.1f us after the send (%.1f us of the wait "
                "runnable without a core)\n",
                wall, cpu, 100 * cpu / wall, wake_us, queued);
    CHECK(wall > 0.5, "the wait ended too early (%.3f s)", wall);
    CHECK(cpu < 0.1 * wall, "the wait burnt %.3f s of CPU in %.3f s", cpu, wall);
    // A sleeping process is woken promptly (generous bound for a loaded CI
    // machine). Under injected faults the wake-up message itself may be
    // dropped, and its retransmissions too (a timeout from 5 ms, doubling):
    // it woke 58 ms after the send once in CI, with a Slurm test beside it.
    // That is within what a missed wake-up costs (the sleep's 100 ms
    // backstop), so the setups with faults only check that the message came
    // within the wait; the fault-free ones check the wake-up itself. What
    // the wait spent woken but waiting for a core is the machine's, not the
    // wake-up's: once in CI (2 cores, a Slurm job beside it) the handler ran
    // 604 ms after the send. A lost wake-up still shows on a machine that is
    // not starved (asleep is not runnable); a starved one excuses more.
    const char* faults = std::getenv("CLUMP_NET_FAULT");
    const double bound_us = faults && *faults ? 500000 : 50000;
    CHECK(wake_us - queued < bound_us, "woke %.0f us after the message was sent, %.0f us of it runnable (bound %.0f us)",
          wake_us, queued, bound_us);
  } else if (rt.rank() == 0) {
    // Being idle here is the point of the test: the peer must sleep meanwhile.
    std::this_thread::sleep_for(std::chrono::seconds(1));
    (void)sent_at;
    auto now = std::chrono::steady_clock::now().time_since_epoch();
    CHECK(ep.request(1, wake, static_cast<int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count())) ==
              clump::status::ok,
          "wake send");
  }
  rt.barrier();
  return failures;
}

// ---- AM_PAR: several threads send and poll one bundle -------------------------

int scenario_parallel(clump::runtime& rt, int threads, int per_thread) {
  clump::bundle b(clump::bundle_mode::parallel);
  clump::endpoint ep(b);
  ep.set_tag(0x7000 + static_cast<clump::tag_t>(rt.job_id() & 0xfff));
  const int n = rt.size();
  std::vector<clump::endpoint_name> names(static_cast<size_t>(n));
  auto me = ep.name();
  rt.allgather(&me, names.data(), sizeof me);
  for (int r = 0; r < n; ++r) ep.map(r, names[static_cast<size_t>(r)], ep.tag());
  std::atomic<int> requests{0}, replies{0};
  auto back = ep.on_reply([&](clump::token&, uint32_t v, uint32_t w) {
    if (v + 1 != w) ++failures;
    replies.fetch_add(1, std::memory_order_relaxed);
  });
  auto req = ep.on_request([&](clump::token& t, uint32_t v) {
    requests.fetch_add(1, std::memory_order_relaxed);
    (void)t.reply(back, v, v + 1);
  });
  rt.barrier();
  std::vector<std::thread> pool;
  std::atomic<int> send_errors{0};
  for (int th = 0; th < threads; ++th)
    pool.emplace_back([&, th] {
      for (int i = 0; i < per_thread; ++i) {
        int dest = (rt.rank() + 1 + i) % n;
        if (ep.request(dest, req, static_cast<uint32_t>(th * per_thread + i)) != clump::status::ok) ++send_errors;
        if (i % 16 == 0) b.poll();
      }
      // Keep polling until this rank's replies are all in.
      b.wait_until([&] { return replies.load() == threads * per_thread; });
    });
  for (auto& t : pool) t.join();
  CHECK(send_errors.load() == 0, "%d sends failed", send_errors.load());
  CHECK(replies.load() == threads * per_thread, "replies %d", replies.load());
  // Others may still need our handlers: keep polling until all are done.
  std::atomic<bool> done{false};
  std::thread server([&] {
    while (!done.load()) b.poll();
  });
  rt.barrier();
  done = true;
  server.join();
  int total = 0, mine = requests.load();
  std::vector<int> all(static_cast<size_t>(n));
  rt.allgather(&mine, all.data(), sizeof mine);
  for (int x : all) total += x;
  CHECK(total == n * threads * per_thread, "requests served %d, expected %d", total, n * threads * per_thread);
  return failures;
}

// ---- a bundle owned by a worker thread while the main thread is in barriers ----

int scenario_worker(clump::runtime& rt) {
  // Rank 0's worker thread polls its own sequential bundle; its main thread
  // sits in barriers. A barrier must poll only the runtime's bundle: polling
  // the worker's too would run its handlers twice, in two threads at once.
  constexpr int rounds = 100, per = 500;
  std::vector<std::atomic<int>> seen(rounds * per);
  std::atomic<bool> stop{false};
  std::atomic<int> inside{0}, overlaps{0};
  clump::bundle wb;
  clump::endpoint we(wb);
  we.set_tag(clump::tag_all);
  auto h = we.on_request([&](clump::token&, uint32_t i) {
    if (inside.fetch_add(1) != 0) ++overlaps;
    seen[i].fetch_add(1);
    inside.fetch_sub(1);
  });
  std::vector<clump::endpoint_name> names(static_cast<size_t>(rt.size()));
  clump::endpoint_name mine = we.name();
  rt.allgather(&mine, names.data(), sizeof mine);
  std::thread worker;
  if (rt.rank() == 0) worker = std::thread([&] {
    while (!stop.load()) wb.poll();
  });
  clump::endpoint& ep = rt.endpoint();
  const int far = rt.size();  // a free translation index
  ep.map(far, names[0], clump::tag_all);
  for (int r = 0; r < rounds; ++r) {
    if (rt.rank() == 1)
      for (int i = 0; i < per; ++i) CHECK(ep.request(far, h, static_cast<uint32_t>(r * per + i)) == clump::status::ok, "send");
    rt.barrier();
  }
  if (rt.rank() == 0) {
    // Everything rank 1 sent is in the worker's queue or handled: let the worker finish it.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    auto handled = [&] {
      int n = 0;
      for (auto& s : seen) n += s.load() > 0;
      return n;
    };
    while (handled() < rounds * per && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    stop = true;
    worker.join();
    int dup = 0, lost = 0;
    for (auto& s : seen) {
      if (s.load() > 1) dup += s.load() - 1;
      if (s.load() == 0) ++lost;
    }
    CHECK(dup == 0 && lost == 0 && overlaps.load() == 0, "%d duplicates, %d lost, %d overlapping handler calls", dup,
          lost, overlaps.load());
  }
  rt.barrier();
  return failures;
}

// ---- a peer that has exited -------------------------------------------------

int scenario_dead_peer(clump::runtime& rt) {
  // The last rank leaves without a word; the others keep sending to it. Once
  // its queue (or window) is full, they must notice the process is gone and
  // get their messages back as unreachable, instead of waiting forever.
  clump::endpoint& ep = rt.endpoint();
  int unreachable = 0, other = 0;
  ep.on_returned([&](const clump::returned_message& m) {
    if (m.reason == clump::return_reason::unreachable) ++unreachable;
    else ++other;
  });
  auto sink = ep.on_request([&](clump::token&, uint32_t) {});
  const int victim = rt.size() - 1;
  std::vector<pid_t> pids(static_cast<size_t>(rt.size()));
  pid_t me = getpid();
  rt.allgather(&me, pids.data(), sizeof me);
  rt.barrier();
  if (rt.rank() == victim) {
    std::fflush(nullptr);
    std::_Exit(0);  // no barrier, no goodbye
  }
  // Wait (bounded) until the process is gone and reaped by clumprun.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  const pid_t gone = pids[static_cast<size_t>(victim)];
  while (kill(gone, 0) == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  CHECK(kill(gone, 0) != 0, "rank %d did not go away", victim);
  const int sends = 3000;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < sends; ++i) CHECK(ep.request(victim, sink, static_cast<uint32_t>(i)) == clump::status::ok, "send %d", i);
  // Over the network, sends packed into a few datagrams need no window room
  // and return at once: they come back as soon as this process learns of the
  // death (from the launcher, or from the silence).
  do rt.bundle().poll();
  while (unreachable < sends - 1024 && std::chrono::steady_clock::now() < deadline);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("dead peer: %d of %d sends came back unreachable in %.2f s (the rest filled its queue)\n", unreachable,
              sends, secs);
  CHECK(other == 0, "%d came back for another reason", other);
  // Everything but what fit in its request queue (CLUMP_SHM_QUEUE_DEPTH) comes back.
  CHECK(unreachable >= sends - 1024, "only %d came back", unreachable);
  CHECK(secs < 20, "took %.1f s", secs);
  std::fflush(nullptr);
  std::_Exit(failures ? 1 : 0);  // the runtime's final barrier would wait for the victim
}

// ---- a packed message while its sender computes ------------------------------

int scenario_held(clump::runtime& rt, int compute_ms, bool unhurried) {
  // Rank 0 sends rank 1 two messages back to back, so the second is packed
  // behind the first (still unacknowledged), then computes for compute_ms
  // without calling clump. The second must not wait for the end of that:
  // the library's service thread sends it. Several rounds: each finds the
  // service thread at another point of its sleep. `unhurried`: one message,
  // under clump::unhurried_sends, held though nothing else is in flight.
  clump::endpoint& ep = rt.endpoint();
  const int rounds = 10;
  int got = 0;
  double worst_ms = 0;
  auto now_ns = [] {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
  };
  auto arrived = ep.on_request([&](clump::token&, uint64_t sent_ns) {
    worst_ms = std::max(worst_ms, static_cast<double>(now_ns() - sent_ns) / 1e6);
    ++got;
  });
  rt.barrier();
  for (int r = 0; r < rounds; ++r) {
    if (rt.rank() == 0) {
      if (unhurried) {
        const clump::unhurried_sends scope;
        CHECK(ep.request(1, arrived, now_ns()) == clump::status::ok, "send");
      } else {
        for (int i = 0; i < 2; ++i) CHECK(ep.request(1, arrived, now_ns()) == clump::status::ok, "send %d", i);
      }
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(compute_ms);
      while (std::chrono::steady_clock::now() < until) {
      }
    }
    rt.barrier();
  }
  if (rt.rank() == 1) {
    const int sent = (unhurried ? 1 : 2) * rounds;
    CHECK(got == sent, "%d of %d arrived", got, sent);
    std::printf("held: the latest message arrived %.1f ms after it was sent, while its sender computed for %d ms\n",
                worst_ms, compute_ms);
    // Half the computation: a message that waited for its end would take all
    // of it. (The service thread shares the computing thread's core: with
    // other jobs running, 8 to 16 ms was seen beside 4 busy loops here, and
    // 52 ms once in CI.)
    CHECK(worst_ms < compute_ms / 2.0, "a message waited %.1f ms for its sender's computation", worst_ms);
  }
  return failures;
}

// ---- unhurried sends share a datagram with what follows ------------------------

int scenario_unhurried(clump::runtime& rt, int rounds) {
  // Each round rank 0 sends rank 1 a short request, then a medium one, and
  // waits for rank 1's answer to the second: the request channel is idle
  // before the first, which therefore leaves at once in a datagram of its
  // own (Nagle's rule), unless it is sent under clump::unhurried_sends: it
  // then waits for the second, which joins it, and the wait sends both. Half
  // the rounds each way, alternating; the first always arrives before the
  // second, each once.
  clump::endpoint& ep = rt.endpoint();
  int firsts = 0, seconds = 0, out_of_order = 0;
  bool answered = false;
  auto answer = ep.on_reply([&](clump::token&) { answered = true; });
  auto first = ep.on_request([&](clump::token&, uint32_t round) {
    out_of_order += static_cast<int>(round) != firsts;
    ++firsts;
  });
  auto second = ep.on_request([&](clump::token& t, std::span<const std::byte> p, uint32_t round) {
    out_of_order += static_cast<int>(round) != seconds || firsts != seconds + 1;
    out_of_order += !payload_ok(p, round);
    ++seconds;
    (void)t.reply(answer);
  });
  rt.barrier();
  uint64_t datagrams[2] = {0, 0};  // sent by rank 0 in the rounds without and with the scope
  if (rt.rank() == 0) {
    for (int r = 0; r < rounds; ++r) {
      const bool unhurried = r % 2 == 1;
      const auto payload = make_payload(64, static_cast<uint32_t>(r));
      const uint64_t before = clump::network_statistics().datagrams_sent;
      {
        std::optional<clump::unhurried_sends> scope;
        if (unhurried) scope.emplace();
        CHECK(ep.request(1, first, static_cast<uint32_t>(r)) == clump::status::ok, "round %d: first", r);
      }
      CHECK(ep.request(1, second, std::span<const std::byte>(payload), static_cast<uint32_t>(r)) == clump::status::ok,
            "round %d: second", r);
      rt.wait_until([&] { return answered; });
      answered = false;
      datagrams[unhurried] += clump::network_statistics().datagrams_sent - before;
    }
    std::printf("unhurried: rank 0 sent %llu datagrams in %d rounds without the scope, %llu in %d with it\n",
                static_cast<unsigned long long>(datagrams[0]), (rounds + 1) / 2,
                static_cast<unsigned long long>(datagrams[1]), rounds / 2);
    // Without: two datagrams a round at least (acks besides). With: one a
    // round, but for a round whose sender the scheduler stopped between the
    // two sends for longer than CLUMP_NET_COALESCE_US.
    CHECK(datagrams[0] >= 2u * static_cast<uint64_t>((rounds + 1) / 2), "%llu datagrams without the scope",
          static_cast<unsigned long long>(datagrams[0]));
    CHECK(datagrams[1] * 4 <= datagrams[0] * 3, "the scope saved too few datagrams: %llu against %llu",
          static_cast<unsigned long long>(datagrams[1]), static_cast<unsigned long long>(datagrams[0]));
  }
  rt.barrier();
  if (rt.rank() == 1) {
    CHECK(firsts == rounds && seconds == rounds, "%d and %d of %d arrived", firsts, seconds, rounds);
    CHECK(out_of_order == 0, "%d messages out of order or with wrong bytes", out_of_order);
  }
  return failures;
}

// ---- remote reads while the owner computes ------------------------------------

int scenario_progress(clump::runtime& rt, bool thread) {
  // Rank 1 computes for 3 s without polling; rank 0 reads from its segment
  // meanwhile. With CLUMP_PROGRESS=thread the progress thread answers the
  // gets at once (Split-C's network processor); without it they wait until
  // rank 1 polls again.
  clump::endpoint& ep = rt.endpoint();
  constexpr int reads = 20;
  constexpr size_t piece = 4096;
  int ok = 0, bad = 0;
  auto got = ep.on_reply([&](clump::token&, std::span<const std::byte> p, uint32_t i) {
    (p.size() == piece && payload_ok(p, 77 + i) ? ok : bad)++;
  });
  for (uint32_t i = 0; i < reads; ++i) {
    auto mine = make_payload(piece, 77 + i);
    std::memcpy(ep.segment().data() + i * piece, mine.data(), piece);
  }
  // Rank 1 says when it starts computing: reads sent earlier could be
  // answered while it still polls (in the barrier, say).
  std::atomic<bool> computing{false};
  auto started = ep.on_request([&](clump::token&, uint32_t) { computing = true; });
  rt.barrier();
  if (rt.rank() == 1) {
    CHECK(ep.request(0, started, 0u) == clump::status::ok, "start");
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    volatile uint64_t work = 0;
    while (std::chrono::steady_clock::now() < until) work = work + 1;  // no poll in here
  } else if (rt.rank() == 0) {
    rt.bundle().wait_until([&] { return computing.load(); });
    const auto t0 = std::chrono::steady_clock::now();
    for (uint32_t i = 0; i < reads; ++i)
      CHECK(ep.get(1, got, i * piece, (1 << 20) + i * piece, piece, i) == clump::status::ok, "get %u", i);
    const auto deadline = t0 + std::chrono::seconds(10);
    while (ok + bad < reads && std::chrono::steady_clock::now() < deadline) rt.bundle().poll();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("progress: %d of %d reads answered in %.3f s while the owner computed for 3 s (%s)\n", ok, reads,
                secs, thread ? "progress thread" : "polling only");
    CHECK(ok == reads && bad == 0, "%d reads right, %d wrong", ok, bad);
    if (thread)
      CHECK(secs < 1.5, "the progress thread did not answer while the owner computed (%.2f s)", secs);
    else
      CHECK(secs > 2, "answered in %.2f s although the owner did not poll", secs);
  }
  rt.barrier();
  return failures;
}

// ---- a peer on another node that is killed ---------------------------------

int scenario_killed(clump::runtime& rt) {
  // The last rank (on the last node) is killed with SIGKILL while the others
  // send it requests that it answers. Run with clumprun --keep-going: the
  // others must get their messages back as unreachable (not hang), then get
  // every new send back at once, and go on.
  clump::endpoint& ep = rt.endpoint();
  const int victim = rt.size() - 1;
  int unreachable = 0, other = 0, replies = 0;
  std::vector<int> handled(static_cast<size_t>(rt.size()));
  ep.on_returned([&](const clump::returned_message& m) {
    if (m.reason == clump::return_reason::unreachable) ++unreachable;
    else ++other;
  });
  auto last_reply = std::chrono::steady_clock::now();
  auto pong = ep.on_reply([&](clump::token&, uint32_t) {
    ++replies;
    last_reply = std::chrono::steady_clock::now();
  });
  auto ping = ep.on_request([&](clump::token& t, uint32_t i) {
    ++handled[static_cast<size_t>(t.source().rank)];
    t.reply(pong, i);
  });
  rt.barrier();
  if (rt.rank() == victim) {
    // Killed once every other rank has had some answers, or after 5 s: a
    // rank that found this one silent for CLUMP_NET_TIMEOUT_MS (1 s in the
    // tests; under faults with the cores oversubscribed it happened) sends
    // nothing more, and waiting for it hung the job until its timeout.
    const auto latest = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    auto all_served = [&] {
      for (int r = 0; r < victim; ++r)
        if (handled[static_cast<size_t>(r)] < 20) return false;
      return true;
    };
    while (!all_served() && std::chrono::steady_clock::now() < latest) rt.bundle().poll();
    std::fflush(nullptr);
    ::raise(SIGKILL);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  uint32_t sent = 0;
  while (unreachable == 0 && std::chrono::steady_clock::now() < deadline) {
    CHECK(ep.request(victim, ping, sent++) == clump::status::ok, "send");
    rt.bundle().poll();
  }
  CHECK(unreachable > 0, "nothing came back from the killed rank within 60 s");
  // Found within the timeout of the victim's last sign of life (its last
  // reply here), plus a second for scheduling: keep-alives, not luck.
  const double found = std::chrono::duration<double>(std::chrono::steady_clock::now() - last_reply).count();
  const char* budget = std::getenv("CLUMP_NET_TIMEOUT_MS");
  const double timeout = budget ? std::atof(budget) / 1000 : 10;
  CHECK(replies == 0 || found <= timeout + 1, "the death was found %.2f s after the last reply (timeout %.2f s)",
        found, timeout);
  // Every later send fails fast.
  const int before = unreachable;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i) CHECK(ep.request(victim, ping, sent++) == clump::status::ok, "send after");
  rt.bundle().poll();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // All of them (earlier sends that were in flight may still be coming back too).
  CHECK(unreachable - before >= 100, "%d of 100 later sends came back", unreachable - before);
  CHECK(secs < 1, "later sends took %.2f s to come back", secs);
  CHECK(other == 0, "%d came back for another reason", other);
  // (Replies before the kill are likely but not certain: the victim may die
  // with its replies still in flight, lost to injected faults.)
  std::printf("killed peer: rank %d got %d replies, then %d messages back unreachable; found %.2f s after the last reply\n",
              rt.rank(), replies, unreachable, found);
  std::fflush(nullptr);
  std::_Exit(failures ? 1 : 0);  // no final barrier: the victim cannot join it
}

// ---- long messages by reads (CLUMP_NET=ofi, a provider with RMA) ----------------

// Each rank sends its right neighbour blocking long messages around the read
// threshold (CLUMP_OFI_RMA_MIN, 32 KiB) and up to the whole segment, each
// checked byte-exact by the handler before the next is sent, and gets 1 MiB
// of its segment; then one with a
// wrong tag and one that runs past the segment's end, which come back and
// leave the destination's bytes untouched (the receiver checks before it
// reads). `by_read`: 1, the network's counters must show the messages read
// (2: sent by reads or read, for a rank with one neighbour on its own node);
// 0, they must show none read (UDP, CLUMP_OFI_RMA_MIN=0, authentication, faults).
int scenario_reads(clump::runtime& rt, int by_read) {
  clump::endpoint& ep = rt.endpoint();
  const int peer = (rt.rank() + 1) % rt.size();
  std::vector<clump::returned_message> back;
  ep.on_returned([&](const clump::returned_message& m) { back.push_back(m); });
  int bad = 0;
  std::atomic<int> got{0}, acked{0};
  auto ack = ep.on_reply([&](clump::token&) { acked.fetch_add(1); });
  auto arrived = ep.on_request([&](clump::token& t, std::span<const std::byte> p, uint32_t seed) {
    if (!payload_ok(p, seed)) ++bad;
    got.fetch_add(1);
    t.reply(ack);
  });
  const size_t seg = ep.segment().size();
  std::vector<size_t> sizes = {(32u << 10) - 1, 32u << 10, (32u << 10) + 1, (1u << 20) + 5, seg};
  rt.barrier();
  int sent = 0;
  for (size_t n : sizes) {
    if (n > seg) continue;
    const auto seed = static_cast<uint32_t>(n + static_cast<size_t>(rt.rank()));
    const std::vector<std::byte> buf = make_payload(n, seed);
    CHECK(ep.request_long(peer, arrived, buf, 0, seed) == clump::status::ok, "long message of %zu bytes", n);
    ++sent;
    rt.wait_until([&] { return acked.load() == sent; });  // its handler has run: the next may overwrite it
  }
  rt.wait_until([&] { return got.load() == sent; });
  CHECK(bad == 0, "%d of %d long messages arrived with wrong bytes", bad, sent);
  rt.barrier();

  // Medium messages at and above the threshold are read too (into the
  // receiver's buffer, then handed over as any medium).
  std::atomic<int> mediums{0};
  auto medium_in = ep.on_request([&](clump::token&, std::span<const std::byte> p, uint32_t seed) {
    if (!payload_ok(p, seed)) ++bad;
    mediums.fetch_add(1);
  });
  rt.barrier();
  int medium_sent = 0;
  for (size_t n : {size_t{(32u << 10) - 1}, size_t{32u << 10}, size_t{clump::max_medium()}}) {
    if (n > clump::max_medium()) continue;
    const auto seed = static_cast<uint32_t>(n * 3 + static_cast<size_t>(rt.rank()));
    const std::vector<std::byte> buf = make_payload(n, seed);
    CHECK(ep.request(peer, medium_in, buf, seed) == clump::status::ok, "medium message of %zu bytes", n);
    ++medium_sent;
  }
  rt.wait_until([&] { return mediums.load() == medium_sent; });
  CHECK(bad == 0, "medium messages arrived with wrong bytes");
  rt.barrier();

  // A burst of asynchronous long sends, more bytes than the copies kept for
  // reads may hold at once (64 MiB): each arrives exactly once (the rest go
  // in datagrams). Their bytes land on each other: only counted.
  const int burst = 40;
  std::atomic<int> counted{0};
  auto count = ep.on_request([&](clump::token&, std::span<const std::byte>) { counted.fetch_add(1); });
  rt.barrier();
  {
    const std::vector<std::byte> big = make_payload(std::min<size_t>(seg, 2u << 20), 7);
    for (int i = 0; i < burst; ++i)
      while (ep.request_long_async(peer, count, big, 0) == clump::status::in_use) rt.bundle().poll();
  }
  rt.wait_until([&] { return counted.load() >= burst; });
  rt.barrier();
  CHECK(counted.load() == burst, "%d of %d asynchronous long messages arrived", counted.load(), burst);

  // A get of 1 MiB: its answer is read too (from a copy the owner made).
  const size_t g = std::min<size_t>(seg / 2, 1u << 20);
  const std::vector<std::byte> mine_now = make_payload(g, static_cast<uint32_t>(500 + rt.rank()));
  std::memcpy(ep.segment().data(), mine_now.data(), g);
  rt.barrier();
  std::atomic<int> fetched{0};
  auto got_get = ep.on_reply([&](clump::token&, std::span<const std::byte> p) {
    if (!payload_ok(p, static_cast<uint32_t>(500 + peer))) ++bad;
    fetched.fetch_add(1);
  });
  CHECK(ep.get(peer, got_get, 0, seg - g, g) == clump::status::ok, "get of %zu bytes", g);
  rt.wait_until([&] { return fetched.load() == 1; });
  CHECK(bad == 0, "the get's %zu bytes arrived wrong", g);
  rt.barrier();

  // Refused ones leave the destination as it was.
  std::memset(ep.segment().data(), 0, seg);
  rt.barrier();
  const int wrong_tag = rt.size();
  ep.map(wrong_tag, ep.translation_name(peer), ep.translation_tag(peer) ^ 0x5a5a);
  const size_t n = std::min<size_t>(seg, 1u << 20);
  const std::vector<std::byte> junk = make_payload(n, 99);
  CHECK(ep.request_long(wrong_tag, arrived, junk, 0, 99u) == clump::status::ok, "wrong tag");
  rt.wait_until([&] { return back.size() == 1; });
  CHECK(back[0].reason == clump::return_reason::bad_tag, "wrong tag came back as %s", clump::to_string(back[0].reason));
  const size_t past = std::min<size_t>(seg / 2, 256u << 10);
  CHECK(ep.request_long(peer, arrived, std::span<const std::byte>(junk).first(past), seg - past + 1, 98u) ==
            clump::status::ok,
        "past the end");
  rt.wait_until([&] { return back.size() == 2; });
  CHECK(back[1].reason == clump::return_reason::bad_segment_offset, "past the end came back as %s",
        clump::to_string(back[1].reason));
  rt.barrier();
  const std::byte* mine = ep.segment().data();
  size_t written = 0;
  for (size_t i = 0; i < seg; ++i) written += mine[i] != std::byte{0};
  CHECK(written == 0, "%zu bytes of the segment were written by messages that came back", written);
  CHECK(got.load() == sent, "a handler ran for a message that came back");

  const clump::network_stats st = clump::network_statistics();
  if (by_read) {
    // Those of 32 KiB and more that were sent, and read here likewise (2:
    // either, where only one neighbour is on another node).
    const bool sent_read = st.messages_sent_by_read >= 3, were_read = st.messages_read >= 3;
    CHECK(by_read == 2 ? sent_read || were_read : sent_read && were_read,
          "sent %llu and read %llu long messages by reads", (unsigned long long)st.messages_sent_by_read,
          (unsigned long long)st.messages_read);
  } else {
    CHECK(st.messages_sent_by_read == 0 && st.messages_read == 0, "sent %llu and read %llu by reads, expected none",
          (unsigned long long)st.messages_sent_by_read, (unsigned long long)st.messages_read);
  }
  std::printf("reads: rank %d sent %d long messages (%llu by reads), read %llu\n", rt.rank(), sent,
              (unsigned long long)st.messages_sent_by_read, (unsigned long long)st.messages_read);
  rt.barrier();
  return failures;
}

// Rank 0 sends rank 1 long messages that rank 1 reads, each answered by its
// handler, `rounds` of each kind, polling all the while: copied ones (256
// KiB, asynchronous: the sender does not wait) must be acknowledged by the
// answers, lent ones (1 MiB, blocking: the sender waits) at once. The job
// sets long ack delays and retransmission timeouts, so that no timer sends
// an ack: rank 1's own acks are then those it sends at once. Until
// 2026-11-27 every read was acknowledged at once, a system call on each
// side before the handler even ran.
int scenario_answered_reads(clump::runtime& rt, int rounds) {
  clump::endpoint& ep = rt.endpoint();
  std::atomic<int> got{0}, answered{0};
  int bad = 0;
  auto answer = ep.on_reply([&](clump::token&) { answered.fetch_add(1); });
  auto arrived = ep.on_request([&](clump::token& t, std::span<const std::byte> p, uint32_t seed) {
    if (!payload_ok(p, seed)) ++bad;
    got.fetch_add(1);
    t.reply(answer);
  });
  rt.barrier();
  uint64_t acks[2] = {0, 0};  // rank 1's: copied, lent
  for (int lent = 0; lent < 2; ++lent) {
    const size_t n = lent ? 1u << 20 : 256u << 10;
    const auto seed = static_cast<uint32_t>(n);
    const std::vector<std::byte> buf = make_payload(n, seed);
    const int base_got = got.load();
    const clump::network_stats before = clump::network_statistics();
    rt.barrier();
    if (rt.rank() == 0) {
      for (int i = 0; i < rounds; ++i) {
        CHECK((lent ? ep.request_long(1, arrived, buf, 0, seed) : ep.request_long_async(1, arrived, buf, 0, seed)) ==
                  clump::status::ok,
              "long message of %zu bytes", n);
        while (answered.load() != i + 1) rt.bundle().poll();
      }
      answered = 0;
    } else {
      while (got.load() != base_got + rounds) rt.bundle().poll();
    }
    acks[lent] = clump::network_statistics().acks_sent - before.acks_sent;
    rt.barrier();
  }
  if (rt.rank() == 1) {
    std::printf("answered reads: rank 1 sent %llu acks of its own for %d copied messages, %llu for %d lent ones\n",
                (unsigned long long)acks[0], rounds, (unsigned long long)acks[1], rounds);
    CHECK(acks[0] < static_cast<uint64_t>(rounds) / 2, "%llu acks of its own for %d answered reads of copies",
          (unsigned long long)acks[0], rounds);
    CHECK(acks[1] >= static_cast<uint64_t>(rounds), "only %llu acks for %d reads whose senders wait",
          (unsigned long long)acks[1], rounds);
    const clump::network_stats st = clump::network_statistics();
    CHECK(st.messages_read >= static_cast<uint64_t>(2 * rounds), "only %llu messages read",
          (unsigned long long)st.messages_read);
  }
  CHECK(bad == 0, "long messages arrived with wrong bytes");
  rt.barrier();
  return failures;
}

// Each of `rounds` rounds: 20 short round trips from rank 0 to rank 1, then
// a long message of `n` bytes in one datagram (the job sets datagrams that
// large, and no reads), answered by a short reply. Over a reliable provider
// nothing is lost, so nothing may be sent again. Until 2026-11-29 the
// retransmission timer counted from when clump handed a datagram over: the
// short round trips teach it the least timeout (CLUMP_NET_RTO_MIN_US), and
// udp;ofi_rxd moves 8 MiB as some 5700 UDP packets under a window of 32, in
// tens of ms, so the datagram went again while the provider was still
// delivering it (tcp;ofi_rxm's too).
int scenario_big_datagrams(clump::runtime& rt, int rounds, size_t n) {
  clump::endpoint& ep = rt.endpoint();
  std::atomic<int> answered{0};
  int bad = 0;
  auto answer = ep.on_reply([&](clump::token&) { answered.fetch_add(1); });
  auto ping = ep.on_request([&](clump::token& t) { CHECK(t.reply(answer) == clump::status::ok, "short reply"); });
  auto big = ep.on_request([&](clump::token& t, std::span<const std::byte> p, uint32_t seed) {
    if (p.size() != n || !payload_ok(p, seed)) ++bad;
    CHECK(t.reply(answer) == clump::status::ok, "short reply");
  });
  rt.barrier();
  const clump::network_stats before = clump::network_statistics();
  if (rt.rank() == 0) {
    int expected = 0;
    for (int i = 0; i < rounds; ++i) {
      for (int k = 0; k < 20; ++k) {
        CHECK(ep.request(1, ping) == clump::status::ok, "short request");
        ++expected;
        rt.bundle().wait_until([&] { return answered.load() == expected; });
      }
      const auto seed = static_cast<uint32_t>(i);
      const std::vector<std::byte> buf = make_payload(n, seed);
      CHECK(ep.request_long(1, big, buf, 0, seed) == clump::status::ok, "long request of %zu bytes", n);
      ++expected;
      rt.bundle().wait_until([&] { return answered.load() == expected; });
    }
  }
  rt.barrier();
  const clump::network_stats after = clump::network_statistics();
  const uint64_t again = after.retransmits - before.retransmits, sent = after.datagrams_sent - before.datagrams_sent;
  std::printf("big datagrams: rank %d sent %llu datagrams and %llu again for %d rounds\n", rt.rank(),
              (unsigned long long)sent, (unsigned long long)again, rounds);
  // A loaded machine may delay an answer past a timeout now and then (up to
  // 3 in 10 rounds were seen beside other jobs); before the fix each big
  // datagram went again two to four times.
  CHECK(again < static_cast<uint64_t>(rounds), "%llu of %llu datagrams sent again over a reliable provider",
        (unsigned long long)again, (unsigned long long)sent);
  CHECK(bad == 0, "long messages arrived with wrong bytes");
  rt.barrier();
  return failures;
}

// Rank 1 sends rank 0 long messages that go by reads (1 MiB: blocking and
// lent; 256 KiB: copied, asynchronous), then computes for `secs` seconds
// without polling: rank 0 must still have them read within a second (the
// sender's library serves the reads while its program computes).
int scenario_reads_quiet(clump::runtime& rt, int secs) {
  clump::endpoint& ep = rt.endpoint();
  std::atomic<int> got{0};
  int bad = 0;
  auto arrived = ep.on_request([&](clump::token&, std::span<const std::byte> p, uint32_t seed) {
    if (!payload_ok(p, seed)) ++bad;
    got.fetch_add(1);
  });
  rt.barrier();
  if (rt.rank() == 1) {
    const std::vector<std::byte> first = make_payload(256u << 10, 1);
    CHECK(ep.request_long_async(0, arrived, first, 0, 1u) == clump::status::ok, "asynchronous long message");
    const std::vector<std::byte> second = make_payload(1u << 20, 2);
    // (Blocking: it returns once rank 0 has read it, so rank 0 has the first too.)
    CHECK(ep.request_long(0, arrived, second, 1u << 20, 2u) == clump::status::ok, "long message");
    const std::vector<std::byte> third = make_payload(256u << 10, 3);
    CHECK(ep.request_long_async(0, arrived, third, 3u << 20, 3u) == clump::status::ok, "asynchronous long message");
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(secs);
    while (std::chrono::steady_clock::now() < until) {
    }
  } else if (rt.rank() == 0) {
    const auto t0 = std::chrono::steady_clock::now();
    rt.wait_until([&] { return got.load() == 3; });
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(bad == 0, "%d of 3 messages arrived with wrong bytes", bad);
    CHECK(took < 1.0, "the messages took %.2f s while their sender computed without polling", took);
    std::printf("reads while the sender computes: 3 messages in %.3f s\n", took);
  }
  rt.barrier();
  return failures;
}

// The last rank streams 4 MiB long messages to rank 0 and is killed with
// SIGKILL by a thread of its own while it does, `arg` ms in (with the
// messages being read: a read under way when the sender dies). Rank 0 gets
// only whole, byte-exact messages, learns of the death, and goes on. Run
// with --keep-going.
int scenario_reads_killed(clump::runtime& rt, int after_ms) {
  clump::endpoint& ep = rt.endpoint();
  const int victim = rt.size() - 1;
  std::atomic<int> got{0}, acked{0};
  int bad = 0;
  auto ack = ep.on_reply([&](clump::token&) { acked.fetch_add(1); });
  auto arrived = ep.on_request([&](clump::token& t, std::span<const std::byte> p, uint32_t seed) {
    if (!payload_ok(p, seed)) ++bad;
    got.fetch_add(1);
    t.reply(ack);
  });
  ep.on_returned([](const clump::returned_message&) {});
  rt.barrier();
  const size_t n = std::min<size_t>(ep.segment().size(), 4u << 20);
  if (rt.rank() == victim) {
    std::thread([after_ms] {
      std::this_thread::sleep_for(std::chrono::milliseconds(after_ms));
      std::fflush(nullptr);
      ::raise(SIGKILL);
    }).detach();
    // Each once the last one's handler has run (they land in the same place).
    for (uint32_t i = 0;; ++i) {
      const std::vector<std::byte> buf = make_payload(n, i);
      (void)ep.request_long(0, arrived, buf, 0, i);
      while (acked.load() <= static_cast<int>(i)) rt.bundle().poll();
    }
  }
  if (rt.rank() == 0) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!clump::rank_failed(victim) && std::chrono::steady_clock::now() < deadline) rt.bundle().poll();
    CHECK(clump::rank_failed(victim), "the killed sender was not found gone within 60 s");
    rt.bundle().poll();
    CHECK(bad == 0, "%d of %d messages from the killed sender arrived with wrong bytes", bad, got.load());
    std::printf("killed sender: rank 0 got %d whole messages, then found it gone\n", got.load());
  }
  std::fflush(nullptr);
  std::_Exit(failures ? 1 : 0);  // no final barrier: the victim cannot join it
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: am_conformance kinds|private|private_undumpable|shared_storm N|shared_quiet|errors|flood N|storm N|fragments N [QUIET_MS]|idle|lazy|parallel T N\n");
    return 2;
  }
  clump::runtime rt{argc, argv};
  my_rank = rt.rank();
  std::string what = argv[1];
  int arg = argc > 2 ? std::atoi(argv[2]) : 1000;
  int failed = 0;
  if (what == "kinds") failed = scenario_kinds(rt, false);
  else if (what == "private") failed = scenario_kinds(rt, true);
  else if (what == "private_undumpable") {
    // Rank 0's memory is closed to other processes (without CAP_SYS_PTRACE):
    // long messages to it take the ring, and its own are written whole by
    // it where the receiver may not pull their rest.
    if (rt.rank() == 0 && ::prctl(PR_SET_DUMPABLE, 0) != 0) std::perror("prctl");
    failed = scenario_kinds(rt, true);
    if (!failed && rt.size() >= 2) failed = scenario_pull_refused(rt);
  }
  else if (what == "shared_storm") failed = scenario_shared_storm(rt, arg);
  else if (what == "shared_quiet") failed = rt.size() >= 2 ? scenario_shared_quiet(rt) : (std::fprintf(stderr, "shared_quiet needs 2 ranks\n"), 1);
  else if (what == "errors") failed = scenario_errors(rt);
  else if (what == "flood") failed = scenario_flood(rt, arg);
  else if (what == "storm") failed = scenario_storm(rt, arg);
  else if (what == "fragments") failed = scenario_fragments(rt, arg, argc > 3 ? std::atoi(argv[3]) : 300);
  else if (what == "lazy") failed = scenario_lazy(rt);
  else if (what == "idle") failed = rt.size() >= 2 ? scenario_idle(rt) : (std::fprintf(stderr, "idle needs 2 ranks\n"), 1);
  else if (what == "worker") failed = rt.size() >= 2 ? scenario_worker(rt) : (std::fprintf(stderr, "worker needs 2 ranks\n"), 1);
  else if (what == "dead_peer") failed = rt.size() >= 2 ? scenario_dead_peer(rt) : (std::fprintf(stderr, "dead_peer needs 2 ranks\n"), 1);
  else if (what == "held") failed = rt.size() >= 2 ? scenario_held(rt, arg, false) : (std::fprintf(stderr, "held needs 2 ranks\n"), 1);
  else if (what == "held_unhurried") failed = rt.size() >= 2 ? scenario_held(rt, arg, true) : (std::fprintf(stderr, "held_unhurried needs 2 ranks\n"), 1);
  else if (what == "unhurried") failed = rt.size() >= 2 ? scenario_unhurried(rt, arg) : (std::fprintf(stderr, "unhurried needs 2 ranks\n"), 1);
  else if (what == "progress") failed = rt.size() >= 2 ? scenario_progress(rt, arg == 1) : (std::fprintf(stderr, "progress needs 2 ranks\n"), 1);
  else if (what == "reads") failed = scenario_reads(rt, arg);
  else if (what == "answered_reads") failed = scenario_answered_reads(rt, arg);
  else if (what == "big_datagrams") failed = rt.size() >= 2 ? scenario_big_datagrams(rt, arg, argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 1u << 20) : (std::fprintf(stderr, "big_datagrams needs 2 ranks\n"), 1);
  else if (what == "reads_quiet") failed = rt.size() >= 2 ? scenario_reads_quiet(rt, arg) : (std::fprintf(stderr, "reads_quiet needs 2 ranks\n"), 1);
  else if (what == "reads_killed") failed = rt.size() >= 2 ? scenario_reads_killed(rt, arg) : (std::fprintf(stderr, "reads_killed needs 2 ranks\n"), 1);
  else if (what == "killed") failed = rt.size() >= 2 ? scenario_killed(rt) : (std::fprintf(stderr, "killed needs 2 ranks\n"), 1);
  else if (what == "parallel") failed = scenario_parallel(rt, arg, argc > 3 ? std::atoi(argv[3]) : 2000);
  else {
    std::fprintf(stderr, "unknown scenario %s\n", what.c_str());
    return 2;
  }
  if (failed) std::fprintf(stderr, "rank %d: %d checks failed\n", rt.rank(), failed);
  else std::printf("rank %d: %s passed\n", rt.rank(), what.c_str());
  return failed ? 1 : 0;
}
