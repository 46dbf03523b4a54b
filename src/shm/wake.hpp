#pragma once
// Sleeping and waking a bundle through a futex word in shared memory.
//
// The word's bit 0 says "the owner is asleep (or about to be)"; the other bits
// count wake-ups. The owner sets bit 0, re-checks its queues (see the
// handshake in queue.hpp) and sleeps on the word; a sender that saw bit 0
// after its claim clears it, bumps the count and calls futex wake. Only the
// sleeping side and a sender that finds a sleeper make system calls.

#include <atomic>
#include <cstdint>

namespace clump::shm {

/// Sets the sleeping bit; returns the value to pass to sleep().
uint32_t prepare_sleep(std::atomic<uint32_t>& word) noexcept;
/// Clears the sleeping bit without sleeping (something arrived meanwhile).
void cancel_sleep(std::atomic<uint32_t>& word) noexcept;
/// Sleeps while the word still equals `expected`, at most `timeout_ns`.
void sleep(std::atomic<uint32_t>& word, uint32_t expected, long timeout_ns) noexcept;
/// Wakes every sleeper on the word (cold path of a send).
void wake(std::atomic<uint32_t>& word) noexcept;

}  // namespace clump::shm
