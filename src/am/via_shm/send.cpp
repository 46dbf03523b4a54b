// The shared-memory transport's sending side: claims room in the destination
// endpoint's queue, fills the packet and publishes it (src/shm/queue.hpp);
// long payloads go straight into the destination's segment, by memmove when
// it is mapped here, by cross-memory attach into another process's own
// memory (cma.hpp), or through the ring in pieces.

#include <sched.h>

#include <cerrno>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "am/send.hpp"
#include "am/via_shm/cma.hpp"
#include "am/via_shm/transport.hpp"
#include "core/log.hpp"
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
  const void* ring_tail = nullptr;  // if set: ring_data holds ring_head bytes, ring_tail the rest
  size_t ring_head = 0;
  std::byte* direct = nullptr;      // copied into the destination segment after the claim
  const void* direct_data = nullptr;
  size_t direct_bytes = 0;
  pid_t direct_pid = 0;             // non-zero: `direct` is an address in that process (cross-memory attach)
  mutable bool faulted = false;     // that address turned out not to be mapped there (the packet was cancelled)
  mutable uint32_t line = 0;        // into another process: the first line claimed
};

[[gnu::cold]] bool owner_alive(am::process& proc, am::remote_endpoint& to) noexcept {
  return !proc.rank_failed(to.rank);
}
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
    if (m.ring_bytes) {
      std::byte* ring = shm::ring_at(q, c.ring_line);
      if (m.ring_tail) [[unlikely]] {
        std::memcpy(ring, m.ring_data, m.ring_head);
        std::memcpy(ring + m.ring_head, m.ring_tail, m.ring_bytes - m.ring_head);
      } else {
        std::memcpy(ring, m.ring_data, m.ring_bytes);
      }
    }
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

inject_result inject(am::remote_endpoint& to, bool reply, uint32_t source, uint32_t source_gen, packet_kind kind,
                     handler_index h, const uint32_t* args, unsigned nargs, uint32_t length, uint64_t offset,
                     tag_t tag, uint64_t aux, const void* ring_data, size_t ring_bytes, uint64_t expect,
                     const void* ring_tail, size_t ring_head) noexcept {
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
    if (ring_tail && ring_head <= ring_bytes) {
      m.ring_tail = ring_tail;
      m.ring_head = ring_head;
    }
  }
  switch (try_enqueue(to, reply, m, source, expect)) {
    case claim_result::sent: return inject_result::sent;
    case claim_result::full: return inject_result::full;
    case claim_result::gone: break;
  }
  return inject_result::gone;
}

}  // namespace clump::detail

namespace clump::am {

using namespace clump::detail;

namespace {

[[gnu::cold]] sent misuse(const char* what) noexcept {
  core::log_error("%s", what);
  return {status::bad_arg};
}

}  // namespace

sent shm_transport::send(endpoint_impl& from, remote_endpoint& to, const message& msg, when_full policy,
                         uint64_t expect) noexcept {
  const bool reply = msg.reply();
  const size_t length = msg.length;
  outgoing m{};
  m.kind = msg.kind;
  m.handler = msg.handler;
  m.args = msg.args;
  m.nargs = msg.nargs;
  m.tag = msg.tag;
  m.src_gen = shm::gen32(from.generation);
  m.length = static_cast<uint32_t>(length);
  switch (msg.kind) {
    case packet_kind::short_request:
    case packet_kind::short_reply: return sent::of(enqueue(from, to, reply, m, policy, expect));
    case packet_kind::medium_request:
    case packet_kind::medium_reply:
      // The receiver's ring must hold two of them (its own CLUMP_* settings
      // may be smaller than ours), or the claim could never succeed.
      if (2 * shm::lines_for_bytes(length) > (reply ? to.view.reply : to.view.request).ring_lines) [[unlikely]]
        return misuse("medium payload longer than the destination's CLUMP_MAX_MEDIUM allows");
      m.flags = shm::flag_ring;
      m.ring_data = msg.data;
      m.ring_bytes = length;
      return sent::of(enqueue(from, to, reply, m, policy, expect));
    case packet_kind::get_request:
      m.offset = msg.offset;
      m.aux = msg.aux;
      return sent::of(enqueue(from, to, false, m, policy, expect));
    case packet_kind::long_request:
    case packet_kind::long_reply: break;
    default: return misuse("not a message kind a program sends");
  }
  const void* data = msg.data;
  const uint64_t offset = msg.offset;
  // From here to the end of a direct copy, the owner may not release the
  // segment we are about to write into.
  copy_guard copying(from.proc->region().copying());
  // A consistent pair (seqlock); the receiver checks the bounds again on arrival.
  uint64_t seg_off = 0, seg_len = 0;
  while (!shm::read_segment(*to.view.header, seg_off, seg_len))
    if (!owner_alive(*from.proc, to)) return sent::back(return_reason::unreachable);  // died mid-change
  if (offset > seg_len || length > seg_len - offset) [[unlikely]]
    return sent::back(return_reason::bad_segment_offset);
  // The tag and the identity of the destination guard every byte: they
  // are checked before any byte lands (the receiver checks them again).
  // Relaxed: the owner's fields, as they are now (see queue_block.hpp).
  if (!tag_accepts(to.view.header->tag.load(std::memory_order_relaxed), msg.tag)) [[unlikely]]
    return sent::back(return_reason::bad_tag);
  if (to.view.header->state.load(std::memory_order_relaxed) != expect) [[unlikely]]
    return sent::back(return_reason::bad_endpoint);
  m.offset = offset;
  if (seg_off != shm::private_segment) {
    // The segment lies in the owner's region (checked, since another
    // process wrote the offsets): a corrupt header cannot aim us elsewhere.
    if (seg_off > to.region_size || seg_len > to.region_size - seg_off) [[unlikely]]
      return sent::back(return_reason::bad_segment_offset);
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
    return sent::of(enqueue(from, to, reply, m, policy, expect));
  }
  // A private segment (out of line: the shared path above stays as it
  // was). Its address is read here, apart; a segment that changed
  // meanwhile takes the ring, which the receiver checks on arrival.
  uint64_t seg_addr = 0, off2 = 0, len2 = 0;
  if (!shm::read_segment(*to.view.header, off2, len2, &seg_addr) || off2 != seg_off || len2 != seg_len) seg_addr = 0;
  const private_result r = send_private_long(from, to, reply, m, data, length, offset, seg_addr, policy, expect,
                                             copying);
  if (r.comes_back) return sent::back(r.why);
  return sent::of(r.s);
}

}  // namespace clump::am
