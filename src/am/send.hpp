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

/// Sends one message of `kind` to `to` (its request queue for requests, its
/// reply queue otherwise). Checks sizes and, for long messages, the
/// destination segment; undeliverable messages go to handler 0 locally.
/// `dest_name` is the destination's name as the sender knows it (for handler
/// 0), or nullptr to work it out only if the message does come back.
/// `expect` is the destination's queue block state the message is meant for:
/// if it changes while the sender waits for room (endpoint freed, slot
/// reused), the message is not delivered. A reply that cannot be delivered
/// is dropped with a warning (its requester is gone) and returns not_sent.
status send_message(endpoint_impl& from, am::remote_endpoint& to, bool reply, message_kind kind, handler_index h,
                    const uint32_t* args, unsigned nargs, const void* data, size_t length, uint64_t offset,
                    tag_t tag, when_full policy, const endpoint_name* dest_name, uint32_t expect) noexcept;

/// Sends a returned message back to endpoint `to` (an id): tries once and
/// keeps it in the outbox when the queue is full. Never blocks.
void send_return(endpoint_impl& from, uint32_t to, const pending_return& r) noexcept;
/// Tries to send a returned message once; false when the queue was full.
bool try_send_return(endpoint_impl& from, uint32_t to, const pending_return& r) noexcept;

/// The name of the endpoint with this id as it is now.
endpoint_name name_of(const endpoint_impl& here, uint32_t id) noexcept;

message_op op_of(shm::packet_kind k) noexcept;

/// Waits one round for room in a full queue or window, as `policy` says (polls).
void wait_for_room(endpoint_impl& from, when_full policy, unsigned round) noexcept;

/// Puts one packet into `to`'s request (or reply) queue as if endpoint
/// `source` had sent it, when there is room; never waits. The network
/// protocol's deliveries come in this way, so one dispatch serves both.
bool inject(am::remote_endpoint& to, bool reply, uint32_t source, shm::packet_kind kind, handler_index h,
            const uint32_t* args, unsigned nargs, uint32_t length, uint64_t offset, tag_t tag, uint64_t aux,
            const void* ring_data, size_t ring_bytes) noexcept;

}  // namespace clump::detail
