#pragma once
// A bounded multi-producer, single-consumer queue of cache-line packets with a
// ring of medium payload bytes behind it, living in shared memory.
//
// Who writes what, in which order, and why that is safe:
// - `tail` packs two 32-bit counters: packet lines claimed (low) and payload
//   ring lines claimed (high). A sender claims both with one compare-and-swap,
//   so packets and their payloads are claimed in the same order and the
//   receiver frees the payload ring in order, exactly as it frees packets.
// - Before claiming, a sender checks room against the receiver's `head` (same
//   packing). It reads `head` with acquire only when its cached copy says the
//   queue is full: the receiver's reads of old packets happen before its
//   release store of `head`, so a sender never overwrites a packet that is
//   still being read.
// - The sender fills the packet (and a second line, and the payload), then
//   stores the first line's `seq` with release. The receiver loads `seq` with
//   acquire and sees everything written before it. It expects seq == index+1;
//   a line that holds an older lap's value is not ready.
// - Counters are 32-bit and wrap; depth and ring size are powers of two so
//   that the masks stay right across the wrap.
// - Sleep/wake (Dekker): the receiver counts itself as a sleeper in its
//   bundle's wake word (seq_cst), then loads `tail` (seq_cst); a sender's claim
//   is a seq_cst CAS on `tail` followed by a seq_cst load of the wake word. One of the two sees
//   the other, so a message is never left behind a sleeping receiver, and the
//   send path needs no extra fence.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "shm/packet.hpp"

// ThreadSanitizer sees only this process. When two threads of one process
// send to the same queue, the line one of them reuses was handed back by a
// receiver in another process (publish -> receiver's acquire of seq ->
// receiver's release of head -> our acquire of head), a chain TSan cannot
// follow. These annotations tell it the in-process part of that chain: every
// publish releases, every claim acquires, on the queue's control block.
#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#define CLUMP_TSAN_ACQUIRE(addr) __tsan_acquire(addr)
#define CLUMP_TSAN_RELEASE(addr) __tsan_release(addr)
#else
#define CLUMP_TSAN_ACQUIRE(addr) ((void)0)
#define CLUMP_TSAN_RELEASE(addr) ((void)0)
#endif

namespace clump::shm {

inline constexpr uint64_t pack_index(uint32_t lines, uint32_t ring) noexcept {
  return (static_cast<uint64_t>(ring) << 32) | lines;
}
inline constexpr uint32_t line_index(uint64_t v) noexcept { return static_cast<uint32_t>(v); }
inline constexpr uint32_t ring_index(uint64_t v) noexcept { return static_cast<uint32_t>(v >> 32); }

/// The shared control words of one queue: each on its own cache line so that
/// senders claiming and the receiver consuming do not share a line.
struct queue_control {
  alignas(cache_line) std::atomic<uint64_t> tail;
  alignas(cache_line) std::atomic<uint64_t> head;
};
static_assert(sizeof(queue_control) == 2 * cache_line);

/// A process-local view of one queue, in whatever address the calling process
/// has mapped it.
struct queue_ref {
  queue_control* control = nullptr;
  packet* lines = nullptr;           // `depth` packet lines
  std::byte* ring = nullptr;         // `ring_lines` * 64 payload bytes
  std::byte* region_base = nullptr;  // the receiver's region, as mapped here
  const std::atomic<uint32_t>* wake_offset = nullptr;  // where in it the receiver's wake word is
  uint32_t wake_base = 0;            // the region's wake words: wake_area bytes from here
  uint32_t depth = 0;                // power of two
  uint32_t ring_lines = 0;           // power of two
};

/// Bytes of a region's wake words (64 of them, a cache line each).
inline constexpr uint32_t wake_area = 64 * 64;

/// A sender's cached copy of a queue's head. Several threads of one process
/// may share it; acquire/release keep the chain of happens-before from the
/// receiver's release of `head` to every thread that trusts the cache.
struct head_cache {
  std::atomic<uint64_t> head{0};
};

/// A claimed place in a queue.
struct claim {
  uint32_t line;       // absolute index of the first packet line
  uint32_t ring_line;  // absolute index of the first payload line (after any skip)
  uint32_t ring_used;  // payload ring lines consumed, skip included
  bool wake;           // the receiver was asleep: wake it after publishing
};

inline constexpr uint32_t lines_for_bytes(size_t bytes) noexcept {
  return static_cast<uint32_t>((bytes + cache_line - 1) / cache_line);
}

/// Where a payload of `payload_lines` lines goes in a ring of `ring_lines`
/// lines when the claims (or, at the receiver, the consumption) stand at ring
/// index `at`: contiguous, so when it would run past the ring's end it starts
/// at the beginning and the lines up to the end are skipped. Sender and
/// receiver both compute it, so no packet says it (and no corrupt packet can
/// move the receiver's reads outside the ring).
struct ring_span {
  uint32_t start;  // absolute ring index of the payload's first line
  uint32_t used;   // ring lines consumed, the skip included
};
inline constexpr ring_span place_payload(uint32_t at, uint32_t payload_lines, uint32_t ring_lines) noexcept {
  if (payload_lines == 0) return {at, 0};
  const uint32_t pos = at & (ring_lines - 1);
  const uint32_t skip = pos + payload_lines > ring_lines ? ring_lines - pos : 0;
  return {at + skip, skip + payload_lines};
}

/// The receiving bundle's wake word. Read afresh on each claim (relaxed: the
/// offset only changes when the endpoint moves to another bundle). The offset
/// is another process's word: it is kept inside the wake words whatever it
/// holds, so that a corrupt one cannot send our atomic add elsewhere.
inline std::atomic<uint32_t>& wake_word(const queue_ref& q) noexcept {
  const uint32_t off = (q.wake_offset->load(std::memory_order_relaxed) - q.wake_base) & (wake_area - 4);
  return *reinterpret_cast<std::atomic<uint32_t>*>(q.region_base + q.wake_base + off);
}

// send-stage: claim (bench/send-breakdown's stages of a send; comments only)
/// Claims `lines` packet lines and room for `payload_bytes` of contiguous
/// payload. Returns false, claiming nothing, when the queue is full.
inline bool try_claim(const queue_ref& q, head_cache& cache, uint32_t lines, size_t payload_bytes,
                      claim& out) noexcept {
  // send-stage: room
  const uint32_t payload_lines = lines_for_bytes(payload_bytes);
  // send-stage: locate
  // Relaxed: the CAS below validates the value; nothing is read through it.
  uint64_t t = q.control->tail.load(std::memory_order_relaxed);
  // send-stage: room
  for (;;) {
    const uint32_t tl = line_index(t), tr = ring_index(t);
    const ring_span span = place_payload(tr, payload_lines, q.ring_lines);
    const uint32_t ring_used = span.used;
    auto fits = [&](uint64_t h) {
      return static_cast<uint32_t>(tl + lines - line_index(h)) <= q.depth &&
             static_cast<uint32_t>(tr + ring_used - ring_index(h)) <= q.ring_lines;
    };
    // Acquire: see note on head_cache.
    uint64_t h = cache.head.load(std::memory_order_acquire);
    if (!fits(h)) {
      // Acquire: pairs with the receiver's release of head (it has finished reading).
      h = q.control->head.load(std::memory_order_acquire);
      cache.head.store(h, std::memory_order_release);
      if (!fits(h)) return false;
    }
    // send-stage: claim
    // seq_cst: one half of the sleep/wake handshake described at the top.
    if (q.control->tail.compare_exchange_weak(t, pack_index(tl + lines, tr + ring_used), std::memory_order_seq_cst,
                                              std::memory_order_relaxed)) {
      CLUMP_TSAN_ACQUIRE(q.control);
      out.line = tl;
      out.ring_line = span.start;
      out.ring_used = ring_used;
      // send-stage: publish (the wake check)
      // seq_cst: the other half of the handshake; non-zero low bits count sleepers.
      out.wake = (wake_word(q).load(std::memory_order_seq_cst) & 0xffu) != 0;
      // send-stage: claim
      return true;
    }
  }
}
// send-stage: end

inline packet& line_at(const queue_ref& q, uint32_t index) noexcept { return q.lines[index & (q.depth - 1)]; }

inline packet_tail& tail_at(const queue_ref& q, uint32_t index) noexcept {
  return reinterpret_cast<packet_tail&>(q.lines[index & (q.depth - 1)]);
}

inline packet_extra& extra_at(const queue_ref& q, uint32_t index) noexcept {
  return reinterpret_cast<packet_extra&>(q.lines[index & (q.depth - 1)]);
}

inline std::byte* ring_at(const queue_ref& q, uint32_t ring_line) noexcept {
  return q.ring + static_cast<size_t>(ring_line & (q.ring_lines - 1)) * cache_line;
}

/// Makes a filled packet visible to the receiver.
inline void publish(const queue_ref& q, const claim& c) noexcept {
  CLUMP_TSAN_RELEASE(q.control);
  // Release: everything written into the claimed lines and payload before
  // this store is visible to the receiver that acquires `seq`.
  line_at(q, c.line).seq.store(c.line + 1, std::memory_order_release);
}

/// The packet at the receiver's head, or nullptr when none is ready.
inline const packet* peek(const queue_ref& q, uint64_t head) noexcept {
  const packet& p = line_at(q, line_index(head));
  // Acquire: pairs with publish().
  return p.seq.load(std::memory_order_acquire) == line_index(head) + 1 ? &p : nullptr;
}

/// True when some sender has claimed lines the receiver has not consumed
/// (published or not). Used before sleeping.
inline bool has_claims(const queue_ref& q, uint64_t head) noexcept {
  // seq_cst: the receiver's half of the sleep/wake handshake.
  return line_index(q.control->tail.load(std::memory_order_seq_cst)) != line_index(head);
}

/// Frees consumed lines and payload for senders.
inline void release(const queue_ref& q, uint64_t new_head) noexcept {
  // Release: our reads of the consumed packets happen before any sender reuses them.
  q.control->head.store(new_head, std::memory_order_release);
}

}  // namespace clump::shm
