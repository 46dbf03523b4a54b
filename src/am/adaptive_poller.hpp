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
// Quiet is not idle while a datagram of ours waits for its ack, a message of
// several datagrams is partly here, or the link has work of ours under way (a
// read, a payload a peer reads): an answer, or the rest, is on its way. The
// bundle then keeps polling the link itself, at least once in
// CLUMP_NET_POLL_MAX polls, and never watches the doorbell (a send that
// starts such a wait rings a watching bundle back to polling). Behind the
// doorbell each answer costs the service thread two wake-ups, on the core the
// program spins on when ranks fill the cores; and a libfabric provider that
// progresses only inside reads of its queue (udp;ofi_rxd: a 32 KiB message is
// 25 of its packets, each acknowledged) stalls between the rings. Over
// udp;ofi_rxd a 32 KiB ping-pong took 1.15x as long behind the doorbell, and
// a bundle receiving a 256 KiB message (five datagrams, each 45 of rxd's
// packets) went quiet between its datagrams: 21 eventfd and wait-descriptor
// writes and 14 context switches a round trip more than once a message
// partly here counted as expecting.
//
// Counting polls assumes they come often. A program that computes between
// polls (Split-C's compute/poll loops) may poll once in 20 us, and 32 polls
// are then 640 us: a remote read waits that long. So adaptive mode also looks
// at the clock every 8th poll and polls the network when CLUMP_NET_POLL_US
// (50 us) have passed since it last did. When polls come often the counts
// reach the network first and the clock changes nothing; a clock read every
// 8 polls costs about 2 ns a poll.
//
// One poller per bundle. Its fields are relaxed atomics only so that the
// threads of a parallel bundle may share it: a lost update shifts one network
// poll by a poll or two, which is harmless.

#include <atomic>
#include <bit>
#include <chrono>
#include <cstdint>

namespace clump::am {

class adaptive_poller {
 public:
  enum class mode { adaptive = 0, fractional = 1, always = 2 };

  adaptive_poller(mode m, uint32_t min_period, uint32_t max_period, uint32_t interval_us = 0) noexcept
      : mode_(m), min_(min_period), max_(max_period), interval_ns_(mode_ == mode::adaptive ? interval_us * 1000ll : 0) {}

  /// True when this poll should look at the network.
  bool due() noexcept {
    const uint32_t left = countdown_.load(std::memory_order_relaxed);
    if (left > 1) {
      countdown_.store(left - 1, std::memory_order_relaxed);
      return interval_ns_ && (left & 7) == 0 && now_ns() - last_ns_.load(std::memory_order_relaxed) >= interval_ns_;
    }
    return true;
  }

  /// Makes the next poll look at the network (a crowded host's wait, see
  /// bundle::wait_until: its polls are few, each after a sched_yield).
  void force() noexcept { countdown_.store(1, std::memory_order_relaxed); }

  /// Records what a network poll found and sets the next period; `expecting`:
  /// an answer is on its way (see above), so the network is not quiet.
  void found(unsigned messages, bool expecting = false) noexcept {
    const uint32_t h = (history_.load(std::memory_order_relaxed) << 1) | (messages ? 1u : 0u);
    history_.store(h, std::memory_order_relaxed);
    expecting_.store(expecting, std::memory_order_relaxed);
    countdown_.store(h == 0 && expecting && mode_ == mode::adaptive ? max_ : period(h), std::memory_order_relaxed);
    if (interval_ns_) last_ns_.store(now_ns(), std::memory_order_relaxed);
  }

  /// True when none of the last 32 network polls found anything and none of
  /// them waits for an answer, in adaptive mode (the fractional and always
  /// modes keep polling the socket: they are the comparison points).
  bool quiet() const noexcept {
    return mode_ == mode::adaptive && history_.load(std::memory_order_relaxed) == 0 &&
           !expecting_.load(std::memory_order_relaxed);
  }

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
  static int64_t now_ns() noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  mode mode_;
  uint32_t min_, max_;
  int64_t interval_ns_;  // adaptive mode's time bound; 0: none
  std::atomic<uint32_t> countdown_{1};
  std::atomic<uint32_t> history_{0};
  std::atomic<bool> expecting_{false};  // the last network poll's `expecting`
  std::atomic<int64_t> last_ns_{0};  // when the network was last polled
};

}  // namespace clump::am
