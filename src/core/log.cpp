#include "core/log.hpp"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

#include "core/settings.hpp"

namespace clump::core {

// Read by every logging thread, written once at boot: relaxed is enough, a
// stale value only changes the prefix.
static std::atomic<int> log_rank{-1};

void set_log_rank(int rank) noexcept { log_rank.store(rank, std::memory_order_relaxed); }

static void emit(const char* level, const char* fmt, va_list ap) noexcept {
  char line[2048];
  int rank = log_rank.load(std::memory_order_relaxed);
  int n = rank >= 0 ? std::snprintf(line, sizeof line, "clump[%d]: %s", rank, level)
                    : std::snprintf(line, sizeof line, "clump: %s", level);
  if (n < 0) return;
  int m = std::vsnprintf(line + n, sizeof line - static_cast<size_t>(n), fmt, ap);
  if (m < 0) return;
  size_t len = static_cast<size_t>(n) + static_cast<size_t>(m);
  if (len > sizeof line - 2) len = sizeof line - 2;
  line[len++] = '\n';
  // One write() per line so that lines of different ranks do not interleave.
  ssize_t ignored = ::write(STDERR_FILENO, line, len);
  (void)ignored;
}

void log_error(const char* fmt, ...) noexcept {
  va_list ap;
  va_start(ap, fmt);
  emit("error: ", fmt, ap);
  va_end(ap);
}

void log_warning(const char* fmt, ...) noexcept {
  va_list ap;
  va_start(ap, fmt);
  emit("warning: ", fmt, ap);
  va_end(ap);
}

void log_info(const char* fmt, ...) noexcept {
  if (settings().verbose < 1) return;
  va_list ap;
  va_start(ap, fmt);
  emit("", fmt, ap);
  va_end(ap);
}

void fatal(const char* fmt, ...) noexcept {
  va_list ap;
  va_start(ap, fmt);
  emit("fatal: ", fmt, ap);
  va_end(ap);
  std::abort();
}

}  // namespace clump::core
