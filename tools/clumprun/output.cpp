#include "output.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace clumprun {

namespace {
// A "line" longer than this is cut and written in pieces, so that a rank that
// never prints a newline cannot make clumprun hold unbounded output.
constexpr size_t max_line = 64 * 1024;
}  // namespace

void write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      // Our stdout may be a non-blocking descriptor inherited from whoever
      // started us: wait for room, like a blocking write would.
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 100);
    } else {
      return;
    }
  }
}

line_forwarder::line_forwarder(int pipe_fd, int dest_fd, std::string prefix)
    : fd_(pipe_fd), dest_(dest_fd), prefix_(std::move(prefix)) {
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
}

line_forwarder::~line_forwarder() {
  if (fd_ >= 0) ::close(fd_);
}

void line_forwarder::on_readable() {
  if (fd_ < 0) return;
  char buf[64 * 1024];
  ssize_t n;
  do n = ::read(fd_, buf, sizeof buf);
  while (n < 0 && errno == EINTR);
  if (n > 0) {
    pending_.append(buf, static_cast<size_t>(n));
    emit(false);
  } else if (n == 0 || errno != EAGAIN) {
    emit(true);
    ::close(fd_);
    fd_ = -1;
  }
}

void line_forwarder::finish() {
  // Bounded: a pipe holds at most its capacity once the writer has exited,
  // unless a child of the rank keeps writing; stop at the first EAGAIN.
  for (int i = 0; i < 64 && fd_ >= 0; ++i) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) break;
    on_readable();
  }
  if (fd_ >= 0) {
    emit(true);
    ::close(fd_);
    fd_ = -1;
  }
}

void line_forwarder::emit(bool flush_partial) {
  std::string out;
  size_t start = 0;
  for (;;) {
    size_t nl = pending_.find('\n', start);
    if (nl == std::string::npos) {
      if (pending_.size() - start <= max_line && !(flush_partial && start < pending_.size())) break;
      nl = std::min(pending_.size(), start + max_line);
      out += prefix_;
      out.append(pending_, start, nl - start);
      out += '\n';
      start = nl;
      continue;
    }
    out += prefix_;
    out.append(pending_, start, nl + 1 - start);
    start = nl + 1;
  }
  pending_.erase(0, start);
  if (!out.empty()) write_all(dest_, out);
}

}  // namespace clumprun
