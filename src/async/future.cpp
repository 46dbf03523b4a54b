// Futures (clump/async.hpp): the pool their states come from, the queue of
// continuations that progress() runs, waiting, and the table of operations
// in flight that answers find by number.
//
// Everything here belongs to the one thread that polls the runtime's bundle
// (futures are not shared between threads), so nothing takes a lock.

#include <clump/async.hpp>

#include <array>
#include <string>
#include <vector>

#include "am/endpoint_impl.hpp"  // handler_depth: a wait inside a handler would never end
#include "am/process.hpp"        // deaths(): progress() lets go of what is kept for failed ranks

namespace clump::async_detail {

namespace {

// ---- the pool: size classes of 64 B to 4 KiB, each a free list -------------

constexpr size_t smallest = 64;
constexpr std::array<size_t, 7> classes{64, 128, 256, 512, 1024, 2048, 4096};

struct free_block {
  free_block* next;
};
std::array<free_block*, classes.size()> free_lists{};

int class_of(size_t bytes) noexcept {
  for (size_t i = 0; i < classes.size(); ++i)
    if (bytes <= classes[i]) return static_cast<int>(i);
  return -1;
}

// ---- the continuations ready to run, in the order they became ready ---------

continuation* queue_head = nullptr;
continuation* queue_tail = nullptr;

// Continuations that only send (continuation::internal): their own queue,
// which the bundle's polls also run (bundle_impl::after_poll).
continuation *internal_head = nullptr, *internal_tail = nullptr;
bundle* polled = nullptr;  // the bundle wait() and progress() poll
bool running_internal = false;

unsigned run_internal() noexcept {
  // Not inside a handler (they may only reply), nor inside itself (a send
  // that polls while a queue is full).
  if (running_internal || clump::detail::handler_depth > 0) return 0;
  running_internal = true;
  if (polled) polled->impl()->after_poll_due.store(false, std::memory_order_relaxed);
  unsigned ran = 0;
  while (continuation* c = internal_head) {
    internal_head = c->next;
    if (!internal_head) internal_tail = nullptr;
    ++ran;
    c->run();
  }
  running_internal = false;
  return ran;
}

void run_internal_after_poll() { (void)run_internal(); }

void enqueue(continuation* c) noexcept {
  c->next = nullptr;
  if (c->internal) {
    if (internal_tail)
      internal_tail->next = c;
    else
      internal_head = c;
    internal_tail = c;
    if (polled) polled->impl()->after_poll_due.store(true, std::memory_order_release);
    return;
  }
  if (queue_tail)
    queue_tail->next = c;
  else
    queue_head = c;
  queue_tail = c;
}

unsigned run_queue() {
  unsigned ran = run_internal();
  while (continuation* c = queue_head) {
    queue_head = c->next;
    if (!queue_head) queue_tail = nullptr;
    ++ran;
    c->run();  // may free c, queue more, or wait (and so run the queue itself)
  }
  return ran;
}

unsigned polled_users = 0;  // the engine and the gas space both use it

// ---- operations in flight -----------------------------------------------------

std::vector<operation> operations;
std::vector<uint32_t> free_slots;
size_t in_flight = 0;

void end_operation(operation& o) noexcept {
  state_base* s = o.s;
  o.s = nullptr;
  o.deliver = nullptr;
  free_slots.push_back(static_cast<uint32_t>(&o - operations.data()));
  --in_flight;
  s->finish();
  s->release();
}

std::string name_of(const operation& o) { return o.call ? "rpc '" + std::string(o.what) + "'" : std::string(o.what); }

// A failure became known since the last look: what the rpc engine keeps for
// the failed rank goes.
void notice_failures() noexcept {
  static uint64_t deaths_seen = 0;
  if (const am::process* p = am::process::existing(); p && p->deaths() != deaths_seen) [[unlikely]] {
    deaths_seen = p->deaths();
    forget_failed();
  }
}

void fail_operations_to_failed_ranks() noexcept {
  for (operation& o : operations) {
    if (!o.s || o.peer < 0 || !clump::rank_failed(o.peer)) continue;
    const uint64_t id = uint64_t{o.generation} << 32 | static_cast<uint64_t>(&o - operations.data());
    o.remaining = 1;  // none of its answers will come
    fail_operation(id, "rank " + std::to_string(o.peer) + " failed (its process is gone) before it answered");
  }
}

}  // namespace

void* pool_allocate(size_t bytes) {
  const int c = class_of(bytes);
  if (c < 0) return ::operator new(bytes);
  if (free_block* b = free_lists[static_cast<size_t>(c)]) {
    free_lists[static_cast<size_t>(c)] = b->next;
    return b;
  }
  return ::operator new(std::max(classes[static_cast<size_t>(c)], smallest));
}

void pool_free(void* p, size_t bytes) noexcept {
  const int c = class_of(bytes);
  if (c < 0) {
    ::operator delete(p);
    return;
  }
  auto* b = static_cast<free_block*>(p);
  b->next = free_lists[static_cast<size_t>(c)];
  free_lists[static_cast<size_t>(c)] = b;
}

void state_base::finish() noexcept {
  ready = true;
  // The waiters were pushed at the head: queue them in the order they came.
  continuation* reversed = nullptr;
  while (continuation* c = waiters) {
    waiters = c->next;
    c->next = reversed;
    reversed = c;
  }
  while (continuation* c = reversed) {
    reversed = c->next;
    enqueue(c);
  }
}

void state_base::await(continuation* c) noexcept {
  if (ready) {
    enqueue(c);
    return;
  }
  c->next = waiters;
  waiters = c;
}

void state_base::wait() {
  if (ready) return;
  if (clump::detail::handler_depth > 0)
    throw error(status::bad_arg, "future::wait",
                "called inside a message handler (an rpc function runs in one), where nothing can be polled: "
                "it would never return; return a value instead, or chain with then()");
  // (The caller's future holds a reference for as long as this runs.)
  run_queue();
  if (ready) return;
  if (!polled)
    throw error(status::not_init, "future::wait",
                "nothing can complete this future: no answer can arrive without an async_engine or a gas::space, "
                "and no continuation is left to run");
  // Polls first without reading the clock (an answer usually comes within
  // a few microseconds), then waits as wait_until does: spins, then sleeps.
  for (unsigned empty = 0; empty < 2048;) {
    if (polled->poll() == 0) {
      ++empty;
      continue;
    }
    run_queue();
    if (ready) return;
    empty = 0;
  }
  try {
    polled->wait_until([this] {
      run_queue();
      return ready;
    });
  } catch (const error&) {
    // A rank has failed and the wait saw nothing for a second: what is in
    // flight to a failed rank fails (its answer cannot come: a process of
    // this node that is gone does not even return our messages).
    fail_operations_to_failed_ranks();
    notice_failures();
    run_queue();
    if (!ready) throw;
  }
}

void no_state(const char* what) {
  throw error(status::bad_arg, what, "the future has no state (default-constructed or moved from)");
}
void not_ready(const char* what) { throw error(status::in_use, what, "the future is not ready: wait() for it"); }

uint64_t begin_operation(state_base& s, deliver_fn deliver, void* context, size_t bytes, uint32_t answers, int peer,
                         const char* what, bool call) {
  if (free_slots.empty()) {
    if (operations.size() >= 0xffffffffu)
      throw error(status::resource, what, "more than 2^32 operations in flight");
    operations.emplace_back();
    free_slots.push_back(static_cast<uint32_t>(operations.size() - 1));
  }
  const uint32_t slot = free_slots.back();
  free_slots.pop_back();
  operation& o = operations[slot];
  if (++o.generation == 0) o.generation = 1;  // 0 would make the number 0: "no answer"
  o.s = &s;
  o.deliver = deliver;
  o.context = context;
  o.bytes = bytes;
  o.remaining = answers;
  o.peer = peer;
  o.what = what;
  o.call = call;
  s.retain();
  ++in_flight;
  return uint64_t{o.generation} << 32 | slot;
}

operation* find_operation(uint64_t id) noexcept {
  const uint64_t slot = id & 0xffffffffu;
  if (slot >= operations.size()) return nullptr;
  operation& o = operations[slot];
  if (!o.s || o.generation != static_cast<uint32_t>(id >> 32)) return nullptr;
  return &o;
}

void answer(uint64_t id, const uint32_t* words, unsigned nwords, std::span<const std::byte> payload) noexcept {
  operation* o = find_operation(id);
  if (!o) return;  // stale (it failed and ended already) or forged: nothing to do
  if (!o->s->failure) {
    bool good = false;
    try {
      good = o->deliver(*o->s, o->context, o->bytes, words, nwords, payload);
    } catch (...) {
      o->s->failure = std::current_exception();
      good = true;
    }
    if (!good)
      o->s->failure = std::make_exception_ptr(
          error(status::bad_arg, name_of(*o), "rank " + std::to_string(o->peer) + " answered with a malformed message",
                o->peer));
  }
  if (--o->remaining == 0) end_operation(*o);
}

void fail_operation(uint64_t id, const std::string& why, status code) noexcept {
  operation* o = find_operation(id);
  if (!o) return;
  if (!o->s->failure) {
    try {
      o->s->failure = std::make_exception_ptr(error(code, name_of(*o), why, o->peer));
    } catch (...) {
      o->s->failure = std::current_exception();
    }
  }
  if (--o->remaining == 0) end_operation(*o);
}

size_t operations_in_flight() noexcept { return in_flight; }

void schedule(continuation* c) noexcept { enqueue(c); }

void use_bundle(bundle* b) noexcept {
  polled = b;
  ++polled_users;
  b->impl()->after_poll = &run_internal_after_poll;
  if (internal_head) b->impl()->after_poll_due.store(true, std::memory_order_release);
}
void drop_bundle(bundle* b) noexcept {
  if (polled == b && --polled_users == 0) {
    b->impl()->after_poll_due.store(false, std::memory_order_relaxed);
    polled = nullptr;
  }
}


}  // namespace clump::async_detail

namespace clump {

unsigned progress() {
  if (async_detail::polled && detail::handler_depth == 0) async_detail::polled->poll();
  async_detail::notice_failures();
  return async_detail::run_queue();
}

}  // namespace clump
