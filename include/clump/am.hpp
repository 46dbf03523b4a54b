#pragma once
/// \file
/// clump's Active Messages (AM-II) in C++.
///
/// An `endpoint` receives messages and names the destinations it sends to
/// through its translation table (small index -> endpoint name + tag). A
/// `bundle` polls its endpoints together and sleeps when they are idle.
/// Handlers are ordinary lambdas or functions, registered in the same order on
/// every process so that their indices agree:
///
/// \code
///   auto pong = ep.on_reply([&](clump::token&, uint32_t v) { got = v; });
///   auto ping = ep.on_request([&](clump::token& t, uint32_t v) { t.reply(pong, v + 1); });
///   ep.request(1, ping, 41u);
/// \endcode
///
/// A handler's argument list fixes its message: `(token&, A...)` is a short
/// message; `(token&, std::span<const std::byte>, A...)` takes a payload
/// (medium or long). Arguments are trivially copyable values of at most 20
/// 32-bit words in all. The data path (sends, polls) returns `status` and never
/// throws; setup throws `clump::error`.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <clump/status.hpp>

namespace clump {

using tag_t = uint64_t;
/// A tag that matches nothing: an endpoint with it receives no message.
inline constexpr tag_t tag_none = 0;
/// A tag that accepts every message, whatever tag it was sent with.
inline constexpr tag_t tag_all = 1;

using handler_index = uint8_t;
/// Handlers per endpoint; index 0 is the returned-message handler.
inline constexpr unsigned max_handlers = 256;
/// Argument words a message carries at most.
inline constexpr unsigned max_args = 20;
/// Payload bytes of a long message at most (it must also fit the segment).
inline constexpr size_t max_long = 0xffffffffu;
/// Largest medium payload (the CLUMP_MAX_MEDIUM setting, 64 KiB by default).
size_t max_medium() noexcept;

/// An endpoint's global name: a plain value, valid across the job. No two
/// endpoints of a job ever have the same name: a slot's generation counts
/// the endpoints that have held it (64 bits: it never wraps), so a message
/// sent under an old name comes back (bad_endpoint) rather than reaching the
/// endpoint that took the slot since.
struct endpoint_name {
  uint64_t job = 0;
  uint32_t rank = 0;
  uint32_t slot = 0;        ///< the endpoint's slot in its process
  uint64_t generation = 0;  ///< which of the endpoints that have held the slot
  friend bool operator==(const endpoint_name&, const endpoint_name&) = default;
};

/// Why a message came back to its sender's handler 0. Values are AM-2's.
enum class return_reason : int {
  bad_args = 1,            ///< the handler does not take these arguments or payload
  bad_entry = 2,           ///< the translation table entry is not mapped
  bad_tag = 3,             ///< the destination's tag does not match
  bad_handler = 4,         ///< no handler at that index (or a request to a reply handler)
  bad_segment_offset = 5,  ///< a long payload falls outside the destination segment
  bad_length = 6,          ///< the payload is too long
  bad_endpoint = 7,        ///< the destination endpoint no longer exists
  congestion = 8,
  unreachable = 9,         ///< the destination's process is gone
  reply_rejected = 10,
};
const char* to_string(return_reason r) noexcept;

/// Which kind of message came back. Values are AM-2's opcodes.
enum class message_op : int {
  request = 1, request_medium = 2, request_long = 3, reply = 4, reply_medium = 5, reply_long = 6,
};

/// A message that could not be delivered, as handler 0 sees it.
struct returned_message {
  return_reason reason;
  message_op op;
  handler_index handler;             ///< the handler it was sent to
  std::span<const uint32_t> args;    ///< its argument words
  size_t length;                     ///< its payload length
  uint64_t offset;                   ///< its destination offset (long messages)
  endpoint_name destination;         ///< where it was going (its name; zero if unknown)
  tag_t tag;                         ///< the tag it was sent with
};

enum class bundle_mode {
  sequential,  ///< one thread at a time uses the bundle and its endpoints
  parallel,    ///< several threads may send and poll at once (AM_PAR)
};

enum class event_mask { none = 0, not_empty = 1 };

class endpoint;
class bundle;
class token_base;

/// Counters of one endpoint (cheap: process-local, not shared).
struct endpoint_stats {
  uint64_t requests_sent[3];   ///< short, medium, long
  uint64_t replies_sent[3];
  uint64_t requests_received[3];
  uint64_t replies_received[3];
  uint64_t returned;           ///< messages that came back to handler 0
  uint64_t bytes_sent;         ///< payload bytes (the sum of the two below)
  uint64_t request_bytes_sent[3];  ///< payload bytes of requests, by kind (short: 0)
  uint64_t reply_bytes_sent[3];    ///< payload bytes of replies, by kind
  uint64_t bytes_received;
  uint64_t send_waits;         ///< sends that found a queue full and had to poll
  /// Packets refused as malformed: another process of the node wrote garbage
  /// into this endpoint's queues. Refused, counted, never used.
  uint64_t corrupt;
};

/// Counters of this process's network protocol. All zero when the process
/// reaches every rank through shared memory (no network is opened then).
struct network_stats {
  uint64_t datagrams_sent, datagrams_received;  ///< including acks and retransmissions
  uint64_t messages_sent, messages_delivered;   ///< active messages handed over / delivered exactly once
  uint64_t retransmits;                         ///< datagrams sent again (timeout or a gap)
  uint64_t duplicates;                          ///< datagrams that arrived again and were dropped
  uint64_t out_of_order;                        ///< datagrams held until the gap before them was filled
  uint64_t acks_sent;                           ///< explicit acknowledgements (most ride on data)
  uint64_t stalls;                              ///< deliveries that waited for room in a full queue
  /// Datagrams refused and dropped, never delivered: shorter than their
  /// headers say, not clump's, another wire-format version, another job, a
  /// rank outside the job, a field out of range, not from the address of
  /// the rank they name, not authenticated (CLUMP_NET_AUTH: no or a wrong
  /// tag), or replayed (authentic, but seen before).
  uint64_t refused_truncated, refused_foreign, refused_version, refused_other_job, refused_bad_rank,
      refused_malformed, refused_source, refused_unauthenticated, refused_replayed;
  uint64_t fault_dropped, fault_duplicated, fault_reordered, fault_delayed;  ///< CLUMP_NET_FAULT at work
  uint64_t peers_unreachable;                   ///< peers declared unreachable
  uint64_t pings_sent;                          ///< keep-alives sent to peers that were silent for a while
  /// Times the library's service thread took the network over from a program
  /// that had not polled it for a while (it computed, or was not scheduled).
  uint64_t covered;
  /// Messages whose payload this process read from the sender's memory
  /// (CLUMP_NET=ofi with a provider that offers RMA; see CLUMP_OFI_RMA_MIN),
  /// and messages it sent that way.
  uint64_t messages_read, messages_sent_by_read;
  /// Send channels (two per peer) with a datagram not acknowledged yet: 0
  /// once the traffic has settled (acks are delayed by at most a few ms).
  /// While it is not 0, poll() keeps looking at the network itself.
  uint64_t unacknowledged;
  /// Receive channels partway through a message of several datagrams (the
  /// rest is on its way): 0 once the traffic has settled. While it is not 0,
  /// poll() keeps looking at the network itself.
  uint64_t partial;
};

/// This process's network counters (takes the network's lock; not for hot loops).
network_stats network_statistics() noexcept;

/// While one is alive on a thread, the messages that thread sends to a rank
/// on another node may wait in a datagram for the messages that follow them,
/// even when nothing else to that rank is in flight (otherwise such a
/// message leaves at once, so that a lone ping-pong waits for nothing). They
/// leave with the next message to the same rank that fills or closes the
/// datagram, at this process's next poll or wait, or within
/// CLUMP_NET_COALESCE_US while the program calls clump (a program that then
/// computes without calling clump has them sent by the library's service
/// thread within a few ms). For one-way traffic its sender does not wait for
/// (gas::store and gas::put use it), followed by more to the same rank: a
/// store and the request after it share one datagram. Nothing changes under
/// CLUMP_NET_COALESCE_US=0, over shared memory, or for a payload lent
/// rather than copied (CLUMP_NET_LEND). Scopes nest.
class unhurried_sends {
 public:
  unhurried_sends() noexcept;
  ~unhurried_sends();
  unhurried_sends(const unhurried_sends&) = delete;
  unhurried_sends& operator=(const unhurried_sends&) = delete;
};

/// This process's UDP address as "a.b.c.d:port", or "" when it has no
/// network (every rank shares its node). For diagnostics and fault tests.
std::string network_address();

// ---- ranks whose process is gone ------------------------------------------------
//
// A rank of this node whose process has exited (found by its pid, looked at
// while waits sleep, at most every 100 ms), or a rank on another node
// declared unreachable (CLUMP_NET_TIMEOUT_MS of silence), is failed. Under
// clumprun's default the job then ends anyway; with --keep-going the other
// ranks go on, and every wait that depends on a failed rank ends with a
// clump::error (status::resource) that names it, instead of waiting for ever:
// gas barriers, collectives, locks and completions, and wait_until (see
// bundle::wait_until). A program that handles failures itself (its handler 0
// takes the unreachable returns) calls acknowledge_failures() and waits on.

/// The ranks known to have failed, in order.
std::vector<int> failed_ranks();
/// True when `rank`'s process is known to be gone; a rank of this node is looked at now.
bool rank_failed(int rank) noexcept;
/// The failures known now no longer end waits (MPI ULFM's failure_ack):
/// the program has seen them and handles them itself.
void acknowledge_failures() noexcept;

namespace detail {
struct endpoint_impl;
struct bundle_impl;

template <class T>
inline constexpr unsigned words_of = static_cast<unsigned>((sizeof(T) + 3) / 4);

template <class... A>
inline constexpr unsigned words_in = (0u + ... + words_of<A>);

template <class T>
inline void put(uint32_t*& out, const T& v) noexcept {
  static_assert(std::is_trivially_copyable_v<T>, "message arguments must be trivially copyable");
  uint32_t w[words_of<T>] = {};
  std::memcpy(w, &v, sizeof(T));
  for (unsigned i = 0; i < words_of<T>; ++i) *out++ = w[i];
}

template <class T>
inline T get(const uint32_t*& in) noexcept {
  T v;
  std::memcpy(&v, in, sizeof(T));
  in += words_of<T>;
  return v;
}

/// Argument values packed into 32-bit words, as a message carries them.
template <class... A>
struct packed {
  uint32_t w[words_in<A...> + 1] = {};
  explicit packed(const A&... a) noexcept {
    [[maybe_unused]] uint32_t* o = w;
    (put(o, a), ...);
  }
};

/// The one shape every handler has inside clump.
using raw_handler = void (*)(void* ctx, clump::token_base& t, const uint32_t* args, unsigned nargs, std::byte* data,
                             size_t length);

enum class role : uint8_t { any, request, reply };

struct holder_base {
  virtual ~holder_base() = default;
};
template <class F>
struct holder final : holder_base {
  explicit holder(F f) : fn(std::move(f)) {}
  F fn;
};
}  // namespace detail

/// The identity of a registered handler: its index, its role (request or
/// reply), whether it takes a payload, and its argument types.
template <detail::role Role, bool Payload, class... A>
struct handler {
  handler_index index = 0;
};
template <class... A> using request_handler = handler<detail::role::request, false, A...>;
template <class... A> using reply_handler = handler<detail::role::reply, false, A...>;
template <class... A> using payload_request_handler = handler<detail::role::request, true, A...>;
template <class... A> using payload_reply_handler = handler<detail::role::reply, true, A...>;

/// What kind of message a raw send makes.
enum class message_kind : uint8_t { short_message, medium, long_message };

/// Given to every handler: says where the message came from and, in a
/// request handler, sends the one reply.
class token_base {
 public:
  /// The sender's global name.
  endpoint_name source() const noexcept;
  /// The tag the message was sent with.
  tag_t tag() const noexcept { return tag_; }
  /// The translation index under which this endpoint knows the sender, or -1.
  int source_index() const noexcept;
  /// The endpoint the message arrived at.
  endpoint& destination() const noexcept;
  /// True in a request handler that has not replied yet.
  bool can_reply() const noexcept { return is_request_ && !replied_; }
  /// The returned message, in handler 0 (else nullptr).
  const returned_message* returned() const noexcept { return returned_; }
  /// The handler index the message was sent to (in handler 0: 0).
  handler_index handler() const noexcept { return handler_; }
  /// The message's kind and whether it is a request.
  message_kind kind() const noexcept { return kind_; }
  bool is_request() const noexcept { return is_request_; }

  /// Sends the reply with raw argument words (the typed `reply` calls this).
  status reply_raw(message_kind kind, handler_index h, const uint32_t* args, unsigned nargs, const void* data,
                   size_t length, uint64_t offset) noexcept;

  // The fields below belong to clump's dispatch.
  detail::endpoint_impl* ep_ = nullptr;
  uint32_t source_ = 0;
  uint32_t source_gen_ = 0;  // the low 32 bits of the sender's generation
  message_kind kind_ = message_kind::short_message;
  handler_index handler_ = 0;
  tag_t tag_ = 0;
  bool is_request_ = false;
  bool replied_ = false;
  const returned_message* returned_ = nullptr;
};

class token : public token_base {
 public:
  /// Replies with a short message. At most one reply per request; a reply
  /// handler may not reply (returns status::bad_arg).
  template <class... A>
  status reply(reply_handler<A...> h, std::type_identity_t<A>... a) noexcept {
    detail::packed<A...> w(a...);
    return reply_raw(message_kind::short_message, h.index, w.w, detail::words_in<A...>, nullptr, 0, 0);
  }
  /// Replies with a medium message (payload copied; at most max_medium()).
  template <class... A>
  status reply(payload_reply_handler<A...> h, std::span<const std::byte> payload,
               std::type_identity_t<A>... a) noexcept {
    detail::packed<A...> w(a...);
    return reply_raw(message_kind::medium, h.index, w.w, detail::words_in<A...>, payload.data(), payload.size(), 0);
  }
  /// Replies with a long message into the requester's segment at `offset`.
  template <class... A>
  status reply_long(payload_reply_handler<A...> h, std::span<const std::byte> payload, uint64_t offset,
                    std::type_identity_t<A>... a) noexcept {
    detail::packed<A...> w(a...);
    return reply_raw(message_kind::long_message, h.index, w.w, detail::words_in<A...>, payload.data(),
                     payload.size(), offset);
  }
};

namespace detail {
template <class F>
struct signature : signature<decltype(&F::operator())> {};
template <class C, class R, class... A>
struct signature<R (C::*)(token&, A...) const> : signature<R (*)(token&, A...)> {};
template <class C, class R, class... A>
struct signature<R (C::*)(token&, A...)> : signature<R (*)(token&, A...)> {};
template <class R, class... A>
struct signature<R (*)(token&, A...)> {
  static constexpr bool payload = false;
  template <role Ro> using handler_type = handler<Ro, false, std::decay_t<A>...>;
  template <class F>
  static void invoke(void* ctx, token_base& t, const uint32_t* args, unsigned, std::byte*, size_t) {
    (void)args;
    call(static_cast<holder<F>*>(ctx)->fn, static_cast<token&>(t), args, static_cast<std::decay_t<A>*>(nullptr)...);
  }
  template <class F, class... T>
  static void call(F& f, token& t, [[maybe_unused]] const uint32_t* in, T*...) {
    // Braced initialisation evaluates the arguments left to right.
    struct ordered {
      std::tuple<T...> v;
    } o{{get<T>(in)...}};
    std::apply([&](auto&... v) { f(t, v...); }, o.v);
  }
};
template <class R, class... A>
struct signature<R (*)(token&, std::span<const std::byte>, A...)> {
  static constexpr bool payload = true;
  template <role Ro> using handler_type = handler<Ro, true, std::decay_t<A>...>;
  template <class F>
  static void invoke(void* ctx, token_base& t, const uint32_t* args, unsigned, std::byte* data, size_t length) {
    call(static_cast<holder<F>*>(ctx)->fn, static_cast<token&>(t), std::span<const std::byte>(data, length), args,
         static_cast<std::decay_t<A>*>(nullptr)...);
  }
  template <class F, class... T>
  static void call(F& f, token& t, std::span<const std::byte> p, [[maybe_unused]] const uint32_t* in, T*...) {
    struct ordered {
      std::tuple<T...> v;
    } o{{get<T>(in)...}};
    std::apply([&](auto&... v) { f(t, p, v...); }, o.v);
  }
};
template <class R, class... A>
struct signature<R (*)(token&, std::span<std::byte>, A...)> : signature<R (*)(token&, std::span<const std::byte>, A...)> {};
}  // namespace detail

/// A set of endpoints polled and waited on together (AM-II bundle).
class bundle {
 public:
  explicit bundle(bundle_mode mode = bundle_mode::sequential);
  ~bundle();
  bundle(const bundle&) = delete;
  bundle& operator=(const bundle&) = delete;

  /// Runs the handlers of pending messages of every endpoint, a bounded
  /// number per queue (CLUMP_POLL_BATCH); returns how many ran. Costs a few
  /// nanoseconds when nothing is pending.
  unsigned poll() noexcept;

  /// Polls until `done()` is true: spins for CLUMP_SPIN_BEFORE_SLEEP_US, then
  /// sleeps in the kernel until a message arrives (no busy waiting while idle).
  /// Throws clump::error (status::resource) when a rank of the job has failed
  /// (see failed_ranks) and nothing has arrived here for a second since: the
  /// wait may depend on that rank and would never end. A program that
  /// handles failures itself calls acknowledge_failures() first.
  ///
  /// On a host with more of the job's ranks than cores (CLUMP_YIELD), the
  /// rank whose answer a waiter needs may be waiting for the waiter's core:
  /// each poll that finds nothing then gives the core away (sched_yield),
  /// the next looks at the network whatever the adaptive poller says, and
  /// the wait sleeps only after 2 ms of that (CLUMP_SPIN_BEFORE_SLEEP_US
  /// when set): a sleeper's wake-up costs more than a yield there. A
  /// crowded wait that starts with network sends held back for packing
  /// sends them and gives the core away before its first poll: no answer
  /// to them can be here yet.
  template <class Pred>
  void wait_until(Pred&& done) {
    const bool crowded = crowded_host();
    if (crowded && !done() && network_holding()) give_way();
    auto spin_until = std::chrono::steady_clock::now() + spin_time(crowded);
    auto last_work = std::chrono::steady_clock::now();
    while (!done()) {
      if (poll() != 0) {
        spin_until = last_work = std::chrono::steady_clock::now();
        spin_until += spin_time(crowded);
        continue;
      }
      if (done()) return;
      if (crowded) give_way();
      if (std::chrono::steady_clock::now() >= spin_until) {
        sleep_until_message();
        if (done()) return;                        // (what a failed rank did before it failed counts)
        check_failures(last_work, "wait_until");  // out of line: throws when a failure ends the wait
      }
    }
  }

  /// Sleeps until some endpoint of the bundle has a message pending (or
  /// `timeout` passes). Does not run handlers.
  void sleep_until_message(std::chrono::nanoseconds timeout = std::chrono::milliseconds(100)) noexcept;
  /// The same, and until `ready()` is true, which is checked after the sleep
  /// is announced: whoever makes it true and then calls endpoint::wake on an
  /// endpoint of this bundle never leaves the sleeper asleep. For waits on
  /// memory other processes of the node write (the gas layer's flags).
  void sleep_until_message(std::chrono::nanoseconds timeout, const std::function<bool()>& ready) noexcept;
  /// For waits built on sleep_until_message: throws clump::error naming the
  /// failed rank when a rank has failed (not acknowledged) and the wait has
  /// seen no work since `last_work` for a second after it was found; `what`
  /// names the wait. Looks at this node's ranks now and then (cheap).
  static void check_failures(std::chrono::steady_clock::time_point last_work, const char* what);

  /// AM_SetEventMask / AM_GetEventMask: the event that wait() waits for. The
  /// mask falls back to event_mask::none once wait() has seen its event.
  void set_event_mask(event_mask m) noexcept;
  event_mask get_event_mask() const noexcept;
  /// AM_WaitSema: sleeps until the event mask's event. status::bad_arg when
  /// the mask is none (it would never return).
  status wait() noexcept;

  bundle_mode mode() const noexcept;
  detail::bundle_impl* impl() const noexcept { return impl_; }

 private:
  static std::chrono::microseconds spin_time(bool crowded) noexcept;
  static bool crowded_host() noexcept;
  bool network_holding() const noexcept;
  void give_way() noexcept;
  unsigned poll_endpoints() noexcept;
  detail::bundle_impl* impl_;
};

/// An AM-II endpoint.
class endpoint {
 public:
  /// Allocates an endpoint in `b`. Its tag starts as tag_none (it accepts
  /// nothing until set_tag); it has no segment and no translations.
  explicit endpoint(bundle& b);
  ~endpoint();
  endpoint(const endpoint&) = delete;
  endpoint& operator=(const endpoint&) = delete;

  endpoint_name name() const noexcept;
  tag_t tag() const noexcept;
  void set_tag(tag_t t) noexcept;
  bundle& owner() const noexcept;
  /// Moves the endpoint to another bundle (AM_MoveEndpoint).
  void move_to(bundle& b);

  // ---- translation table ----
  /// Translation entries (default 256; the AM-2 maximum is 65535).
  int translation_count() const noexcept;
  void set_translation_count(int n);
  /// Maps index -> (name, tag). Throws clump::error for a bad index or a name
  /// outside this job.
  void map(int index, const endpoint_name& name, tag_t tag);
  /// Maps the first free index; returns it.
  int map_any(const endpoint_name& name, tag_t tag);
  void unmap(int index);
  bool is_mapped(int index) const noexcept;
  endpoint_name translation_name(int index) const;
  tag_t translation_tag(int index) const;
  /// Changes the tag a mapped entry sends with (AMX_SetTranslationTag).
  /// Throws clump::error (bad_arg) when the entry is not mapped.
  void set_translation_tag(int index, tag_t tag);

  // ---- segment ----
  /// Allocates a segment of `bytes` in shared memory: long messages to it and
  /// remote accesses from the node's other processes are a single memcpy.
  std::span<std::byte> allocate_segment(size_t bytes);
  /// Uses memory of the caller's as the segment (AM_SetSeg). Memory outside
  /// clump's shared region receives long payloads in pieces, one extra copy.
  void set_segment(void* address, size_t bytes);
  std::span<std::byte> segment() const noexcept;
  /// The segment of the endpoint at translation `dest` as mapped in this
  /// process, when that endpoint is on this node and its segment is in
  /// shared memory (allocate_segment); empty otherwise (reach it with
  /// messages). For direct loads and stores, as the gas layer makes; valid
  /// while that endpoint keeps its segment.
  std::span<std::byte> mapped_segment(int dest) const noexcept;
  /// Wakes the threads sleeping in the bundle of the endpoint at
  /// translation `dest` (one on this node), so that they look again: for
  /// layers that write into its memory directly (the gas layer's flags)
  /// and then must make sure a sleeper sees it (see
  /// bundle::sleep_until_message with `ready`). Seq_cst: write first.
  void wake(int dest) noexcept;

  // ---- handlers ----
  /// Registers a request handler at the next free index; returns its typed id.
  template <class F>
  auto on_request(F f) {
    return install<detail::role::request>(-1, std::move(f));
  }
  /// Registers a request handler at a given index (1..255).
  template <class F>
  auto on_request(handler_index index, F f) {
    return install<detail::role::request>(index, std::move(f));
  }
  template <class F>
  auto on_reply(F f) {
    return install<detail::role::reply>(-1, std::move(f));
  }
  template <class F>
  auto on_reply(handler_index index, F f) {
    return install<detail::role::reply>(index, std::move(f));
  }
  /// Handler 0: receives every message of this endpoint that could not be
  /// delivered. Without one, clump prints the message and aborts the process.
  void on_returned(std::function<void(const returned_message&)> f);
  /// Installs a raw handler (the C API's path). `nargs` < 0 accepts any count;
  /// `payload` is 0 (short messages only), 1 (medium and long only) or -1 (any).
  /// `index` < 0 takes the next free index from 1. Throws for a taken or bad index.
  handler_index set_raw_handler(int index, detail::raw_handler fn, void* ctx, detail::role role, int nargs,
                                int payload, std::unique_ptr<detail::holder_base> owner = nullptr);
  void clear_handler(handler_index index) noexcept;
  bool has_handler(handler_index index) const noexcept;

  // ---- sending (data path: returns status, never throws) ----
  /// Short request to translation index `dest`.
  template <class... A>
  status request(int dest, request_handler<A...> h, std::type_identity_t<A>... a) noexcept {
    static_assert(detail::words_in<A...> <= max_args, "too many argument words");
    detail::packed<A...> w(a...);
    return send_raw(dest, message_kind::short_message, h.index, w.w, detail::words_in<A...>, nullptr, 0, 0, false);
  }
  /// Medium request: the payload is copied; at most max_medium() bytes.
  template <class... A>
  status request(int dest, payload_request_handler<A...> h, std::span<const std::byte> payload,
                 std::type_identity_t<A>... a) noexcept {
    detail::packed<A...> w(a...);
    return send_raw(dest, message_kind::medium, h.index, w.w, detail::words_in<A...>, payload.data(), payload.size(),
                    0, false);
  }
  /// Long request: the payload lands at `offset` in the destination's segment
  /// before the handler runs there. Returns when `payload` may be reused
  /// (over the network, a payload of CLUMP_NET_LEND bytes or more is sent
  /// without a copy, and the call returns once the destination acknowledged
  /// it, that is, after the destination polled).
  template <class... A>
  status request_long(int dest, payload_request_handler<A...> h, std::span<const std::byte> payload,
                      uint64_t offset, std::type_identity_t<A>... a) noexcept {
    detail::packed<A...> w(a...);
    return send_raw(dest, message_kind::long_message, h.index, w.w, detail::words_in<A...>, payload.data(),
                    payload.size(), offset, false);
  }
  /// As request_long, but returns status::in_use instead of waiting when
  /// the destination's queue is full.
  template <class... A>
  status request_long_async(int dest, payload_request_handler<A...> h, std::span<const std::byte> payload,
                            uint64_t offset, std::type_identity_t<A>... a) noexcept {
    detail::packed<A...> w(a...);
    return send_raw(dest, message_kind::long_message, h.index, w.w, detail::words_in<A...>, payload.data(),
                    payload.size(), offset, true);
  }
  /// Pulls `length` bytes at `source_offset` of the destination's segment into
  /// this endpoint's segment at `offset`; then `h` runs here as a reply
  /// handler with the data (AM_GetXferM).
  template <class... A>
  status get(int dest, payload_reply_handler<A...> h, uint64_t source_offset, uint64_t offset, size_t length,
             std::type_identity_t<A>... a) noexcept {
    detail::packed<A...> w(a...);
    return get_raw(dest, h.index, w.w, detail::words_in<A...>, source_offset, offset, length);
  }

  /// The raw send every typed send uses (and the C API).
  status send_raw(int dest, message_kind kind, handler_index h, const uint32_t* args, unsigned nargs,
                  const void* data, size_t length, uint64_t offset, bool async) noexcept;
  status get_raw(int dest, handler_index h, const uint32_t* args, unsigned nargs, uint64_t source_offset,
                 uint64_t offset, size_t length) noexcept;

  endpoint_stats stats() const noexcept;
  void reset_stats() noexcept;

  detail::endpoint_impl* impl() const noexcept { return impl_; }

 private:
  template <detail::role Ro, class F>
  auto install(int index, F f) {
    using sig = detail::signature<std::decay_t<F>>;
    using H = typename sig::template handler_type<Ro>;
    auto owner = std::make_unique<detail::holder<std::decay_t<F>>>(std::move(f));
    void* ctx = owner.get();
    handler_index i = set_raw_handler(index, &sig::template invoke<std::decay_t<F>>, ctx, Ro,
                                      static_cast<int>(handler_words(H{})), sig::payload ? 1 : 0, std::move(owner));
    return H{i};
  }
  template <detail::role Ro, bool P, class... A>
  static constexpr unsigned handler_words(handler<Ro, P, A...>) {
    static_assert(detail::words_in<A...> <= max_args, "too many argument words");
    return detail::words_in<A...>;
  }
  detail::endpoint_impl* impl_;
};

}  // namespace clump
