#pragma once
// When a poll looks at the network (SC97, "multi-protocol polling").
//
// Polling shared memory costs a few cached loads; polling the network costs a
// system call, orders of magnitude more. So poll() always checks shared
// memory and checks the network only every `period` polls. In adaptive mode
// the period follows the last 32 network polls: it is CLUMP_NET_POLL_MIN when
// all of them found something and CLUMP_NET_POLL_MAX when none did, in
// proportion between. Fractional mode keeps it at CLUMP_NET_POLL_MIN; always
// mode polls the network every time (the papers' comparison points).
//
// Adaptive mode only: when the last 32 network polls all found nothing, the bundle stops polling
// the socket and watches the network's doorbell instead (a load per poll; the
// network's service thread rings it when a datagram comes), until a poll it
// rang for finds something. An idle network then costs shared-memory traffic
// nothing, and a busy one is polled directly, without a thread in the way.
// The doorbell is only a hint, though: the service thread may not get a core
// soon when every core spins (one process per core), so a quiet bundle still
// looks at the socket once in 32 x CLUMP_NET_POLL_MAX polls.
//
// One poller per bundle. Its fields are relaxed atomics only so that the
// threads of a parallel bundle may share it: a lost update shifts one network
// poll by a poll or two, which is harmless.

#include <atomic>
#include <bit>
#include <cstdint>

namespace clump::am {

class adaptive_poller {
 public:
  enum class mode { adaptive = 0, fractional = 1, always = 2 };

  adaptive_poller(mode m, uint32_t min_period, uint32_t max_period) noexcept
      : mode_(m), min_(min_period), max_(max_period) {}

  /// True when this poll should look at the network.
  bool due() noexcept {
    const uint32_t left = countdown_.load(std::memory_order_relaxed);
    if (left > 1) {
      countdown_.store(left - 1, std::memory_order_relaxed);
      return false;
    }
    return true;
  }

  /// Records what a network poll found and sets the next period.
  void found(unsigned messages) noexcept {
    const uint32_t h = (history_.load(std::memory_order_relaxed) << 1) | (messages ? 1u : 0u);
    history_.store(h, std::memory_order_relaxed);
    countdown_.store(period(h), std::memory_order_relaxed);
  }

  /// True when none of the last 32 network polls found anything, in adaptive
  /// mode (the fractional and always modes keep polling the socket: they are
  /// the comparison points).
  bool quiet() const noexcept { return mode_ == mode::adaptive && history_.load(std::memory_order_relaxed) == 0; }

  uint32_t period(uint32_t history) const noexcept {
    switch (mode_) {
      case mode::always: return 1;
      case mode::fractional: return min_;
      case mode::adaptive: break;
    }
    if (history == 0) return 32 * max_;  // quiet: the doorbell, and a look now and then
    const uint32_t hits = static_cast<uint32_t>(std::popcount(history));
    return max_ - (max_ - min_) * hits / 32;
  }

 private:
  mode mode_;
  uint32_t min_, max_;
  std::atomic<uint32_t> countdown_{1};
  std::atomic<uint32_t> history_{0};
};

}  // namespace clump::am
