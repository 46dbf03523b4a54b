#include "net/udp.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <clump/status.hpp>

#include "core/log.hpp"

namespace clump::net {

namespace {

constexpr const char* opening = "opening the network socket";

std::string errno_text(int e) { return std::string(std::strerror(e)) + " (errno " + std::to_string(e) + ")"; }

/// The first IPv4 address of an interface that is up and not loopback.
bool interface_address(in_addr& out) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return false;
  bool found = false;
  for (ifaddrs* i = list; i && !found; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    if (!(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK)) continue;
    out = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr;
    found = true;
  }
  ::freeifaddrs(list);
  return found;
}

/// Asks for `bytes` of socket buffer: beyond net.core.[rw]mem_max when we may
/// (CAP_NET_ADMIN), else as much as the limit allows.
void size_buffer(int fd, int option, int force_option, size_t bytes) {
  int v = static_cast<int>(std::min<size_t>(bytes, 1u << 30));
  if (::setsockopt(fd, SOL_SOCKET, force_option, &v, sizeof v) == 0) return;
  ::setsockopt(fd, SOL_SOCKET, option, &v, sizeof v);  // silently capped by the kernel
}

}  // namespace

udp_socket::udp_socket(const std::string& address, size_t mtu, uint32_t window, uint32_t send_sockets)
    : send_sockets_(send_sockets), mtu_(mtu) {
  fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw error(status::resource, opening, "socket(AF_INET, SOCK_DGRAM) failed: " + errno_text(errno));
  self_.sin_family = AF_INET;
  self_.sin_port = 0;
  try {
    self_.sin_addr = local_address(address);
  } catch (...) {
    ::close(fd_);
    throw;
  }
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&self_), sizeof self_) != 0) {
    const int e = errno;
    ::close(fd_);
    throw error(status::resource, opening,
                "cannot bind a UDP socket to " + to_text(self_) + ": " + errno_text(e) +
                    "; set CLUMP_NET_ADDRESS to an address of this host");
  }
  socklen_t len = sizeof self_;
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&self_), &len);
  // Room for a full window from a few peers at once; the protocol recovers
  // from overflow, but every overflow costs a retransmission timeout.
  const size_t want = std::max<size_t>(size_t{4} << 20, 2 * size_t{window} * mtu);
  size_buffer(fd_, SO_RCVBUF, SO_RCVBUFFORCE, want);
  size_buffer(fd_, SO_SNDBUF, SO_SNDBUFFORCE, want);
  buffer_bytes_ = want;

  // The port of the connected sending sockets. Without it (no SO_REUSEPORT)
  // everything goes through the main socket, which works, only slower.
  sockaddr_in anchor = self_;
  anchor.sin_port = 0;
  if (send_sockets_) send_anchor_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int one = 1;
  socklen_t anchor_len = sizeof anchor;
  if (send_anchor_ >= 0 &&
      (::setsockopt(send_anchor_, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0 ||
       ::bind(send_anchor_, reinterpret_cast<sockaddr*>(&anchor), sizeof anchor) != 0 ||
       ::getsockname(send_anchor_, reinterpret_cast<sockaddr*>(&anchor), &anchor_len) != 0)) {
    ::close(send_anchor_);
    send_anchor_ = -1;
  }
  if (send_anchor_ >= 0) {
    send_port_ = anchor.sin_port;
    // It is never read: keep what strays to it small.
    int small = 4096;
    ::setsockopt(send_anchor_, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  }

  in_bufs_.resize(batch);
  in_msgs_.resize(batch);
  in_iov_.resize(batch);
  in_peers_.resize(batch);
  for (unsigned i = 0; i < batch; ++i) in_bufs_[i] = std::make_unique<std::byte[]>(max_datagram);
}

in_addr local_address(const std::string& address) {
  in_addr a{};
  if (address == "auto") {
    if (!interface_address(a)) a.s_addr = htonl(INADDR_LOOPBACK);
  } else if (::inet_pton(AF_INET, address.c_str(), &a) != 1) {
    throw error(status::bad_arg, opening,
                "CLUMP_NET_ADDRESS=" + address + " is not an IPv4 address (write e.g. 10.0.0.5, or auto)");
  }
  return a;
}

udp_socket::~udp_socket() {
  for (int c : connected_) ::close(c);
  if (send_anchor_ >= 0) ::close(send_anchor_);
  if (fd_ >= 0) ::close(fd_);
}

int udp_socket::connect_to(const sockaddr_in& peer) noexcept {
  if (send_anchor_ < 0 || connected_.size() >= send_sockets_) return -1;
  const int c = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c < 0) return -1;
  sockaddr_in from = self_;
  from.sin_port = send_port_;
  const int one = 1;
  if (::setsockopt(c, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0 ||
      ::bind(c, reinterpret_cast<const sockaddr*>(&from), sizeof from) != 0 ||
      ::connect(c, reinterpret_cast<const sockaddr*>(&peer), sizeof peer) != 0) {
    ::close(c);
    return -1;
  }
  size_buffer(c, SO_SNDBUF, SO_SNDBUFFORCE, buffer_bytes_);
  int small = 4096;  // only ICMP errors come here
  ::setsockopt(c, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  connected_.push_back(c);
  return c;
}

std::string udp_socket::to_text(const sockaddr_in& a) {
  char text[INET_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET, &a.sin_addr, text, sizeof text);
  return std::string(text) + ":" + std::to_string(ntohs(a.sin_port));
}

std::string udp_socket::address_text() const { return to_text(self_); }

void udp_socket::queue(const sockaddr_in& to, int via, const std::byte* data, size_t n, const std::byte* body,
                       size_t body_n, const std::byte* tail, size_t tail_n) {
  const uint8_t parts = static_cast<uint8_t>(1 + (body_n ? 1 : 0) + (tail_n ? 1 : 0));
  out_peers_.push_back(to);
  out_via_.push_back(via);
  out_parts_.push_back(parts);
  out_iov_.push_back({const_cast<std::byte*>(data), n});
  if (body_n) out_iov_.push_back({const_cast<std::byte*>(body), body_n});
  if (tail_n) out_iov_.push_back({const_cast<std::byte*>(tail), tail_n});
}

void udp_socket::flush(clock::time_point) {
  const size_t total = out_parts_.size();
  ++flushes_;
  if (total == 0) return;
  // Datagrams to several peers: all in one sendmmsg through the main socket
  // (receivers know it as well as the sending port), rather than one call
  // per connected socket.
  if (std::any_of(out_via_.begin(), out_via_.end(), [&](int v) { return v != out_via_.front(); }))
    std::fill(out_via_.begin(), out_via_.end(), -1);
  out_msgs_.resize(total);
  for (size_t i = 0, part = 0; i < total; part += out_parts_[i], ++i) {
    out_msgs_[i] = {};
    if (out_via_[i] < 0) {
      out_msgs_[i].msg_hdr.msg_name = &out_peers_[i];
      out_msgs_[i].msg_hdr.msg_namelen = sizeof(sockaddr_in);
    }
    out_msgs_[i].msg_hdr.msg_iov = &out_iov_[part];
    out_msgs_[i].msg_hdr.msg_iovlen = out_parts_[i];
  }
  auto length = [&](size_t i) {
    size_t n = 0;
    for (size_t k = 0; k < out_msgs_[i].msg_hdr.msg_iovlen; ++k) n += out_msgs_[i].msg_hdr.msg_iov[k].iov_len;
    return n;
  };
  // Runs of datagrams through the same socket: one call each (sendmmsg for
  // several; for one, the cheaper send/sendto, or sendmsg for two parts).
  for (size_t run = 0; run < total;) {
    const int via = out_via_[run];
    const int fd = via >= 0 ? via : fd_;
    size_t end = run + 1;
    while (end < total && out_via_[end] == via) ++end;
    size_t done = run;
    if (end - run == 1) {
      const msghdr& m = out_msgs_[run].msg_hdr;
      ssize_t n;
      do {
        if (m.msg_iovlen >= 2)
          n = ::sendmsg(fd, &m, 0);
        else if (via >= 0)
          n = ::send(fd, m.msg_iov[0].iov_base, m.msg_iov[0].iov_len, 0);
        else
          n = ::sendto(fd, m.msg_iov[0].iov_base, m.msg_iov[0].iov_len, 0,
                       reinterpret_cast<const sockaddr*>(&out_peers_[run]), sizeof(sockaddr_in));
      } while (n < 0 && errno == EINTR);
      if (n < 0) {
        counters_.send_errors++;  // the protocol retransmits
      } else {
        counters_.datagrams_sent++;
        counters_.bytes_sent += static_cast<size_t>(n);
      }
      done = end;
    }
    while (done < end) {
      int n = ::sendmmsg(fd, out_msgs_.data() + done, static_cast<unsigned>(end - done), 0);
      if (n > 0) {
        for (size_t i = done; i < done + static_cast<size_t>(n); ++i) counters_.bytes_sent += length(i);
        counters_.datagrams_sent += static_cast<uint64_t>(n);
        done += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      // EAGAIN (buffer full) or an error for this datagram (e.g. ECONNREFUSED
      // from an earlier one, EMSGSIZE): skip it; the protocol retransmits.
      counters_.send_errors++;
      ++done;
    }
    run = end;
  }
  out_iov_.clear();
  out_parts_.clear();
  out_via_.clear();
  out_peers_.clear();
}

unsigned udp_socket::receive_batch() {
  if (single_) {
    // While datagrams come one at a time (or not at all: the idle poll),
    // recvfrom costs less than recvmmsg; a batch of two or more switches back.
    socklen_t len = sizeof(sockaddr_in);
    for (;;) {
      const ssize_t n = ::recvfrom(fd_, in_bufs_[0].get(), max_datagram, MSG_DONTWAIT,
                                   reinterpret_cast<sockaddr*>(&in_peers_[0]), &len);
      if (n >= 0) {
        in_msgs_[0].msg_len = static_cast<unsigned>(n);
        // More may be queued behind it: try a batch next time.
        single_ = false;
        return 1;
      }
      if (errno == EINTR) continue;
      return 0;
    }
  }
  for (unsigned i = 0; i < batch; ++i) {
    in_iov_[i] = {in_bufs_[i].get(), max_datagram};  // any UDP datagram fits: none is cut short
    in_msgs_[i] = {};
    in_msgs_[i].msg_hdr.msg_name = &in_peers_[i];
    in_msgs_[i].msg_hdr.msg_namelen = sizeof(sockaddr_in);
    in_msgs_[i].msg_hdr.msg_iov = &in_iov_[i];
    in_msgs_[i].msg_hdr.msg_iovlen = 1;
  }
  for (;;) {
    int n = ::recvmmsg(fd_, in_msgs_.data(), batch, MSG_DONTWAIT, nullptr);
    if (n >= 0) {
      single_ = n < 2;
      return static_cast<unsigned>(n);
    }
    if (errno == EINTR) continue;
    single_ = true;
    return 0;  // EAGAIN: nothing there; ECONNREFUSED: an ICMP error for an earlier send, ignored
  }
}

// ---- udp_link ------------------------------------------------------------------

// The address: the main socket's sockaddr_in, then the sending port.
std::vector<std::byte> udp_link::address() const {
  const sockaddr_in& a = socket_.address();
  const in_port_t port = socket_.send_port();
  std::vector<std::byte> blob(sizeof a + sizeof port);
  std::memcpy(blob.data(), &a, sizeof a);
  std::memcpy(blob.data() + sizeof a, &port, sizeof port);
  return blob;
}

bool udp_link::add_peer(int rank, std::span<const std::byte> address) {
  peer p;
  if (rank < 0 || address.size() != sizeof p.addr + sizeof p.send_port) return false;
  std::memcpy(&p.addr, address.data(), sizeof p.addr);
  std::memcpy(&p.send_port, address.data() + sizeof p.addr, sizeof p.send_port);
  if (p.addr.sin_family != AF_INET) return false;
  if (peers_.size() <= static_cast<size_t>(rank)) peers_.resize(static_cast<size_t>(rank) + 1);
  peers_[static_cast<size_t>(rank)] = p;
  return true;
}

bool udp_link::sent_by(int rank, const origin& from) const noexcept {
  if (!from.addr || rank < 0 || static_cast<size_t>(rank) >= peers_.size()) return false;
  const peer& p = peers_[static_cast<size_t>(rank)];
  const sockaddr_in& a = *from.addr;
  return a.sin_addr.s_addr == p.addr.sin_addr.s_addr &&
         (a.sin_port == p.addr.sin_port || (p.send_port && a.sin_port == p.send_port));
}

std::string udp_link::peer_text(int rank) const {
  if (rank < 0 || static_cast<size_t>(rank) >= peers_.size()) return "?";
  return udp_socket::to_text(peers_[static_cast<size_t>(rank)].addr);
}

void udp_link::queue(int rank, const std::byte* data, size_t n, const std::byte* body, size_t body_n,
                     const std::byte* tail, size_t tail_n) noexcept {
  peer& p = peers_[static_cast<size_t>(rank)];
  if (p.via == -2) p.via = socket_.connect_to(p.addr);
  socket_.queue(p.addr, p.via, data, n, body, body_n, tail, tail_n);
}

}  // namespace clump::net
