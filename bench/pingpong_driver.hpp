#pragma once
// The clump side of pingpong: the handlers both ranks register, and the
// workloads rank 0 drives (latency, streaming bandwidth, message rate).

// GCC 12 at -O2 warns (maybe-uninitialized) inside clump's typed reply() for
// handlers without arguments: detail::packed<> leaves its one padding word
// unset and passes it to reply_raw() with nargs 0. Harmless (nothing reads
// it); silenced for clump's headers only, until am.hpp initialises it.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <clump/clump.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#include <cstddef>
#include <cstdint>
#include <string>

#include "measure.hpp"

namespace pingpong {

struct words8 {
  uint32_t w[8];
};
struct words16 {
  uint32_t w[16];
};

/// What handlers tell the loops that spin on poll().
struct state {
  bool done = false;         // a reply arrived
  uint64_t got = 0;          // what it carried (argument or payload length)
  uint64_t count = 0;        // sink messages counted since the last flush
  bool acked = false;        // the flush reply arrived
  uint64_t acked_count = 0;  // what the flush reply said
  bool echo = false;         // rank 1: enter a cache-line echo session
  bool capi = false;         // rank 1: enter the C API's echo loop (capi_serve)
  uint64_t udp = 0;          // rank 1: enter raw UDP session udp >> 8 in mode udp & 0xff (0: none)
  bool stop = false;         // rank 1: the driver is done
  bool failed = false;       // a reply from a handler failed
};

/// Every handler of the benchmark. Both ranks register them in the same
/// order, so their indices agree. Must not move (handlers capture `this`).
struct handlers {
  clump::reply_handler<> pong0;
  clump::request_handler<> ping0;
  clump::reply_handler<uint64_t> pong2;
  clump::request_handler<uint64_t> ping2;
  clump::reply_handler<words8> pong8;
  clump::request_handler<words8> ping8;
  clump::reply_handler<words16> pong16;
  clump::request_handler<words16> ping16;
  clump::payload_reply_handler<> pong_medium;
  clump::payload_request_handler<> ping_medium;   // echoes the payload
  clump::payload_request_handler<> ping_long;     // replies short (pong0)
  clump::request_handler<> sink;                  // counts, no reply
  clump::payload_request_handler<> sink_payload;  // counts, no reply (medium and long)
  clump::reply_handler<uint64_t> ack;
  clump::request_handler<> flush;                 // replies ack(count)
  clump::request_handler<> echo;                  // rank 1: start a cache-line session
  clump::request_handler<> capi;                  // rank 1: serve the C API's ping-pong
  clump::request_handler<uint64_t> udp;           // rank 1: start a raw UDP session (session << 8 | mode)
  clump::request_handler<> stop;

  handlers(clump::endpoint& ep, state& st);
  handlers(const handlers&) = delete;
  handlers& operator=(const handlers&) = delete;
};

/// Prints "pingpong: <why>" and ends the process.
[[noreturn]] void die(const std::string& why);

/// Rank 0's workloads against `peer` (1, or 0 when alone).
class driver {
 public:
  static constexpr size_t max_payload = 4u << 20;

  driver(clump::runtime& rt, state& st, handlers& h, int peer, int slots);
  ~driver();
  driver(const driver&) = delete;
  driver& operator=(const driver&) = delete;

  /// Short request with `words` argument words (0, 2, 8 or 16), answered by a
  /// short reply carrying them back; us one way.
  bench::workload short_latency(unsigned words);
  /// Medium request echoed by a medium reply of the same size; us one way.
  bench::workload medium_latency(size_t bytes);
  /// Long request into the peer's segment at offset 0, short reply; us, round trip / 2.
  bench::workload long_latency(size_t bytes);
  /// Long requests back to back into a rotating area of the peer's segment; GB/s.
  bench::workload long_bandwidth(size_t bytes);
  /// Medium requests back to back; GB/s.
  bench::workload medium_bandwidth(size_t bytes);
  /// Short requests without arguments back to back; million messages per second.
  bench::workload message_rate();
  /// The short latency of 2 words through the AM-2 C API (capi_pingpong.c):
  /// AM_Request2 answered by AM_Reply2, spinning on AM_Poll; us one way.
  bench::workload capi_short_latency();
  /// Long requests of `bytes` back to back through the AM-2 C API into the
  /// peer's segment of malloc'd memory (AM_SetSeg: a private segment, as
  /// AM-2 programs have); GB/s.
  bench::workload capi_private_bandwidth(size_t bytes);
  /// Puts rank 1 into a cache-line echo session (the limit's begin()).
  void start_echo_session();
  /// Puts rank 1 into raw UDP session `session` in `mode` (a bench::udp_mode).
  void start_udp_session(uint64_t session, uint8_t mode);

 private:
  template <class Send>
  bench::workload latency(Send send, bool check_echo);
  template <class SendOne>
  bench::workload stream(size_t bytes, SendOne send_one);
  void spin_for_reply();
  void flush(uint64_t n);

  clump::endpoint& ep_;
  clump::bundle& b_;
  state& st_;
  handlers& h_;
  int peer_;
  int slots_;
  std::byte* source_ = nullptr;
};

}  // namespace pingpong
