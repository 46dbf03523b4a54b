#pragma once
// The send path shared by requests, replies, returned messages and gets.

#include <clump/am.hpp>

#include "am/endpoint_impl.hpp"
#include "shm/packet.hpp"

namespace clump::detail {

/// What a sender does when the destination queue is full.
enum class when_full {
  poll_bundle,   // a request: run the handlers of the whole bundle, then retry
  poll_replies,  // a reply: drain our own reply queue only (we may be inside a request handler)
  give_up,       // asynchronous: return status::in_use
};

/// True when an endpoint whose tag is `mine` takes a message sent with `sent`.
inline bool tag_accepts(tag_t mine, tag_t sent) noexcept {
  return mine == tag_all || (mine != tag_none && sent == mine);
}

/// Sends one message of `kind` to `to` (its request queue for requests, its
/// reply queue otherwise). Checks sizes and, for long messages, the
/// destination segment, its tag and its generation before any byte of the
/// payload lands; undeliverable messages go to handler 0 locally.
/// `dest_name` is the destination's name as the sender knows it (for handler
/// 0), or nullptr to work it out only if the message does come back.
/// `expect` is the destination's state (shm::alive_state of its generation)
/// the message is meant for: if it changes before the message is in the
/// queue (endpoint freed, slot reused), the message is not delivered. A
/// reply that cannot be delivered comes back to the replier's handler 0, as
/// a request does (AM-2's AM_REPLY_* opcodes).
status send_message(endpoint_impl& from, am::remote_endpoint& to, bool reply, message_kind kind, handler_index h,
                    const uint32_t* args, unsigned nargs, const void* data, size_t length, uint64_t offset,
                    tag_t tag, when_full policy, const endpoint_name* dest_name, uint64_t expect) noexcept;

/// Depth of clump::unhurried_sends scopes on this thread: the network may
/// then hold a message for the ones that follow it (see network::send).
extern thread_local int unhurried_depth [[gnu::tls_model("initial-exec")]];

/// The name of the endpoint with this id and (low 32 bits of) generation,
/// with its whole generation where this process can still tell it.
endpoint_name name_of(const endpoint_impl& here, uint32_t id, uint32_t gen) noexcept;

message_op op_of(shm::packet_kind k) noexcept;

/// Waits one round for room in a full queue or window, as `policy` says (polls).
void wait_for_room(endpoint_impl& from, when_full policy, unsigned round) noexcept;

/// What inject() did.
enum class inject_result { sent, full, gone };

/// Puts one packet into `to`'s request (or reply) queue as if endpoint
/// `source` (generation `source_gen`) had sent it, when there is room and `to`
/// still has state `expect`; never waits. The network protocol's deliveries
/// come in this way, so one dispatch serves both. With `ring_tail`, the
/// payload's first `ring_head` bytes are at `ring_data` and the rest at
/// `ring_tail` (a message assembled from fragments, its last one unmoved).
inject_result inject(am::remote_endpoint& to, bool reply, uint32_t source, uint32_t source_gen, shm::packet_kind kind,
                     handler_index h, const uint32_t* args, unsigned nargs, uint32_t length, uint64_t offset,
                     tag_t tag, uint64_t aux, const void* ring_data, size_t ring_bytes, uint64_t expect,
                     const void* ring_tail = nullptr, size_t ring_head = 0) noexcept;

}  // namespace clump::detail
