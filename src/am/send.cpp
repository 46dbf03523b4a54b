#include "am/send.hpp"

#include <sched.h>
#include <signal.h>

#include <cerrno>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <vector>

#include "am/cma.hpp"
#include "am/net_bridge.hpp"
#include "am/returns.hpp"
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
  uint8_t flags = 0;           // flag_ring, flag_staged (the line flags follow from kind and nargs)
  handler_index handler = 0;
  const uint32_t* args = nullptr;
  unsigned nargs = 0;
  uint32_t length = 0;         // the packet's length field
  tag_t tag = 0;
  uint32_t src_gen = 0;        // the sending endpoint's generation (low 32 bits)
  uint64_t offset = 0;         // second line
  uint64_t aux = 0;            // second line
  uint32_t piece = 0;          // second line
  const void* ring_data = nullptr;  // copied into the payload ring
  size_t ring_bytes = 0;
  std::byte* direct = nullptr;      // copied into the destination segment after the claim
  const void* direct_data = nullptr;
  size_t direct_bytes = 0;
  pid_t direct_pid = 0;             // non-zero: `direct` is an address in that process (cross-memory attach)
  mutable bool faulted = false;     // that address turned out not to be mapped there (the packet was cancelled)
  mutable uint32_t line = 0;        // into another process: the first line claimed
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

[[gnu::cold]] bool owner_alive(am::process& proc, am::remote_endpoint& to) noexcept { return !proc.rank_failed(to.rank); }
/// Whether a sender waiting for `to` looks whether its process is still
/// there in this round of waiting (from round 64, when waits yield the core).
inline bool time_to_look(unsigned round) noexcept { return round >= 64 && (round & 15) == 0; }

[[gnu::cold]] void cma_refused(am::remote_endpoint& to) noexcept {
  if (to.cma.exchange(-1, std::memory_order_relaxed) != -1)
    core::log_info("the kernel refuses cross-memory attach into rank %d (%s): long messages into its private "
                   "segments go through the ring",
                   to.rank, std::strerror(errno));
}

[[gnu::cold]] void cma_fault(const am::remote_endpoint& to, uint64_t address, size_t n) noexcept {
  core::log_warning("the private segment of rank %d's endpoint %u is not mapped in its process at 0x%llx (%zu "
                    "bytes): was its memory freed while it was still the segment? The long message comes back",
                    to.rank, to.slot, static_cast<unsigned long long>(address), n);
}

/// Writes argument words 8 and on into a packet's further lines.
void fill_more_args(const shm::queue_ref& q, uint32_t line, uint32_t lines, const uint32_t* args,
                    unsigned nargs) noexcept {
  if (lines >= 2) {
    shm::packet_tail& t = shm::tail_at(q, line + 1);
    // Relaxed: its own index + 1 (see packet.hpp); the release in publish()
    // orders it with everything else.
    t.seq.store(line + 2, std::memory_order_relaxed);
    if (nargs > shm::args_in_first_line)
      std::memcpy(t.args, args + shm::args_in_first_line,
                  (std::min(nargs, shm::args_in_first_line + shm::args_in_second_line) - shm::args_in_first_line) *
                      sizeof(uint32_t));
  }
  if (lines >= 3) {
    shm::packet_extra& x = shm::extra_at(q, line + 2);
    x.seq.store(line + 3, std::memory_order_relaxed);  // relaxed: as above
    x.shared.store(0, std::memory_order_relaxed);      // relaxed: as above
    constexpr unsigned before = shm::args_in_first_line + shm::args_in_second_line;
    if (nargs > before) std::memcpy(x.args, args + before, (nargs - before) * sizeof(uint32_t));
  }
}

/// The cross-memory write of an asynchronous long message, after its claim
/// (cold: kept out of try_enqueue, which every message goes through).
/// False when it failed (m.faulted: the address is not mapped there).
[[gnu::cold, gnu::noinline]] bool write_after_claim(const am::remote_endpoint& to, const outgoing& m) noexcept {
  const cma::result r = cma::write_into(m.direct_pid, m.direct, m.direct_data, m.direct_bytes);
  if (r == cma::result::done) return true;
  if (r == cma::result::fault) cma_fault(to, reinterpret_cast<uint64_t>(m.direct), m.direct_bytes);
  m.faulted = r == cma::result::fault;
  return false;
}

enum class claim_result { sent, full, gone };

/// Claims room, fills the packet and publishes it, as endpoint `source`, to
/// the endpoint whose state is `expect`. full: nothing written, no room.
/// gone: the endpoint was freed (or its slot taken) before the claim took
/// effect; the claimed lines are published as a cancelled packet, nothing
/// lands in its segment, and the caller returns the message itself.
/// IntoProcess: the direct copy goes into another process's memory by
/// cross-memory attach (m.direct_pid), a failure of which cancels the packet
/// (a separate instance: the branch costs every other message ~10% of an
/// 8-byte long stream's rate).
template <bool IntoProcess = false>
claim_result try_enqueue(am::remote_endpoint& to, bool reply, const outgoing& m, uint32_t source,
                         uint64_t expect) noexcept {
  const shm::queue_ref& q = reply ? to.view.reply : to.view.request;
  shm::head_cache& cache = reply ? to.reply_cache : to.request_cache;
  const uint8_t flags = m.flags | shm::line_flags(m.kind, m.nargs);
  const uint32_t lines = shm::lines_of(flags);
  shm::claim c;
  if (!shm::try_claim(q, cache, lines, m.ring_bytes, c)) return claim_result::full;
  // seq_cst, after the seq_cst claim: the sender's half of the handshake
  // with an owner freeing its endpoint (endpoint.cpp, retire()): either the
  // owner's drain, which starts after its seq_cst store of the state, sees
  // this claim, or this load sees that store.
  bool gone = to.view.header->state.load(std::memory_order_seq_cst) != expect;
  shm::packet& p = shm::line_at(q, c.line);
  p.kind = gone ? packet_kind::cancelled : m.kind;
  p.handler = m.handler;
  p.nargs = static_cast<uint8_t>(m.nargs);
  p.flags = flags;
  p.source = source;
  p.length = m.length;
  p.dst_gen = shm::gen32(shm::generation_of(expect));
  p.src_gen = m.src_gen;
  p.tag = m.tag;
  if (m.nargs) std::memcpy(p.args, m.args, std::min(m.nargs, shm::args_in_first_line) * sizeof(uint32_t));
  if (lines >= 2) {
    shm::packet_tail& t = shm::tail_at(q, c.line + 1);
    t.piece = m.piece;
    t.offset = m.offset;
    t.aux = m.aux;
  }
  fill_more_args(q, c.line, lines, m.args, m.nargs);
  if (!gone) {
    if (m.ring_bytes) std::memcpy(shm::ring_at(q, c.ring_line), m.ring_data, m.ring_bytes);
    if constexpr (IntoProcess) {
      // Into a private segment of another process: a failure now (its
      // memory unmapped, the process gone) cancels the claimed packet.
      // (A shared copy writes after publishing: no direct bytes here.)
      m.line = c.line;
      if (m.direct_bytes && !write_after_claim(to, m)) {
        p.kind = packet_kind::cancelled;
        gone = true;
      }
    } else if (m.direct_bytes) {
      std::memmove(m.direct, m.direct_data, m.direct_bytes);  // may overlap (to oneself)
    }
  }
  core::sent_outside();  // (TSan only) the message may reach us back through another process
  shm::publish(q, c);
  if (c.wake) [[unlikely]]
    shm::wake(shm::wake_word(q));
  return gone ? claim_result::gone : claim_result::sent;
}

/// Sends one packet, waiting for room as `policy` says.
template <bool IntoProcess = false>
status enqueue(endpoint_impl& from, am::remote_endpoint& to, bool reply, const outgoing& m, when_full policy,
               uint64_t expect) noexcept {
  for (unsigned round = 0;; ++round) {
    const claim_result r = try_enqueue<IntoProcess>(to, reply, m, from.id, expect);
    if (r == claim_result::sent) return status::ok;
    if (r == claim_result::gone) return status::not_sent;
    if (policy == when_full::give_up) return status::in_use;
    // A request whose destination went away while we wait would wait forever.
    if (to.view.header->state.load(std::memory_order_relaxed) != expect) return status::not_sent;
    // So would any message to a process that has exited (checked every 16
    // rounds once we yield: a system call beside sched_yield's, on a path
    // that already waits; every 1024 took 22 s on a loaded machine, where
    // each yield gives the core away for milliseconds; once found dead, at once).
    if (to.gone.load(std::memory_order_relaxed) || (time_to_look(round) && !owner_alive(*from.proc, to))) [[unlikely]]
      return status::resource;
    wait_for_room(from, policy, round);
  }
}

/// Counts this thread as copying into another endpoint's segment, from before
/// it reads where the segment is until its copy ends (see region_header::copying).
class copy_guard {
 public:
  explicit copy_guard(std::atomic<uint32_t>& c) noexcept : c_(c) {
    // seq_cst: before the segment's seqlock read; pairs with the owner's
    // seq_cst load of this counter after it published a new segment.
    c_.fetch_add(1, std::memory_order_seq_cst);
  }
  ~copy_guard() { end(); }
  void end() noexcept {
    // Release: the copy happens before an owner that sees 0 reuses the memory.
    if (!ended_) c_.fetch_sub(1, std::memory_order_release);
    ended_ = true;
  }
  copy_guard(const copy_guard&) = delete;
  copy_guard& operator=(const copy_guard&) = delete;

 private:
  std::atomic<uint32_t>& c_;
  bool ended_ = false;
};

packet_kind kind_for(message_kind k, bool reply) noexcept {
  switch (k) {
    case message_kind::short_message: return reply ? packet_kind::short_reply : packet_kind::short_request;
    case message_kind::medium: return reply ? packet_kind::medium_reply : packet_kind::medium_request;
    case message_kind::long_message: return reply ? packet_kind::long_reply : packet_kind::long_request;
  }
  return packet_kind::short_request;
}

}  // namespace

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
    case packet_kind::returned:
    case packet_kind::cancelled: return message_op::reply_long;
  }
  return message_op::request;
}

endpoint_name name_of(const endpoint_impl& here, uint32_t id, uint32_t gen) noexcept {
  endpoint_name n{here.proc->job_id(), static_cast<uint32_t>(am::source_rank(id)), am::source_slot(id), gen};
  if (am::remote_endpoint* r = here.proc->remote(id)) {
    // Relaxed: a name for handler 0 or a token, as it is now. The whole
    // generation, when the endpoint we know of is the one meant.
    const uint64_t whole = r->net ? r->peer_gen.load(std::memory_order_relaxed)
                                  : shm::generation_of(r->view.header->state.load(std::memory_order_relaxed));
    if (shm::gen32(whole) == gen) n.generation = whole;
  }
  return n;
}

namespace {

/// What a long message into a private segment came to: sent, or refused
/// with `s`, or it comes back to handler 0 with `why`.
struct private_result {
  status s = status::ok;
  bool comes_back = false;
  return_reason why = return_reason::bad_endpoint;
};

/// The end of a shared copy (see packet.hpp's flag_shared_copy), after its
/// packet is published at `line` of `to`'s request queue: writes the front
/// of the payload into the segment at `dst`; then, if the receiver has
/// claimed the rest, waits until it has pulled it (our buffer must not change
/// meanwhile), else writes the rest too.
[[gnu::noinline]] private_result finish_shared_copy(endpoint_impl& from, am::remote_endpoint& to, uint32_t line,
                                                    const std::byte* data, size_t length, size_t front,
                                                    std::byte* dst) noexcept {
  const shm::queue_ref& q = to.view.request;
  std::atomic<uint32_t>& word = shm::extra_at(q, line + 2).shared;
  const uint32_t done_line = line + 3;  // the head reaches it once the receiver is done with the packet
  // Writes the rest of the payload (ours to write) and sets the last bit.
  auto write_rest = [&](cma::result r) -> private_result {
    if (r == cma::result::done) r = cma::write_into(to.pid, dst + front, data + front, length - front);
    if (r == cma::result::fault) cma_fault(to, reinterpret_cast<uint64_t>(dst), length);
    // Release: our bytes are in place before the receiver sees the bit.
    word.fetch_or(r == cma::result::done ? shm::shared_all_written : shm::shared_failed, std::memory_order_release);
    // A failure comes back from the receiver (it sees shared_failed), unless it is gone.
    if (r == cma::result::gone) return {status::ok, true, return_reason::unreachable};
    return {};
  };
  const cma::result r = cma::write_into(to.pid, dst, data, front);
  if (r != cma::result::done) return write_rest(r);
  // Acquire and release: our front is in place before the receiver sees the
  // bit, and we see whether it claimed the rest first.
  if (!(word.fetch_or(shm::shared_front_written | shm::shared_taken, std::memory_order_acq_rel) &
        shm::shared_claimed))
    return write_rest(r);
  for (unsigned round = 0;; ++round) {
    // The word first, then the head: a head short of the packet means the
    // word we read was still this packet's (its lines are freed only after).
    const uint32_t bits = word.load(std::memory_order_acquire);
    // Acquire: pairs with the receiver's release of its head.
    const uint32_t head = shm::line_index(q.control->head.load(std::memory_order_acquire));
    if (static_cast<int32_t>(head - done_line) >= 0 || (bits & shm::shared_pulled)) return {};
    if (bits & shm::shared_refused) {
      to.no_pull.store(true, std::memory_order_relaxed);
      return write_rest(r);
    }
    // The receiver died halfway: the message went with it.
    if (to.gone.load(std::memory_order_relaxed) || (time_to_look(round) && !owner_alive(*from.proc, to)))
      [[unlikely]]
      return {status::ok, true, return_reason::unreachable};
    if (round > 64) sched_yield();  // the receiver, in the middle of its copy, may need this core
  }
}

/// A long message into a segment outside shared memory (the owner's own
/// memory at `seg_addr` in its process): straight into it where the kernel
/// lets us (cross-memory attach: one copy, by the kernel), still inside the
/// copy guard (the owner waits for it before the program may free that
/// memory, see endpoint.cpp's publish_segment). A blocking request of
/// CLUMP_CMA_SPLIT bytes or more is a shared copy: the receiver pulls half
/// while we write the other half, on two cores. Else, and above
/// CLUMP_CMA_MAX, through the ring in pieces that the receiver copies into
/// place, the last one running the handler.
[[gnu::noinline]] private_result send_private_long(endpoint_impl& from, am::remote_endpoint& to, bool reply,
                                                   outgoing& m, const void* data, size_t length, uint64_t offset,
                                                   uint64_t seg_addr, when_full policy, uint64_t expect,
                                                   copy_guard& copying) noexcept {
  auto back = [](return_reason why) { return private_result{status::ok, true, why}; };
  const bool shared = !reply && policy != when_full::give_up && from.cma_split && length >= from.cma_split &&
                      !to.no_pull.load(std::memory_order_relaxed);
  if (length && from.cma_max && (length <= from.cma_max || shared) && seg_addr &&
      to.cma.load(std::memory_order_relaxed) >= 0) {
    std::byte* dst = reinterpret_cast<std::byte*>(seg_addr) + offset;
    if (to.rank == from.proc->rank()) {  // our own process: the address is ours
      if (policy == when_full::give_up) {
        m.direct = dst;
        m.direct_data = data;
        m.direct_bytes = length;
      } else {
        std::memmove(dst, data, length);
        copying.end();
      }
      return {enqueue(from, to, reply, m, policy, expect)};
    }
    if (policy == when_full::give_up || shared) {
      // Asynchronous: claim first, so that a full queue leaves the segment
      // untouched; the write follows the claim. A shared copy writes after
      // publishing. Whether the kernel allows it is found out first, without writing.
      const cma::result r = to.cma.load(std::memory_order_relaxed) > 0 ? cma::result::done : cma::probe(to.pid, dst);
      if (r == cma::result::gone) return back(return_reason::unreachable);
      if (r == cma::result::fault) {
        cma_fault(to, seg_addr + offset, length);
        return back(return_reason::bad_segment_offset);
      }
      if (r == cma::result::refused) cma_refused(to);
      if (r == cma::result::done) {
        to.cma.store(1, std::memory_order_relaxed);
        m.direct_pid = to.pid;
        if (shared) {
          const size_t front = (length / 2) & ~size_t{4095};
          m.flags = shm::flag_shared_copy | shm::flag_two_lines | shm::flag_three_lines;
          m.piece = static_cast<uint32_t>(front);
          m.aux = reinterpret_cast<uint64_t>(data);
          const status s = enqueue<true>(from, to, reply, m, policy, expect);
          if (s != status::ok) return {s};
          return finish_shared_copy(from, to, m.line, static_cast<const std::byte*>(data), length, front, dst);
        }
        m.direct = dst;
        m.direct_data = data;
        m.direct_bytes = length;
        const status s = enqueue<true>(from, to, reply, m, policy, expect);
        if (s == status::not_sent && m.faulted) return back(return_reason::bad_segment_offset);
        return {s};
      }
    } else {
      switch (cma::write_into(to.pid, dst, data, length)) {
        case cma::result::done:
          to.cma.store(1, std::memory_order_relaxed);
          copying.end();
          return {enqueue(from, to, reply, m, policy, expect)};
        case cma::result::gone: return back(return_reason::unreachable);
        case cma::result::fault:
          cma_fault(to, seg_addr + offset, length);
          return back(return_reason::bad_segment_offset);
        case cma::result::refused:
          cma_refused(to);  // and through the ring below
          break;
      }
    }
  }
  copying.end();
  // Pieces fit both our medium limit and half the receiver's ring.
  const size_t piece =
      std::min<size_t>(from.max_medium, (reply ? to.view.reply : to.view.request).ring_lines * shm::cache_line / 2);
  const auto* src = static_cast<const std::byte*>(data);
  size_t done = 0;
  outgoing part{};
  part.kind = reply ? packet_kind::long_piece_reply : packet_kind::long_piece;
  part.flags = shm::flag_ring | shm::flag_staged;
  part.tag = m.tag;
  part.src_gen = m.src_gen;
  while (length - done > piece) {
    part.length = static_cast<uint32_t>(piece);
    part.piece = static_cast<uint32_t>(piece);
    part.offset = offset + done;
    part.ring_data = src + done;
    part.ring_bytes = piece;
    const status s = enqueue(from, to, reply, part,
                             done ? (policy == when_full::give_up ? when_full::poll_bundle : policy) : policy, expect);
    if (s != status::ok) return {s};
    done += piece;
  }
  m.flags = shm::flag_ring | shm::flag_staged;
  m.piece = static_cast<uint32_t>(length - done);
  m.ring_data = src + done;
  m.ring_bytes = length - done;
  return {enqueue(from, to, reply, m, done && policy == when_full::give_up ? when_full::poll_bundle : policy, expect)};
}

}  // namespace

status send_message(endpoint_impl& from, am::remote_endpoint& to, bool reply, message_kind kind, handler_index h,
                    const uint32_t* args, unsigned nargs, const void* data, size_t length, uint64_t offset,
                    tag_t tag, when_full policy, const endpoint_name* dest_name, uint64_t expect) noexcept {
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
  m.src_gen = shm::gen32(from.generation);
  m.length = static_cast<uint32_t>(length);
  const message_op op = op_of(m.kind);
  // A message that cannot be delivered: back to handler 0, a reply as a
  // request (AM-2's AM_REPLY_* opcodes; see returns.cpp's run_returned for
  // an endpoint without handler 0).
  auto undeliverable = [&](return_reason why) {
    return_locally(from, why, op, h, args, nargs, length, offset, destination_name(from, to, dest_name, expect), tag);
    return status::ok;
  };
  status s = status::ok;
  if (to.net) {
    // The network: the destination checks the segment, its tag and its own
    // limits on arrival, before any fragment lands.
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
      // From here to the end of a direct copy, the owner may not release the
      // segment we are about to write into.
      copy_guard copying(from.proc->region().copying());
      // A consistent pair (seqlock); the receiver checks the bounds again on arrival.
      uint64_t seg_off = 0, seg_len = 0;
      while (!shm::read_segment(*to.view.header, seg_off, seg_len))
        if (!owner_alive(*from.proc, to)) return undeliverable(return_reason::unreachable);  // died mid-change
      if (offset > seg_len || length > seg_len - offset) [[unlikely]]
        return undeliverable(return_reason::bad_segment_offset);
      // The tag and the identity of the destination guard every byte: they
      // are checked before any byte lands (the receiver checks them again).
      // Relaxed: the owner's fields, as they are now (see queue_block.hpp).
      if (!tag_accepts(to.view.header->tag.load(std::memory_order_relaxed), tag)) [[unlikely]]
        return undeliverable(return_reason::bad_tag);
      if (to.view.header->state.load(std::memory_order_relaxed) != expect) [[unlikely]]
        return undeliverable(return_reason::bad_endpoint);
      m.offset = offset;
      if (seg_off != shm::private_segment) {
        // The segment lies in the owner's region (checked, since another
        // process wrote the offsets): a corrupt header cannot aim us elsewhere.
        if (seg_off > to.region_size || seg_len > to.region_size - seg_off) [[unlikely]]
          return undeliverable(return_reason::bad_segment_offset);
        // Single copy: straight into the destination's segment, mapped here.
        std::byte* dst = to.region_base + seg_off + offset;
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
          copying.end();
        }
        s = enqueue(from, to, reply, m, policy, expect);
        break;
      }
      // A private segment (out of line: the shared path above stays as it
      // was). Its address is read here, apart; a segment that changed
      // meanwhile takes the ring, which the receiver checks on arrival.
      uint64_t seg_addr = 0, off2 = 0, len2 = 0;
      if (!shm::read_segment(*to.view.header, off2, len2, &seg_addr) || off2 != seg_off || len2 != seg_len)
        seg_addr = 0;
      const private_result r = send_private_long(from, to, reply, m, data, length, offset, seg_addr, policy, expect,
                                                 copying);
      if (r.comes_back) return undeliverable(r.why);
      s = r.s;
      break;
    }
  }
  if (s == status::not_sent || s == status::resource) [[unlikely]]
    return undeliverable(s == status::not_sent ? return_reason::bad_endpoint : return_reason::unreachable);
  if (s != status::ok) return s;
  (reply ? from.replies_sent : from.requests_sent)[k].add(1, par);
  if (length) (reply ? from.reply_bytes_sent : from.request_bytes_sent)[k].add(length, par);
  return status::ok;
}

inject_result inject(am::remote_endpoint& to, bool reply, uint32_t source, uint32_t source_gen, packet_kind kind,
                     handler_index h, const uint32_t* args, unsigned nargs, uint32_t length, uint64_t offset,
                     tag_t tag, uint64_t aux, const void* ring_data, size_t ring_bytes, uint64_t expect) noexcept {
  outgoing m{};
  m.kind = kind;
  m.handler = h;
  m.args = args;
  m.nargs = nargs;
  m.length = length;
  m.offset = offset;
  m.tag = tag;
  m.aux = aux;
  m.src_gen = source_gen;
  if (ring_bytes || kind == packet_kind::medium_request || kind == packet_kind::medium_reply) {
    m.flags = shm::flag_ring;
    m.ring_data = ring_data;
    m.ring_bytes = ring_bytes;
  }
  switch (try_enqueue(to, reply, m, source, expect)) {
    case claim_result::sent: return inject_result::sent;
    case claim_result::full: return inject_result::full;
    case claim_result::gone: break;
  }
  return inject_result::gone;
}

// send-stage: checks (the markers split the short send into the stages of the
// SC97 paper's Figure 4 for bench/send-breakdown; comments only)
/// The common case in one piece: a short message of at most 8 words to a
/// queue with room, whose endpoint is still the one meant. Anything else (a
/// full queue, more words, an endpoint freed meanwhile) returns false and
/// takes send_message, which checks, waits and handles errors.
static inline bool try_send_short(endpoint_impl& from, am::remote_endpoint& to, bool reply, handler_index h,
                                  const uint32_t* args, unsigned nargs, tag_t tag, uint64_t expect) noexcept {
  if (nargs > shm::args_in_first_line || to.net) return false;
  // send-stage: locate
  const shm::queue_ref& q = reply ? to.view.reply : to.view.request;
  shm::claim c;
  // send-stage: claim (and its room check; see try_claim)
  if (!shm::try_claim(q, reply ? to.reply_cache : to.request_cache, 1, 0, c)) return false;
  // seq_cst: see try_enqueue.
  const bool gone = to.view.header->state.load(std::memory_order_seq_cst) != expect;
  // send-stage: fill
  shm::packet& p = shm::line_at(q, c.line);
  p.kind = gone ? packet_kind::cancelled : reply ? packet_kind::short_reply : packet_kind::short_request;
  p.handler = h;
  p.nargs = static_cast<uint8_t>(nargs);
  p.flags = 0;
  p.source = from.id;
  p.length = 0;
  p.dst_gen = shm::gen32(shm::generation_of(expect));
  p.src_gen = shm::gen32(from.generation);
  p.tag = tag;
  for (unsigned i = 0; i < nargs; ++i) p.args[i] = args[i];
  // send-stage: publish
  shm::publish(q, c);
  if (c.wake) [[unlikely]]
    shm::wake(shm::wake_word(q));
  // send-stage: count
  if (gone) [[unlikely]]
    return false;  // send_message finds it gone too, and returns it
  (reply ? from.replies_sent : from.requests_sent)[0].add(1, from.parallel);
  return true;
}

// send-stage: checks
/// True when translation `t` names an endpoint that may receive a message
/// now; otherwise the message goes to handler 0 (unmapped entry, endpoint
/// freed, process exited) and false comes back.
static am::remote_endpoint* deliverable(endpoint_impl& e, const translation& t, message_op op, handler_index h,
                                        const uint32_t* args, unsigned nargs, size_t length, uint64_t offset) noexcept {
  am::remote_endpoint* to = remote_of(e, t);
  if (!to) [[unlikely]] {
    // Unmapped, or its region could not be mapped (said in the log).
    if (t.used) return_locally(e, return_reason::unreachable, op, h, args, nargs, length, offset, t.name, t.tag);
    else return_locally(e, return_reason::bad_entry, op, h, args, nargs, length, offset, endpoint_name{}, 0);
    return nullptr;
  }
  // Relaxed: see queue_block.hpp and remote_endpoint::gone.
  const bool gone = to->gone.load(std::memory_order_relaxed);
  // Over the network the destination checks its state itself, on arrival.
  if (gone || (!to->net && to->view.header->state.load(std::memory_order_relaxed) != t.state)) [[unlikely]] {
    return_locally(e, gone ? return_reason::unreachable : return_reason::bad_endpoint, op, h, args, nargs, length,
                   offset, t.name, t.tag);
    return nullptr;
  }
  return to;
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
  am::remote_endpoint* to = deliverable(e, t, op_of(kind_for(kind, false)), h, args, nargs, length, offset);
  if (!to) [[unlikely]]
    return status::ok;
  if (kind == message_kind::short_message && try_send_short(e, *to, false, h, args, nargs, t.tag, t.state))
    return status::ok;
  // send-stage: call (send_message itself, the slow path, is unmarked: "other")
  return send_message(e, *to, false, kind, h, args, nargs, data, length, offset, t.tag,
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
  am::remote_endpoint* to = deliverable(e, t, message_op::request_long, h, args, nargs, length, source_offset);
  if (!to) [[unlikely]]
    return status::ok;
  outgoing m{};
  m.kind = shm::packet_kind::get_request;
  m.src_gen = shm::gen32(e.generation);
  m.handler = h;
  m.args = args;
  m.nargs = nargs;
  m.length = static_cast<uint32_t>(length);
  m.offset = source_offset;
  m.aux = offset;
  m.tag = t.tag;
  status s = to->net ? send_net(e, *to, m.kind, h, args, nargs, nullptr, length, source_offset, offset, t.tag,
                                when_full::poll_bundle, t.state)
                     : enqueue(e, *to, false, m, when_full::poll_bundle, t.state);
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
  // queue_block.hpp), or what it said of itself over the network. The reply
  // goes to the very endpoint that sent the request: one freed since (or
  // replaced in its slot) gets nothing.
  const tag_t tag = to->net ? to->peer_tag.load(std::memory_order_relaxed)
                            : to->view.header->tag.load(std::memory_order_relaxed);
  const uint64_t state = to->net ? shm::alive_state(to->peer_gen.load(std::memory_order_relaxed))
                                 : to->view.header->state.load(std::memory_order_relaxed);
  if (!shm::is_alive(state) || shm::gen32(shm::generation_of(state)) != source_gen_) [[unlikely]] {
    // The requester was freed: the reply comes back to our handler 0.
    const message_op op = kind == message_kind::short_message ? message_op::reply
                          : kind == message_kind::medium      ? message_op::reply_medium
                                                              : message_op::reply_long;
    return_locally(*ep_, return_reason::bad_endpoint, op, h, args, nargs, length, offset,
                   name_of(*ep_, source_, source_gen_), tag);
    replied_ = true;
    return status::ok;
  }
  if (kind == message_kind::short_message && try_send_short(*ep_, *to, true, h, args, nargs, tag, state)) {
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
