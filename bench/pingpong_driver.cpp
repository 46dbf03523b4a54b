#include "pingpong_driver.hpp"

#include "capi_pingpong.h"

#include <cstdio>
#include <cstdlib>
#include <span>

#include <fmt/core.h>

namespace pingpong {

namespace {

void check(clump::status s, const char* what) {
  if (s != clump::status::ok) die(std::string(what) + " failed: " + clump::to_string(s));
}

double one_way_us(double secs, uint64_t n) { return secs / static_cast<double>(n) / 2 * 1e6; }

}  // namespace

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "pingpong: %s\n", why.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

handlers::handlers(clump::endpoint& ep, state& st) {
  auto ok = [&st](clump::status s) {
    if (s != clump::status::ok) st.failed = true;
  };
  pong0 = ep.on_reply([&st](clump::token&) { st.done = true; });
  ping0 = ep.on_request([this, ok](clump::token& t) { ok(t.reply(pong0)); });
  pong2 = ep.on_reply([&st](clump::token&, uint64_t v) {
    st.got = v;
    st.done = true;
  });
  ping2 = ep.on_request([this, ok](clump::token& t, uint64_t v) { ok(t.reply(pong2, v)); });
  pong8 = ep.on_reply([&st](clump::token&, words8 v) {
    st.got = v.w[0];
    st.done = true;
  });
  ping8 = ep.on_request([this, ok](clump::token& t, words8 v) { ok(t.reply(pong8, v)); });
  pong16 = ep.on_reply([&st](clump::token&, words16 v) {
    st.got = v.w[0];
    st.done = true;
  });
  ping16 = ep.on_request([this, ok](clump::token& t, words16 v) { ok(t.reply(pong16, v)); });
  pong_medium = ep.on_reply([&st](clump::token&, std::span<const std::byte> p) {
    st.got = p.size();
    st.done = true;
  });
  ping_medium =
      ep.on_request([this, ok](clump::token& t, std::span<const std::byte> p) { ok(t.reply(pong_medium, p)); });
  ping_long = ep.on_request([this, ok](clump::token& t, std::span<const std::byte>) { ok(t.reply(pong0)); });
  sink = ep.on_request([&st](clump::token&) { ++st.count; });
  sink_payload = ep.on_request([&st](clump::token&, std::span<const std::byte>) { ++st.count; });
  ack = ep.on_reply([&st](clump::token&, uint64_t n) {
    st.acked_count = n;
    st.acked = true;
  });
  flush = ep.on_request([this, &st, ok](clump::token& t) {
    ok(t.reply(ack, st.count));
    st.count = 0;
  });
  echo = ep.on_request([&st](clump::token&) { st.echo = true; });
  capi = ep.on_request([&st](clump::token&) { st.capi = true; });
  udp = ep.on_request([&st](clump::token&, uint64_t session_mode) { st.udp = session_mode; });
  stop = ep.on_request([&st](clump::token&) { st.stop = true; });
}

driver::driver(clump::runtime& rt, state& st, handlers& h, int peer, int slots)
    : ep_(rt.endpoint()), b_(rt.bundle()), st_(st), h_(h), peer_(peer), slots_(slots) {
  source_ = static_cast<std::byte*>(std::aligned_alloc(4096, max_payload));
  if (!source_) die("out of memory for the payload buffer");
  for (size_t i = 0; i < max_payload; ++i) source_[i] = static_cast<std::byte>(i * 131);
}

driver::~driver() { std::free(source_); }

void driver::spin_for_reply() {
  // Spin on poll(): wait_until would sleep in the kernel after its spin time.
  while (!st_.done) b_.poll();
  st_.done = false;
  if (st_.failed) die("a reply from a request handler failed");
}

void driver::flush(uint64_t n) {
  check(ep_.request(peer_, h_.flush), "flush request");
  while (!st_.acked) b_.poll();
  st_.acked = false;
  if (st_.acked_count != n) die(fmt::format("the receiver counted {} messages, not {}", st_.acked_count, n));
}

template <class Send>
bench::workload driver::latency(Send send, bool check_echo) {
  bench::workload w;
  w.run = [this, send, check_echo](uint64_t n, bench::steady::time_point deadline) -> uint64_t {
    for (uint64_t i = 0; i < n; ++i) {
      if (bench::past<255>(i, deadline)) return i;
      send(i);
      spin_for_reply();
      if (check_echo && static_cast<uint32_t>(st_.got) != static_cast<uint32_t>(i))
        die(fmt::format("the echo carried {} instead of {}", st_.got, i));
    }
    return n;
  };
  w.value = one_way_us;
  return w;
}

template <class SendOne>
bench::workload driver::stream(size_t bytes, SendOne send_one) {
  bench::workload w;
  w.run = [this, send_one](uint64_t n, bench::steady::time_point deadline) mutable -> uint64_t {
    uint64_t i = 0;
    for (; i < n && !bench::past<15>(i, deadline); ++i) send_one();
    flush(i);
    return i;
  };
  w.value = [bytes](double secs, uint64_t n) {
    return static_cast<double>(bytes) * static_cast<double>(n) / secs / 1e9;
  };
  return w;
}

bench::workload driver::short_latency(unsigned words) {
  switch (words) {
    case 0:
      return latency([this](uint64_t) { check(ep_.request(peer_, h_.ping0), "short request"); }, false);
    case 2:
      return latency([this](uint64_t i) { check(ep_.request(peer_, h_.ping2, i), "short request"); }, true);
    case 8:
      return latency(
          [this](uint64_t i) {
            words8 a{};
            a.w[0] = static_cast<uint32_t>(i);
            check(ep_.request(peer_, h_.ping8, a), "short request");
          },
          true);
    default:
      return latency(
          [this](uint64_t i) {
            words16 a{};
            a.w[0] = static_cast<uint32_t>(i);
            check(ep_.request(peer_, h_.ping16, a), "short request");
          },
          true);
  }
}

bench::workload driver::medium_latency(size_t bytes) {
  const std::span<const std::byte> p(source_, bytes);
  bench::workload w = latency([this, p](uint64_t) { check(ep_.request(peer_, h_.ping_medium, p), "medium request"); },
                              false);
  auto run = w.run;
  w.run = [this, run, bytes](uint64_t n, bench::steady::time_point deadline) {
    const uint64_t done = run(n, deadline);
    if (st_.got != bytes) die(fmt::format("the medium echo carried {} bytes, not {}", st_.got, bytes));
    return done;
  };
  return w;
}

bench::workload driver::long_latency(size_t bytes) {
  const std::span<const std::byte> p(source_, bytes);
  return latency([this, p](uint64_t) { check(ep_.request_long(peer_, h_.ping_long, p, 0), "long request"); }, false);
}

bench::workload driver::long_bandwidth(size_t bytes) {
  const std::span<const std::byte> p(source_, bytes);
  uint64_t slot = 0;
  return stream(bytes, [this, p, bytes, slot]() mutable {
    check(ep_.request_long(peer_, h_.sink_payload, p, slot * bytes), "long request");
    if (++slot == static_cast<uint64_t>(slots_)) slot = 0;
  });
}

bench::workload driver::medium_bandwidth(size_t bytes) {
  const std::span<const std::byte> p(source_, bytes);
  return stream(bytes, [this, p] { check(ep_.request(peer_, h_.sink_payload, p), "medium request"); });
}

bench::workload driver::message_rate() {
  bench::workload w;
  w.run = [this](uint64_t n, bench::steady::time_point deadline) -> uint64_t {
    uint64_t i = 0;
    for (; i < n && !bench::past<1023>(i, deadline); ++i) check(ep_.request(peer_, h_.sink), "short request");
    flush(i);
    return i;
  };
  w.value = [](double secs, uint64_t n) { return static_cast<double>(n) / secs / 1e6; };
  return w;
}

bench::workload driver::capi_short_latency() {
  bench::workload w;
  w.begin = [this] { check(ep_.request(peer_, h_.capi), "C API session request"); };
  w.end = [this] {
    if (int rc = capi_stop(peer_); rc != 0) die(fmt::format("the C API's stop request failed: AM code {}", rc));
  };
  w.run = [this](uint64_t n, bench::steady::time_point deadline) -> uint64_t {
    // Chunks of 256 round trips, the deadline checked between them as latency() does.
    uint64_t i = 0;
    for (; i < n && !(i > 0 && bench::steady::now() > deadline); i += std::min<uint64_t>(256, n - i))
      if (int rc = capi_pingpong(peer_, i, std::min<uint64_t>(256, n - i)); rc != 0)
        die(rc < 0 ? "a C API reply carried the wrong words" : fmt::format("AM_Request2 failed: AM code {}", rc));
    return i;
  };
  w.value = one_way_us;
  return w;
}

bench::workload driver::capi_private_bandwidth(size_t bytes) {
  bench::workload w;
  w.begin = [this] { check(ep_.request(peer_, h_.capi), "C API session request"); };
  w.end = [this] {
    if (int rc = capi_stop(peer_); rc != 0) die(fmt::format("the C API's stop request failed: AM code {}", rc));
  };
  w.run = [this, bytes](uint64_t n, bench::steady::time_point deadline) -> uint64_t {
    // Chunks of 16 messages, each ended by a flush (one round trip per 16 payloads).
    uint64_t i = 0;
    for (; i < n && !(i > 0 && bench::steady::now() > deadline); i += std::min<uint64_t>(16, n - i))
      if (int rc = capi_long_stream(peer_, bytes, slots_, std::min<uint64_t>(16, n - i)); rc != 0)
        die(rc < 0 ? "the C API's long stream lost messages" : fmt::format("AM_RequestXfer0 failed: AM code {}", rc));
    return i;
  };
  w.value = [bytes](double secs, uint64_t n) {
    return static_cast<double>(bytes) * static_cast<double>(n) / secs / 1e9;
  };
  return w;
}

void driver::start_echo_session() { check(ep_.request(peer_, h_.echo), "echo request"); }

void driver::start_udp_session(uint64_t session, uint8_t mode) {
  check(ep_.request(peer_, h_.udp, session << 8 | mode), "UDP session request");
}

}  // namespace pingpong
