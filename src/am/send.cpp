#include "am/send.hpp"

#include <sched.h>
#include <signal.h>

#include <cerrno>

#include <algorithm>
#include <cstring>

#include "am/net_bridge.hpp"
#include "core/log.hpp"
#include "core/settings.hpp"
#include "core/tsan.hpp"
#include "shm/queue.hpp"
#include "shm/region.hpp"
#include "shm/wake.hpp"

namespace clump::detail {

namespace {

using shm::packet_kind;

/// One packet as the sender describes it.
struct outgoing {
  packet_kind kind;
  uint8_t flags = 0;
  handler_index handler = 0;
  const uint32_t* args = nullptr;
  unsigned nargs = 0;
  uint32_t length = 0;         // the packet's length field
  uint64_t offset = 0;         // the packet's offset field (unless the ring is used)
  tag_t tag = 0;
  uint64_t aux = 0;            // second line
  uint32_t piece = 0;          // second line
  const void* ring_data = nullptr;  // copied into the payload ring
  size_t ring_bytes = 0;
  std::byte* direct = nullptr;      // copied into the destination segment after the claim
  const void* direct_data = nullptr;
  size_t direct_bytes = 0;
};

[[gnu::cold]] status misuse(const char* what) noexcept {
  core::log_error("%s", what);
  return status::bad_arg;
}

}  // namespace

[[gnu::cold]] void wait_for_room(endpoint_impl& from, when_full policy, unsigned round) noexcept {
  if (round == 0) from.send_waits.add(1, from.parallel);
  if (policy == when_full::poll_replies) {
    // We may be inside a request handler of any endpoint of this bundle, so
    // run no request handlers; but drain the reply queues of every endpoint
    // of the bundle: the reply we wait to send may be stuck behind a reply to
    // another of our endpoints (reply and returned-message handlers send
    // nothing, so this always makes progress).
    const bundle_impl::list* l = from.bundle->endpoints.load(std::memory_order_acquire);
    for (endpoint_impl* e : l->eps) poll_replies(*e, from.bundle->poll_batch);
  } else {
    // Not inside a handler (sends of requests from handlers are refused), so
    // running the bundle's handlers here is safe and keeps replies flowing.
    from.bundle->owner->poll();
  }
  if (round > 64) sched_yield();  // the receiver may need this core
}

namespace {

[[gnu::cold]] bool owner_alive(am::remote_endpoint& to) noexcept {
  const auto* h = reinterpret_cast<const shm::region_header*>(to.region_base);
  if (::kill(h->pid, 0) == 0 || errno != ESRCH) return true;
  core::log_error("rank %d (pid %d) has exited; messages to it come back as unreachable", to.rank, h->pid);
  // Relaxed: a hint shared by this process's threads; a stale "alive" only
  // costs another check.
  to.gone.store(true, std::memory_order_relaxed);
  return false;
}

/// Claims room, fills the packet and publishes it, as endpoint `source`;
/// false (and nothing written) when the queue has no room.
bool try_enqueue(am::remote_endpoint& to, bool reply, const outgoing& m, uint32_t source) noexcept {
  const shm::queue_ref& q = reply ? to.view.reply : to.view.request;
  shm::head_cache& cache = reply ? to.reply_cache : to.request_cache;
  uint8_t flags = m.flags;
  if (m.nargs > shm::args_in_first_line) flags |= shm::flag_two_lines;
  const uint32_t lines = (flags & shm::flag_two_lines) ? 2 : 1;
  shm::claim c;
  if (!shm::try_claim(q, cache, lines, m.ring_bytes, c)) return false;
  shm::packet& p = shm::line_at(q, c.line);
  p.kind = m.kind;
  p.handler = m.handler;
  p.nargs = static_cast<uint8_t>(m.nargs);
  p.flags = flags;
  p.source = source;
  p.length = m.length;
  p.tag = m.tag;
  p.offset = (flags & shm::flag_ring) ? c.ring_used : m.offset;
  const unsigned first = std::min(m.nargs, shm::args_in_first_line);
  if (first) std::memcpy(p.args, m.args, first * sizeof(uint32_t));
  if (lines == 2) {
    shm::packet_tail& t = shm::tail_at(q, c.line + 1);
    // Relaxed: only keeps an older lap's value from matching (see packet.hpp);
    // the release in publish() orders it with everything else.
    t.seq.store(c.line + 2, std::memory_order_relaxed);
    t.piece = m.piece;
    t.aux = m.aux;
    if (m.nargs > first) std::memcpy(t.args, m.args + first, (m.nargs - first) * sizeof(uint32_t));
  }
  if (m.ring_bytes) std::memcpy(shm::ring_at(q, c.ring_line), m.ring_data, m.ring_bytes);
  if (m.direct_bytes) std::memmove(m.direct, m.direct_data, m.direct_bytes);  // may overlap (to oneself)
  core::sent_outside();  // (TSan only) the message may reach us back through another process
  shm::publish(q, c);
  if (c.wake) [[unlikely]]
    shm::wake(shm::wake_word(q));
  return true;
}

/// Sends one packet, waiting for room as `policy` says.
status enqueue(endpoint_impl& from, am::remote_endpoint& to, bool reply, const outgoing& m, when_full policy,
               uint32_t expect_state) noexcept {
  for (unsigned round = 0; !try_enqueue(to, reply, m, from.id); ++round) {
    if (policy == when_full::give_up) return status::in_use;
    // A request whose destination went away while we wait would wait forever.
    if (expect_state && to.view.header->state.load(std::memory_order_relaxed) != expect_state)
      return status::not_sent;
    // So would any message to a process that has exited (checked every 1024
    // rounds: a system call, on a path that is already waiting; once found
    // dead, at once).
    if (to.gone.load(std::memory_order_relaxed) || ((round & 1023) == 1023 && !owner_alive(to))) [[unlikely]]
      return status::resource;
    wait_for_room(from, policy, round);
  }
  return status::ok;
}

packet_kind kind_for(message_kind k, bool reply) noexcept {
  switch (k) {
    case message_kind::short_message: return reply ? packet_kind::short_reply : packet_kind::short_request;
    case message_kind::medium: return reply ? packet_kind::medium_reply : packet_kind::medium_request;
    case message_kind::long_message: return reply ? packet_kind::long_reply : packet_kind::long_request;
  }
  return packet_kind::short_request;
}

}  // namespace

/// The destination's name for handler 0 (cold: only when a message comes back).
[[gnu::cold]] static endpoint_name name_or(const endpoint_impl& from, const am::remote_endpoint& to,
                                    const endpoint_name* known) noexcept {
  return known ? *known : name_of(from, am::source_id(to.rank, to.slot));
}

message_op op_of(packet_kind k) noexcept {
  switch (k) {
    case packet_kind::short_request: return message_op::request;
    case packet_kind::medium_request: return message_op::request_medium;
    case packet_kind::long_request:
    case packet_kind::long_piece:
    case packet_kind::get_request: return message_op::request_long;
    case packet_kind::short_reply: return message_op::reply;
    case packet_kind::medium_reply: return message_op::reply_medium;
    case packet_kind::long_reply:
    case packet_kind::long_piece_reply:
    case packet_kind::returned: return message_op::reply_long;
  }
  return message_op::request;
}

endpoint_name name_of(const endpoint_impl& here, uint32_t id) noexcept {
  endpoint_name n{here.proc->job_id(), static_cast<uint32_t>(am::source_rank(id)), am::source_slot(id)};
  if (am::remote_endpoint* r = here.proc->remote(id)) {
    // Relaxed: a name for handler 0 or a token, as it is now.
    const uint32_t state = r->net ? r->peer_state.load(std::memory_order_relaxed)
                                  : r->view.header->state.load(std::memory_order_relaxed);
    n.id |= (state >> 1) << 8;
  }
  return n;
}

status send_message(endpoint_impl& from, am::remote_endpoint& to, bool reply, message_kind kind, handler_index h,
                    const uint32_t* args, unsigned nargs, const void* data, size_t length, uint64_t offset,
                    tag_t tag, when_full policy, const endpoint_name* dest_name, uint32_t expect) noexcept {
  const bool par = from.parallel;
  const auto k = static_cast<unsigned>(kind);
  if (nargs > max_args) [[unlikely]]
    return misuse("a message carries at most 20 argument words");
  if (length && !data) [[unlikely]]
    return misuse("payload pointer is null but its length is not 0");
  outgoing m{};
  m.kind = kind_for(kind, reply);
  m.handler = h;
  m.args = args;
  m.nargs = nargs;
  m.tag = tag;
  m.length = static_cast<uint32_t>(length);
  status s = status::ok;
  if (to.net) {
    // The network: the destination checks the segment and its own limits on arrival.
    if (kind == message_kind::medium && length > from.max_medium) [[unlikely]]
      return misuse("medium payload longer than max_medium() (CLUMP_MAX_MEDIUM); send it as a long message");
    if (kind == message_kind::long_message && length > max_long) [[unlikely]]
      return misuse("long payload longer than max_long (4 GiB - 1)");
    s = send_net(from, to, m.kind, h, args, nargs, data, length, offset, 0, tag, policy, expect);
  } else switch (kind) {
    case message_kind::short_message:
      s = enqueue(from, to, reply, m, policy, expect);
      break;
    case message_kind::medium:
      if (length > from.max_medium) [[unlikely]]
        return misuse("medium payload longer than max_medium() (CLUMP_MAX_MEDIUM); send it as a long message");
      // The receiver's ring must hold two of them (its own CLUMP_* settings
      // may be smaller than ours), or the claim could never succeed.
      if (2 * shm::lines_for_bytes(length) > (reply ? to.view.reply : to.view.request).ring_lines) [[unlikely]]
        return misuse("medium payload longer than the destination's CLUMP_MAX_MEDIUM allows");
      m.flags = shm::flag_ring;
      m.ring_data = data;
      m.ring_bytes = length;
      s = enqueue(from, to, reply, m, policy, expect);
      break;
    case message_kind::long_message: {
      if (length > max_long) [[unlikely]]
        return misuse("long payload longer than max_long (4 GiB - 1)");
      // A consistent pair (seqlock); the receiver checks the bounds again on arrival.
      uint64_t seg_off = 0, seg_len = 0;
      shm::read_segment(*to.view.header, seg_off, seg_len);
      if (offset > seg_len || length > seg_len - offset) [[unlikely]] {
        return_locally(from, return_reason::bad_segment_offset, reply ? message_op::reply_long : message_op::request_long,
                       h, args, nargs, length, offset, name_or(from, to, dest_name), tag);
        return status::ok;
      }
      if (seg_off != shm::private_segment) {
        // Single copy: straight into the destination's segment, mapped here.
        std::byte* dst = to.region_base + seg_off + offset;
        m.offset = offset;
        if (policy == when_full::give_up) {
          // Asynchronous: claim first, so that a full queue leaves the segment untouched.
          m.direct = dst;
          m.direct_data = data;
          m.direct_bytes = length;
        } else if (length) {
          // Copy first: while it runs, the previous packet's publication
          // reaches the receiver, so the claim's locked instruction does not
          // wait for it (worth ~20% at 64 KiB when the cores are far apart).
          std::memmove(dst, data, length);  // memmove: a message to oneself may overlap
        }
        s = enqueue(from, to, reply, m, policy, expect);
        break;
      }
      // A private segment: the payload travels through the ring in pieces
      // that the receiver copies into place; the last one runs the handler.
      // Pieces fit both our medium limit and half the receiver's ring.
      const size_t piece = std::min<size_t>(
          from.max_medium, (reply ? to.view.reply : to.view.request).ring_lines * shm::cache_line / 2);
      const auto* src = static_cast<const std::byte*>(data);
      size_t done = 0;
      outgoing part{};
      part.kind = reply ? packet_kind::long_piece_reply : packet_kind::long_piece;
      part.flags = shm::flag_ring | shm::flag_two_lines | shm::flag_staged;
      part.tag = tag;
      while (length - done > piece) {
        part.length = static_cast<uint32_t>(piece);
        part.piece = static_cast<uint32_t>(piece);
        part.aux = offset + done;
        part.ring_data = src + done;
        part.ring_bytes = piece;
        s = enqueue(from, to, reply, part, done ? (policy == when_full::give_up ? when_full::poll_bundle : policy)
                                                : policy, expect);
        if (s != status::ok) break;
        done += piece;
      }
      if (s != status::ok) break;
      m.flags = shm::flag_ring | shm::flag_two_lines | shm::flag_staged;
      m.aux = offset;
      m.piece = static_cast<uint32_t>(length - done);
      m.ring_data = src + done;
      m.ring_bytes = length - done;
      s = enqueue(from, to, reply, m, done && policy == when_full::give_up ? when_full::poll_bundle : policy,
                  expect);
      break;
    }
  }
  if ((s == status::not_sent || s == status::resource) && reply) [[unlikely]] {
    // The requester went away (freed endpoint or exited process) while we
    // waited: nobody is left to receive this reply or a returned message.
    core::log_warning("a reply to rank %d was dropped: the requesting endpoint %s", to.rank,
                      s == status::not_sent ? "was freed" : "'s process has exited");
    return status::not_sent;
  }
  if (s == status::not_sent || s == status::resource) [[unlikely]] {
    return_locally(from, s == status::not_sent ? return_reason::bad_endpoint : return_reason::unreachable,
                   op_of(m.kind), h, args, nargs, length, offset, name_or(from, to, dest_name), tag);
    return status::ok;
  }
  if (s != status::ok) return s;
  (reply ? from.replies_sent : from.requests_sent)[k].add(1, par);
  if (length) from.bytes_sent.add(length, par);
  return status::ok;
}

bool inject(am::remote_endpoint& to, bool reply, uint32_t source, packet_kind kind, handler_index h,
            const uint32_t* args, unsigned nargs, uint32_t length, uint64_t offset, tag_t tag, uint64_t aux,
            const void* ring_data, size_t ring_bytes) noexcept {
  outgoing m{};
  m.kind = kind;
  m.handler = h;
  m.args = args;
  m.nargs = nargs;
  m.length = length;
  m.offset = offset;
  m.tag = tag;
  m.aux = aux;
  if (kind == packet_kind::get_request || kind == packet_kind::returned) m.flags = shm::flag_two_lines;
  if (ring_bytes || kind == packet_kind::medium_request || kind == packet_kind::medium_reply) {
    m.flags |= shm::flag_ring;
    m.ring_data = ring_data;
    m.ring_bytes = ring_bytes;
  }
  return try_enqueue(to, reply, m, source);
}

bool try_send_return(endpoint_impl& from, uint32_t to_id, const pending_return& r) noexcept {
  am::remote_endpoint* to = from.proc->remote(to_id);
  if (!to) return true;  // nowhere to send it; dropped (logged by the caller)
  const uint64_t aux = static_cast<uint64_t>(r.reason) | (static_cast<uint64_t>(r.op) << 8);
  if (to->net) {
    const status s = send_net(from, *to, packet_kind::returned, r.handler, r.args, r.nargs, nullptr, r.length, r.offset,
                              aux, r.tag, when_full::give_up, to->peer_state.load(std::memory_order_relaxed));
    if (s == status::resource)
      core::log_warning("a message returned to rank %d (%s) was dropped: its process is unreachable", to->rank,
                        to_string(r.reason));
    return s != status::in_use;
  }
  // Relaxed: see queue_block.hpp. A sender that is gone gets nothing back.
  if ((to->view.header->state.load(std::memory_order_relaxed) & 1u) == 0 ||
      to->gone.load(std::memory_order_relaxed)) [[unlikely]] {
    core::log_warning("a message returned to rank %d (%s) was dropped: its sender no longer exists", to->rank,
                      to_string(r.reason));
    return true;
  }
  outgoing m{};
  m.kind = packet_kind::returned;
  m.flags = shm::flag_two_lines;
  m.handler = r.handler;
  m.args = r.args;
  m.nargs = r.nargs;
  m.length = static_cast<uint32_t>(r.length);
  m.offset = r.offset;
  m.tag = r.tag;  // the tag the message was sent with (returned packets are not tag-checked)
  m.aux = aux;
  return enqueue(from, *to, true, m, when_full::give_up, 0) == status::ok;
}

void send_return(endpoint_impl& from, uint32_t to, const pending_return& r) noexcept {
  if (try_send_return(from, to, r)) return;
  std::lock_guard lock(from.returns_mutex);
  from.outbox.push_back({to, r, from.id});
  // Relaxed: the mutex orders the outbox; the flag only prompts a later poll.
  from.has_outbox.store(true, std::memory_order_relaxed);
}

// send-stage: checks (the markers split the short send into the stages of the
// SC97 paper's Figure 4 for bench/send-breakdown; comments only)
/// The common case in one piece: a short message of at most 8 words to a
/// queue with room. Anything else (a full queue, more words) returns false
/// and takes send_message, which checks, waits and handles errors.
static inline bool try_send_short(endpoint_impl& from, am::remote_endpoint& to, bool reply, handler_index h,
                                  const uint32_t* args, unsigned nargs, tag_t tag) noexcept {
  if (nargs > shm::args_in_first_line || to.net) return false;
  // send-stage: locate
  const shm::queue_ref& q = reply ? to.view.reply : to.view.request;
  shm::claim c;
  // send-stage: claim (and its room check; see try_claim)
  if (!shm::try_claim(q, reply ? to.reply_cache : to.request_cache, 1, 0, c)) return false;
  // send-stage: fill
  shm::packet& p = shm::line_at(q, c.line);
  p.kind = reply ? packet_kind::short_reply : packet_kind::short_request;
  p.handler = h;
  p.nargs = static_cast<uint8_t>(nargs);
  p.flags = 0;
  p.source = from.id;
  p.length = 0;
  p.tag = tag;
  p.offset = 0;
  for (unsigned i = 0; i < nargs; ++i) p.args[i] = args[i];
  // send-stage: publish
  shm::publish(q, c);
  if (c.wake) [[unlikely]]
    shm::wake(shm::wake_word(q));
  // send-stage: count
  (reply ? from.replies_sent : from.requests_sent)[0].add(1, from.parallel);
  return true;
}

// send-stage: checks
/// True when translation `t` names an endpoint that may receive a message
/// now; otherwise the message goes to handler 0 (unmapped entry, endpoint
/// freed, process exited) and false comes back.
static bool deliverable(endpoint_impl& e, const translation& t, message_op op, handler_index h, const uint32_t* args,
                        unsigned nargs, size_t length, uint64_t offset) noexcept {
  if (!t.used || !t.remote) [[unlikely]] {
    return_locally(e, return_reason::bad_entry, op, h, args, nargs, length, offset, endpoint_name{}, 0);
    return false;
  }
  // Relaxed: see queue_block.hpp and remote_endpoint::gone.
  const bool gone = t.remote->gone.load(std::memory_order_relaxed);
  // Over the network the destination checks its state itself, on arrival.
  if (gone || (!t.remote->net && t.remote->view.header->state.load(std::memory_order_relaxed) != t.state)) [[unlikely]] {
    return_locally(e, gone ? return_reason::unreachable : return_reason::bad_endpoint, op, h, args, nargs, length,
                   offset, t.name, t.tag);
    return false;
  }
  return true;
}
// send-stage: end

// ---- the public entry points -------------------------------------------

}  // namespace clump::detail

namespace clump {

using namespace clump::detail;

// send-stage: call
status endpoint::send_raw(int dest, message_kind kind, handler_index h, const uint32_t* args, unsigned nargs,
                          const void* data, size_t length, uint64_t offset, bool async) noexcept {
  endpoint_impl& e = *impl_;
  // send-stage: checks
  if (handler_depth > 0) [[unlikely]]
    return misuse("a request was sent from inside a handler; handlers may only reply (AM-II)");
  if (dest < 0 || static_cast<size_t>(dest) >= e.translations.size()) [[unlikely]]
    return misuse("translation index out of range");
  // send-stage: locate
  translation& t = e.translations[static_cast<size_t>(dest)];
  // send-stage: checks
  if (!deliverable(e, t, op_of(kind_for(kind, false)), h, args, nargs, length, offset)) [[unlikely]]
    return status::ok;
  if (kind == message_kind::short_message && try_send_short(e, *t.remote, false, h, args, nargs, t.tag))
    return status::ok;
  // send-stage: call (send_message itself, the slow path, is unmarked: "other")
  return send_message(e, *t.remote, false, kind, h, args, nargs, data, length, offset, t.tag,
                      async ? when_full::give_up : when_full::poll_bundle, &t.name, t.state);
}
// send-stage: end

status endpoint::get_raw(int dest, handler_index h, const uint32_t* args, unsigned nargs, uint64_t source_offset,
                         uint64_t offset, size_t length) noexcept {
  endpoint_impl& e = *impl_;
  if (handler_depth > 0) [[unlikely]]
    return misuse("a get was started from inside a handler; handlers may only reply (AM-II)");
  if (dest < 0 || static_cast<size_t>(dest) >= e.translations.size()) [[unlikely]]
    return misuse("translation index out of range");
  if (nargs > max_args) [[unlikely]]
    return misuse("a message carries at most 20 argument words");
  if (offset > e.segment_length || length > e.segment_length - offset || length > max_long) [[unlikely]]
    return misuse("get: the destination range lies outside this endpoint's segment");
  const handler_entry& local = e.handlers[h];
  if (h == 0 || !local.fn || local.accepts == role::request || local.payload == 0) [[unlikely]]
    return misuse("get: the handler that receives the data must be a reply handler taking a payload, set here");
  translation& t = e.translations[static_cast<size_t>(dest)];
  if (!deliverable(e, t, message_op::request_long, h, args, nargs, length, source_offset)) [[unlikely]]
    return status::ok;
  outgoing m{};
  m.kind = shm::packet_kind::get_request;
  m.flags = shm::flag_two_lines;
  m.handler = h;
  m.args = args;
  m.nargs = nargs;
  m.length = static_cast<uint32_t>(length);
  m.offset = source_offset;
  m.aux = offset;
  m.tag = t.tag;
  status s = t.remote->net ? send_net(e, *t.remote, m.kind, h, args, nargs, nullptr, length, source_offset, offset,
                                      t.tag, when_full::poll_bundle, t.state)
                           : enqueue(e, *t.remote, false, m, when_full::poll_bundle, t.state);
  if (s == status::not_sent || s == status::resource) {
    return_locally(e, s == status::not_sent ? return_reason::bad_endpoint : return_reason::unreachable,
                   message_op::request_long, h, args, nargs, length, source_offset, t.name, t.tag);
    return status::ok;
  }
  if (s == status::ok) e.requests_sent[2].add(1, e.parallel);  // counted as a long request, as on arrival
  return s;
}

status token_base::reply_raw(message_kind kind, handler_index h, const uint32_t* args, unsigned nargs,
                             const void* data, size_t length, uint64_t offset) noexcept {
  if (!is_request_) [[unlikely]]
    return misuse("reply from a reply handler or handler 0; only request handlers may reply");
  if (replied_) [[unlikely]]
    return misuse("a request handler may reply only once");
  am::remote_endpoint* to = ep_->proc->remote(source_);
  if (!to) [[unlikely]]
    return misuse("reply: the requester is not known in this job");
  // Relaxed: the requester's tag and state, read from its queue block (see
  // queue_block.hpp). A requester freed since its request gets no reply.
  const tag_t tag = to->net ? to->peer_tag.load(std::memory_order_relaxed)
                            : to->view.header->tag.load(std::memory_order_relaxed);
  const uint32_t state = to->net ? to->peer_state.load(std::memory_order_relaxed)
                                 : to->view.header->state.load(std::memory_order_relaxed);
  if ((state & 1u) == 0) [[unlikely]] {
    core::log_warning("a reply to rank %d was dropped: the requesting endpoint was freed", to->rank);
    return status::not_sent;
  }
  if (kind == message_kind::short_message && try_send_short(*ep_, *to, true, h, args, nargs, tag)) {
    replied_ = true;
    return status::ok;
  }
  const status s = send_message(*ep_, *to, true, kind, h, args, nargs, data, length, offset, tag,
                                when_full::poll_replies, nullptr, state);
  // A reply refused at the call site (bad arguments) does not use up the one reply.
  if (s == status::ok) replied_ = true;
  return s;
}

}  // namespace clump
