#pragma once
// A process's shared region: one memfd holding the queue blocks of its
// endpoints, its bundles' wake words and the segments it allocates. Every
// process of the node maps every region (descriptors are passed by the
// launcher), so a sender writes straight into the receiver's queues and
// segments. A memfd has no name in /dev/shm and its memory is freed when the
// last process that maps it exits, whatever the way it exits.
//
// Layout (offsets; the header says where each part starts):
//   0                 region_header
//   4096              wake words, one cache line each
//   queue_block_base  max_endpoints queue blocks, queue_block_stride apart
//   heap_base         segments, allocated by the owner
// The region is sparse: only touched or committed pages use memory.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace clump::shm {

inline constexpr uint32_t region_magic = 0x434c4d50u;  // "CLMP"
inline constexpr uint32_t region_version = 2;
inline constexpr uint32_t max_wake_words = 64;

struct region_header {
  uint32_t magic;
  uint32_t version;
  int32_t rank;
  int32_t pid;
  uint64_t size;
  uint32_t max_endpoints;
  uint32_t depth;            // packet lines per queue, for every queue block here
  uint64_t ring_bytes;       // payload ring bytes per queue
  uint64_t wake_base;
  uint64_t queue_block_base;
  uint64_t queue_block_stride;
  uint64_t heap_base;
  /// Threads of this process copying straight into another endpoint's shared
  /// segment right now (between reading where the segment is and the end of
  /// the copy). An owner that replaces or frees a segment waits until every
  /// process of the node shows 0 after it has published the change, so that
  /// no byte lands in memory it has released (see endpoint.cpp).
  alignas(64) std::atomic<uint32_t> copying;
};

/// A region's layout as its header states it, checked once when the region
/// is mapped (a peer's header is another process's memory: it is read once,
/// checked, and the copy is what this process uses).
struct region_geometry {
  uint64_t size = 0;
  uint32_t max_endpoints = 0;
  uint32_t depth = 0;
  uint64_t ring_bytes = 0;
  uint32_t wake_base = 0;
  uint64_t queue_block_base = 0;
  uint64_t queue_block_stride = 0;
  uint64_t heap_base = 0;
  int32_t pid = 0;
};

/// This process's own region.
class region {
 public:
  /// Creates the memfd and maps it. Throws clump::error with the cause and the
  /// fix when memory or address space is short.
  region(uint32_t depth, size_t ring_bytes, uint32_t max_endpoints, size_t size);
  ~region();
  region(const region&) = delete;
  region& operator=(const region&) = delete;

  int fd() const noexcept { return fd_; }
  std::byte* base() const noexcept { return base_; }
  size_t size() const noexcept { return size_; }
  const region_header& header() const noexcept { return *reinterpret_cast<region_header*>(base_); }
  void set_rank(int rank) noexcept;

  uint32_t depth() const noexcept { return depth_; }
  size_t ring_bytes() const noexcept { return ring_bytes_; }
  uint32_t max_endpoints() const noexcept { return max_endpoints_; }
  uint64_t queue_block_offset(uint32_t slot) const noexcept;
  std::byte* queue_block(uint32_t slot) const noexcept { return base_ + queue_block_offset(slot); }

  /// Takes a free endpoint slot and commits its queue block's memory; returns
  /// the slot and the generation to stamp it with (64 bits, never repeated
  /// in a slot). Throws when none is free or memory cannot be committed.
  uint32_t take_endpoint_slot(uint64_t& generation);
  /// The slot is free again (its endpoint has marked itself dead and drained its queues).
  void give_endpoint_slot(uint32_t slot) noexcept;
  /// Tests only: the next endpoint in `slot` gets generation `next`.
  void set_next_generation(uint32_t slot, uint64_t next) noexcept;

  /// Takes a wake word (one per bundle); returns its offset.
  uint32_t take_wake_word();
  void give_wake_word(uint32_t offset) noexcept;
  std::atomic<uint32_t>& wake_word(uint32_t offset) const noexcept {
    return *reinterpret_cast<std::atomic<uint32_t>*>(base_ + offset);
  }

  /// Allocates `bytes` of segment memory (page aligned); returns its offset.
  uint64_t allocate(size_t bytes);
  void deallocate(uint64_t offset, size_t bytes) noexcept;
  /// Gives the memory back to the kernel but never hands the range out again
  /// (a segment that some process may still be writing into).
  void retire(uint64_t offset, size_t bytes) noexcept;
  std::atomic<uint32_t>& copying() const noexcept { return reinterpret_cast<region_header*>(base_)->copying; }
  /// When [p, p+n) lies inside this region, sets `offset` and returns true.
  bool contains(const void* p, size_t n, uint64_t& offset) const noexcept;

 private:
  void commit(uint64_t offset, size_t bytes, const char* what);

  int fd_ = -1;
  std::byte* base_ = nullptr;
  size_t size_ = 0;
  uint32_t depth_;
  size_t ring_bytes_;
  uint32_t max_endpoints_;
  std::mutex mutex_;  // guards the allocation state below (setup path only)
  std::vector<uint64_t> slot_generation_;
  std::vector<bool> slot_used_;
  std::vector<bool> wake_used_;
  uint64_t heap_top_ = 0;
  struct free_block {
    uint64_t offset;
    size_t bytes;
  };
  std::vector<free_block> free_;
};

/// The regions of the other processes of the node. A peer's header is read
/// (and checked) when its descriptor arrives, but its region is mapped only
/// when this process first sends to it: a process of a node of P ranks that
/// talks to a few of them maps a few regions, not P (page tables for P - 1
/// regions in each of P processes were the largest cost of a 256-rank
/// job's start-up).
class peer_regions {
 public:
  peer_regions() = default;
  ~peer_regions();
  peer_regions(const peer_regions&) = delete;
  peer_regions& operator=(const peer_regions&) = delete;

  /// Room for ranks 0 .. count-1; before any attach, never again after.
  void reserve(size_t count);
  /// Takes `fd` as rank `rank`'s region, reading and checking its header
  /// (throws clump::error for a bad one). `own` is this process's region,
  /// used as is (mapped already) for its own rank.
  void attach(int rank, int fd, const region* own);
  /// Whether `rank` is a process of this node with a region here.
  bool has(int rank) const noexcept {
    return static_cast<size_t>(rank) < count_ && geometry_[static_cast<size_t>(rank)].size != 0;
  }
  /// `rank`'s region, mapped now if it was not yet; nullptr if it has none.
  /// Throws clump::error if the mapping fails. Thread-safe.
  std::byte* map(int rank);
  /// `rank`'s region if it is mapped, else nullptr.
  std::byte* base(int rank) const noexcept {
    return static_cast<size_t>(rank) < count_ ? bases_[static_cast<size_t>(rank)].load(std::memory_order_acquire)
                                              : nullptr;
  }
  /// The checked layout of `rank`'s region (valid where has(rank)).
  const region_geometry& geometry(int rank) const noexcept { return geometry_[static_cast<size_t>(rank)]; }
  size_t count() const noexcept { return count_; }
  /// How many peers' regions are mapped (this process's own aside).
  size_t mapped() const noexcept { return mapped_.load(std::memory_order_relaxed); }

 private:
  size_t count_ = 0;
  std::unique_ptr<region_geometry[]> geometry_;
  std::unique_ptr<std::atomic<std::byte*>[]> bases_;
  std::unique_ptr<int[]> fds_;     // until mapped; -1 after
  std::unique_ptr<bool[]> owned_;  // mapped here (not our own region)
  std::atomic<size_t> mapped_{0};
  std::mutex mutex_;  // guards map()
};

}  // namespace clump::shm
