// Receiving: polls an endpoint's queues, checks each packet (tag, handler,
// arguments, segment bounds) and runs its handler, or sends it back to its
// sender's handler 0 with the reason. A protocol hands packets here; it never
// runs a handler itself.

#include <algorithm>
#include <cstring>

#include "am/endpoint_impl.hpp"
#include "am/send.hpp"
#include "core/log.hpp"
#include "shm/queue.hpp"

namespace clump::detail {

thread_local int handler_depth [[gnu::tls_model("initial-exec")]] = 0;

namespace {

using shm::packet_kind;

bool tag_accepts(tag_t mine, tag_t sent) noexcept { return mine == tag_all || (mine != tag_none && sent == mine); }

/// Runs handler 0 (C handler, C++ callback, or the default that aborts).
void run_returned(endpoint_impl& e, const returned_message& m) noexcept {
  e.returned.add(1, e.parallel);
  const handler_entry& h0 = e.handlers[0];
  ++handler_depth;
  if (h0.fn) {
    token t;
    t.ep_ = &e;
    // The token names the endpoint the message was going to.
    t.source_ = am::source_id(static_cast<int>(m.destination.rank), m.destination.id & 0xffu);
    t.tag_ = m.tag;
    t.returned_ = &m;
    h0.fn(h0.ctx, t, m.args.data(), static_cast<unsigned>(m.args.size()), nullptr, 0);
  } else if (e.on_returned) {
    e.on_returned(m);
  } else {
    core::fatal("a message to handler %u (%zu payload bytes) came back undelivered: %s; no handler 0 is set on "
                "this endpoint (set one with endpoint::on_returned or AM_SetHandler(ep, 0, ...) to handle it)",
                m.handler, m.length, to_string(m.reason));
  }
  --handler_depth;
}

/// Sends the packet back to its sender's handler 0.
[[gnu::cold]] void reject(endpoint_impl& e, const shm::packet& p, const uint32_t* args, uint64_t offset,
                          return_reason why) noexcept {
  if (p.kind == packet_kind::returned) {
    core::log_error("dropped a returned message that could not be delivered either (%s)", to_string(why));
    return;
  }
  if (p.kind == packet_kind::long_piece || p.kind == packet_kind::long_piece_reply) return;  // the last piece reports
  pending_return r{};
  r.reason = why;
  r.op = op_of(p.kind);
  r.handler = p.handler;
  r.nargs = p.nargs;
  std::memcpy(r.args, args, p.nargs * sizeof(uint32_t));
  r.length = p.length;
  r.offset = offset;
  r.destination = name_of(e, e.id);
  r.tag = p.tag;
  if (!e.proc->remote(p.source)) {
    core::log_error("dropped a message from unknown endpoint %u (rank %d): %s", p.source, am::source_rank(p.source),
                    to_string(why));
    return;
  }
  send_return(e, p.source, r);
}

// Out of line: keeps the polling loop small for the common empty case.
[[gnu::noinline]] void handle(endpoint_impl& e, const shm::queue_ref& q, const shm::packet& p, uint64_t head) noexcept {
  const packet_kind kind = p.kind;
  const bool two = p.flags & shm::flag_two_lines;
  const shm::packet_tail* tail = two ? &shm::tail_at(q, shm::line_index(head) + 1) : nullptr;
  uint32_t words[max_args];
  const uint32_t* args = p.args;
  const unsigned nargs = std::min<unsigned>(p.nargs, max_args);
  if (nargs > shm::args_in_first_line) {
    std::memcpy(words, p.args, sizeof p.args);
    std::memcpy(words + shm::args_in_first_line, tail->args, (nargs - shm::args_in_first_line) * sizeof(uint32_t));
    args = words;
  }

  if (kind == packet_kind::returned) {
    returned_message m{static_cast<return_reason>(tail->aux & 0xff),
                       static_cast<message_op>((tail->aux >> 8) & 0xff),
                       p.handler,
                       std::span<const uint32_t>(args, nargs),
                       p.length,
                       p.offset,
                       name_of(e, p.source),
                       p.tag};
    run_returned(e, m);
    return;
  }

  const bool request = shm::is_request(kind);
  const bool staged = p.flags & shm::flag_staged;
  const bool medium = kind == packet_kind::medium_request || kind == packet_kind::medium_reply;
  // The destination offset of a long message (0 for others: a medium's
  // offset field holds ring lines, which mean nothing to handler 0).
  const uint64_t long_offset = staged ? tail->aux : medium ? 0 : p.offset;
  // Relaxed: our own tag, written by this process.
  if (!tag_accepts(e.own.header->tag.load(std::memory_order_relaxed), p.tag)) [[unlikely]]
    return reject(e, p, args, long_offset, return_reason::bad_tag);

  std::byte* data = nullptr;
  size_t length = p.length;
  message_kind mk = message_kind::short_message;
  switch (kind) {
    case packet_kind::medium_request:
    case packet_kind::medium_reply: {
      const uint32_t used = static_cast<uint32_t>(p.offset);
      data = shm::ring_at(q, shm::ring_index(head) + used - shm::lines_for_bytes(length));
      mk = message_kind::medium;
      break;
    }
    case packet_kind::long_piece:
    case packet_kind::long_piece_reply:
    case packet_kind::long_request:
    case packet_kind::long_reply: {
      if (long_offset > e.segment_length || length > e.segment_length - long_offset) [[unlikely]]
        return reject(e, p, args, long_offset, return_reason::bad_segment_offset);
      data = e.segment + long_offset;
      if (staged) {
        const uint32_t used = static_cast<uint32_t>(p.offset);
        const std::byte* piece = shm::ring_at(q, shm::ring_index(head) + used - shm::lines_for_bytes(tail->piece));
        std::memcpy(data + length - tail->piece, piece, tail->piece);
      }
      if (kind == packet_kind::long_piece || kind == packet_kind::long_piece_reply) return;
      if (!data) data = reinterpret_cast<std::byte*>(&e);  // a non-null pointer for an empty payload
      mk = message_kind::long_message;
      break;
    }
    case packet_kind::get_request: {
      // Pull: answer with a long reply carrying our segment's bytes.
      const uint64_t src = p.offset;
      if (src > e.segment_length || length > e.segment_length - src) [[unlikely]]
        return reject(e, p, args, src, return_reason::bad_segment_offset);
      // The requester's own segment must take the data too; if it no longer
      // does (it changed its segment since), the get goes back to the
      // requester's handler 0 rather than to ours.
      // (Over the network the requester checks on arrival of the reply instead.)
      am::remote_endpoint* from = e.proc->remote(p.source);
      if (from && !from->net) {
        uint64_t off = 0, len = 0;
        shm::read_segment(*from->view.header, off, len);
        if (tail->aux > len || length > len - tail->aux) [[unlikely]]
          return reject(e, p, args, tail->aux, return_reason::bad_segment_offset);
      }
      e.requests_received[2].add(1, e.parallel);
      token t;
      t.ep_ = &e;
      t.source_ = p.source;
      t.tag_ = p.tag;
      t.is_request_ = true;
      t.reply_raw(message_kind::long_message, p.handler, args, nargs, e.segment + src, length, tail->aux);
      return;
    }
    default:
      break;
  }

  const handler_entry& h = e.handlers[p.handler];
  if (!h.fn || p.handler == 0) [[unlikely]]
    return reject(e, p, args, long_offset, return_reason::bad_handler);
  if ((request && h.accepts == role::reply) || (!request && h.accepts == role::request)) [[unlikely]]
    return reject(e, p, args, long_offset, return_reason::bad_handler);
  if ((h.nargs >= 0 && h.nargs != static_cast<int>(nargs)) ||
      (h.payload >= 0 && h.payload != (mk != message_kind::short_message ? 1 : 0))) [[unlikely]]
    return reject(e, p, args, long_offset, return_reason::bad_args);

  const auto k = static_cast<unsigned>(mk);
  (request ? e.requests_received : e.replies_received)[k].add(1, e.parallel);
  if (length) e.bytes_received.add(length, e.parallel);
  token t;
  t.ep_ = &e;
  t.source_ = p.source;
  t.kind_ = mk;
  t.tag_ = p.tag;
  t.is_request_ = request;
  ++handler_depth;
  h.fn(h.ctx, t, args, nargs, data, length);
  --handler_depth;
}

unsigned poll_queue(endpoint_impl& e, const shm::queue_ref& q, std::atomic<uint64_t>& head_word,
                    unsigned budget) noexcept {
  // Relaxed: only this thread consumes this queue now (see endpoint_impl).
  uint64_t head = head_word.load(std::memory_order_relaxed);
  unsigned n = 0;
  for (; n < budget; ++n) {
    const shm::packet* p = shm::peek(q, head);
    if (!p) break;
    const uint32_t lines = (p->flags & shm::flag_two_lines) ? 2 : 1;
    const uint32_t ring = (p->flags & shm::flag_ring) ? static_cast<uint32_t>(p->offset) : 0;
    handle(e, q, *p, head);
    head = shm::pack_index(shm::line_index(head) + lines, shm::ring_index(head) + ring);
    head_word.store(head, std::memory_order_relaxed);
    shm::release(q, head);
  }
  return n;
}


/// One consumer at a time per queue: free in a sequential bundle, a flag in a
/// parallel one (a thread that finds it taken leaves the queue to its holder).
unsigned poll_guarded(endpoint_impl& e, const shm::queue_ref& q, std::atomic<uint64_t>& head, std::atomic_flag& busy,
                      unsigned budget) noexcept {
  if (!e.parallel) return poll_queue(e, q, head, budget);
  // Acquire/release: hands the consumer role (and the head) between threads.
  if (busy.test_and_set(std::memory_order_acquire)) return 0;
  unsigned n = poll_queue(e, q, head, budget);
  busy.clear(std::memory_order_release);
  return n;
}

}  // namespace

unsigned poll_requests(endpoint_impl& e, unsigned budget) noexcept {
  return poll_guarded(e, e.own.request, e.request_head, e.request_busy, budget);
}

unsigned poll_replies(endpoint_impl& e, unsigned budget) noexcept {
  return poll_guarded(e, e.own.reply, e.reply_head, e.reply_busy, budget);
}

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

bool has_pending(const endpoint_impl& e) noexcept {
  return shm::has_claims(e.own.request, e.request_head.load(std::memory_order_relaxed)) ||
         shm::has_claims(e.own.reply, e.reply_head.load(std::memory_order_relaxed)) ||
         e.has_returns.load(std::memory_order_relaxed);
}

}  // namespace clump::detail
