// Endpoint setup: allocation, names, tags, translation table, segment,
// handler table, statistics. The data path is in send.cpp, the transports
// (via_shm, via_net) and dispatch.cpp.

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>

#include "am/endpoint_impl.hpp"
#include "am/returns.hpp"
#include "am/send.hpp"
#include "core/log.hpp"
#include "core/settings.hpp"
#include "shm/queue.hpp"
#include "shm/wake.hpp"

namespace clump {

using namespace clump::detail;

size_t max_medium() noexcept { return core::settings().max_medium; }

const char* to_string(return_reason r) noexcept {
  switch (r) {
    case return_reason::bad_args: return "bad arguments (the handler does not take this message's arguments or payload)";
    case return_reason::bad_entry: return "bad translation entry (not mapped)";
    case return_reason::bad_tag: return "bad tag (the destination does not accept the tag it was sent with)";
    case return_reason::bad_handler: return "bad handler (none at that index, or of the other role)";
    case return_reason::bad_segment_offset: return "bad segment offset (outside the destination segment)";
    case return_reason::bad_length: return "bad length";
    case return_reason::bad_endpoint: return "bad endpoint (it no longer exists)";
    case return_reason::congestion: return "congestion";
    case return_reason::unreachable: return "unreachable (the destination's process is gone)";
    case return_reason::reply_rejected: return "reply rejected";
  }
  return "unknown reason";
}

endpoint::endpoint(bundle& b) : impl_(new endpoint_impl) {
  endpoint_impl& e = *impl_;
  e.self = this;
  e.proc = &am::process::get();
  e.bundle = b.impl();
  e.parallel = b.mode() == bundle_mode::parallel;
  e.max_medium = core::settings().max_medium;
  e.cma_max = core::settings().cma_max;
  e.cma_split = core::settings().cma_split;
  shm::region& reg = e.proc->region();
  try {
    e.slot = reg.take_endpoint_slot(e.generation);
  } catch (...) {
    delete impl_;
    throw;
  }
  e.id = am::source_id(e.proc->rank(), e.slot);
  std::byte* block = reg.queue_block(e.slot);
  shm::init_queue_block(block, reg.depth(), reg.ring_bytes(), e.generation);
  auto* h = reinterpret_cast<shm::queue_block_header*>(block);
  h->wake_offset.store(e.bundle->wake_offset, std::memory_order_relaxed);
  shm::write_segment(*h, shm::private_segment, 0);
  e.own = shm::view_queue_block(block, reg.base(), reg.depth(), reg.ring_bytes(),
                                static_cast<uint32_t>(reg.header().wake_base));
  // The queues continue from where this slot's previous endpoint left them.
  e.request_head.store(e.own.request.control->head.load(std::memory_order_relaxed), std::memory_order_relaxed);
  e.reply_head.store(e.own.reply.control->head.load(std::memory_order_relaxed), std::memory_order_relaxed);
  e.translations.resize(256);
  std::lock_guard lock(e.bundle->mutex);
  auto eps = e.bundle->endpoints.load(std::memory_order_relaxed)->eps;
  eps.push_back(impl_);
  e.bundle->set(std::move(eps));
}

/// Releases segment memory this endpoint owned, once no process of the node
/// can still be writing into it.
static void release_segment(endpoint_impl& e, uint64_t offset, size_t length) noexcept {
  if (!e.proc->is_leaving() && e.proc->quiesce_copies())
    e.proc->region().deallocate(offset, length);
  else
    e.proc->region().retire(offset, length);
}

endpoint::~endpoint() {
  endpoint_impl& e = *impl_;
  {
    std::lock_guard lock(e.bundle->mutex);
    auto eps = e.bundle->endpoints.load(std::memory_order_relaxed)->eps;
    eps.erase(std::remove(eps.begin(), eps.end(), impl_), eps.end());
    e.bundle->set(std::move(eps));
  }
  e.bundle->quiesce();
  e.proc->segment_changed(e.slot, nullptr, 0);  // no fragment from the network lands any more
  // Dead, from here on: senders that claim from now see it and return their
  // messages themselves; what is already in the queues goes back now.
  // seq_cst: the owner's half of the handshake in via_shm/send.cpp's try_enqueue.
  e.own.header->state.store(e.generation << 1, std::memory_order_seq_cst);
  drain_freed(e);
  // The returns the drain could not send at once (a full queue) outlive the
  // endpoint: later polls of any bundle of the process send them.
  adopt_returns(e);
  if (e.segment_owned) release_segment(e, e.segment_offset, e.segment_length);
  else if (e.segment_offset == shm::private_segment && e.segment_length) e.proc->quiesce_copies();  // see publish_segment
  e.proc->region().give_endpoint_slot(e.slot);
  delete impl_;
}

endpoint_name endpoint::name() const noexcept {
  return {impl_->proc->job_id(), static_cast<uint32_t>(impl_->proc->rank()), impl_->slot, impl_->generation};
}

tag_t endpoint::tag() const noexcept { return impl_->own.header->tag.load(std::memory_order_relaxed); }

void endpoint::set_tag(tag_t t) noexcept {
  // Relaxed: senders read it as a hint and the receiver checks on arrival.
  impl_->own.header->tag.store(t, std::memory_order_relaxed);
}

bundle& endpoint::owner() const noexcept { return *impl_->bundle->owner; }

void endpoint::move_to(bundle& b) {
  endpoint_impl& e = *impl_;
  if (b.impl() == e.bundle) return;
  if ((b.mode() == bundle_mode::parallel) != e.parallel)
    throw error(status::bad_arg, "move endpoint", "both bundles must have the same mode (sequential or parallel)");
  {
    std::lock_guard lock(e.bundle->mutex);
    auto eps = e.bundle->endpoints.load(std::memory_order_relaxed)->eps;
    eps.erase(std::remove(eps.begin(), eps.end(), impl_), eps.end());
    e.bundle->set(std::move(eps));
  }
  bundle_impl* old = e.bundle;
  old->quiesce();
  e.bundle = b.impl();
  e.own.header->wake_offset.store(e.bundle->wake_offset, std::memory_order_relaxed);
  {
    std::lock_guard lock(e.bundle->mutex);
    auto eps = e.bundle->endpoints.load(std::memory_order_relaxed)->eps;
    eps.push_back(impl_);
    e.bundle->set(std::move(eps));
  }
  // A sender may have looked at the old wake word: wake its sleeper so that
  // nothing waits for the 100 ms backstop.
  shm::wake(*old->wake);
}

// ---- translation table -----------------------------------------------------

int endpoint::translation_count() const noexcept { return static_cast<int>(impl_->translations.size()); }

void endpoint::set_translation_count(int n) {
  if (n < 1 || n > 65535)
    throw error(status::bad_arg, "set translation count", "must be between 1 and 65535, not " + std::to_string(n));
  auto& t = impl_->translations;
  for (size_t i = static_cast<size_t>(n); i < t.size(); ++i)
    if (t[i].used)
      throw error(status::in_use, "set translation count",
                  "entry " + std::to_string(i) + " is still mapped; unmap it first");
  t.resize(static_cast<size_t>(n));
}

void endpoint::map(int index, const endpoint_name& name, tag_t tag) {
  endpoint_impl& e = *impl_;
  if (index < 0 || static_cast<size_t>(index) >= e.translations.size())
    throw error(status::bad_arg, "map", "translation index " + std::to_string(index) + " is outside 0.." +
                                            std::to_string(e.translations.size() - 1));
  if (name.job != e.proc->job_id())
    throw error(status::bad_arg, "map", "the endpoint name belongs to another job");
  // Checked now, found on the first send (remote_of).
  const bool exists = name.slot < 256 && name.rank < static_cast<uint32_t>(e.proc->size()) &&
                      e.proc->has_endpoint(static_cast<int>(name.rank), name.slot);
  if (!exists || name.generation == 0)
    throw error(status::bad_arg, "map",
                "no endpoint " + std::to_string(name.slot) + " (generation " + std::to_string(name.generation) +
                    ") on rank " + std::to_string(name.rank) + " in this job of " + std::to_string(e.proc->size()));
  translation& t = e.translations[static_cast<size_t>(index)];
  if (t.used) throw error(status::in_use, "map", "translation index " + std::to_string(index) + " is in use");
  t.used = true;
  t.name = name;
  t.tag = tag;
  t.remote.store(nullptr, std::memory_order_relaxed);
  t.state = shm::alive_state(name.generation);
}

int endpoint::map_any(const endpoint_name& name, tag_t tag) {
  auto& t = impl_->translations;
  for (size_t i = 0; i < t.size(); ++i)
    if (!t[i].used) {
      map(static_cast<int>(i), name, tag);
      return static_cast<int>(i);
    }
  throw error(status::resource, "map", "every translation entry is in use; raise the count first");
}

namespace detail {
am::remote_endpoint* find_remote(const endpoint_impl& e, const translation& t) noexcept {
  am::remote_endpoint* r = e.proc->remote(am::source_id(static_cast<int>(t.name.rank), t.name.slot));
  if (r) t.remote.store(r, std::memory_order_release);
  return r;
}
}  // namespace detail

void endpoint::unmap(int index) {
  auto& t = impl_->translations;
  if (index < 0 || static_cast<size_t>(index) >= t.size() || !t[static_cast<size_t>(index)].used)
    throw error(status::bad_arg, "unmap", "translation index " + std::to_string(index) + " is not mapped");
  t[static_cast<size_t>(index)] = translation{};
}

bool endpoint::is_mapped(int index) const noexcept {
  auto& t = impl_->translations;
  return index >= 0 && static_cast<size_t>(index) < t.size() && t[static_cast<size_t>(index)].used;
}

endpoint_name endpoint::translation_name(int index) const {
  if (!is_mapped(index)) throw error(status::bad_arg, "translation name", "index " + std::to_string(index) + " is not mapped");
  return impl_->translations[static_cast<size_t>(index)].name;
}

tag_t endpoint::translation_tag(int index) const {
  if (!is_mapped(index)) throw error(status::bad_arg, "translation tag", "index " + std::to_string(index) + " is not mapped");
  return impl_->translations[static_cast<size_t>(index)].tag;
}

void endpoint::set_translation_tag(int index, tag_t tag) {
  if (!is_mapped(index))
    throw error(status::bad_arg, "set translation tag", "index " + std::to_string(index) + " is not mapped");
  impl_->translations[static_cast<size_t>(index)].tag = tag;
}

// ---- segment ---------------------------------------------------------------

/// Where senders of the node find the endpoint's segment: its offset in our
/// region, or, for a private one, its address here (for cross-memory attach).
static void write_own_segment(endpoint_impl& e) noexcept {
  const bool is_private = e.segment_offset == shm::private_segment;
  shm::write_segment(*e.own.header, e.segment_offset, e.segment_length,
                     is_private ? reinterpret_cast<uint64_t>(e.segment) : 0);
}

/// Publishes the endpoint's (new) segment; then the old one, if the endpoint
/// owned it, is released once nobody can still be writing into it: a
/// segment that is replaced is never written after it is released. The
/// program's own memory (a private segment, which other processes of the
/// node write into by cross-memory attach) is likewise not written once this
/// returns: the program may free it.
static void publish_segment(endpoint_impl& e, bool owned_before, uint64_t old_offset, size_t old_length) noexcept {
  write_own_segment(e);
  e.proc->segment_changed(e.slot, e.segment, e.segment_length);  // for long messages from the network
  if (owned_before) release_segment(e, old_offset, old_length);
  else if (old_offset == shm::private_segment && old_length) e.proc->quiesce_copies();
}

std::span<std::byte> endpoint::allocate_segment(size_t bytes) {
  endpoint_impl& e = *impl_;
  shm::region& reg = e.proc->region();
  const uint64_t off = reg.allocate(bytes);  // throws for a size that does not fit
  const bool owned_before = e.segment_owned;
  const uint64_t old_offset = e.segment_offset;
  const size_t old_length = e.segment_length;
  e.segment = reg.base() + off;
  e.segment_length = bytes;
  e.segment_offset = off;
  e.segment_owned = true;
  publish_segment(e, owned_before, old_offset, old_length);
  return {e.segment, bytes};
}

void endpoint::set_segment(void* address, size_t bytes) {
  endpoint_impl& e = *impl_;
  if (!address && bytes) throw error(status::bad_arg, "set segment", "null address with a non-zero length");
  if (address && bytes > UINTPTR_MAX - reinterpret_cast<uintptr_t>(address))
    throw error(status::bad_arg, "set segment",
                std::to_string(bytes) + " bytes from that address run past the end of the address space");
  shm::region& reg = e.proc->region();
  const bool owned_before = e.segment_owned;
  const uint64_t old_offset = e.segment_offset;
  const size_t old_length = e.segment_length;
  e.segment_owned = false;
  e.segment = static_cast<std::byte*>(address);
  e.segment_length = bytes;
  uint64_t off = 0;
  e.segment_offset = reg.contains(address, bytes, off) ? off : shm::private_segment;
  publish_segment(e, owned_before, old_offset, old_length);
}

std::span<std::byte> endpoint::segment() const noexcept { return {impl_->segment, impl_->segment_length}; }

std::span<std::byte> endpoint::mapped_segment(int dest) const noexcept {
  const endpoint_impl& e = *impl_;
  if (dest < 0 || static_cast<size_t>(dest) >= e.translations.size()) return {};
  const translation& t = e.translations[static_cast<size_t>(dest)];
  const am::remote_endpoint* to = remote_of(e, t);
  return to ? to->via->mapped_segment(*to) : std::span<std::byte>{};
}

void endpoint::wake(int dest) noexcept {
  const endpoint_impl& e = *impl_;
  if (dest < 0 || static_cast<size_t>(dest) >= e.translations.size()) return;
  const translation& t = e.translations[static_cast<size_t>(dest)];
  const am::remote_endpoint* to = remote_of(e, t);
  if (to) to->via->wake(*to);
}

// ---- handlers --------------------------------------------------------------

handler_index endpoint::set_raw_handler(int index, raw_handler fn, void* ctx, role r, int nargs, int payload,
                                        std::unique_ptr<holder_base> owner) {
  endpoint_impl& e = *impl_;
  if (index < 0) {
    for (int i = 1; i < static_cast<int>(max_handlers); ++i)
      if (!e.handlers[static_cast<size_t>(i)].fn) {
        index = i;
        break;
      }
    if (index < 0) throw error(status::resource, "register handler", "all 255 handler indices are taken");
  }
  if (index >= static_cast<int>(max_handlers))
    throw error(status::bad_arg, "register handler", "index " + std::to_string(index) + " is outside 0..255");
  auto i = static_cast<size_t>(index);
  e.handlers[i] = handler_entry{fn, ctx, r, static_cast<int16_t>(nargs), static_cast<int8_t>(payload)};
  e.owners[i] = std::move(owner);
  return static_cast<handler_index>(index);
}

void endpoint::clear_handler(handler_index index) noexcept {
  impl_->handlers[index] = handler_entry{};
  impl_->owners[index].reset();
}

bool endpoint::has_handler(handler_index index) const noexcept { return impl_->handlers[index].fn != nullptr; }

void endpoint::on_returned(std::function<void(const returned_message&)> f) {
  impl_->handlers[0] = handler_entry{};
  impl_->on_returned = std::move(f);
}

// ---- statistics ------------------------------------------------------------

endpoint_stats endpoint::stats() const noexcept {
  const endpoint_impl& e = *impl_;
  endpoint_stats s{};
  for (int k = 0; k < 3; ++k) {
    s.requests_sent[k] = e.requests_sent[k].get();
    s.replies_sent[k] = e.replies_sent[k].get();
    s.requests_received[k] = e.requests_received[k].get();
    s.replies_received[k] = e.replies_received[k].get();
    s.request_bytes_sent[k] = e.request_bytes_sent[k].get();
    s.reply_bytes_sent[k] = e.reply_bytes_sent[k].get();
    s.bytes_sent += s.request_bytes_sent[k] + s.reply_bytes_sent[k];
  }
  s.returned = e.returned.get();
  s.bytes_received = e.bytes_received.get();
  s.send_waits = e.send_waits.get();
  s.corrupt = e.corrupt.get();
  return s;
}

void endpoint::reset_stats() noexcept {
  endpoint_impl& e = *impl_;
  for (int k = 0; k < 3; ++k) {
    e.requests_sent[k].v.store(0, std::memory_order_relaxed);
    e.replies_sent[k].v.store(0, std::memory_order_relaxed);
    e.requests_received[k].v.store(0, std::memory_order_relaxed);
    e.replies_received[k].v.store(0, std::memory_order_relaxed);
    e.request_bytes_sent[k].v.store(0, std::memory_order_relaxed);
    e.reply_bytes_sent[k].v.store(0, std::memory_order_relaxed);
  }
  for (counter* c : {&e.returned, &e.bytes_received, &e.send_waits, &e.corrupt})
    c->v.store(0, std::memory_order_relaxed);
}

// ---- tokens ----------------------------------------------------------------

endpoint_name token_base::source() const noexcept { return name_of(*ep_, source_, source_gen_); }

int token_base::source_index() const noexcept {
  const auto& t = ep_->translations;
  const auto rank = static_cast<uint32_t>(am::source_rank(source_));
  const uint32_t slot = am::source_slot(source_);
  auto same = [&](const translation& x) {
    return x.used && x.name.rank == rank && x.name.slot == slot && shm::gen32(x.name.generation) == source_gen_;
  };
  if (rank < t.size() && same(t[rank])) return static_cast<int>(rank);  // the SPMD layout: index i is rank i
  for (size_t i = 0; i < t.size(); ++i)
    if (same(t[i])) return static_cast<int>(i);
  return -1;
}

endpoint& token_base::destination() const noexcept { return *ep_->self; }

}  // namespace clump
