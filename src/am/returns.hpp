#pragma once
// Returned messages: a message that cannot be delivered comes back to its
// sender's handler 0 with the reason, a reply as a request does (AM-2's
// AM_REPLY_* opcodes). The AM layer's ways back are all here: returns found
// at the sender (kept until its next poll), returns sent back by the
// receiver (tried once, then kept in the endpoint's outbox, then by the
// process when the endpoint is freed), the aux word that carries why, and
// handler 0 itself, and the network protocol's own two: a message refused as
// it arrives, while the network's lock is held (refuse_from_network), and
// one given back because the peer is unreachable (give_back_unreachable).

#include <clump/am.hpp>

#include <atomic>

#include "am/endpoint_impl.hpp"
#include "net/wire.hpp"
#include "shm/packet.hpp"

namespace clump::detail {

/// A returned message says why it came back and what it was in its aux word.
inline uint64_t returned_aux(return_reason why, message_op op) noexcept {
  return static_cast<uint64_t>(why) | (static_cast<uint64_t>(op) << 8);
}
inline return_reason returned_reason(uint64_t aux) noexcept { return static_cast<return_reason>(aux & 0xff); }
inline message_op returned_op(uint64_t aux) noexcept { return static_cast<message_op>((aux >> 8) & 0xff); }
/// True when `aux` names a reason and an operation that exist (another
/// process wrote it).
inline bool returned_aux_valid(uint64_t aux) noexcept {
  const uint64_t reason = aux & 0xff, op = (aux >> 8) & 0xff;
  return reason >= static_cast<uint64_t>(return_reason::bad_args) &&
         reason <= static_cast<uint64_t>(return_reason::reply_rejected) &&
         op >= static_cast<uint64_t>(message_op::request) && op <= static_cast<uint64_t>(message_op::reply_long);
}

/// Runs handler 0 for `m` (a C handler, a C++ callback, or the default:
/// a returned reply is dropped with a warning, a request is fatal).
void run_returned(endpoint_impl& e, const returned_message& m) noexcept;

/// Records a message that did not leave this process; handler 0 gets it at
/// the next poll (deliver_returns).
void return_locally(endpoint_impl& e, return_reason why, message_op op, handler_index h, const uint32_t* args,
                    unsigned nargs, size_t length, uint64_t offset, const endpoint_name& dest, tag_t tag) noexcept;
/// Delivers returns found at the sender and retries those waiting in the outbox.
unsigned deliver_returns(endpoint_impl& e) noexcept;

/// The name of `to` for handler 0: `known`, or worked out from `expect`
/// (only when a message does come back).
endpoint_name destination_name(const endpoint_impl& from, const am::remote_endpoint& to, const endpoint_name* known,
                               uint64_t expect) noexcept;

/// Sends packet `p` that `e` received, with its `args` and `offset`, back to
/// its sender's handler 0 because of `why` (a returned one is dropped).
void reject(endpoint_impl& e, const shm::packet& p, const uint32_t* args, unsigned nargs, uint64_t offset,
            return_reason why) noexcept;

/// Sends a returned message back to endpoint `to` (an id; r.to_gen says
/// which generation of it): tries once and keeps it in the outbox when the
/// queue is full. Never blocks.
void send_return(endpoint_impl& from, uint32_t to, const pending_return& r) noexcept;
/// Tries to send a returned message once; false when the queue was full.
bool try_send_return(endpoint_impl& from, uint32_t to, const pending_return& r) noexcept;
/// An endpoint being freed hands the returns it could not send yet (its
/// outbox) to the process, which keeps trying them at later polls of any
/// bundle (retry_orphans): a freed endpoint's messages still go back.
void adopt_returns(endpoint_impl& e) noexcept;
void retry_orphans(am::process& proc) noexcept;
/// True while some are waiting (relaxed: a hint for the poll loop).
extern std::atomic<bool> orphans_waiting;

/// A message from the network refused as it arrives (no such endpoint, a
/// bad tag or length), with the network's lock held: true when it goes back
/// to its sender (a request or a reply; `back` is the returned message's
/// header, which the network transport sends after the poll), false when it
/// is dropped with a warning (a returned message).
bool refuse_from_network(int peer, const net::message_header& m, return_reason why,
                         net::message_header& back) noexcept;
/// A message we sent to `peer` that will never arrive (it is unreachable)
/// comes back to its sender's handler 0; false when the sender's queue is
/// full (the network offers it again).
bool give_back_unreachable(am::process& p, int peer, const net::message_header& m, const uint32_t* args) noexcept;

}  // namespace clump::detail
