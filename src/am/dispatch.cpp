// Receiving: polls an endpoint's queues, checks each packet (tag, handler,
// arguments, segment bounds) and runs its handler, or sends it back to its
// sender's handler 0 with the reason. A protocol hands packets here; it never
// runs a handler itself.

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "am/via_shm/cma.hpp"
#include "am/endpoint_impl.hpp"
#include "am/returns.hpp"
#include "am/send.hpp"
#include "core/log.hpp"
#include "shm/queue.hpp"

namespace clump::detail {

thread_local int handler_depth [[gnu::tls_model("initial-exec")]] = 0;

namespace {

using shm::packet_kind;

/// A packet's shape, checked: where its lines and payload are. Another
/// process wrote it, so nothing in it is used before it is checked here.
struct shape {
  uint32_t lines = 1;      // lines to step over, this one included
  uint32_t ring_used = 0;  // payload ring lines it consumed, the skip included
  uint32_t ring_start = 0;
  const shm::packet_tail* tail = nullptr;
  const shm::packet_extra* extra = nullptr;
  const char* bad = nullptr;  // why it is refused, or nullptr
};

/// Checks every field of a packet but the common short one's (examine).
/// Fills `s` and returns why the packet is refused, or nullptr.
[[gnu::noinline]] const char* examine_any(const shm::queue_ref& q, const shm::packet& p, uint64_t head,
                                          bool request_queue, shape& s) noexcept {
  const uint32_t line = shm::line_index(head);
  const uint8_t flags = p.flags;
  if ((flags & ~shm::known_flags) || (flags & (shm::flag_three_lines | shm::flag_two_lines)) == shm::flag_three_lines)
    return "unknown flags, or a third line without a second";
  const uint32_t lines = shm::lines_of(flags);
  // Further lines are the packet's own only if they carry their own index
  // (written before the first line was published); else it is stepped over
  // as one line.
  // Relaxed: the acquire of the first line's seq ordered these writes.
  if (lines >= 2) {
    s.tail = &shm::tail_at(q, line + 1);
    if (s.tail->seq.load(std::memory_order_relaxed) != line + 2) return "a second line not its own";
    if (lines == 3) {
      s.extra = &shm::extra_at(q, line + 2);
      if (s.extra->seq.load(std::memory_order_relaxed) != line + 3) return "a third line not its own";
    }
  }
  s.lines = lines;
  // The payload's place in the ring follows from its length and our ring
  // position alone (as the sender's claim computed it).
  const bool staged = flags & shm::flag_staged;
  if (flags & shm::flag_ring) {
    if (staged && !s.tail) return "a staged piece without a second line";
    const uint64_t bytes = staged ? s.tail->piece : p.length;
    if (bytes > uint64_t{q.ring_lines} * shm::cache_line / 2) return "a payload longer than half the ring";
    const shm::ring_span span = shm::place_payload(shm::ring_index(head), shm::lines_for_bytes(bytes), q.ring_lines);
    s.ring_start = span.start;
    s.ring_used = span.used;
  }
  const auto kind = p.kind;
  if (kind == packet_kind::cancelled) return nullptr;  // its sender returned it itself; skipped whatever it holds
  const auto k = static_cast<uint8_t>(kind);
  if (k < 1 || k > 10 || shm::is_request(kind) != request_queue) return "an unknown kind, or one of the other queue";
  const bool shared_copy = flags & shm::flag_shared_copy;
  if (p.nargs > max_args ||
      (flags & (shm::flag_two_lines | shm::flag_three_lines)) != shm::line_flags(kind, p.nargs, shared_copy))
    return "an argument count that does not fit its lines";
  if (shared_copy && (kind != packet_kind::long_request || (flags & (shm::flag_ring | shm::flag_staged)) ||
                      s.tail->piece > p.length))
    return "a shared copy that is not a long request, or whose front is longer than its payload";
  const bool medium = kind == packet_kind::medium_request || kind == packet_kind::medium_reply;
  if (medium != ((flags & shm::flag_ring) && !staged)) return "a medium payload not in the ring";
  if (staged) {
    const bool piece = kind == packet_kind::long_piece || kind == packet_kind::long_piece_reply;
    if (!shm::is_long(kind) || s.tail->piece > p.length || (piece && s.tail->piece != p.length))
      return "a staged piece that does not fit its message";
  } else if (kind == packet_kind::long_piece || kind == packet_kind::long_piece_reply) {
    return "a piece of a long message not staged";
  }
  if (kind == packet_kind::returned) {
    if (!returned_aux_valid(s.tail->aux)) return "a returned message with no valid reason";
  }
  return nullptr;
}

/// The common cases inline: a short message on one line or two, a medium
/// one on one line, in their own queue; examine_any checks the rest.
inline shape examine(const shm::queue_ref& q, const shm::packet& p, uint64_t head, bool request_queue) noexcept {
  shape s;
  const packet_kind short_kind = request_queue ? packet_kind::short_request : packet_kind::short_reply;
  const packet_kind medium_kind = request_queue ? packet_kind::medium_request : packet_kind::medium_reply;
  const unsigned nargs = p.nargs;
  if (p.kind == short_kind) [[likely]] {
    if (p.flags == 0 && nargs <= shm::args_in_first_line) [[likely]]
      return s;
    if (p.flags == shm::flag_two_lines && nargs > shm::args_in_first_line &&
        nargs <= shm::args_in_first_line + shm::args_in_second_line) {
      s.tail = &shm::tail_at(q, shm::line_index(head) + 1);
      // Relaxed: the acquire of the first line's seq ordered it.
      if (s.tail->seq.load(std::memory_order_relaxed) == shm::line_index(head) + 2) {
        s.lines = 2;
        return s;
      }
    }
  } else if (p.kind == medium_kind && p.flags == shm::flag_ring && nargs <= shm::args_in_first_line &&
             p.length <= uint64_t{q.ring_lines} * shm::cache_line / 2) {
    const shm::ring_span span = shm::place_payload(shm::ring_index(head), shm::lines_for_bytes(p.length), q.ring_lines);
    s.ring_start = span.start;
    s.ring_used = span.used;
    return s;
  }
  s = shape{};
  s.bad = examine_any(q, p, head, request_queue, s);
  return s;
}

/// Counts and reports (the first few) packets refused as malformed.
[[gnu::cold]] void refuse_corrupt(endpoint_impl& e, const shm::packet& p, const char* why) noexcept {
  e.corrupt.add(1, e.parallel);
  const uint64_t n = e.corrupt.get();
  if (n <= 5)
    core::log_error("endpoint %u refused a malformed packet in its queue (%s; it names rank %d as its sender): "
                    "another process of this node wrote it; it is dropped%s",
                    e.slot, why, am::source_rank(p.source), n == 5 ? " (no more reports)" : "");
}

/// A packet's argument words: its first line's, or all of them gathered
/// from its lines into `words`.
inline const uint32_t* gather_args(const shm::packet& p, const shape& sh, uint32_t (&words)[max_args]) noexcept {
  const unsigned nargs = p.nargs;
  if (nargs <= shm::args_in_first_line) [[likely]]
    return p.args;
  constexpr unsigned two = shm::args_in_first_line + shm::args_in_second_line;
  std::memcpy(words, p.args, sizeof p.args);
  std::memcpy(words + shm::args_in_first_line, sh.tail->args,
              (std::min(nargs, two) - shm::args_in_first_line) * sizeof(uint32_t));
  if (nargs > two) std::memcpy(words + two, sh.extra->args, (nargs - two) * sizeof(uint32_t));
  return words;
}

/// Sends a packet that will not run back to its sender's handler 0, with `why`.
[[gnu::cold]] void return_packet(endpoint_impl& e, const shm::packet& p, const shape& sh, return_reason why) noexcept {
  uint32_t words[max_args];
  reject(e, p, gather_args(p, sh, words), p.nargs, sh.tail && shm::has_offsets(p.kind) ? sh.tail->offset : 0, why);
}

/// A shared copy (packet.hpp, flag_shared_copy) is in our queue until its
/// sender has set its last bit, one of `last`: waits for it, so that no bit
/// of the sender's lands in lines we freed. Returns the bits, or 0 when the
/// message is to be dropped (its payload may be incomplete): its sender died
/// first, or it is not a process of this node that could set the bit, or
/// it did not within 10 s (a sender sets it as soon as its copy ends; a
/// packet that names a live process that did not send it would hold the
/// queue forever).
[[gnu::cold, gnu::noinline]] uint32_t settle_shared(endpoint_impl& e, const shm::packet& p,
                                                    const shm::packet_extra& x, uint32_t last) noexcept {
  const int from = am::source_rank(p.source);
  const am::remote_endpoint* sender = e.proc->remote(p.source);
  // Not a shared-memory sender: refused as from an unknown endpoint already (reject).
  if (!sender || sender->kind != am::transport_kind::shm) return 0;
  // The sender writes this word; nothing else of the packet changes.
  auto& word = const_cast<std::atomic<uint32_t>&>(x.shared);
  std::chrono::steady_clock::time_point give_up{};
  for (unsigned round = 0;; ++round) {
    // Acquire: the sender's bytes are in place before its bit.
    const uint32_t bits = word.load(std::memory_order_acquire);
    if (bits & last) return bits;
    if ((round & 1023) == 1023) [[unlikely]] {
      const auto now = std::chrono::steady_clock::now();
      if (round == 1023) give_up = now + std::chrono::seconds(10);
      const bool dead = e.proc->rank_failed(from);
      if (dead || now >= give_up) {
        core::log_warning("a long message of %u bytes from rank %d into endpoint %u's segment is dropped: %s", p.length,
                          from, e.slot,
                          dead ? "its process died while it wrote it" : "its sender did not finish writing it in 10 s");
        return 0;
      }
    }
    if (round > 64) sched_yield();  // the sender may need this core
  }
}

/// A shared copy that will not run (refused, or its endpoint freed): unless
/// we claimed its rest, its sender writes that, then sets its last bit.
void settle_unclaimed(endpoint_impl& e, const shm::packet& p, const shape& sh) noexcept {
  if (!sh.extra || !(p.flags & shm::flag_shared_copy) || p.kind != packet_kind::long_request) return;
  // Relaxed: our own bit.
  if (!(sh.extra->shared.load(std::memory_order_relaxed) & shm::shared_claimed))
    settle_shared(e, p, *sh.extra, shm::shared_all_written | shm::shared_failed);
}

/// Our part of a shared copy: claims the rest of the payload and, unless the
/// sender took it first, pulls it from the sender's memory into `data`;
/// then waits until the whole payload is in place. False when the message is
/// not to be run: dropped (its sender died) or sent back (a write failed).
[[gnu::cold, gnu::noinline]] bool pull_shared(endpoint_impl& e, const shm::packet& p, const shape& sh,
                                              std::byte* data, const uint32_t* args, unsigned nargs,
                                              uint64_t offset) noexcept {
  auto& word = const_cast<std::atomic<uint32_t>&>(sh.extra->shared);
  uint32_t last = shm::shared_all_written | shm::shared_failed;  // the sender's last bit when it writes the rest
  // Acquire: if the sender took the rest, its bytes come with its bits (below).
  if (!(word.fetch_or(shm::shared_claimed, std::memory_order_acq_rel) & shm::shared_taken)) {
    const uint32_t front = sh.tail->piece;  // <= length: checked
    const am::remote_endpoint* from = e.proc->remote(p.source);
    cma::result r = cma::result::done;
    if (front < p.length) {
      // The sender's payload, in its memory (an address we only hand to the kernel).
      r = from && from->kind == am::transport_kind::shm && from->pid > 0
              ? cma::read_from(from->pid, reinterpret_cast<const std::byte*>(sh.tail->aux + front), data + front,
                               p.length - front)
              : cma::result::refused;
    }
    if (r == cma::result::done) {
      last = shm::shared_front_written | shm::shared_failed;
    } else {
      core::log_info("could not pull a long message's rest from rank %d's memory (%s): it writes the whole of it",
                     am::source_rank(p.source), r == cma::result::refused ? "the kernel refuses" : "not mapped there");
    }
    // Release: our bytes are in place before the sender sees the bit (it may reuse its buffer).
    word.fetch_or(r == cma::result::done ? shm::shared_pulled : shm::shared_refused, std::memory_order_release);
  }
  const uint32_t bits = settle_shared(e, p, *sh.extra, last);
  if (!bits) return false;
  if (bits & shm::shared_failed) {
    reject(e, p, args, nargs, offset, return_reason::bad_segment_offset);
    return false;
  }
  return true;
}

// Out of line: keeps the polling loop small for the common empty case.
[[gnu::noinline]] void handle(endpoint_impl& e, const shm::queue_ref& q, const shm::packet& p,
                              const shape& sh) noexcept {
  const packet_kind kind = p.kind;
  if (kind == packet_kind::cancelled) return;
  uint32_t words[max_args];
  const uint32_t* args = gather_args(p, sh, words);
  const unsigned nargs = p.nargs;
  // A long message's destination offset, a get's source, a returned message's original.
  const uint64_t offset = sh.tail && shm::has_offsets(kind) ? sh.tail->offset : 0;
  const bool request = shm::is_request(kind);

  // Meant for this endpoint, not for one that held the slot before it.
  if (p.dst_gen != shm::gen32(e.generation)) [[unlikely]] {
    if (kind == packet_kind::returned) return;  // its sender is gone: nobody to give it to
    return reject(e, p, args, nargs, offset, return_reason::bad_endpoint);
  }

  if (kind == packet_kind::returned) {
    returned_message m{returned_reason(sh.tail->aux),
                       returned_op(sh.tail->aux),
                       p.handler,
                       std::span<const uint32_t>(args, nargs),
                       p.length,
                       offset,
                       name_of(e, p.source, p.src_gen),
                       p.tag};
    run_returned(e, m);
    return;
  }

  // Relaxed: our own tag, written by this process.
  if (!tag_accepts(e.own.header->tag.load(std::memory_order_relaxed), p.tag)) [[unlikely]]
    return reject(e, p, args, nargs, offset, return_reason::bad_tag);

  std::byte* data = nullptr;
  size_t length = p.length;
  message_kind mk = message_kind::short_message;
  switch (kind) {
    case packet_kind::medium_request:
    case packet_kind::medium_reply:
      data = shm::ring_at(q, sh.ring_start);
      mk = message_kind::medium;
      break;
    case packet_kind::long_piece:
    case packet_kind::long_piece_reply:
    case packet_kind::long_request:
    case packet_kind::long_reply: {
      if (offset > e.segment_length || length > e.segment_length - offset) [[unlikely]]
        return reject(e, p, args, nargs, offset, return_reason::bad_segment_offset);
      data = e.segment + offset;
      if ((p.flags & shm::flag_shared_copy) && !pull_shared(e, p, sh, data, args, nargs, offset)) [[unlikely]]
        return;
      if (p.flags & shm::flag_staged) {
        const uint32_t piece = sh.tail->piece;  // <= length: checked
        std::memcpy(data + length - piece, shm::ring_at(q, sh.ring_start), piece);
      }
      if (kind == packet_kind::long_piece || kind == packet_kind::long_piece_reply) return;
      if (!data) data = reinterpret_cast<std::byte*>(&e);  // a non-null pointer for an empty payload
      mk = message_kind::long_message;
      break;
    }
    case packet_kind::get_request: {
      // Pull: answer with a long reply carrying our segment's bytes.
      const uint64_t src = offset, dst = sh.tail->aux;
      if (src > e.segment_length || length > e.segment_length - src) [[unlikely]]
        return reject(e, p, args, nargs, src, return_reason::bad_segment_offset);
      // The requester's own segment must take the data too; if it no longer
      // does (it changed its segment since), the get goes back to the
      // requester's handler 0 rather than to ours.
      // (Over the network the requester checks on arrival of the reply instead.)
      am::remote_endpoint* from = e.proc->remote(p.source);
      if (from && from->kind == am::transport_kind::shm) {
        uint64_t off = 0, len = 0;
        // (A requester that stays in the middle of a segment change has
        // died halfway: its get goes back, as one outside its segment.)
        if (!shm::read_segment(*from->view.header, off, len) || dst > len || length > len - dst) [[unlikely]]
          return reject(e, p, args, nargs, src, return_reason::bad_segment_offset);
      }
      e.requests_received[2].add(1, e.parallel);
      token t;
      t.ep_ = &e;
      t.source_ = p.source;
      t.source_gen_ = p.src_gen;
      t.tag_ = p.tag;
      t.is_request_ = true;
      t.reply_raw(message_kind::long_message, p.handler, args, nargs, e.segment + src, length, dst);
      return;
    }
    default:
      break;
  }

  const handler_entry& h = e.handlers[p.handler];
  if (!h.fn || p.handler == 0) [[unlikely]]
    return reject(e, p, args, nargs, offset, return_reason::bad_handler);
  if ((request && h.accepts == role::reply) || (!request && h.accepts == role::request)) [[unlikely]]
    return reject(e, p, args, nargs, offset, return_reason::bad_handler);
  if ((h.nargs >= 0 && h.nargs != static_cast<int>(nargs)) ||
      (h.payload >= 0 && h.payload != (mk != message_kind::short_message ? 1 : 0))) [[unlikely]]
    return reject(e, p, args, nargs, offset, return_reason::bad_args);

  const auto k = static_cast<unsigned>(mk);
  (request ? e.requests_received : e.replies_received)[k].add(1, e.parallel);
  if (length) e.bytes_received.add(length, e.parallel);
  token t;
  t.ep_ = &e;
  t.source_ = p.source;
  t.source_gen_ = p.src_gen;
  t.kind_ = mk;
  t.handler_ = p.handler;
  t.tag_ = p.tag;
  t.is_request_ = request;
  ++handler_depth;
  h.fn(h.ctx, t, args, nargs, data, length);
  --handler_depth;
}

/// Takes the ready packet at `head`: runs it, or refuses it as malformed
/// (`refused` set); returns where the head goes next. While `refused` is
/// set, where the ring's payloads are is not known (see resync_ring): a
/// packet with a payload in the ring goes back to its sender (congestion)
/// rather than run with bytes from the wrong place.
uint64_t take(endpoint_impl& e, const shm::queue_ref& q, const shm::packet& p, uint64_t head, bool request_queue,
              bool& refused) noexcept {
  const shape sh = examine(q, p, head, request_queue);
  if (sh.bad) [[unlikely]] {
    refuse_corrupt(e, p, sh.bad);
    refused = true;
  } else if (refused && (p.flags & shm::flag_ring) && p.kind != packet_kind::cancelled) [[unlikely]] {
    return_packet(e, p, sh, return_reason::congestion);
  } else {
    handle(e, q, p, sh);
    // A shared copy refused before its pull: its sender may still be writing.
    if (sh.extra) [[unlikely]]
      settle_unclaimed(e, p, sh);
  }
  return shm::pack_index(shm::line_index(head) + sh.lines, shm::ring_index(head) + sh.ring_used);
}

/// After a malformed packet, the payload ring lines its writer claimed are
/// unknown (a packet does not say them: see packet.hpp). Once every claimed
/// line has been taken, the claims' ring position is the right one: the
/// queue takes it, and the ring space the corrupt packet held comes back.
[[gnu::cold]] uint64_t resync_ring(const shm::queue_ref& q, uint64_t head, bool& pending) noexcept {
  // Acquire: the claims' counters as the last claim left them.
  const uint64_t tail = q.control->tail.load(std::memory_order_acquire);
  if (shm::line_index(tail) != shm::line_index(head)) return head;  // claims in flight: later
  pending = false;
  return shm::pack_index(shm::line_index(head), shm::ring_index(tail));
}

unsigned poll_queue(endpoint_impl& e, const shm::queue_ref& q, std::atomic<uint64_t>& head_word,
                    unsigned budget) noexcept {
  // Relaxed: only this thread consumes this queue now (see endpoint_impl).
  uint64_t head = head_word.load(std::memory_order_relaxed);
  const bool request_queue = &q == &e.own.request;
  bool& resync = request_queue ? e.resync_request : e.resync_reply;
  unsigned n = 0;
  for (; n < budget; ++n) {
    const shm::packet* p = shm::peek(q, head);
    if (!p) break;
    head = take(e, q, *p, head, request_queue, resync);
    head_word.store(head, std::memory_order_relaxed);
    shm::release(q, head);
  }
  if (resync) [[unlikely]] {
    head = resync_ring(q, head, resync);
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

bool has_pending(const endpoint_impl& e) noexcept {
  return shm::has_claims(e.own.request, e.request_head.load(std::memory_order_relaxed)) ||
         shm::has_claims(e.own.reply, e.reply_head.load(std::memory_order_relaxed)) ||
         e.has_returns.load(std::memory_order_relaxed);
}

}  // namespace clump::detail

namespace clump::detail {

void drain_freed(endpoint_impl& e) noexcept {
  unsigned returned = 0, dropped = 0;
  for (int which = 0; which < 2; ++which) {
    const shm::queue_ref& q = which ? e.own.reply : e.own.request;
    std::atomic<uint64_t>& head_word = which ? e.reply_head : e.request_head;
    uint64_t head = head_word.load(std::memory_order_relaxed);
    // seq_cst, after the seq_cst store that marked the endpoint dead: the
    // owner's half of the handshake in via_shm/send.cpp's try_enqueue. Every claim
    // this load misses sees the endpoint dead and returns its message itself.
    const uint32_t end = shm::line_index(q.control->tail.load(std::memory_order_seq_cst));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (static_cast<int32_t>(end - shm::line_index(head)) > 0) {
      const shm::packet* p = shm::peek(q, head);
      if (!p) {
        // Claimed, not yet published: its sender is between the two.
        if (std::chrono::steady_clock::now() >= deadline) {
          core::log_warning("endpoint %u was freed with a message still being written into its queue after 1 s "
                            "(its sender stopped halfway?); it is skipped",
                            e.slot);
          break;
        }
        sched_yield();
        continue;
      }
      const shape sh = examine(q, *p, head, which == 0);
      if (sh.bad) {
        refuse_corrupt(e, *p, sh.bad);
      } else if (p->kind == packet_kind::cancelled || p->kind == packet_kind::long_piece ||
                 p->kind == packet_kind::long_piece_reply) {
        // nothing: its sender returned it itself; a piece's message is returned by its last packet
      } else if (shm::is_request(p->kind)) {
        // A shared copy's sender may still be writing: its bits must land first.
        settle_unclaimed(e, *p, sh);
        // Never lost: back to its sender, as a message to a freed endpoint.
        return_packet(e, *p, sh, return_reason::bad_endpoint);
        ++returned;
      } else {
        ++dropped;  // a reply or a returned message: this endpoint was their only destination
      }
      head = shm::pack_index(shm::line_index(head) + sh.lines, shm::ring_index(head) + sh.ring_used);
      head_word.store(head, std::memory_order_relaxed);
      shm::release(q, head);
    }
  }
  if (dropped)
    core::log_warning("endpoint %u was freed with %u replies or returned messages not yet handled; they are dropped",
                      e.slot, dropped);
  if (returned)
    core::log_info("endpoint %u was freed with %u requests not yet handled; they go back to their senders", e.slot,
                   returned);
}

}  // namespace clump::detail
