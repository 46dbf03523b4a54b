#pragma once
// Sleeping and waking a bundle through a futex word in shared memory.
//
// The word's low 8 bits count the threads that are asleep (or about to be);
// the upper bits count wake-ups. A thread going to sleep adds itself
// (seq_cst), re-checks its queues (see the handshake in queue.hpp) and sleeps
// on the word's value; it removes itself when it wakes or gives up. A sender
// that sees a non-zero count after its claim bumps the wake count (changing
// the value every sleeper waits on) and calls futex wake. With a count rather
// than one bit, one thread that stops sleeping cannot hide another that still
// sleeps. Only sleepers and senders that find a sleeper make system calls.

#include <atomic>
#include <cstdint>

namespace clump::shm {

/// Bits of the wake word that count sleepers.
inline constexpr uint32_t sleeper_mask = 0xffu;

/// Counts this thread as a sleeper; returns the value to pass to sleep().
uint32_t prepare_sleep(std::atomic<uint32_t>& word) noexcept;
/// Stops counting this thread as a sleeper without sleeping (something arrived).
void cancel_sleep(std::atomic<uint32_t>& word) noexcept;
/// Sleeps while the word still equals `expected`, at most `timeout_ns`, then
/// stops counting this thread as a sleeper.
void sleep(std::atomic<uint32_t>& word, uint32_t expected, long timeout_ns) noexcept;
/// Wakes every sleeper on the word (cold path of a send).
void wake(std::atomic<uint32_t>& word) noexcept;

}  // namespace clump::shm
