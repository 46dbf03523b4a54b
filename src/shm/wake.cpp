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
  return word.fetch_add(1u, std::memory_order_seq_cst) + 1u;
}

void cancel_sleep(std::atomic<uint32_t>& word) noexcept {
  // Relaxed: the count is only a hint to senders; a sender that still sees
  // this thread counted makes one needless wake call.
  word.fetch_sub(1u, std::memory_order_relaxed);
}

void sleep(std::atomic<uint32_t>& word, uint32_t expected, long timeout_ns) noexcept {
  timespec ts{timeout_ns / 1000000000L, timeout_ns % 1000000000L};
  futex(word, FUTEX_WAIT, expected, &ts);
  cancel_sleep(word);
}

void wake(std::atomic<uint32_t>& word) noexcept {
  // Bump the wake count (above the sleeper bits), so that a sleeper that has
  // not yet entered the kernel finds a changed value and does not sleep.
  // seq_cst: orders this with the sender's publish before the kernel call.
  word.fetch_add(sleeper_mask + 1u, std::memory_order_seq_cst);
  futex(word, FUTEX_WAKE, INT_MAX, nullptr);
}

}  // namespace clump::shm
