#pragma once
// Non-blocking framed I/O over a boot socket (see wire.hpp for the format),
// shared by the ranks (boot/launched_job.cpp) and by clumprun. Header-only so
// that clumprun does not depend on libclump's internal symbols for it.
//
// Neither class blocks or waits: the caller polls the socket and calls fill()
// when it is readable and flush() when it is writable, which lets clumprun
// serve every rank from one poll() loop and lets a rank run its progress
// function between polls.

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "boot/wire.hpp"

namespace clump::boot {

/// One received frame; the receiver owns `fds`.
struct frame {
  wire::msg type{};
  std::vector<std::byte> payload;
  std::vector<int> fds;
};

/// Accumulates bytes and descriptors from a stream socket and cuts them into frames.
class frame_reader {
 public:
  frame_reader() = default;
  frame_reader(const frame_reader&) = delete;
  frame_reader& operator=(const frame_reader&) = delete;
  ~frame_reader() {
    for (int fd : fds_) ::close(fd);
  }

  /// Reads what `sock` holds now, without blocking. Returns the number of
  /// bytes read (> 0), 0 at end of stream, or -1 with errno (EAGAIN: nothing yet).
  /// Received descriptors are close-on-exec.
  ssize_t fill(int sock) {
    // Room for the rest of a large frame (read in few calls), else 64 KiB.
    size_t want = 64 * 1024;
    if (available() >= sizeof(wire::frame_header)) {
      wire::frame_header h;
      std::memcpy(&h, buf_.get() + start_, sizeof h);
      if (h.length <= wire::max_payload && sizeof h + h.length > available())
        want = std::max(want, sizeof h + h.length - available());
    }
    reserve(want);
    iovec iov{buf_.get() + end_, cap_ - end_};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 253)];
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control;
    m.msg_controllen = sizeof control;
    ssize_t n;
    do n = ::recvmsg(sock, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0) return -1;
    end_ += static_cast<size_t>(n);
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        fds_.push_back(fd);
      }
    }
    // The kernel drops descriptors it cannot install (EMFILE) and says so here.
    if (m.msg_flags & MSG_CTRUNC) lost_fds_ = true;
    return n;
  }

  enum class result { frame, need_more, bad };

  /// Takes the next complete frame into `out`. `bad` (with the reason in `why`)
  /// when the stream is corrupt or descriptors were lost; the stream is then
  /// useless.
  /// The largest payload next() accepts (wire::max_payload unless lowered:
  /// a peer that has not proved who it is gets only a few bytes).
  void limit(uint64_t max_payload) noexcept { limit_ = max_payload; }

  result next(frame& out, std::string& why) {
    if (lost_fds_) {
      why = "descriptors sent over the boot socket were dropped by the kernel: this process ran out of "
            "file descriptors (raise the limit with ulimit -n)";
      return result::bad;
    }
    if (available() < sizeof(wire::frame_header)) return result::need_more;
    wire::frame_header h;
    std::memcpy(&h, buf_.get() + start_, sizeof h);
    if (h.magic != wire::frame_magic) {
      why = "garbage on the boot socket (bad frame magic: CLUMP_BOOT_FD must be the socket clumprun gave the process)";
      return result::bad;
    }
    if (h.length > limit_) {
      why = "frame of " + std::to_string(h.length) + " bytes exceeds the limit of " + std::to_string(limit_);
      return result::bad;
    }
    if (available() < sizeof h + h.length) return result::need_more;
    if (fds_.size() < h.nfds) {
      why = "a frame announced " + std::to_string(h.nfds) + " descriptors but " + std::to_string(fds_.size()) +
            " arrived";
      return result::bad;
    }
    const std::byte* p = buf_.get() + start_ + sizeof h;
    out.type = static_cast<wire::msg>(h.type);
    out.payload.assign(p, p + h.length);
    out.fds.assign(fds_.begin(), fds_.begin() + h.nfds);
    fds_.erase(fds_.begin(), fds_.begin() + h.nfds);
    start_ += sizeof h + h.length;
    return result::frame;
  }

  /// Bytes received and not yet taken as frames.
  size_t available() const { return end_ - start_; }

 private:
  // Makes room for `want` more bytes after end_, moving the unread bytes to the
  // front. Not a std::vector: resize() would zero every chunk before recvmsg
  // overwrites it.
  void reserve(size_t want) {
    if (start_ == end_) start_ = end_ = 0;
    if (cap_ - end_ >= want) return;
    size_t live = available();
    if (start_ > 0 && cap_ - live >= want) {
      std::memmove(buf_.get(), buf_.get() + start_, live);
    } else {
      size_t cap = std::max(cap_ * 2, live + want);
      std::unique_ptr<std::byte[]> bigger(new std::byte[cap]);
      if (live) std::memcpy(bigger.get(), buf_.get() + start_, live);
      buf_ = std::move(bigger);
      cap_ = cap;
    }
    start_ = 0;
    end_ = live;
  }

  std::unique_ptr<std::byte[]> buf_;
  size_t cap_ = 0;
  size_t start_ = 0;
  size_t end_ = 0;
  std::deque<int> fds_;
  bool lost_fds_ = false;
  uint64_t limit_ = wire::max_payload;
};

/// Queues frames and sends them as the socket accepts them.
class frame_writer {
 public:
  /// Queues a frame made of `body` (copied) followed by `data` (not copied: it
  /// and `fds` must stay valid until flush() has sent them; `keep` may own
  /// them). `fds` are passed with SCM_RIGHTS and not closed by the writer.
  void push(wire::msg type, std::span<const std::byte> body, std::span<const std::byte> data = {},
            std::span<const int> fds = {}, std::shared_ptr<const void> keep = nullptr) {
    entry e;
    wire::frame_header h{wire::frame_magic, static_cast<uint16_t>(type), static_cast<uint16_t>(fds.size()),
                         body.size() + data.size()};
    e.head.resize(sizeof h + body.size());
    std::memcpy(e.head.data(), &h, sizeof h);
    if (!body.empty()) std::memcpy(e.head.data() + sizeof h, body.data(), body.size());
    e.data = data;
    e.fds.assign(fds.begin(), fds.end());
    e.keep = std::move(keep);
    queue_.push_back(std::move(e));
  }

  template <class T>
  void push_body(wire::msg type, const T& body, std::span<const std::byte> data = {}, std::span<const int> fds = {},
                 std::shared_ptr<const void> keep = nullptr) {
    push(type, std::as_bytes(std::span<const T, 1>(&body, 1)), data, fds, std::move(keep));
  }

  /// Sends what the socket takes without blocking. Returns 1 when the queue is
  /// empty, 0 when more is pending (wait for POLLOUT), -1 with errno on error
  /// (EPIPE: the peer is gone; ETOOMANYREFS: too many descriptors in flight,
  /// retry later).
  int flush(int sock) {
    while (!queue_.empty()) {
      entry& e = queue_.front();
      iovec iov[2];
      int n_iov = 0;
      size_t head_left = e.sent < e.head.size() ? e.head.size() - e.sent : 0;
      if (head_left) iov[n_iov++] = {e.head.data() + e.sent, head_left};
      size_t data_done = e.sent > e.head.size() ? e.sent - e.head.size() : 0;
      if (data_done < e.data.size())
        iov[n_iov++] = {const_cast<std::byte*>(e.data.data()) + data_done, e.data.size() - data_done};
      msghdr m{};
      m.msg_iov = iov;
      m.msg_iovlen = static_cast<size_t>(n_iov);
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * wire::max_fds_per_frame)] = {};  // zeroed: cmsg padding reaches the kernel
      if (!e.fds.empty() && e.sent == 0) {
        // Attached to the first byte of the header, so the reader has them by
        // the time it parses the header.
        m.msg_control = control;
        m.msg_controllen = CMSG_SPACE(sizeof(int) * e.fds.size());
        cmsghdr* c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * e.fds.size());
        std::memcpy(CMSG_DATA(c), e.fds.data(), sizeof(int) * e.fds.size());
      }
      ssize_t n = ::sendmsg(sock, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
        return -1;
      }
      e.sent += static_cast<size_t>(n);
      if (e.sent == e.head.size() + e.data.size()) queue_.pop_front();
    }
    return 1;
  }

  bool empty() const { return queue_.empty(); }

 private:
  struct entry {
    std::vector<std::byte> head;  // frame header + body
    std::span<const std::byte> data;
    std::vector<int> fds;
    std::shared_ptr<const void> keep;
    size_t sent = 0;
  };
  std::deque<entry> queue_;
};

}  // namespace clump::boot
