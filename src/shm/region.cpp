#include "shm/region.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <string>

#include <clump/status.hpp>

#include "shm/queue.hpp"
#include "shm/queue_block.hpp"

namespace clump::shm {

namespace {

constexpr size_t page = 4096;
constexpr size_t heap_alignment = 2u << 20;  // lets the kernel use huge pages for big segments

constexpr uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

std::string errno_text(int e) { return std::string(std::strerror(e)) + " (errno " + std::to_string(e) + ")"; }

}  // namespace

region::region(uint32_t depth, size_t ring_bytes, uint32_t max_endpoints, size_t size)
    : depth_(depth), ring_bytes_(ring_bytes), max_endpoints_(max_endpoints) {
  const uint64_t wake_base = page;
  const uint64_t qb_base = round_up(wake_base + max_wake_words * 64, page);
  const uint64_t stride = round_up(queue_block_bytes(depth, ring_bytes), page);
  const uint64_t heap_base = round_up(qb_base + stride * max_endpoints, heap_alignment);
  if (size < heap_base + heap_alignment)
    throw error(status::bad_arg, "create shared region",
                "CLUMP_SHM_REGION_SIZE=" + std::to_string(size) + " is too small; it needs at least " +
                    std::to_string(heap_base + heap_alignment) + " bytes for " + std::to_string(max_endpoints) +
                    " queue blocks");
  fd_ = ::memfd_create("clump-region", MFD_CLOEXEC);
  if (fd_ < 0)
    throw error(status::resource, "memfd_create", errno_text(errno) + "; clump needs memfd (Linux 3.17 or later)");
  // A memfd has no name to guess; 0600 also keeps /proc/<pid>/fd/ from
  // opening it to anyone but this user.
  (void)::fchmod(fd_, 0600);
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
    int e = errno;
    ::close(fd_);
    throw error(status::resource, "size shared region", errno_text(e) + "; lower CLUMP_SHM_REGION_SIZE");
  }
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd_, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    ::close(fd_);
    throw error(status::resource, "map shared region",
                errno_text(e) + "; the address space is short: lower CLUMP_SHM_REGION_SIZE (now " +
                    std::to_string(size >> 20) + " MiB) or raise ulimit -v");
  }
  base_ = static_cast<std::byte*>(p);
  size_ = size;
  commit(0, qb_base, "region header");
  auto* h = new (base_) region_header{};
  h->magic = region_magic;
  h->version = region_version;
  h->rank = -1;
  h->pid = static_cast<int32_t>(::getpid());
  h->size = size;
  h->max_endpoints = max_endpoints;
  h->depth = depth;
  h->ring_bytes = ring_bytes;
  h->wake_base = wake_base;
  h->queue_block_base = qb_base;
  h->queue_block_stride = stride;
  h->heap_base = heap_base;
  for (uint32_t i = 0; i < max_wake_words; ++i) new (base_ + wake_base + i * 64) std::atomic<uint32_t>(0);
  static_assert(max_wake_words * 64 == wake_area);
  slot_generation_.assign(max_endpoints, 0);
  slot_used_.assign(max_endpoints, false);
  wake_used_.assign(max_wake_words, false);
  heap_top_ = heap_base;
}

region::~region() {
  if (base_) ::munmap(base_, size_);
  if (fd_ >= 0) ::close(fd_);
}

void region::set_rank(int rank) noexcept { reinterpret_cast<region_header*>(base_)->rank = rank; }

uint64_t region::queue_block_offset(uint32_t slot) const noexcept {
  const auto& h = header();
  return h.queue_block_base + h.queue_block_stride * slot;
}

void region::commit(uint64_t offset, size_t bytes, const char* what) {
  // Commit now, so that a shortage is a clear error here rather than a
  // SIGBUS later when a peer first touches the page.
  if (::fallocate(fd_, 0, static_cast<off_t>(offset), static_cast<off_t>(bytes)) != 0) {
    int e = errno;
    throw error(status::resource, std::string("commit shared memory for ") + what,
                "cannot reserve " + std::to_string(bytes >> 10) + " KiB: " + errno_text(e) +
                    "; free memory, run fewer ranks, or shrink CLUMP_SHM_QUEUE_DEPTH / CLUMP_SHM_MEDIUM_RING");
  }
}

uint32_t region::take_endpoint_slot(uint64_t& generation) {
  std::lock_guard lock(mutex_);
  for (uint32_t s = 0; s < max_endpoints_; ++s) {
    if (slot_used_[s]) continue;
    commit(queue_block_offset(s), queue_block_bytes(depth_, ring_bytes_), "an endpoint's queue block");
    slot_used_[s] = true;
    generation = ++slot_generation_[s];
    return s;
  }
  throw error(status::resource, "allocate endpoint",
              "this process already owns " + std::to_string(max_endpoints_) +
                  " endpoints; free one or raise CLUMP_MAX_ENDPOINTS");
}

void region::give_endpoint_slot(uint32_t slot) noexcept {
  std::lock_guard lock(mutex_);
  slot_used_[slot] = false;
}

void region::set_next_generation(uint32_t slot, uint64_t next) noexcept {
  std::lock_guard lock(mutex_);
  if (slot < slot_generation_.size()) slot_generation_[slot] = next - 1;
}

uint32_t region::take_wake_word() {
  std::lock_guard lock(mutex_);
  for (uint32_t i = 0; i < max_wake_words; ++i) {
    if (wake_used_[i]) continue;
    wake_used_[i] = true;
    return static_cast<uint32_t>(header().wake_base + i * 64);
  }
  throw error(status::resource, "allocate bundle",
              "this process already has " + std::to_string(max_wake_words) + " bundles; free one");
}

void region::give_wake_word(uint32_t offset) noexcept {
  std::lock_guard lock(mutex_);
  wake_used_[(offset - header().wake_base) / 64] = false;
}

uint64_t region::allocate(size_t bytes) {
  std::lock_guard lock(mutex_);
  // Checked before any arithmetic on it: a size near 2^64 would wrap the
  // round-up to a few bytes, "succeed", and leave every bounds check open.
  if (bytes > size_ - header().heap_base)
    throw error(status::bad_arg, "allocate segment",
                std::to_string(bytes) + " bytes can never fit in this process's shared region (" +
                    std::to_string(size_ >> 20) + " MiB in all); raise CLUMP_SHM_REGION_SIZE or ask for less");
  const uint64_t need = round_up(bytes ? bytes : 1, page);
  for (size_t i = 0; i < free_.size(); ++i) {
    if (free_[i].bytes < need) continue;
    uint64_t off = free_[i].offset;
    free_[i].offset += need;
    free_[i].bytes -= need;
    if (free_[i].bytes == 0) free_.erase(free_.begin() + static_cast<long>(i));
    return off;
  }
  uint64_t off = round_up(heap_top_, need >= heap_alignment ? heap_alignment : page);
  if (off > size_ || need > size_ - off)
    throw error(status::resource, "allocate segment",
                std::to_string(bytes) + " bytes do not fit in this process's shared region (" +
                    std::to_string(size_ >> 20) + " MiB in all); raise CLUMP_SHM_REGION_SIZE");
  heap_top_ = off + need;
  return off;
}

void region::deallocate(uint64_t offset, size_t bytes) noexcept {
  std::lock_guard lock(mutex_);
  const uint64_t need = round_up(bytes ? bytes : 1, page);
  // Give the pages back to the kernel; the range stays mapped and reads as zero.
  ::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset), static_cast<off_t>(need));
  free_.push_back({offset, need});
}

void region::retire(uint64_t offset, size_t bytes) noexcept {
  const uint64_t need = round_up(bytes ? bytes : 1, page);
  ::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset), static_cast<off_t>(need));
}

bool region::contains(const void* p, size_t n, uint64_t& offset) const noexcept {
  auto* b = static_cast<const std::byte*>(p);
  if (b < base_ || b + n > base_ + size_ || b + n < b) return false;
  offset = static_cast<uint64_t>(b - base_);
  return offset >= header().heap_base;
}

peer_regions::~peer_regions() {
  for (size_t i = 0; i < count_; ++i) {
    std::byte* b = bases_[i].load(std::memory_order_relaxed);
    if (owned_[i] && b) ::munmap(b, geometry_[i].size);
    if (fds_[i] >= 0) ::close(fds_[i]);
  }
}

void peer_regions::reserve(size_t count) {
  count_ = count;
  geometry_ = std::make_unique<region_geometry[]>(count);
  bases_ = std::make_unique<std::atomic<std::byte*>[]>(count);
  fds_ = std::make_unique<int[]>(count);
  owned_ = std::make_unique<bool[]>(count);
  for (size_t i = 0; i < count; ++i) {
    bases_[i].store(nullptr, std::memory_order_relaxed);
    fds_[i] = -1;
    owned_[i] = false;
  }
}

void peer_regions::attach(int rank, int fd, const region* own) {
  auto r = static_cast<size_t>(rank);
  if (r >= count_) {
    if (fd >= 0) ::close(fd);
    throw error(status::bad_arg, "attach shared region", "rank outside the job", rank);
  }
  auto read_geometry = [](const region_header& h) {
    return region_geometry{h.size,         h.max_endpoints,        h.depth,     h.ring_bytes,
                           static_cast<uint32_t>(h.wake_base), h.queue_block_base, h.queue_block_stride,
                           h.heap_base, h.pid};
  };
  if (own && own->header().rank == rank) {
    if (fd >= 0) ::close(fd);
    geometry_[r] = read_geometry(own->header());
    bases_[r].store(own->base(), std::memory_order_release);
    return;
  }
  // The header, read without mapping the region (see the class).
  alignas(region_header) unsigned char bytes[sizeof(region_header)];
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(region_header)) ||
      ::pread(fd, bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) {
    int e = errno;
    ::close(fd);
    throw error(status::resource, "attach shared region", "bad region descriptor: " + errno_text(e), rank);
  }
  const auto* h = reinterpret_cast<const region_header*>(bytes);
  if (h->magic != region_magic || h->version != region_version) {
    ::close(fd);
    throw error(status::resource, "attach shared region",
                "the peer runs another clump version (region layout " + std::to_string(h->version) + ", ours " +
                    std::to_string(region_version) + "); rebuild every program of the job against one clump",
                rank);
  }
  // The layout another process says its region has: checked here, once, so
  // that nothing derived from it can reach outside the mapping.
  const auto size = static_cast<size_t>(st.st_size);
  const region_geometry g = read_geometry(*h);
  auto pow2 = [](uint64_t v) { return v && (v & (v - 1)) == 0; };
  const uint64_t block = queue_block_bytes(g.depth, g.ring_bytes);
  const bool ok = g.size == size && g.max_endpoints >= 1 && g.max_endpoints <= 255 && pow2(g.depth) &&
                  g.depth >= 16 && g.depth <= (1u << 20) && pow2(g.ring_bytes) && g.ring_bytes >= 2 * cache_line &&
                  g.ring_bytes <= (1u << 30) && g.wake_base >= sizeof(region_header) &&
                  g.wake_base % cache_line == 0 && g.wake_base + wake_area <= g.queue_block_base &&
                  g.queue_block_stride >= block && g.queue_block_base % cache_line == 0 &&
                  g.queue_block_stride % cache_line == 0 && g.queue_block_stride < size &&
                  g.queue_block_base + g.queue_block_stride * g.max_endpoints <= g.heap_base && g.heap_base <= size;
  if (!ok) {
    ::close(fd);
    throw error(status::resource, "attach shared region",
                "the peer's region header describes a layout that does not fit its region (corrupt, or not "
                "clump's); refusing it",
                rank);
  }
  std::lock_guard lock(mutex_);
  if (fds_[r] >= 0) ::close(fds_[r]);
  fds_[r] = fd;
  geometry_[r] = g;
}

std::byte* peer_regions::map(int rank) {
  auto r = static_cast<size_t>(rank);
  if (r >= count_) return nullptr;
  if (std::byte* b = bases_[r].load(std::memory_order_acquire)) return b;
  std::lock_guard lock(mutex_);
  if (std::byte* b = bases_[r].load(std::memory_order_relaxed)) return b;
  if (fds_[r] < 0) return nullptr;
  // The size checked at attach: a region never changes size (the owner sizes
  // it once), and a mapping never reaches past what was checked.
  void* p = ::mmap(nullptr, geometry_[r].size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fds_[r], 0);
  if (p == MAP_FAILED)
    throw error(status::resource, "map a peer's shared region",
                errno_text(errno) + "; the address space is short: lower CLUMP_SHM_REGION_SIZE", rank);
  ::close(fds_[r]);
  fds_[r] = -1;
  owned_[r] = true;
  mapped_.fetch_add(1, std::memory_order_relaxed);
  bases_[r].store(static_cast<std::byte*>(p), std::memory_order_release);
  return static_cast<std::byte*>(p);
}

}  // namespace clump::shm
