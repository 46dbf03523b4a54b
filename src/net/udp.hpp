#pragma once
// The UDP socket of a process: one per process, non-blocking, batched with
// sendmmsg/recvmmsg. Knows nothing about reliability (faults for tests are
// injected above it: net/fault.hpp).
//
// Everything arrives on that one socket. Sending may go through a connected
// socket per peer instead (connect_to()): the kernel then keeps the route
// rather than looking it up for every datagram, which is a good part of a
// short message's cost on a fast network. Those sockets share a second port
// of this process (SO_REUSEPORT, held by an unconnected anchor socket from
// the start), so that receivers know them by it.

#include <netinet/in.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/settings.hpp"
#include "net/link.hpp"

namespace clump::net {

/// The IPv4 address CLUMP_NET_ADDRESS names: "auto" is the first
/// non-loopback interface that is up, else 127.0.0.1. Throws clump::error.
in_addr local_address(const std::string& address);

class udp_socket {
 public:
  /// Creates the socket bound to `address` ("auto": the first non-loopback
  /// IPv4 interface that is up, else 127.0.0.1) on a free port, with receive
  /// and send buffers sized for `window` datagrams of `mtu` bytes per peer.
  /// Throws clump::error with the reason and the fix.
  udp_socket(const std::string& address, size_t mtu, uint32_t window, uint32_t send_sockets);
  ~udp_socket();
  udp_socket(const udp_socket&) = delete;
  udp_socket& operator=(const udp_socket&) = delete;

  int fd() const noexcept { return fd_; }
  const sockaddr_in& address() const noexcept { return self_; }
  /// The port datagrams sent through connect_to() sockets come from (network order).
  in_port_t send_port() const noexcept { return send_port_; }
  /// A socket connected to `peer`, bound to send_port(), for queue(); -1 when
  /// none can be made (send_sockets made already, or the system refuses):
  /// use the main socket.
  int connect_to(const sockaddr_in& peer) noexcept;
  std::string address_text() const;
  static std::string to_text(const sockaddr_in& a);

  /// Queues a datagram of `n` bytes at `data`, followed by `body_n` bytes at
  /// `body` and `tail_n` at `tail` (if any), for the next flush(), to `to`
  /// through the main socket or, if `via` >= 0, through that socket from
  /// connect_to(to). The bytes must stay valid until flush().
  void queue(const sockaddr_in& to, int via, const std::byte* data, size_t n, const std::byte* body = nullptr,
             size_t body_n = 0, const std::byte* tail = nullptr, size_t tail_n = 0);
  /// Sends everything queued.
  void flush(clock::time_point now);
  /// Counts flushes: a datagram queued when flushes() was B is still waiting
  /// (its bytes must not change) as long as flushes() is B.
  uint64_t flushes() const noexcept { return flushes_; }
  /// Receives a batch of datagrams and calls on_datagram(bytes, n, from) for each. Returns how many.
  template <class F>
  unsigned receive(clock::time_point now, F&& on_datagram);

  const link_counters& counters() const noexcept { return counters_; }

 private:
  unsigned receive_batch();

  int fd_ = -1;
  sockaddr_in self_{};
  int send_anchor_ = -1;       // holds send_port_ for the connected sockets
  in_port_t send_port_ = 0;
  std::vector<int> connected_;  // from connect_to(), closed with the socket
  size_t buffer_bytes_ = 0;
  uint32_t send_sockets_;
  size_t mtu_;
  link_counters counters_;
  uint64_t flushes_ = 0;

  // Outgoing batch.
  std::vector<struct mmsghdr> out_msgs_;
  std::vector<struct iovec> out_iov_;   // every part of every queued datagram, in order
  std::vector<uint8_t> out_parts_;       // per queued datagram: how many of out_iov_ (1 to 3)
  std::vector<int> out_via_;             // per queued datagram: the connected socket, or -1
  std::vector<sockaddr_in> out_peers_;
  // Incoming batch.
  static constexpr unsigned batch = 32;
  static constexpr size_t max_datagram = 65536;
  std::vector<std::unique_ptr<std::byte[]>> in_bufs_;
  std::vector<struct mmsghdr> in_msgs_;
  std::vector<struct iovec> in_iov_;
  std::vector<sockaddr_in> in_peers_;
  bool single_ = true;  // the last receive found at most one datagram: use recvfrom
};

/// The net protocol's link over a udp_socket: a peer is known by its
/// address, and a datagram is its when it comes from that address (its main
/// port or its sending port).
class udp_link final : public link {
 public:
  udp_link(const std::string& address, size_t mtu, uint32_t window, uint32_t send_sockets)
      : socket_(address, mtu, window, send_sockets), mtu_(mtu) {}

  std::string kind() const override { return "udp"; }
  size_t max_datagram() const noexcept override { return mtu_; }
  std::vector<std::byte> address() const override;
  std::string address_text() const override { return socket_.address_text(); }
  bool add_peer(int rank, std::span<const std::byte> address) override;
  bool sent_by(int rank, const origin& from) const noexcept override;
  std::string peer_text(int rank) const override;
  std::string origin_text(const origin& from) const override {
    return from.addr ? udp_socket::to_text(*from.addr) : "?";
  }
  void queue(int rank, const std::byte* data, size_t n, const std::byte* body, size_t body_n, const std::byte* tail,
             size_t tail_n) noexcept override;
  void flush(clock::time_point now) noexcept override { socket_.flush(now); }
  uint64_t flushes() const noexcept override { return socket_.flushes(); }
  bool holding() const noexcept override { return false; }
  unsigned receive(clock::time_point now, on_datagram f, void* context) noexcept override {
    return socket_.receive(now, [&](const std::byte* bytes, size_t n, const sockaddr_in& from) {
      f(context, bytes, n, origin{&from});
    });
  }
  /// receive() with a callable of any type, for callers that know the link is UDP.
  template <class F>
  unsigned receive_each(clock::time_point now, F&& f) {
    return socket_.receive(now, [&](const std::byte* bytes, size_t n, const sockaddr_in& from) {
      f(bytes, n, origin{&from});
    });
  }
  int wait_fd() const noexcept override { return socket_.fd(); }
  const link_counters& counters() const noexcept override { return socket_.counters(); }

 private:
  struct peer {
    sockaddr_in addr{};
    in_port_t send_port = 0;  // its datagrams come from addr or from this port (network order; 0: none)
    int via = -2;             // our connected socket to it; -1: the main socket; -2: not made yet
  };
  udp_socket socket_;
  size_t mtu_;
  std::vector<peer> peers_;  // by rank
};

template <class F>
unsigned udp_socket::receive(clock::time_point, F&& on_datagram) {
  const unsigned n = receive_batch();
  for (unsigned i = 0; i < n; ++i) {
    const size_t len = in_msgs_[i].msg_len;
    counters_.datagrams_received++;
    counters_.bytes_received += len;
    on_datagram(in_bufs_[i].get(), len, in_peers_[i]);
  }
  return n;
}

}  // namespace clump::net
