#pragma once
// An endpoint's queue block: what other processes of the node see of it.
//
// Layout (offsets from the block's start; all in the owner's region):
//   0     header line (read-mostly: tag, segment, state, wake word offset)
//   128   request queue: control (2 lines), `depth` packet lines, payload ring
//   ...   reply queue: the same
// The header is written by the owner at setup (allocate, set tag, set
// segment) and read by senders on every send, so it stays shared in their
// caches. Fields senders read are atomics (relaxed: a sender that races with
// the owner's reconfiguration sees the old or the new value, and the receiver
// checks the tag again on arrival).

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "shm/queue.hpp"

namespace clump::shm {

inline constexpr uint32_t queue_block_magic = 0x51424c4bu;  // "QBLK"
inline constexpr uint32_t queue_block_version = 3;

/// Marks an endpoint segment that is private to its owner (not in the shared
/// region): long payloads to it are written into the owner's address space
/// (cross-memory attach, at segment_address) or, where the kernel does not
/// allow that, travel through the medium ring in pieces.
inline constexpr uint64_t private_segment = ~uint64_t{0};

/// An endpoint's state word: its generation (which of the endpoints that have
/// held the slot it is: 64 bits, so that it never repeats) and whether it is
/// alive. Packets carry the low 32 bits of generations (gen32), enough to
/// tell apart the endpoints that can hold a slot while one message is in
/// flight: a slot's queues are drained when its endpoint is freed.
inline constexpr uint64_t alive_state(uint64_t generation) noexcept { return generation << 1 | 1u; }
inline constexpr bool is_alive(uint64_t state) noexcept { return state & 1u; }
inline constexpr uint64_t generation_of(uint64_t state) noexcept { return state >> 1; }
inline constexpr uint32_t gen32(uint64_t generation) noexcept { return static_cast<uint32_t>(generation); }

struct alignas(cache_line) queue_block_header {
  uint32_t magic;
  uint32_t version;
  uint32_t depth;                           // packet lines per queue
  uint32_t ring_bytes;                      // payload ring bytes per queue
  std::atomic<uint64_t> state;              // alive_state(generation) while the endpoint exists
  std::atomic<uint64_t> tag;                // the endpoint's tag
  std::atomic<uint64_t> segment_offset;     // in the owner's region, or private_segment
  std::atomic<uint64_t> segment_length;     // 0: no segment
  std::atomic<uint32_t> wake_offset;        // owner's bundle wake word, offset in the owner's region
  std::atomic<uint32_t> segment_version;    // seqlock over the segment fields: odd while they change
  std::atomic<uint64_t> segment_address;    // a private segment's address in the owner's process (else 0)
};
static_assert(sizeof(queue_block_header) == cache_line);

/// The owner changes its segment (a seqlock write, so that no sender pairs
/// the new offset with the old length). No fences (TSan does not model them):
/// each field store is a release, so a reader that sees a new field also sees
/// the odd version stored before it.
inline void write_segment(queue_block_header& h, uint64_t offset, uint64_t length, uint64_t address = 0) noexcept {
  const uint32_t v = h.segment_version.load(std::memory_order_relaxed);
  h.segment_version.store(v + 1, std::memory_order_relaxed);
  h.segment_offset.store(offset, std::memory_order_release);
  h.segment_length.store(length, std::memory_order_release);
  h.segment_address.store(address, std::memory_order_release);
  // Release: the fields are written before the version turns even again.
  // Seq_cst besides: the owner then reads every process's copying counter
  // (region_header::copying), a store-then-load that must not be reordered.
  h.segment_version.store(v + 2, std::memory_order_seq_cst);
}

/// A sender reads a consistent (offset, length) pair. False when the owner
/// has been changing it for a long while (some 100 000 tries): it may have
/// died halfway, which the caller must find out (then call again, or give up).
inline bool read_segment(const queue_block_header& h, uint64_t& offset, uint64_t& length,
                         uint64_t* address = nullptr) noexcept {
  for (unsigned tries = 0; tries < 100'000; ++tries) {
    // Acquire: pairs with the release that ends a write. Seq_cst besides:
    // a copier counts itself (seq_cst) before this load, the owner's half of
    // that handshake is in write_segment.
    const uint32_t v1 = h.segment_version.load(std::memory_order_seq_cst);
    // Acquire: keeps the second version load after these, and pairs with the
    // writer's release stores of the fields.
    offset = h.segment_offset.load(std::memory_order_acquire);
    length = h.segment_length.load(std::memory_order_acquire);
    if (address) *address = h.segment_address.load(std::memory_order_acquire);
    if ((v1 & 1u) == 0 && h.segment_version.load(std::memory_order_relaxed) == v1) return true;
  }
  return false;
}

/// Bytes one queue block takes with the given parameters.
constexpr size_t queue_bytes(uint32_t depth, size_t ring_bytes) noexcept {
  return sizeof(queue_control) + static_cast<size_t>(depth) * cache_line + ring_bytes;
}
constexpr size_t queue_block_bytes(uint32_t depth, size_t ring_bytes) noexcept {
  return 2 * cache_line + 2 * queue_bytes(depth, ring_bytes);
}

/// The two queues of a queue block, as seen from one process.
struct queue_block_view {
  queue_block_header* header = nullptr;
  queue_ref request;
  queue_ref reply;
};

/// Initialises a fresh queue block (by its owner). `generation` distinguishes
/// successive endpoints in the same slot.
void init_queue_block(std::byte* block, uint32_t depth, size_t ring_bytes, uint64_t generation) noexcept;

/// Builds a view of the queue block mapped at `block`, whose owner's region is
/// mapped at `region_base` (its checked header gives depth, ring size and
/// where its wake words are, the same for every block of a region). The block
/// need not be in use yet: a sender checks `state` on each send.
queue_block_view view_queue_block(std::byte* block, std::byte* region_base, uint32_t depth, size_t ring_bytes,
                                  uint32_t wake_base) noexcept;

}  // namespace clump::shm
