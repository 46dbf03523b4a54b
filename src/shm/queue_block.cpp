#include "shm/queue_block.hpp"

#include <new>

namespace clump::shm {

void init_queue_block(std::byte* block, uint32_t depth, size_t ring_bytes, uint32_t generation) noexcept {
  auto* h = new (block) queue_block_header{};
  h->depth = depth;
  h->ring_bytes = static_cast<uint32_t>(ring_bytes);
  h->tag.store(0, std::memory_order_relaxed);
  h->segment_offset.store(0, std::memory_order_relaxed);
  h->segment_length.store(0, std::memory_order_relaxed);
  h->wake_offset.store(0, std::memory_order_relaxed);
  std::byte* q = block + 2 * cache_line;
  for (int i = 0; i < 2; ++i) {
    auto* c = new (q) queue_control{};
    c->tail.store(0, std::memory_order_relaxed);
    c->head.store(0, std::memory_order_relaxed);
    auto* lines = reinterpret_cast<packet*>(q + sizeof(queue_control));
    for (uint32_t l = 0; l < depth; ++l) {
      // A fresh line must not look published for index l: seq l+1 is what the
      // receiver expects on the first lap, so start from 0 (never expected: l+1 >= 1).
      new (&lines[l].seq) std::atomic<uint32_t>(0);
    }
    q += queue_bytes(depth, ring_bytes);
  }
  h->magic = queue_block_magic;
  h->version = queue_block_version;
  // Release: a process that sees the endpoint alive sees it initialised.
  h->state.store((generation << 1) | 1u, std::memory_order_release);
}

queue_block_view view_queue_block(std::byte* block, std::byte* region_base, uint32_t depth,
                                  size_t ring_bytes) noexcept {
  queue_block_view view;
  view.header = reinterpret_cast<queue_block_header*>(block);
  std::byte* q = block + 2 * cache_line;
  for (queue_ref* r : {&view.request, &view.reply}) {
    r->control = reinterpret_cast<queue_control*>(q);
    r->lines = reinterpret_cast<packet*>(q + sizeof(queue_control));
    r->ring = q + sizeof(queue_control) + static_cast<size_t>(depth) * cache_line;
    r->depth = depth;
    r->ring_lines = static_cast<uint32_t>(ring_bytes / cache_line);
    r->region_base = region_base;
    r->wake_offset = &view.header->wake_offset;
    q += queue_bytes(depth, ring_bytes);
  }
  return view;
}

}  // namespace clump::shm
