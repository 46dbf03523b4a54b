#include "udp_limits.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace bench {

namespace {

enum control_type : uint32_t { ready = 1, data = 2, flush = 3, count = 4, leave = 5, left = 6 };

/// What rate_small's 8-byte datagrams carry: the session, with the top bit
/// set (a ping's sequence number never has it).
constexpr uint64_t small_mark(uint64_t session) noexcept { return session | (uint64_t{1} << 63); }

/// A datagram of the benchmark's own went missing for good, or a socket
/// call failed: the figures would mean nothing, so the run ends.
[[noreturn]] void fail(const std::string& why) {
  std::fprintf(stderr, "pingpong: raw UDP limit: %s\n", why.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

std::string errno_text() { return std::string(std::strerror(errno)) + " (errno " + std::to_string(errno) + ")"; }

std::string address_text(const sockaddr_in& a) {
  char ip[INET_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
  return std::string(ip) + ":" + std::to_string(ntohs(a.sin_port));
}

/// Asks for `granted` as getsockopt would report it: the kernel doubles the
/// request. Beyond net.core.[rw]mem_max when we may (CAP_NET_ADMIN), as clump does.
void size_buffer(int fd, int option, int force_option, int granted) {
  if (granted <= 0) return;
  const int v = granted / 2;
  if (::setsockopt(fd, SOL_SOCKET, force_option, &v, sizeof v) == 0) return;
  ::setsockopt(fd, SOL_SOCKET, option, &v, sizeof v);
}

/// No datagram here now (or only the echo of an old ICMP error): try again.
bool nothing_yet(ssize_t r) noexcept {
  return r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNREFUSED);
}

double since_us(steady::time_point t) { return std::chrono::duration<double, std::micro>(steady::now() - t).count(); }

/// Receives as clump's socket does: recvmmsg, non-blocking, into up to 32
/// buffers of 64 KiB, with the senders' addresses, the headers set afresh
/// for every call.
class batch_receiver {
 public:
  static constexpr unsigned batch = 32;
  static constexpr size_t room = 65536;

  batch_receiver() : bufs_(batch * room, std::byte{0}) {}
  int receive(int fd) noexcept {
    for (unsigned i = 0; i < batch; ++i) {
      iov_[i] = {bufs_.data() + i * room, room};
      msgs_[i] = {};
      msgs_[i].msg_hdr.msg_name = &from_[i];
      msgs_[i].msg_hdr.msg_namelen = sizeof from_[i];
      msgs_[i].msg_hdr.msg_iov = &iov_[i];
      msgs_[i].msg_hdr.msg_iovlen = 1;
    }
    return ::recvmmsg(fd, msgs_, batch, MSG_DONTWAIT, nullptr);
  }
  const std::byte* data(int i) const noexcept { return bufs_.data() + static_cast<size_t>(i) * room; }
  size_t length(int i) const noexcept { return msgs_[i].msg_len; }

 private:
  std::vector<std::byte> bufs_;
  mmsghdr msgs_[batch];
  iovec iov_[batch];
  sockaddr_in from_[batch];
};

/// Sends as clump's socket does: sendmmsg with the destination's address
/// (which takes the unconnected path: a route lookup per datagram).
ssize_t send_as_clump(int fd, const sockaddr_in& to, const void* data, size_t n) noexcept {
  iovec iov{const_cast<void*>(data), n};
  mmsghdr m{};
  m.msg_hdr.msg_name = const_cast<sockaddr_in*>(&to);
  m.msg_hdr.msg_namelen = sizeof to;
  m.msg_hdr.msg_iov = &iov;
  m.msg_hdr.msg_iovlen = 1;
  return ::sendmmsg(fd, &m, 1, 0);
}

}  // namespace

std::optional<socket_buffers> buffers_of_socket(const std::string& address) {
  DIR* dir = ::opendir("/proc/self/fd");
  if (!dir) return std::nullopt;
  std::optional<socket_buffers> found;
  while (dirent* e = ::readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end) continue;
    struct stat st{};
    if (::fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_in a{};
    socklen_t len = sizeof a;
    if (::getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&a), &len) != 0 || a.sin_family != AF_INET)
      continue;
    if (address_text(a) != address) continue;
    socket_buffers b;
    len = sizeof b.receive;
    ::getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_RCVBUF, &b.receive, &len);
    len = sizeof b.send;
    ::getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_SNDBUF, &b.send, &len);
    found = b;
    break;
  }
  ::closedir(dir);
  return found;
}

// ---- udp_link --------------------------------------------------------------------

udp_link::udp_link(const std::string& ip, socket_buffers want) {
  // Blocking: the blocking ping-pong waits in recv; the others pass MSG_DONTWAIT.
  fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw std::runtime_error("socket(AF_INET, SOCK_DGRAM): " + errno_text());
  self_.sin_family = AF_INET;
  if (::inet_pton(AF_INET, ip.c_str(), &self_.sin_addr) != 1) {
    ::close(fd_);
    throw std::runtime_error("not an IPv4 address: " + ip);
  }
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&self_), sizeof self_) != 0) {
    const std::string why = errno_text();
    ::close(fd_);
    throw std::runtime_error("bind to " + ip + ": " + why);
  }
  socklen_t len = sizeof self_;
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&self_), &len);
  size_buffer(fd_, SO_RCVBUF, SO_RCVBUFFORCE, want.receive);
  size_buffer(fd_, SO_SNDBUF, SO_SNDBUFFORCE, want.send);
  // A blocked recv gives up after a second, so that a lost ping ends the run
  // with a message instead of hanging it.
  timeval tv{1, 0};
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

udp_link::~udp_link() {
  if (fd_ >= 0) ::close(fd_);
}

void udp_link::connect_to(const sockaddr_in& peer) {
  if (::connect(fd_, reinterpret_cast<const sockaddr*>(&peer), sizeof peer) != 0)
    throw std::runtime_error("connect to " + address_text(peer) + ": " + errno_text());
  peer_ = peer;
}

socket_buffers udp_link::buffers() const noexcept {
  socket_buffers b;
  socklen_t len = sizeof b.receive;
  ::getsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &b.receive, &len);
  len = sizeof b.send;
  ::getsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &b.send, &len);
  return b;
}

/// The lengths of the datagrams that carry a message of `bytes` when each
/// datagram, its 32-byte head included, is at most `datagram` bytes long.
std::vector<size_t> message_datagrams(uint64_t bytes, uint64_t datagram) {
  const uint64_t room = datagram - sizeof(udp_control);
  std::vector<size_t> lengths;
  for (uint64_t done = 0; done < bytes; done += room)
    lengths.push_back(sizeof(udp_control) + static_cast<size_t>(std::min(room, bytes - done)));
  return lengths;
}

/// Sends the datagrams of messages on a connected socket, in as few
/// sendmmsg calls as the socket takes, every one from `buf` (at least the
/// largest datagram long) with `head` written at its start. The headers of
/// the calls are made once per shape (head.a bytes in datagrams of head.b),
/// not in the timed loop.
class message_sender {
 public:
  explicit message_sender(std::vector<std::byte>& buf) : buf_(buf) {}
  /// How many datagrams a message of head.a bytes takes (sets the shape).
  size_t datagrams(const udp_control& head) {
    if (head.a != bytes_ || head.b != datagram_) shape(head.a, head.b);
    return msgs_.size();
  }
  void send(int fd, const udp_control& head) {
    std::memcpy(buf_.data(), &head, sizeof head);
    const size_t n = datagrams(head);
    for (size_t sent = 0; sent < n;) {
      const int k = ::sendmmsg(fd, msgs_.data() + sent, static_cast<unsigned>(n - sent), 0);
      if (k > 0)
        sent += static_cast<size_t>(k);
      else if (!nothing_yet(k) && errno != ENOBUFS)
        fail("sendmmsg of a message: " + errno_text());
    }
  }
 private:
  void shape(uint64_t bytes, uint64_t datagram) {
    const std::vector<size_t> lengths = message_datagrams(bytes, datagram);
    iov_.resize(lengths.size());
    msgs_.resize(lengths.size());
    for (size_t i = 0; i < lengths.size(); ++i) {
      iov_[i] = {buf_.data(), lengths[i]};
      msgs_[i] = {};
      msgs_[i].msg_hdr.msg_iov = &iov_[i];
      msgs_[i].msg_hdr.msg_iovlen = 1;
    }
    bytes_ = bytes, datagram_ = datagram;
  }
  std::vector<std::byte>& buf_;
  uint64_t bytes_ = 0, datagram_ = 0;
  std::vector<iovec> iov_;
  std::vector<mmsghdr> msgs_;
};

/// Whether datagram `i` of what `rx` holds belongs to message `seq` of `session`.
bool of_message(const batch_receiver& rx, int i, uint64_t session, uint32_t seq) noexcept {
  if (rx.length(i) < sizeof(udp_control)) return false;
  udp_control c;
  std::memcpy(&c, rx.data(i), sizeof c);
  return c.session == session && c.type == data && c.seq == seq;
}

void udp_link::serve(uint64_t session, udp_mode mode) {
  if (mode == udp_mode::sink)
    serve_sink(session);
  else if (mode == udp_mode::echo_message)
    serve_message_echo(session);
  else
    serve_echo(session, mode);
}

void udp_link::serve_echo(uint64_t session, udp_mode mode) {
  const udp_control bye{session, left, 0, 0, 0};
  if (mode == udp_mode::echo_mmsg) {
    auto rx = std::make_unique<batch_receiver>();
    const udp_control hello{session, ready, 0, 0, 0};
    (void)::send(fd_, &hello, sizeof hello, 0);
    for (;;) {
      const int n = rx->receive(fd_);
      for (int i = 0; i < n; ++i) {
        if (rx->length(i) == 8) {
          (void)send_as_clump(fd_, peer_, rx->data(i), 8);
        } else if (rx->length(i) == sizeof(udp_control)) {
          udp_control c;
          std::memcpy(&c, rx->data(i), sizeof c);
          if (c.session == session && c.type == leave) {
            (void)::send(fd_, &bye, sizeof bye, 0);
            return;
          }
        }
      }
    }
  }
  const udp_control hello{session, ready, 0, 0, 0};
  (void)::send(fd_, &hello, sizeof hello, 0);
  const int flags = mode == udp_mode::echo_blocking ? 0 : MSG_DONTWAIT;
  alignas(8) std::byte buf[256];
  for (;;) {
    const ssize_t r = ::recv(fd_, buf, sizeof buf, flags);
    if (r == 8) {
      (void)::send(fd_, buf, 8, 0);
      continue;
    }
    if (r == static_cast<ssize_t>(sizeof(udp_control))) {
      udp_control c;
      std::memcpy(&c, buf, sizeof c);
      if (c.session == session && c.type == leave) {
        (void)::send(fd_, &bye, sizeof bye, 0);
        return;
      }
    }
  }
}

void udp_link::serve_message_echo(uint64_t session) {
  auto rx = std::make_unique<batch_receiver>();
  std::vector<std::byte> out(batch_receiver::room, std::byte{0x5a});  // touched before `ready`
  const udp_control hello{session, ready, 0, 0, 0};
  (void)::send(fd_, &hello, sizeof hello, 0);
  message_sender out_sender(out);
  uint32_t seq = 0;
  size_t arrived = 0;
  for (;;) {
    const int n = rx->receive(fd_);
    for (int i = 0; i < n; ++i) {
      if (rx->length(i) < sizeof(udp_control)) continue;
      udp_control c;
      std::memcpy(&c, rx->data(i), sizeof c);
      if (c.session != session) continue;
      if (c.type == leave) {
        const udp_control bye{session, left, 0, 0, 0};
        (void)::send(fd_, &bye, sizeof bye, 0);
        return;
      }
      if (c.type != data || c.b <= sizeof(udp_control) || c.b > out.size()) continue;
      if (c.seq != seq) seq = c.seq, arrived = 0;
      if (++arrived == out_sender.datagrams(c)) {
        out_sender.send(fd_, c);  // the whole message is here: it goes back
        arrived = 0;
      }
    }
  }
}

void udp_link::serve_sink(uint64_t session) {
  constexpr unsigned batch = 16;
  constexpr size_t room = 65536;  // any UDP datagram fits
  std::vector<std::byte> bufs(batch * room, std::byte{0});  // touched before `ready`
  mmsghdr msgs[batch]{};
  iovec iov[batch];
  for (unsigned i = 0; i < batch; ++i) {
    iov[i] = {bufs.data() + i * room, room};
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
  }
  const udp_control hello{session, ready, 0, 0, 0};
  (void)::send(fd_, &hello, sizeof hello, 0);
  uint64_t datagrams = 0, bytes = 0;
  udp_control answer{session, count, 0, 0, 0};  // the last flush's answer, sent again for a repeated flush
  for (;;) {
    const int n = ::recvmmsg(fd_, msgs, batch, MSG_DONTWAIT, nullptr);
    for (int i = 0; i < n; ++i) {
      const size_t len = msgs[i].msg_len;
      if (len == 8) {  // rate_small's, or an old ping
        uint64_t mark;
        std::memcpy(&mark, iov[i].iov_base, sizeof mark);
        if (mark == small_mark(session)) ++datagrams, bytes += len;
        continue;
      }
      if (len < sizeof(udp_control)) continue;
      udp_control c;
      std::memcpy(&c, iov[i].iov_base, sizeof c);
      if (c.session != session) continue;
      if (c.type == data) {
        ++datagrams;
        bytes += len;
      } else if (c.type == flush) {
        if (c.seq != answer.seq) {
          answer = {session, count, c.seq, datagrams, bytes};
          datagrams = bytes = 0;
        }
        (void)::send(fd_, &answer, sizeof answer, 0);
      } else if (c.type == leave) {
        const udp_control bye{session, left, 0, 0, 0};
        (void)::send(fd_, &bye, sizeof bye, 0);
        return;
      }
    }
  }
}

// ---- udp_driver ------------------------------------------------------------------

void udp_driver::send_control(uint32_t type, uint32_t seq) {
  const udp_control c{session_, type, seq, 0, 0};
  if (::send(link_->fd(), &c, sizeof c, 0) < 0 && errno != ECONNREFUSED) fail("send: " + errno_text());
}

bool udp_driver::await(uint32_t type, uint32_t seq, udp_control& got, double timeout_us, bool poll_clump) {
  const auto t0 = steady::now();
  for (;;) {
    udp_control c;
    const ssize_t r = ::recv(link_->fd(), &c, sizeof c, MSG_DONTWAIT);
    if (r == static_cast<ssize_t>(sizeof c) && c.session == session_ && c.type == type && c.seq == seq) {
      got = c;
      return true;
    }
    if (r >= 0) continue;  // an old pong or answer
    if (!nothing_yet(r)) fail("recv: " + errno_text());
    if (poll_clump && progress_) progress_();
    if (since_us(t0) > timeout_us) return false;
  }
}

void udp_driver::exchange(uint32_t type, uint32_t answer, uint32_t seq, udp_control& got, double every_us,
                          bool poll_clump) {
  const auto t0 = steady::now();
  for (;;) {
    send_control(type, seq);
    if (await(answer, seq, got, every_us, poll_clump)) return;
    if (since_us(t0) > 10e6) fail("rank 1 did not answer control datagram " + std::to_string(type) + " in 10 s");
  }
}

void udp_driver::begin(udp_mode mode) {
  ++session_;
  start_(session_, mode);
  udp_control got;
  // The request travels through clump (and may need a retransmission, hence the polling).
  if (!await(ready, 0, got, 10e6, true))
    fail("rank 1 did not enter UDP session " + std::to_string(session_) + " in 10 s");
}

void udp_driver::end() {
  udp_control got;
  exchange(leave, left, 0, got, 2000, false);
}

workload udp_driver::pingpong(udp_mode mode) {
  workload w;
  w.begin = [this, mode] { begin(mode); };
  w.end = [this] { end(); };
  if (mode == udp_mode::echo_mmsg) {
    auto rx = std::make_shared<batch_receiver>();
    w.run = [this, rx](uint64_t n, steady::time_point deadline) -> uint64_t {
      const int fd = link_->fd();
      for (uint64_t i = 0; i < n; ++i) {
        if (past<255>(i, deadline)) return i;
        const uint64_t v = ++ping_seq_;
        if (send_as_clump(fd, link_->peer(), &v, sizeof v) != 1) fail("sendmmsg of a ping: " + errno_text());
        for (uint64_t spins = 1;; ++spins) {
          const int got = rx->receive(fd);
          bool answered = false;
          for (int k = 0; k < got; ++k)
            if (rx->length(k) == 8 && std::memcmp(rx->data(k), &v, 8) == 0) answered = true;
          if (answered) break;
          if (got < 0 && !nothing_yet(got)) fail("recvmmsg of a pong: " + errno_text());
          if ((spins & 0xffff) == 0 && steady::now() > deadline + std::chrono::seconds(1))
            fail("ping " + std::to_string(v) + " got no answer within a second");
        }
      }
      return n;
    };
  } else {
    const bool blocking = mode == udp_mode::echo_blocking;
    w.run = [this, blocking](uint64_t n, steady::time_point deadline) -> uint64_t {
      const int fd = link_->fd();
      const int flags = blocking ? 0 : MSG_DONTWAIT;
      for (uint64_t i = 0; i < n; ++i) {
        if (past<255>(i, deadline)) return i;
        const uint64_t v = ++ping_seq_;
        if (::send(fd, &v, sizeof v, 0) != static_cast<ssize_t>(sizeof v)) fail("send of a ping: " + errno_text());
        for (uint64_t spins = 1;; ++spins) {
          uint64_t got[4];
          const ssize_t r = ::recv(fd, got, sizeof got, flags);
          if (r == 8 && got[0] == v) break;
          if (r >= 0) continue;  // an old pong or control datagram
          if (!nothing_yet(r)) fail("recv of a pong: " + errno_text());
          // Blocking: recv gave up after its 1 s timeout. Busy: look at the clock now and then.
          if ((blocking && errno != EINTR) ||
              ((spins & 0xffff) == 0 && steady::now() > deadline + std::chrono::seconds(1)))
            fail("ping " + std::to_string(v) + " got no answer within a second");
        }
      }
      return n;
    };
  }
  w.value = [](double secs, uint64_t n) { return secs / static_cast<double>(n) / 2 * 1e6; };
  return w;
}

workload udp_driver::message_echo(size_t bytes, size_t datagram) {
  if (datagram <= sizeof(udp_control) || datagram > 65507 || bytes == 0 || bytes > (1u << 20))
    fail("an echo of " + std::to_string(bytes) + " bytes in datagrams of " + std::to_string(datagram));
  auto rx = std::make_shared<batch_receiver>();
  auto buf = std::make_shared<std::vector<std::byte>>(datagram, std::byte{0x5a});
  auto sender = std::make_shared<message_sender>(*buf);
  const size_t datagrams = message_datagrams(bytes, datagram).size();
  workload w;
  w.begin = [this] { begin(udp_mode::echo_message); };
  w.end = [this] { end(); };
  w.run = [this, rx, buf, sender, bytes, datagram, datagrams](uint64_t n, steady::time_point deadline) -> uint64_t {
    const int fd = link_->fd();
    for (uint64_t i = 0; i < n; ++i) {
      if (past<255>(i, deadline)) return i;
      const udp_control head{session_, data, ++message_seq_, bytes, datagram};
      sender->send(fd, head);
      size_t back = 0;
      for (uint64_t spins = 1; back < datagrams; ++spins) {
        const int got = rx->receive(fd);
        for (int k = 0; k < got; ++k) back += of_message(*rx, k, session_, head.seq);
        if (got < 0 && !nothing_yet(got)) fail("recvmmsg of an echo: " + errno_text());
        if ((spins & 0xffff) == 0 && steady::now() > deadline + std::chrono::seconds(1))
          fail("message " + std::to_string(head.seq) + " got no whole echo within a second");
      }
    }
    return n;
  };
  w.value = [](double secs, uint64_t n) { return secs / static_cast<double>(n) / 2 * 1e6; };
  return w;
}

uint64_t udp_driver::end_loop(uint64_t sent, stream_totals& totals, uint64_t& arrived) {
  // The receiver may still be draining its buffer: the flush waits for it
  // (resent every 200 us, as it may itself have been dropped by a full buffer).
  udp_control got;
  exchange(flush, count, ++flush_seq_, got, 200, false);
  totals.sent += sent;
  totals.arrived += got.a;
  arrived = got.a;
  return sent;
}

workload udp_driver::stream(size_t bytes, std::shared_ptr<stream_totals> totals, size_t datagram) {
  if (bytes < sizeof(udp_control) || bytes > (datagram ? size_t{1} << 20 : 65507) ||
      (datagram && (datagram <= sizeof(udp_control) || datagram > 65507)))
    fail("a stream of " + std::to_string(bytes) + " bytes in datagrams of " + std::to_string(datagram));
  // One message's datagrams: a single datagram of `bytes`, its head within
  // it, or the message's bytes cut into datagrams with a head each.
  const std::vector<size_t> lengths = datagram ? message_datagrams(bytes, datagram) : std::vector<size_t>{bytes};
  auto buf = std::make_shared<std::vector<std::byte>>(lengths.front(), std::byte{0x5a});
  // What arrived in the last loop: the loop returns what it sent (its
  // iterations, for sizing and for the deadline's count) and the figure is
  // what arrived.
  auto arrived = std::make_shared<uint64_t>(0);
  workload w;
  w.begin = [this] { begin(udp_mode::sink); };
  w.end = [this] { end(); };
  w.run = [this, lengths, buf, totals, arrived](uint64_t n, steady::time_point deadline) -> uint64_t {
    const udp_control head{session_, data, 0, 0, 0};
    std::memcpy(buf->data(), &head, sizeof head);
    // A batch: whole messages, 16 datagrams or the fewest messages above.
    const size_t per = lengths.size();
    const size_t batch = per * std::max<size_t>(1, 16 / per);
    std::vector<iovec> iov(batch);
    std::vector<mmsghdr> msgs(batch);
    for (size_t i = 0; i < batch; ++i) {
      iov[i] = {buf->data(), lengths[i % per]};
      msgs[i] = {};
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
    }
    const uint64_t want = n * per;  // datagrams
    uint64_t sent = 0;
    while (sent < want && steady::now() <= deadline) {
      const size_t at = sent % batch;  // a batch cut short goes on where it stopped
      const int k = ::sendmmsg(link_->fd(), msgs.data() + at, static_cast<unsigned>(std::min<uint64_t>(batch - at, want - sent)), 0);
      if (k > 0) {
        sent += static_cast<uint64_t>(k);
      } else if (!nothing_yet(k) && errno != ENOBUFS) {
        fail("sendmmsg: " + errno_text());
      }
    }
    return end_loop(sent, *totals, *arrived) / per;
  };
  w.value = [bytes, arrived, per = lengths.size()](double secs, uint64_t) {
    return static_cast<double>(bytes) * static_cast<double>(*arrived) / static_cast<double>(per) / secs / 1e9;
  };
  return w;
}

workload udp_driver::rate_small(std::shared_ptr<stream_totals> totals) {
  auto arrived = std::make_shared<uint64_t>(0);
  workload w;
  w.begin = [this] { begin(udp_mode::sink); };
  w.end = [this] { end(); };
  w.run = [this, totals, arrived](uint64_t n, steady::time_point deadline) -> uint64_t {
    const uint64_t mark = small_mark(session_);
    uint64_t sent = 0;
    while (sent < n && steady::now() <= deadline) {
      const ssize_t k = ::send(link_->fd(), &mark, sizeof mark, 0);
      if (k == static_cast<ssize_t>(sizeof mark)) {
        ++sent;
      } else if (!nothing_yet(k) && errno != ENOBUFS) {
        fail("send: " + errno_text());
      }
    }
    return end_loop(sent, *totals, *arrived);
  };
  w.value = [arrived](double secs, uint64_t) { return static_cast<double>(*arrived) / secs / 1e6; };
  return w;
}

}  // namespace bench
