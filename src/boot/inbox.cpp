#include "boot/inbox.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "boot/wire.hpp"
#include "core/tsan.hpp"

namespace clump::boot {

inbox::~inbox() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
    wake_ = nullptr;
  }
  if (control_ >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(control_, &one, sizeof one);
  }
  if (thread_.joinable()) thread_.join();
  if (control_ >= 0) ::close(control_);
}

void inbox::on_peer_exit(std::function<void(int, int)> f) {
  std::deque<std::pair<int, int>> early;
  {
    std::lock_guard lock(mutex_);
    peer_exit_ = f;
    early.swap(early_exits_);
  }
  for (auto [rank, status] : early) f(rank, status);
}

bool inbox::start() noexcept {
  if (thread_.joinable()) return true;
  control_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (control_ < 0) return false;
  try {
    thread_ = std::thread([this] { run(); });
  } catch (...) {
    ::close(control_);
    control_ = -1;
    return false;
  }
  return true;
}

inbox::result inbox::take(frame& out, std::string& why) {
  std::lock_guard lock(mutex_);
  if (!queue_.empty()) {
    out = std::move(queue_.front());
    queue_.pop_front();
    return result::frame;
  }
  if (lost_) {
    why = why_;
    return result::lost;
  }
  return result::none;
}

void inbox::arm(std::function<void()> wake) {
  std::lock_guard lock(mutex_);
  // Relaxed: the mutex orders it with the reader; a sleeper only acts on true.
  ready_.store(!queue_.empty() || lost_, std::memory_order_relaxed);
  wake_ = std::move(wake);
}

void inbox::disarm() {
  std::lock_guard lock(mutex_);  // waits for a wake that is running
  wake_ = nullptr;
}

void inbox::ring() noexcept {
  // Seq_cst: before the wake, which the sleeper's check of ready follows.
  ready_.store(true, std::memory_order_seq_cst);
  if (wake_) {
    wake_();
    wake_ = nullptr;  // once per arm()
  }
}

void inbox::deliver(frame f) {
  if (f.type == wire::msg::end) {
    // Another rank ended the job: end quietly with its code, now, as it did.
    wire::exit_body b{};
    wire::read_body(f.payload.data(), f.payload.size(), b);
    std::fflush(nullptr);
    ::_exit(b.code);
  }
  if (f.type == wire::msg::peer_exited) {
    wire::peer_exited_body b{};
    if (!wire::read_body(f.payload.data(), f.payload.size(), b)) return;
    std::function<void(int, int)> tell;
    {
      std::lock_guard lock(mutex_);
      if (peer_exit_)
        tell = peer_exit_;
      else
        early_exits_.emplace_back(b.rank, b.status);
    }
    if (tell) tell(b.rank, b.status);
    return;
  }
  std::lock_guard lock(mutex_);
  queue_.push_back(std::move(f));
  ring();
}

void inbox::run() noexcept {
  pollfd fds[2] = {{sock_, POLLIN, 0}, {control_, POLLIN, 0}};
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (stop_ || lost_) return;
    }
    fds[0].revents = fds[1].revents = 0;
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) return;
    if (fds[1].revents & POLLIN) continue;  // stopping
    if (!(fds[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    const ssize_t n = in_.fill(sock_);
    std::string why;
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
      why = n == 0 || errno == ECONNRESET
                ? "the socket to clumprun closed: the launcher died or is ending the job (another rank failed?)"
                : std::string("receiving from clumprun failed: ") + std::strerror(errno);
    frame f;
    for (;;) {
      std::string bad;
      const frame_reader::result r = in_.next(f, bad);
      if (r == frame_reader::result::need_more) break;
      if (r == frame_reader::result::bad) {
        why = bad;
        break;
      }
      core::heard_from_outside();  // see core/tsan.hpp
      deliver(std::move(f));
      f = frame{};
    }
    if (!why.empty()) {
      std::lock_guard lock(mutex_);
      lost_ = true;
      why_ = why;
      ring();
      return;
    }
  }
}

}  // namespace clump::boot
