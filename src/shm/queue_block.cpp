#include "shm/queue_block.hpp"


namespace clump::shm {

void init_queue_block(std::byte* block, uint32_t depth, size_t ring_bytes, uint64_t generation) noexcept {
  // Field by field, never constructed over: other threads of this process
  // (the network's service thread) and other processes may be reading the
  // atomics of a slot that is being reused (a fresh region is zero, a valid
  // value for each of them, as for every header a peer maps).
  auto* h = reinterpret_cast<queue_block_header*>(block);
  h->depth = depth;
  h->ring_bytes = static_cast<uint32_t>(ring_bytes);
  // Relaxed: the release of `state` below publishes these.
  h->tag.store(0, std::memory_order_relaxed);
  h->segment_offset.store(0, std::memory_order_relaxed);
  h->segment_length.store(0, std::memory_order_relaxed);
  h->segment_address.store(0, std::memory_order_relaxed);
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
  h->state.store(alive_state(generation), std::memory_order_release);
}

queue_block_view view_queue_block(std::byte* block, std::byte* region_base, uint32_t depth, size_t ring_bytes,
                                  uint32_t wake_base) noexcept {
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
    r->wake_base = wake_base;
    q += queue_bytes(depth, ring_bytes);
  }
  return view;
}

}  // namespace clump::shm
