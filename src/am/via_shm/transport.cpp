#include "am/via_shm/transport.hpp"

#include "am/process.hpp"
#include "am/send.hpp"
#include "am/via_shm/short.hpp"
#include "shm/queue.hpp"
#include "shm/wake.hpp"

namespace clump::am {

bool shm_transport::may_exist(int rank, uint32_t slot) const noexcept {
  return p_.peers().has(rank) && slot < p_.peers().geometry(rank).max_endpoints;
}

std::unique_ptr<remote_endpoint> shm_transport::reach(int rank, uint32_t slot) noexcept {
  std::byte* base = p_.map_peer(rank, "reaching a process of this node");  // on first use (shm::peer_regions)
  if (!base) return nullptr;
  // The layout as checked when the region was read, not as its header says now.
  const shm::region_geometry& g = p_.peers().geometry(rank);
  if (slot >= g.max_endpoints) return nullptr;
  auto e = std::make_unique<remote_endpoint>();
  e->kind = transport_kind::shm;
  e->via = this;
  e->view = shm::view_queue_block(base + g.queue_block_base + g.queue_block_stride * slot, base, g.depth,
                                  g.ring_bytes, g.wake_base);
  e->region_base = base;
  e->region_size = g.size;
  e->pid = g.pid;
  e->rank = rank;
  e->slot = slot;
  return e;
}

void shm_transport::describe(const remote_endpoint& to, tag_t& tag, uint64_t& state) const noexcept {
  detail::describe_shm(to, tag, state);
}

std::span<std::byte> shm_transport::mapped_segment(const remote_endpoint& to) const noexcept {
  if (!to.region_base) return {};
  uint64_t offset = 0, length = 0;
  if (!shm::read_segment(*to.view.header, offset, length)) return {};  // changing for long: died halfway?
  if (offset == shm::private_segment || length == 0 || offset > to.region_size || length > to.region_size - offset)
    return {};
  return {to.region_base + offset, static_cast<size_t>(length)};
}

void shm_transport::wake(const remote_endpoint& to) noexcept {
  std::atomic<uint32_t>& w = shm::wake_word(to.view.request);
  // seq_cst: the writer's half of the handshake with a sleeper that checks
  // its `ready` after announcing itself (bundle::sleep_until_message).
  if (w.load(std::memory_order_seq_cst) & shm::sleeper_mask) shm::wake(w);
}

returned_sent shm_transport::send_returned(detail::endpoint_impl* /*from*/, uint32_t from_id, uint64_t from_gen,
                                           remote_endpoint& to, const message& m, uint32_t to_gen) noexcept {
  // Relaxed: see queue_block.hpp. A sender that is gone gets nothing back.
  const uint64_t state = to.view.header->state.load(std::memory_order_relaxed);
  if (!shm::is_alive(state) || shm::gen32(shm::generation_of(state)) != to_gen) [[unlikely]]
    return returned_sent::sender_gone;
  switch (detail::inject(to, true, from_id, shm::gen32(from_gen), shm::packet_kind::returned, m.handler, m.args,
                         m.nargs, static_cast<uint32_t>(m.length), m.offset, m.tag, m.aux, nullptr, 0, state)) {
    case detail::inject_result::sent: return returned_sent::sent;
    case detail::inject_result::full: return returned_sent::full;
    case detail::inject_result::gone: break;
  }
  return returned_sent::freed;
}

}  // namespace clump::am
