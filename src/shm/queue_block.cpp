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
  // The counters are never reset: a slot's new endpoint starts its queues
  // where the old one's ended (head = tail, dropping what was left), so the
  // head a sender cached for the old endpoint is never ahead of the new one's
  // and the lines' seq words keep meaning what they meant. A fresh region is
  // zero (committed by fallocate): every counter and seq starts at 0, and a
  // line with seq 0 is never the one expected (index + 1 >= 1).
  std::byte* q = block + 2 * cache_line;
  for (int i = 0; i < 2; ++i) {
    auto* c = reinterpret_cast<queue_control*>(q);
    // Relaxed: nobody consumes this queue yet; the release of `state` below publishes it.
    c->head.store(c->tail.load(std::memory_order_relaxed), std::memory_order_relaxed);
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
