#pragma once
// The shared-memory transport's short send, inline: the hot path of every
// short request and reply between the processes of a node, which does not go
// through the transport interface (see am/transport.hpp). The send-stage
// markers split it for bench/send-breakdown.

#include <algorithm>
#include <atomic>

#include "am/endpoint_impl.hpp"
#include "shm/queue.hpp"
#include "shm/wake.hpp"

namespace clump::detail {

/// The tag and state of `to`, an endpoint of this node, as its queue block
/// says now (shm_transport::describe, inline for the reply path).
inline void describe_shm(const am::remote_endpoint& to, tag_t& tag, uint64_t& state) noexcept {
  // Relaxed: the owner's fields, as they are now (see queue_block.hpp).
  tag = to.view.header->tag.load(std::memory_order_relaxed);
  state = to.view.header->state.load(std::memory_order_relaxed);
}

// send-stage: checks (the markers split the short send into the stages of the
// SC97 paper's Figure 4 for bench/send-breakdown; comments only)
/// The common case in one piece: a short message of at most 8 words to a
/// queue with room, whose endpoint is still the one meant. Anything else (a
/// full queue, more words, an endpoint freed meanwhile) returns false and
/// takes send_message, which checks, waits and handles errors.
inline bool try_send_short(endpoint_impl& from, am::remote_endpoint& to, bool reply, handler_index h,
                                  const uint32_t* args, unsigned nargs, tag_t tag, uint64_t expect) noexcept {
  if (nargs > shm::args_in_first_line || to.kind != am::transport_kind::shm) return false;
  // send-stage: locate
  const shm::queue_ref& q = reply ? to.view.reply : to.view.request;
  shm::claim c;
  // send-stage: claim (and its room check; see try_claim)
  if (!shm::try_claim(q, reply ? to.reply_cache : to.request_cache, 1, 0, c)) return false;
  // seq_cst: see try_enqueue.
  const bool gone = to.view.header->state.load(std::memory_order_seq_cst) != expect;
  // send-stage: fill
  shm::packet& p = shm::line_at(q, c.line);
  p.kind = gone ? shm::packet_kind::cancelled : reply ? shm::packet_kind::short_reply : shm::packet_kind::short_request;
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

}  // namespace clump::detail
