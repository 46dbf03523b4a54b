#include "am/send.hpp"

#include <sched.h>

#include <atomic>

#include "am/returns.hpp"
#include "am/via_shm/short.hpp"
#include "core/log.hpp"
#include "shm/queue.hpp"

namespace clump::detail {

namespace {

using shm::packet_kind;

[[gnu::cold]] status misuse(const char* what) noexcept {
  core::log_error("%s", what);
  return status::bad_arg;
}

}  // namespace

thread_local int unhurried_depth [[gnu::tls_model("initial-exec")]] = 0;

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
    tag_t tag = 0;
    uint64_t state = 0;
    r->via->describe(*r, tag, state);
    const uint64_t whole = shm::generation_of(state);
    if (shm::gen32(whole) == gen) n.generation = whole;
  }
  return n;
}

status send_message(endpoint_impl& from, am::remote_endpoint& to, bool reply, message_kind kind, handler_index h,
                    const uint32_t* args, unsigned nargs, const void* data, size_t length, uint64_t offset,
                    tag_t tag, when_full policy, const endpoint_name* dest_name, uint64_t expect) noexcept {
  const auto k = static_cast<unsigned>(kind);
  if (nargs > max_args) [[unlikely]]
    return misuse("a message carries at most 20 argument words");
  if (length && !data) [[unlikely]]
    return misuse("payload pointer is null but its length is not 0");
  if (kind == message_kind::medium && length > from.max_medium) [[unlikely]]
    return misuse("medium payload longer than max_medium() (CLUMP_MAX_MEDIUM); send it as a long message");
  if (kind == message_kind::long_message && length > max_long) [[unlikely]]
    return misuse("long payload longer than max_long (4 GiB - 1)");
  am::message m;
  m.kind = kind_for(kind, reply);
  m.handler = h;
  m.args = args;
  m.nargs = nargs;
  m.data = data;
  m.length = length;
  m.offset = kind == message_kind::long_message ? offset : 0;
  m.tag = tag;
  const am::sent r = to.via->send(from, to, m, policy, expect);
  if (r.comes_back) [[unlikely]] {
    // Back to handler 0, a reply as a request (AM-2's AM_REPLY_* opcodes;
    // see returns.cpp's run_returned for an endpoint without handler 0).
    return_locally(from, r.why, op_of(m.kind), h, args, nargs, length, offset,
                   destination_name(from, to, dest_name, expect), tag);
    return status::ok;
  }
  if (r.s != status::ok) return r.s;
  (reply ? from.replies_sent : from.requests_sent)[k].add(1, from.parallel);
  if (length) (reply ? from.reply_bytes_sent : from.request_bytes_sent)[k].add(length, from.parallel);
  return status::ok;
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
  const bool by_shm = to->kind == am::transport_kind::shm;
  if (gone || (by_shm && to->view.header->state.load(std::memory_order_relaxed) != t.state)) [[unlikely]] {
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
  am::message m;
  m.kind = shm::packet_kind::get_request;
  m.handler = h;
  m.args = args;
  m.nargs = nargs;
  m.length = length;
  m.offset = source_offset;
  m.aux = offset;
  m.tag = t.tag;
  const am::sent r = to->via->send(e, *to, m, when_full::poll_bundle, t.state);
  if (r.comes_back) {
    return_locally(e, r.why, message_op::request_long, h, args, nargs, length, source_offset, t.name, t.tag);
    return status::ok;
  }
  const status s = r.s;
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
  // The requester's tag and state, read from its queue block (inline: the
  // hot path), or what it said of itself over the network. The reply goes to
  // the very endpoint that sent the request: one freed since (or replaced in
  // its slot) gets nothing.
  tag_t tag = 0;
  uint64_t state = 0;
  if (to->kind == am::transport_kind::shm) describe_shm(*to, tag, state);
  else to->via->describe(*to, tag, state);
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

unhurried_sends::unhurried_sends() noexcept { ++detail::unhurried_depth; }
unhurried_sends::~unhurried_sends() { --detail::unhurried_depth; }

}  // namespace clump
