#include "shm/wake.hpp"

#include <climits>
#include <ctime>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace clump::shm {

static long futex(std::atomic<uint32_t>& word, int op, uint32_t val, const timespec* ts) noexcept {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free);
  // Shared (not FUTEX_PRIVATE): the word is in memory mapped by several processes.
  return ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), op, val, ts, nullptr, 0);
}

uint32_t prepare_sleep(std::atomic<uint32_t>& word) noexcept {
  // seq_cst: the receiver's half of the handshake in queue.hpp.
  return word.fetch_or(1u, std::memory_order_seq_cst) | 1u;
}

void cancel_sleep(std::atomic<uint32_t>& word) noexcept {
  // Relaxed: only the owner sets the bit; a sender clearing it too is harmless.
  word.fetch_and(~1u, std::memory_order_relaxed);
}

void sleep(std::atomic<uint32_t>& word, uint32_t expected, long timeout_ns) noexcept {
  timespec ts{timeout_ns / 1000000000L, timeout_ns % 1000000000L};
  futex(word, FUTEX_WAIT, expected, &ts);
  cancel_sleep(word);
}

void wake(std::atomic<uint32_t>& word) noexcept {
  // Clear "asleep" and bump the count in one step, so that a sleeper that has
  // not yet entered the kernel finds a changed value and does not sleep.
  uint32_t v = word.load(std::memory_order_relaxed);
  // seq_cst: orders this with the sender's publish before the kernel call.
  while (!word.compare_exchange_weak(v, (v & ~1u) + 2u, std::memory_order_seq_cst, std::memory_order_relaxed)) {
  }
  futex(word, FUTEX_WAKE, INT_MAX, nullptr);
}

}  // namespace clump::shm
