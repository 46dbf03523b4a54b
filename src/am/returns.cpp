#include "am/returns.hpp"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "am/transport.hpp"
#include "am/send.hpp"
#include "core/log.hpp"
#include "shm/queue_block.hpp"

namespace clump::detail {

using shm::packet_kind;

// ---- handler 0 ----------------------------------------------------------------

/// Runs handler 0 (C handler, C++ callback, or the default that aborts).
[[gnu::cold]] void run_returned(endpoint_impl& e, const returned_message& m) noexcept {
  e.returned.add(1, e.parallel);
  const handler_entry& h0 = e.handlers[0];
  ++handler_depth;
  if (h0.fn) {
    token t;
    t.ep_ = &e;
    // The token names the endpoint the message was going to.
    t.source_ = am::source_id(static_cast<int>(m.destination.rank), m.destination.slot);
    t.source_gen_ = shm::gen32(m.destination.generation);
    t.tag_ = m.tag;
    t.returned_ = &m;
    h0.fn(h0.ctx, t, m.args.data(), static_cast<unsigned>(m.args.size()), nullptr, 0);
  } else if (e.on_returned) {
    e.on_returned(m);
  } else if (m.op >= message_op::reply) {
    // A reply that came back to an endpoint without handler 0: its
    // requester is gone or refused it; the replier has nothing left to do.
    core::log_warning("a reply to handler %u (%zu payload bytes) came back undelivered: %s; dropped (no handler 0 "
                      "is set on this endpoint)",
                      m.handler, m.length, to_string(m.reason));
  } else {
    core::fatal("a message to handler %u (%zu payload bytes) came back undelivered: %s; no handler 0 is set on "
                "this endpoint (set one with endpoint::on_returned or AM_SetHandler(ep, 0, ...) to handle it)",
                m.handler, m.length, to_string(m.reason));
  }
  --handler_depth;
}

// ---- found at the sender: kept until its next poll ------------------------------

void return_locally(endpoint_impl& e, return_reason why, message_op op, handler_index h, const uint32_t* args,
                    unsigned nargs, size_t length, uint64_t offset, const endpoint_name& dest, tag_t tag) noexcept {
  pending_return r{};
  r.reason = why;
  r.op = op;
  r.handler = h;
  r.nargs = static_cast<uint8_t>(std::min<unsigned>(nargs, max_args));
  if (args) std::memcpy(r.args, args, r.nargs * sizeof(uint32_t));
  r.length = length;
  r.offset = offset;
  r.destination = dest;
  r.tag = tag;
  r.to_gen = shm::gen32(e.generation);
  std::lock_guard lock(e.returns_mutex);
  e.local_returns.push_back(r);
  // Relaxed: the mutex orders the list; the flag only prompts the next poll.
  e.has_returns.store(true, std::memory_order_relaxed);
}

unsigned deliver_returns(endpoint_impl& e) noexcept {
  std::vector<pending_return> local;
  {
    std::lock_guard lock(e.returns_mutex);
    local.swap(e.local_returns);
    auto keep = std::remove_if(e.outbox.begin(), e.outbox.end(),
                               [&](const endpoint_impl::deferred& d) { return try_send_return(e, d.to, d.r); });
    e.outbox.erase(keep, e.outbox.end());
    e.has_outbox.store(!e.outbox.empty(), std::memory_order_relaxed);
    e.has_returns.store(false, std::memory_order_relaxed);
  }
  for (const pending_return& r : local) {
    returned_message m{r.reason, r.op, r.handler, std::span<const uint32_t>(r.args, r.nargs), r.length, r.offset,
                       r.destination, r.tag};
    run_returned(e, m);
  }
  return static_cast<unsigned>(local.size());
}

[[gnu::cold]] endpoint_name destination_name(const endpoint_impl& from, const am::remote_endpoint& to,
                                             const endpoint_name* known, uint64_t expect) noexcept {
  return known ? *known
               : name_of(from, am::source_id(to.rank, to.slot), shm::gen32(shm::generation_of(expect)));
}

// ---- refused by the receiver: sent back to the sender -------------------------

namespace {
endpoint_name own_name(const endpoint_impl& e) noexcept {
  return {e.proc->job_id(), static_cast<uint32_t>(e.proc->rank()), e.slot, e.generation};
}
}  // namespace

/// Sends the packet back to its sender's handler 0, a request or a reply
/// (AM-2: handler 0 gets AM_REPLY_* opcodes too).
[[gnu::cold]] void reject(endpoint_impl& e, const shm::packet& p, const uint32_t* args, unsigned nargs,
                          uint64_t offset, return_reason why) noexcept {
  if (p.kind == packet_kind::returned) {
    core::log_error("dropped a returned message that could not be delivered either (%s)", to_string(why));
    return;
  }
  if (p.kind == packet_kind::long_piece || p.kind == packet_kind::long_piece_reply) return;  // the last piece reports
  pending_return r{};
  r.reason = why;
  r.op = op_of(p.kind);
  r.handler = p.handler;
  r.nargs = static_cast<uint8_t>(nargs);
  std::memcpy(r.args, args, nargs * sizeof(uint32_t));
  r.length = p.length;
  r.offset = offset;
  r.destination = own_name(e);
  r.tag = p.tag;
  r.to_gen = p.src_gen;
  if (!e.proc->remote(p.source)) {
    core::log_error("dropped a message from unknown endpoint %u (rank %d): %s", p.source, am::source_rank(p.source),
                    to_string(why));
    return;
  }
  send_return(e, p.source, r);
}

namespace {

/// Sends returned message `r` as endpoint `from_id` (generation `from_gen`)
/// back to endpoint `to_id`, once, without waiting. True when it is sent or
/// can never be (its sender is gone: dropped with a warning); false when the
/// queue or window is full. `from` may be null: an endpoint freed since
/// (see adopt_returns).
bool return_once(am::process& proc, endpoint_impl* from, uint32_t from_id, uint64_t from_gen, uint32_t to_id,
                 const pending_return& r) noexcept {
  am::remote_endpoint* to = proc.remote(to_id);
  if (!to) return true;  // nowhere to send it; dropped (logged by the caller)
  auto dropped = [&](const char* why) {
    core::log_warning("a message returned to rank %d (%s) was dropped: %s", to->rank, to_string(r.reason), why);
    return true;
  };
  // Relaxed: see remote_endpoint::gone. A sender that is gone gets nothing back.
  if (to->gone.load(std::memory_order_relaxed)) [[unlikely]]
    return dropped("its sender no longer exists");
  am::message m;
  m.kind = packet_kind::returned;
  m.handler = r.handler;
  m.args = r.args;
  m.nargs = r.nargs;
  m.length = r.length;
  m.offset = r.offset;
  m.aux = returned_aux(r.reason, r.op);
  m.tag = r.tag;  // the tag the message was sent with (returned messages are not tag-checked)
  switch (to->via->send_returned(from, from_id, from_gen, *to, m, r.to_gen)) {
    case am::returned_sent::sent: return true;
    case am::returned_sent::full: return false;
    case am::returned_sent::sender_gone: return dropped("its sender no longer exists");
    case am::returned_sent::unreachable: return dropped("its process is unreachable");
    case am::returned_sent::freed: break;
  }
  return dropped("its sender was freed meanwhile");
}

// Returns that an endpoint freed with a full outbox left behind: the process
// keeps them and later polls of any bundle send them (adopt_returns).
struct orphan {
  uint32_t from_id;
  uint64_t from_gen;
  uint32_t to;
  pending_return r;
};
std::mutex orphans_mutex;
std::vector<orphan> orphans;

}  // namespace

std::atomic<bool> orphans_waiting{false};

bool try_send_return(endpoint_impl& from, uint32_t to_id, const pending_return& r) noexcept {
  return return_once(*from.proc, &from, from.id, from.generation, to_id, r);
}

void send_return(endpoint_impl& from, uint32_t to, const pending_return& r) noexcept {
  if (try_send_return(from, to, r)) return;
  std::lock_guard lock(from.returns_mutex);
  from.outbox.push_back({to, r});
  // Relaxed: the mutex orders the outbox; the flag only prompts a later poll.
  from.has_outbox.store(true, std::memory_order_relaxed);
}

void adopt_returns(endpoint_impl& e) noexcept {
  std::lock_guard mine(e.returns_mutex);
  if (e.outbox.empty()) return;
  std::lock_guard lock(orphans_mutex);
  for (const endpoint_impl::deferred& d : e.outbox) orphans.push_back({e.id, e.generation, d.to, d.r});
  e.outbox.clear();
  // Relaxed: the mutex orders the list; the flag only prompts later polls.
  orphans_waiting.store(true, std::memory_order_relaxed);
}

void retry_orphans(am::process& proc) noexcept {
  std::unique_lock lock(orphans_mutex, std::try_to_lock);
  if (!lock.owns_lock()) return;  // another thread is at it
  std::erase_if(orphans, [&](const orphan& o) { return return_once(proc, nullptr, o.from_id, o.from_gen, o.to, o.r); });
  orphans_waiting.store(!orphans.empty(), std::memory_order_relaxed);
}

// ---- the network's two ways back ---------------------------------------------

namespace {

const char* network_what(net::msg_kind k) noexcept {
  return k == net::msg_kind::returned ? "returned message" : net::is_request(k) ? "request" : "reply";
}

}  // namespace

bool refuse_from_network(int peer, const net::message_header& m, return_reason why,
                         net::message_header& back) noexcept {
  const auto kind = static_cast<net::msg_kind>(m.kind);
  if (kind == net::msg_kind::returned) {
    core::log_warning("a %s from rank %d to endpoint %u was dropped: %s", network_what(kind), peer, m.dst_slot,
                      to_string(why));
    return false;
  }
  // A request or a reply goes back, as AM-2 says.
  back = net::back_to_sender(m, net::msg_kind::returned);
  back.tag = m.tag;
  back.offset = net::is_long(kind) || kind == net::msg_kind::get_request ? m.offset : 0;
  back.aux = returned_aux(why, op_of(static_cast<shm::packet_kind>(m.kind)));
  return true;
}

bool give_back_unreachable(am::process& p, int peer, const net::message_header& m, const uint32_t* args) noexcept {
  const auto kind = static_cast<net::msg_kind>(m.kind);
  if (kind == net::msg_kind::returned) {
    core::log_warning("a %s to rank %d was dropped: that process is unreachable", network_what(kind), peer);
    return true;
  }
  // A sender freed since gets nothing back.
  uint64_t state = 0;
  am::remote_endpoint* own = am::meant(p, m.src_slot, m.src_gen, state);
  if (!own) return true;
  const uint64_t aux = returned_aux(return_reason::unreachable, op_of(static_cast<shm::packet_kind>(m.kind)));
  const uint64_t offset = net::is_long(kind) || kind == net::msg_kind::get_request ? m.offset : 0;
  return inject(*own, true, am::source_id(peer, m.dst_slot), shm::gen32(m.dst_gen), shm::packet_kind::returned,
                m.handler, args, m.nargs, m.length, offset, m.tag, aux, nullptr, 0, state) != inject_result::full;
}

}  // namespace clump::detail
