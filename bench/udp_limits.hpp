#pragma once
// The limits a network protocol over UDP is measured against, taken in the
// same run between the same two processes (the two ranks, on their cores) as
// clump's figures, on a UDP socket of their own beside clump's:
// - ping-pong of 8-byte datagrams over loopback, each side either spinning
//   on a non-blocking recv (busy-polling) or blocked in recv; the one-way
//   time is half a round trip. No one-way message over UDP between these two
//   processes costs less than the busy-polling figure. A third variant makes
//   the system calls clump makes (sendmmsg to an address on an unconnected
//   path, recvmmsg of up to 32 datagrams of 64 KiB, spinning), so that
//   clump's own cost can be told from that of the calls it chose.
// - echo of a message of many bytes (32 KiB, 64 KiB) cut into datagrams of
//   clump's size, the second half of the trip starting once the whole
//   message has arrived: the limit of a medium echo of the same size.
// - streaming of large datagrams (65000 bytes, clump's default
//   CLUMP_NET_MTU): sendmmsg in batches as fast as the sender can, no flow
//   control; the receiver drains with recvmmsg and counts. The figure is what
//   arrived (goodput); what the receive buffer dropped is counted apart.
// Both raw sockets get the buffer sizes of clump's own socket, read off it
// (buffers_of_socket), so the kernel gives both the same room.
//
// Sessions: rank 1 serves one session at a time. A clump request starts it
// (the driver's `start`); rank 1 answers `ready` on the raw socket once it
// listens, so the clock never runs while the server is still polling clump,
// and a `leave` datagram, answered by `left`, ends it. Control datagrams
// (leave, flush) are resent on a timeout, so losing one costs time, never a
// hang; a ping unanswered for a second ends the run with a message.
// Formats: pings are exactly 8 bytes (the sequence number), and so are the
// small datagrams of rate_small (the session with the top bit set); control
// datagrams are a 32-byte `udp_control`; data datagrams start with one of
// type data.

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "measure.hpp"

namespace bench {

/// Socket buffer sizes as getsockopt reports them (the kernel doubles what
/// setsockopt asks, for its bookkeeping).
struct socket_buffers {
  int receive = 0;
  int send = 0;
};

/// The buffers of this process's UDP socket bound to `address`
/// ("a.b.c.d:port", as clump::network_address() says), found among the open
/// descriptors; nullopt when there is none.
std::optional<socket_buffers> buffers_of_socket(const std::string& address);

/// A control datagram (and the head of every data datagram).
struct udp_control {
  uint64_t session;
  uint32_t type;  ///< ready, data, flush, count, leave, left (udp_limits.cpp)
  uint32_t seq;   ///< flush: its number; count: the flush it answers
  uint64_t a;     ///< count: data datagrams since the last flush
  uint64_t b;     ///< count: their bytes
};
static_assert(sizeof(udp_control) == 32);

/// What rank 1 does in a session.
enum class udp_mode : uint8_t {
  echo_busy = 1,      ///< echoes 8-byte pings, spinning on a non-blocking recv
  echo_blocking = 2,  ///< echoes 8-byte pings, blocked in recv
  echo_mmsg = 4,      ///< echoes 8-byte pings with clump's calls: recvmmsg (32), sendmmsg with an address
  echo_message = 5,   ///< echoes a message of several datagrams once all of it has arrived (recvmmsg, sendmmsg)
  sink = 3,           ///< counts data datagrams, answers flushes with the count
};

/// One raw UDP socket of the benchmark, connected to the other rank's.
class udp_link {
 public:
  /// Opens a socket bound to `ip` on a free port, with buffers `want` (0: the
  /// kernel's defaults). Throws std::runtime_error.
  udp_link(const std::string& ip, socket_buffers want);
  ~udp_link();
  udp_link(const udp_link&) = delete;
  udp_link& operator=(const udp_link&) = delete;

  const sockaddr_in& address() const noexcept { return self_; }
  /// Talks only to `peer` from now on. Throws std::runtime_error.
  void connect_to(const sockaddr_in& peer);
  /// The buffer sizes the kernel granted.
  socket_buffers buffers() const noexcept;
  int fd() const noexcept { return fd_; }
  const sockaddr_in& peer() const noexcept { return peer_; }

  /// Rank 1: serves session `session` until the driver leaves it.
  void serve(uint64_t session, udp_mode mode);

 private:
  void serve_echo(uint64_t session, udp_mode mode);
  void serve_sink(uint64_t session);
  void serve_message_echo(uint64_t session);

  int fd_ = -1;
  sockaddr_in self_{};
  sockaddr_in peer_{};
};

/// What a stream workload sent and what arrived, over all its loops.
struct stream_totals {
  uint64_t sent = 0;
  uint64_t arrived = 0;
};

/// Rank 0's side: the workloads, each in a session of its own per sample.
class udp_driver {
 public:
  /// `start(session, mode)` asks rank 1 to serve a session (a clump request);
  /// `progress` polls clump while the driver waits for rank 1 to answer (the
  /// request may need retransmitting).
  udp_driver(udp_link& link, std::function<void(uint64_t, udp_mode)> start, std::function<void()> progress)
      : link_(&link), start_(std::move(start)), progress_(std::move(progress)) {}

  /// 8-byte ping-pong in mode echo_busy, echo_blocking or echo_mmsg; us one
  /// way. begin/end open and close a session.
  workload pingpong(udp_mode mode);
  /// A message of `bytes` in datagrams of at most `datagram` bytes (each
  /// with a 32-byte head, as clump's carry theirs), sent with one sendmmsg;
  /// rank 1 echoes it the same way once every datagram of it has arrived,
  /// and the next goes once the whole echo is back: what a medium request
  /// echoed by a medium reply of the same size costs the kernel, with no
  /// copy in user space. us one way.
  workload message_echo(size_t bytes, size_t datagram);
  /// Datagrams of `bytes` streamed back to back, a flush ending each loop;
  /// GB/s arrived (a loop's iterations are the datagrams it sent). `totals`
  /// collects the datagrams sent and arrived. With `datagram`, messages of
  /// `bytes` (up to 1 MiB) each cut into datagrams of at most `datagram`
  /// bytes with a 32-byte head, as clump cuts a long message; the
  /// iterations are then messages.
  workload stream(size_t bytes, std::shared_ptr<stream_totals> totals, size_t datagram = 0);
  /// 8-byte datagrams sent back to back, one send() each (the bound a
  /// protocol that sends a datagram per message cannot pass), a flush ending
  /// each loop; million datagrams a second arrived.
  workload rate_small(std::shared_ptr<stream_totals> totals);

 private:
  void begin(udp_mode mode);
  void end();
  void send_control(uint32_t type, uint32_t seq);
  /// Waits up to `timeout_us` for a control datagram of `type` and `seq` of
  /// the current session; false on timeout.
  bool await(uint32_t type, uint32_t seq, udp_control& got, double timeout_us, bool poll_clump);
  /// Sends control `type` until its answer `answer` comes (resent every
  /// `every_us`); dies after 10 s.
  void exchange(uint32_t type, uint32_t answer, uint32_t seq, udp_control& got, double every_us, bool poll_clump);
  /// Ends a streaming loop that sent `sent` datagrams: a flush, whose answer
  /// says what arrived (into `arrived` and `totals`). Returns `sent`.
  uint64_t end_loop(uint64_t sent, stream_totals& totals, uint64_t& arrived);

  udp_link* link_;
  std::function<void(uint64_t, udp_mode)> start_;
  std::function<void()> progress_;
  uint64_t session_ = 0;
  uint64_t ping_seq_ = 0;
  uint32_t message_seq_ = 0;
  uint32_t flush_seq_ = 0;
};

}  // namespace bench
