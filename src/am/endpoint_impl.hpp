#pragma once
// The private state behind clump::endpoint and clump::bundle.

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include <clump/am.hpp>

#include "am/adaptive_poller.hpp"
#include "am/process.hpp"
#include "core/settings.hpp"
#include "shm/queue_block.hpp"

namespace clump::detail {

struct handler_entry {
  raw_handler fn = nullptr;
  void* ctx = nullptr;
  role accepts = role::any;
  int16_t nargs = -1;   // -1: any count
  int8_t payload = -1;  // -1: any message; 0: short only; 1: medium and long only
};

struct translation {
  bool used = false;
  endpoint_name name{};
  tag_t tag = 0;
  /// The endpoint named, found on the first send (remote_of): mapping a name
  /// does not map its process's region (shm::peer_regions).
  mutable std::atomic<am::remote_endpoint*> remote{nullptr};
  uint64_t state = 0;  // the queue block state the name stands for: shm::alive_state(name.generation)

  translation() = default;
  translation(const translation& o)
      : used(o.used), name(o.name), tag(o.tag), remote(o.remote.load(std::memory_order_relaxed)), state(o.state) {}
  translation& operator=(const translation& o) {
    used = o.used;
    name = o.name;
    tag = o.tag;
    remote.store(o.remote.load(std::memory_order_relaxed), std::memory_order_relaxed);
    state = o.state;
    return *this;
  }
};

/// A message that must come back to handler 0, kept until the next poll.
struct pending_return {
  return_reason reason;
  message_op op;
  handler_index handler;
  uint8_t nargs;
  uint32_t args[max_args];
  size_t length;
  uint64_t offset;
  endpoint_name destination;
  tag_t tag;
  uint32_t to_gen;  // sent back to another endpoint: the generation of the one it came from
};

/// A counter of the owning endpoint: plain stores when one thread owns the
/// bundle, atomic additions when several may.
struct counter {
  std::atomic<uint64_t> v{0};
  void add(uint64_t n, bool parallel) noexcept {
    // Relaxed: statistics order nothing.
    if (parallel)
      v.fetch_add(n, std::memory_order_relaxed);
    else
      v.store(v.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  uint64_t get() const noexcept { return v.load(std::memory_order_relaxed); }
};

struct endpoint_impl {
  endpoint* self = nullptr;
  bundle_impl* bundle = nullptr;
  am::process* proc = nullptr;
  uint32_t slot = 0;
  uint64_t generation = 0;
  uint32_t id = 0;  // rank << 8 | slot
  shm::queue_block_view own;
  bool parallel = false;
  size_t max_medium = 0;   // CLUMP_MAX_MEDIUM, cached off the settings registry
  size_t cma_max = 0;      // CLUMP_CMA_MAX: long messages into private segments of the node by cross-memory attach
  size_t cma_split = 0;    // CLUMP_CMA_SPLIT: blocking long requests from this size copied by both sides

  // Consumer state (this process only).
  // Atomic (relaxed) only because a sleeping thread may read them while the
  // consumer thread writes them; one thread at a time consumes each queue.
  std::atomic<uint64_t> request_head{0};
  std::atomic<uint64_t> reply_head{0};
  std::atomic_flag request_busy = ATOMIC_FLAG_INIT;  // parallel mode: one consumer per queue
  std::atomic_flag reply_busy = ATOMIC_FLAG_INIT;
  bool resync_request = false, resync_reply = false;  // a malformed packet was refused (see dispatch.cpp)

  std::array<handler_entry, max_handlers> handlers{};
  std::array<std::unique_ptr<holder_base>, max_handlers> owners{};
  std::function<void(const returned_message&)> on_returned;

  std::vector<translation> translations;

  // Segment.
  std::byte* segment = nullptr;
  size_t segment_length = 0;
  uint64_t segment_offset = shm::private_segment;  // in our region, when shared
  bool segment_owned = false;

  // Returns found at the sender, and returns that could not be sent back yet.
  std::mutex returns_mutex;
  std::vector<pending_return> local_returns;
  struct deferred {
    uint32_t to;
    pending_return r;
  };
  std::vector<deferred> outbox;
  std::atomic<bool> has_returns{false};  // local_returns holds messages for handler 0
  std::atomic<bool> has_outbox{false};   // outbox holds returns to retry (not an event: no wake-up)

  // Statistics.
  counter requests_sent[3], replies_sent[3], requests_received[3], replies_received[3];
  counter request_bytes_sent[3], reply_bytes_sent[3];  // payload bytes, by kind
  counter returned, bytes_received, send_waits;
  counter corrupt;  // packets refused as malformed (another process wrote garbage into our queues)
};

struct bundle_impl {
  bundle* owner = nullptr;
  bundle_mode mode = bundle_mode::sequential;
  unsigned poll_batch = 0;  // CLUMP_POLL_BATCH, cached
  am::process* proc = nullptr;
  // When to poll the network for this bundle, and when to watch its
  // doorbell instead (see adaptive_poller.hpp); used only when the process
  // has a network.
  am::adaptive_poller net_poller;
  bundle_impl(const core::config& c) noexcept
      : net_poller(static_cast<am::adaptive_poller::mode>(c.net_poll_mode), c.net_poll_min, c.net_poll_max,
                   c.net_poll_us) {}
  // Work a layer above leaves for the end of a poll, outside handlers (the
  // rpc engine's late answers, and the calls its functions made): it sets
  // the function, and the flag while work waits.
  void (*after_poll)() = nullptr;
  std::atomic<bool> after_poll_due{false};
  uint32_t wake_offset = 0;
  std::atomic<uint32_t>* wake = nullptr;
  std::atomic<int> mask{0};
  // The endpoints, as an immutable list swapped on change so that polls read
  // it without a lock. Old lists are kept until the bundle dies (a poll in
  // another thread may still be walking one).
  struct list {
    std::vector<endpoint_impl*> eps;
  };
  std::atomic<const list*> endpoints{nullptr};
  std::vector<std::unique_ptr<list>> lists;
  std::mutex mutex;  // guards changes to the list
  // Parallel bundles only: threads walking a list (poll, the pre-sleep
  // check) hold this shared; an endpoint leaving the bundle takes it
  // exclusively after the swap, so no thread still walks an old list that
  // names it when it is freed. (So an endpoint of a parallel bundle may not
  // be freed or moved from inside one of that bundle's handlers.)
  std::shared_mutex walkers;

  void set(std::vector<endpoint_impl*> eps);
  /// Waits until no thread walks a list older than the current one.
  void quiesce() {
    if (mode == bundle_mode::parallel) std::unique_lock lock(walkers);
  }
};

/// Sleeps until some endpoint of the bundle has a message pending, `also`
/// (if given) is true, or `timeout` passes (bundle::sleep_until_message).
void sleep_bundle(bundle_impl& b, std::chrono::nanoseconds timeout, const std::function<bool()>* also) noexcept;

/// Runs handlers of one queue; returns how many messages it handled.
unsigned poll_requests(endpoint_impl& e, unsigned budget) noexcept;
unsigned poll_replies(endpoint_impl& e, unsigned budget) noexcept;
/// True when some queue of `e` has claims not yet handled, or returns wait.
bool has_pending(const endpoint_impl& e) noexcept;
/// After `e` has marked itself dead (seq_cst): takes what its queues hold,
/// sending requests back to their senders (bad_endpoint, through e's outbox
/// when a queue is full) and dropping replies, up to the last claim made
/// before it died. Never runs a handler.
void drain_freed(endpoint_impl& e) noexcept;

/// The endpoint translation `t` names (used), found on its first use: its
/// process's region is mapped then. nullptr when it cannot be reached.
[[gnu::cold, gnu::noinline]] am::remote_endpoint* find_remote(const endpoint_impl& e, const translation& t) noexcept;
/// The same, from the table once found (an unused entry has none: unmap
/// clears the entry whole).
inline am::remote_endpoint* remote_of(const endpoint_impl& e, const translation& t) noexcept {
  // Acquire: pairs with find_remote's release (another thread's first send).
  am::remote_endpoint* r = t.remote.load(std::memory_order_acquire);
  if (r) [[likely]]
    return r;
  return t.used ? find_remote(e, t) : nullptr;
}

/// Depth of handler calls on this thread (requests may not be sent from a handler).
// initial-exec: a plain %fs-relative access instead of a __tls_get_addr call
// on every message (libclump is linked, not dlopen'ed late).
extern thread_local int handler_depth [[gnu::tls_model("initial-exec")]];

}  // namespace clump::detail
