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
inline constexpr uint32_t queue_block_version = 1;

/// Marks an endpoint segment that is private to its owner (not in the shared
/// region): long payloads to it travel through the medium ring in pieces.
inline constexpr uint64_t private_segment = ~uint64_t{0};

struct alignas(cache_line) queue_block_header {
  uint32_t magic;
  uint32_t version;
  uint32_t depth;                           // packet lines per queue
  uint32_t ring_bytes;                      // payload ring bytes per queue
  std::atomic<uint32_t> state;              // (generation << 1) | 1 while the endpoint exists
  std::atomic<uint32_t> wake_offset;        // owner's bundle wake word, offset in the owner's region
  std::atomic<uint64_t> tag;                // the endpoint's tag
  std::atomic<uint64_t> segment_offset;     // in the owner's region, or private_segment
  std::atomic<uint64_t> segment_length;     // 0: no segment
};
static_assert(sizeof(queue_block_header) == cache_line);

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
void init_queue_block(std::byte* block, uint32_t depth, size_t ring_bytes, uint32_t generation) noexcept;

/// Builds a view of the queue block mapped at `block`, whose owner's region is
/// mapped at `region_base` (the region header gives depth and ring size, the
/// same for every block of a region). The block need not be in use yet: a
/// sender checks `state` on each send.
queue_block_view view_queue_block(std::byte* block, std::byte* region_base, uint32_t depth, size_t ring_bytes) noexcept;

}  // namespace clump::shm
