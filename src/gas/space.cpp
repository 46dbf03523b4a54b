// The gas layer (clump/gas.hpp) on clump's active messages.
//
// Each process has one endpoint of its own for the global address space, in
// the runtime's bundle (so that the runtime's polling and waiting serve it),
// with a segment in shared memory: the process's share of global memory.
// Offsets in global pointers are offsets into these segments.
//
// Segment layout: the first 1024 bytes are the control area (the count of
// bytes stored into this process, which processes of the node add to
// directly, the lock of atomic procedures, the collectives' signal flags);
// symmetric allocations (all_alloc) grow up from there,
// this process's own (alloc) grow down from the end.
//
// A place on a process of this node is reached with plain memory operations
// through its segment, mapped here; the operation is complete when the call
// returns. A place on another node takes messages:
//   put:   long request into the segment; the target's handler acks it (a
//          short reply), and sync() waits for the acks;
//   get:   a short request (offset, length, where); the target replies with
//          a medium message of the bytes, in pieces of at most max_medium();
//   store: long request into the segment; the target's handler adds the
//          length to its stored count; nothing comes back.

#include <clump/gas.hpp>

#include <sched.h>
#include <sys/random.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <new>
#include <string>
#include <vector>

#include "core/log.hpp"
#include "core/settings.hpp"
#include "core/tsan.hpp"

namespace clump::gas {

namespace {

constexpr size_t line = 64;
/// The control area at the start of every segment (control_line, padded).
constexpr size_t control_bytes = 1024;
/// Signal slots of the collectives: dissemination rounds, the broadcast, and
/// one per round of the reduction tree.
constexpr unsigned bcast_slot = 32, reduce_slot = 33, slot_count = 33 + 32;
space* current_space = nullptr;

struct control_line {
  std::atomic<uint64_t> stored;  // bytes stored into this process, ever
  std::atomic<uint32_t> lock;    // held by atomic procedures (and, once there are any, by every atomic)
  std::atomic<uint64_t> expected;  // bytes all_store_sync says are on their way here, ever
  std::atomic<uint64_t> signal[slot_count];  // the collectives' flags: the newest epoch signalled
};

// The process's lock, in its control line: taken by whoever runs an atomic
// procedure on its memory (the owner's handler or a process of the node).
// The word holds the holder's rank + 1, so that a waiter can find out that
// the holder died holding it (else it would wait for ever): a caller then
// gets a clump::error; a handler, which cannot throw, takes the lock over
// and says so (what the dead holder was doing to that memory may be half
// done).
class lock_guard {
 public:
  lock_guard(control_line* c, int me, bool in_handler) : c_(c) {
    if (!c_) return;
    const uint32_t mine = static_cast<uint32_t>(me) + 1;
    uint32_t holder = 0;
    // Acquire: what the last holder did before its release is visible.
    for (unsigned spins = 0; !c_->lock.compare_exchange_weak(holder, mine, std::memory_order_acquire,
                                                             std::memory_order_relaxed);
         ++spins) {
      if (holder == 0) continue;
      if (spins > 64) sched_yield();
      if ((spins & 1023) == 1023 && clump::rank_failed(static_cast<int>(holder) - 1)) {
        if (!in_handler)
          throw error(status::resource, "gas lock",
                      "rank " + std::to_string(holder - 1) + " failed (its process is gone) while it held the lock "
                      "of this memory; what it was doing to it may be half done");
        core::log_error("rank %u failed while it held the gas lock of this process's memory; the lock is taken "
                        "over (what it was doing to that memory may be half done)",
                        holder - 1);
        c_->lock.store(mine, std::memory_order_relaxed);  // relaxed: the holder is gone, nobody else takes it
        break;
      }
      holder = 0;
    }
  }
  ~lock_guard() {
    if (c_) c_->lock.store(0, std::memory_order_release);
  }
  lock_guard(const lock_guard&) = delete;
  lock_guard& operator=(const lock_guard&) = delete;

 private:
  control_line* c_;
};

// The remote atomics' operation on one word. Acq_rel: an atomic orders the
// caller's earlier and later accesses around it, as a lock would (the
// min/max loop's first load may be relaxed: the exchange checks it).
template <class T>
T apply(T* word, atomic_op op, T a, T b) {
  std::atomic_ref<T> w(*word);
  switch (op) {
    case atomic_op::add: return w.fetch_add(a, std::memory_order_acq_rel);
    case atomic_op::bit_and: return w.fetch_and(a, std::memory_order_acq_rel);
    case atomic_op::bit_or: return w.fetch_or(a, std::memory_order_acq_rel);
    case atomic_op::bit_xor: return w.fetch_xor(a, std::memory_order_acq_rel);
    case atomic_op::swap: return w.exchange(a, std::memory_order_acq_rel);
    case atomic_op::compare_swap: {
      T expected = a;
      w.compare_exchange_strong(expected, b, std::memory_order_acq_rel);
      return expected;  // the old value either way
    }
    case atomic_op::min:
    case atomic_op::max: {
      T old = w.load(std::memory_order_relaxed);
      while ((op == atomic_op::min ? a < old : a > old) &&
             !w.compare_exchange_weak(old, a, std::memory_order_acq_rel)) {
      }
      return old;
    }
  }
  return 0;
}

uint64_t apply_word(std::byte* at, atomic_op op, unsigned width, bool is_signed, uint64_t a, uint64_t b) {
  if (width == 4) {
    if (is_signed)
      return static_cast<uint64_t>(static_cast<int64_t>(apply(reinterpret_cast<int32_t*>(at), op,
                                                               static_cast<int32_t>(a), static_cast<int32_t>(b))));
    return apply(reinterpret_cast<uint32_t*>(at), op, static_cast<uint32_t>(a), static_cast<uint32_t>(b));
  }
  if (is_signed)
    return static_cast<uint64_t>(apply(reinterpret_cast<int64_t*>(at), op, static_cast<int64_t>(a), static_cast<int64_t>(b)));
  return apply(reinterpret_cast<uint64_t*>(at), op, a, b);
}
static_assert(sizeof(control_line) <= control_bytes);

[[noreturn]] void fail(const std::string& what, const std::string& why) {
  throw error(status::bad_arg, what, why);
}

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace

struct space::impl {
  explicit impl(runtime& r) : rt(r), ep(r.bundle()) {}

  runtime& rt;
  clump::endpoint ep;
  int rank = 0, size = 1;
  std::span<std::byte> seg;
  std::vector<std::byte*> base;  // per rank: its segment mapped here, or nullptr
  size_t seg_len = 0;            // every rank's (they are equal)

  // Allocation.
  uint64_t sym_top = control_bytes;        // symmetric allocations end here
  uint64_t own_floor = 0;         // this process's allocations start here
  std::map<uint64_t, size_t> own_blocks;  // offset -> bytes, of alloc()
  std::map<uint64_t, size_t> own_free;    // freed blocks above own_floor

  traffic_counts moved;  // see gas::traffic()

  // Counts one operation to rank r's node (`messages` 0) or to another node.
  void count(int r, size_t bytes, uint64_t messages = 1) {
    if (base[static_cast<size_t>(r)]) {
      ++moved.node_operations;
      moved.node_bytes += bytes;
    } else {
      moved.network_messages += messages;
      moved.network_bytes += bytes;
    }
  }

  // Completion.
  uint64_t pending = 0;                // puts and get pieces not yet completed
  std::vector<uint64_t> stored_to;     // bytes this process stored to each rank, ever
  std::vector<uint64_t> announced_to;  // of those, what all_store_sync has announced to the rank
  uint64_t epoch = 0;                  // collectives so far (the same on every rank)
  uint64_t consumed = 0;               // of our stored count, what store_sync took

  // Atomics: the answer of the one atomic in flight (they block), the
  // procedures, and whether atomics take the lock (once there are procedures).
  uint64_t atomic_result = 0;
  std::vector<atomic_procedure_fn> procedures;
  bool locked_atomics = false;

  // Handlers.
  request_handler<uint32_t, uint64_t> signal_req{};
  request_handler<uint64_t> expect_req{};
  reply_handler<> expect_ack{};
  reply_handler<uint64_t> atomic_ans{};
  request_handler<uint32_t, uint32_t, uint64_t, uint64_t, uint64_t> atomic_req{};
  request_handler<uint32_t, uint64_t, uint64_t, uint64_t> call_req{};
  reply_handler<> put_ack{};
  request_handler<uint64_t, uint32_t, uint64_t> get_req{};
  payload_reply_handler<uint64_t> get_data{};
  payload_reply_handler<uint64_t, uint64_t> pulled{};
  payload_request_handler<> put_req{};
  payload_request_handler<> store_req{};
  // The operations that return futures (rget, rput, rfetch_op): each message
  // carries the operation's number, and its answer brings it back.
  request_handler<uint64_t, uint32_t, uint64_t, uint64_t> fget_req{};  // offset, length, operation, piece offset
  payload_reply_handler<uint64_t, uint64_t> fget_data{};               // operation, piece offset
  payload_request_handler<uint64_t> fput_req{};                        // operation
  reply_handler<uint64_t> fput_done{};                                 // operation
  request_handler<uint32_t, uint32_t, uint64_t, uint64_t, uint64_t, uint64_t> fatomic_req{};  // ..., operation
  reply_handler<uint64_t, uint64_t> fatomic_done{};                    // operation, old value

  control_line& control() const { return *reinterpret_cast<control_line*>(seg.data()); }
  control_line* control_of(int r) const { return reinterpret_cast<control_line*>(base[static_cast<size_t>(r)]); }

  void check(int r, uint64_t offset, size_t bytes, const char* what) const {
    if (r < 0 || r >= size) {
      if (r == -1) fail(what, "null global pointer");
      fail(what, "rank " + std::to_string(r) + " is outside the job (0.." + std::to_string(size - 1) + ")");
    }
    if (offset < control_bytes || offset > seg_len || bytes > seg_len - offset)
      fail(what, "bytes [" + std::to_string(offset) + ", " + std::to_string(offset + bytes) + ") of rank " +
                     std::to_string(r) + " lie outside its segment [" + std::to_string(control_bytes) + ", " +
                     std::to_string(seg_len) + ")");
  }

  // Puts, gets and atomics in flight: every one is answered, or comes back
  // (handler 0, below) when its destination failed; then it is an error.
  void wait_pending() {
    rt.wait_until([&] { return pending == 0; });
    if (!failure.empty()) {
      std::string why = std::move(failure);
      failure.clear();
      throw error(status::resource, "gas", why);
    }
  }
  std::string failure;  // why a message of ours came back (the first since the last wait)

  // Waits until `done()`, which a message's handler or another process of
  // the node (a plain atomic, then endpoint::wake) makes true: polls, then
  // sleeps when nothing happens (the writer wakes it). Ends with a
  // clump::error when `from` (the rank that would make it true; -1: any)
  // fails, or when any rank has failed and nothing has happened for a second.
  template <class Pred>
  void spin_until(Pred&& done, int from, const char* what) {
    const auto spin = std::chrono::microseconds(core::settings().spin_before_sleep_us);
    auto last_work = std::chrono::steady_clock::now();
    const std::function<bool()> ready = [&] { return done(); };
    for (unsigned spins = 0; !done(); ++spins) {
      if (rt.bundle().poll() != 0) {
        last_work = std::chrono::steady_clock::now();
        continue;
      }
      if (spins > 256) sched_yield();  // a writer of this node may need the core
      if (std::chrono::steady_clock::now() - last_work < spin) continue;
      rt.bundle().sleep_until_message(std::chrono::milliseconds(100), ready);
      // What the failed rank did before it failed counts: its messages that
      // are here already too.
      while (rt.bundle().poll() != 0) {
      }
      if (done()) break;
      if (from >= 0 && from != rank && clump::rank_failed(from))
        throw error(status::resource, what,
                    "rank " + std::to_string(from) + " failed (its process is gone) before it did its part");
      bundle::check_failures(last_work, what);
    }
    core::heard_from_outside();  // another process made it true (see core/tsan.hpp)
  }

  // Raises rank r's flag `slot` to at least `value`.
  void signal(int r, unsigned slot, uint64_t value) {
    count(r, sizeof value);
    core::sent_outside();  // see core/tsan.hpp
    if (control_line* c = control_of(r)) {
      raise(c->signal[slot], value);
      ep.wake(r);  // it may sleep waiting for the flag (see spin_until)
      return;
    }
    sent(ep.request(r, signal_req, slot, value), "gas collective");
  }
  // Release (with the acquire in wait_signal): the rank that sees the flag
  // sees what the signaller wrote before, its direct puts included. The first
  // load may be relaxed: a stale value only costs a failed exchange.
  // Seq_cst besides: the writer's half of the handshake with a sleeping
  // waiter (endpoint::wake follows).
  static void raise(std::atomic<uint64_t>& flag, uint64_t value) {
    uint64_t old = flag.load(std::memory_order_relaxed);
    while (old < value && !flag.compare_exchange_weak(old, value, std::memory_order_seq_cst)) {
    }
  }
  // Seq_cst: the waiter's half (spin_until checks after announcing its sleep).
  void wait_signal(unsigned slot, uint64_t value, int from, const char* what) {
    spin_until([&] { return control().signal[slot].load(std::memory_order_seq_cst) >= value; }, from, what);
  }

  // A dissemination barrier: in round k, signal rank + 2^k and wait for rank - 2^k.
  void barrier() {
    wait_pending();
    const uint64_t e = ++epoch;
    for (unsigned k = 0, d = 1; static_cast<int>(d) < size; ++k, d <<= 1) {
      signal((rank + static_cast<int>(d)) % size, k, e);
      wait_signal(k, e, (rank - static_cast<int>(d) % size + size) % size, "gas::barrier");
    }
  }

  // A temporary symmetric area for a collective (every rank takes the same).
  uint64_t scratch(size_t bytes, const char* what) {
    const uint64_t at = align_up(sym_top, line);
    if (at > own_floor || bytes > own_floor - at)
      throw error(status::resource, what,
                  std::to_string(bytes) + " bytes of staging do not fit in the segment's free space (CLUMP_GAS_SEGMENT)");
    sym_top = at + bytes;
    return at;
  }

  // An atomic another node asked for, on this segment: false (nothing
  // done, no answer) when the word is out of range or misaligned.
  bool serve_atomic(uint32_t op, uint32_t shape, uint64_t offset, uint64_t a, uint64_t b, uint64_t& old) {
    const unsigned width = shape & 0xffu;
    if ((width != 4 && width != 8) || offset % width || offset < control_bytes || offset > seg_len - width) return false;
    lock_guard g(locked_atomics ? &control() : nullptr, rank, true);
    old = apply_word(seg.data() + offset, static_cast<atomic_op>(op), width, shape >> 8, a, b);
    return true;
  }

  // A blocking send that must not fail quietly: a status other than ok means
  // the destination cannot be reached.
  static void sent(status s, const char* what) {
    if (s != status::ok) throw error(s, what, "the message could not be sent");
  }
};

space::space(runtime& rt, size_t segment_bytes) : impl_(std::make_unique<impl>(rt)) {
  if (current_space) throw error(status::in_use, "creating the gas space", "this process has one already");
  impl& m = *impl_;
  m.rank = rt.rank();
  m.size = rt.size();
  size_t bytes = std::max(segment_bytes, core::settings().gas_segment);
  if (bytes > core::settings().shm_region_size)
    throw error(status::bad_arg, "creating the gas space",
                std::to_string(bytes) + " bytes a process is more than its whole shared region "
                "(CLUMP_SHM_REGION_SIZE=" + std::to_string(core::settings().shm_region_size >> 20) + " MiB)");
  bytes = std::max<size_t>(align_up(bytes, line), control_bytes + line);
  m.seg = m.ep.allocate_segment(bytes);
  m.seg_len = m.seg.size();
  new (m.seg.data()) control_line{};
  m.own_floor = m.seg_len;
  m.stored_to.assign(static_cast<size_t>(m.size), 0);
  m.announced_to.assign(static_cast<size_t>(m.size), 0);

  m.put_ack = m.ep.on_reply([&m](token&) { --m.pending; });
  m.put_req = m.ep.on_request([&m](token& t, std::span<const std::byte>) { (void)t.reply(m.put_ack); });
  m.store_req = m.ep.on_request([&m](token&, std::span<const std::byte> p) {
    m.control().stored.fetch_add(p.size(), std::memory_order_acq_rel);  // pairs with store_sync's acquire
  });
  m.get_data = m.ep.on_reply([&m](token&, std::span<const std::byte> p, uint64_t where) {
    std::memcpy(reinterpret_cast<void*>(static_cast<uintptr_t>(where)), p.data(), p.size());
    --m.pending;
  });
  m.signal_req = m.ep.on_request([&m](token&, uint32_t slot, uint64_t value) {
    if (slot < slot_count) impl::raise(m.control().signal[slot], value);
  });
  m.expect_ack = m.ep.on_reply([&m](token&) { --m.pending; });
  m.expect_req = m.ep.on_request([&m](token& t, uint64_t bytes) {
    m.control().expected.fetch_add(bytes, std::memory_order_acq_rel);  // read after the next barrier
    (void)t.reply(m.expect_ack);
  });
  m.atomic_ans = m.ep.on_reply([&m](token&, uint64_t old) {
    m.atomic_result = old;
    --m.pending;
  });
  m.atomic_req = m.ep.on_request([&m](token& t, uint32_t op, uint32_t shape, uint64_t offset, uint64_t a, uint64_t b) {
    uint64_t old;
    if (m.serve_atomic(op, shape, offset, a, b, old)) (void)t.reply(m.atomic_ans, old);
  });
  m.call_req = m.ep.on_request([&m](token& t, uint32_t procedure, uint64_t offset, uint64_t bytes, uint64_t argument) {
    if (procedure >= m.procedures.size() || offset < control_bytes || offset > m.seg_len || bytes > m.seg_len - offset) return;
    uint64_t r;
    {
      lock_guard g(&m.control(), m.rank, true);
      r = m.procedures[procedure](m.seg.data() + offset, argument);
    }
    (void)t.reply(m.atomic_ans, r);
  });
  m.pulled = m.ep.on_reply([&m](token&, std::span<const std::byte> p, uint64_t where, uint64_t block) {
    std::memcpy(reinterpret_cast<void*>(static_cast<uintptr_t>(where)), p.data(), p.size());
    detail::free_bytes(m.rank, block);
    --m.pending;
  });
  m.get_req = m.ep.on_request([&m](token& t, uint64_t offset, uint32_t length, uint64_t where) {
    // Checked by the sender; checked again here, where it matters.
    if (offset > m.seg_len || length > m.seg_len - offset) return;
    (void)t.reply(m.get_data, m.seg.subspan(offset, length), where);
  });

  m.fget_req = m.ep.on_request([&m](token& t, uint64_t offset, uint32_t length, uint64_t op, uint64_t piece) {
    if (offset > m.seg_len || length > m.seg_len - offset) return;
    (void)t.reply(m.fget_data, m.seg.subspan(offset, length), op, piece);
  });
  m.fget_data = m.ep.on_reply([](token&, std::span<const std::byte> p, uint64_t op, uint64_t piece) {
    uint32_t w[2];
    async_detail::put_id(w, piece);
    async_detail::answer(op, w, 2, p);
  });
  m.fput_req = m.ep.on_request([&m](token& t, std::span<const std::byte>, uint64_t op) { (void)t.reply(m.fput_done, op); });
  m.fput_done = m.ep.on_reply([](token&, uint64_t op) { async_detail::answer(op, nullptr, 0, {}); });
  m.fatomic_req = m.ep.on_request(
      [&m](token& t, uint32_t op, uint32_t shape, uint64_t offset, uint64_t a, uint64_t b, uint64_t number) {
        uint64_t old;
        if (m.serve_atomic(op, shape, offset, a, b, old)) (void)t.reply(m.fatomic_done, number, old);
      });
  m.fatomic_done = m.ep.on_reply([](token&, uint64_t op, uint64_t old) {
    uint32_t w[2];
    async_detail::put_id(w, old);
    async_detail::answer(op, w, 2, {});
  });

  // Handler 0: a message of ours that came back (its destination failed,
  // or became unreachable). What waited for its answer is told: the wait
  // ends with an error (wait_pending) instead of waiting for ever; an
  // operation with a future fails it.
  m.ep.on_returned([&m](const returned_message& r) {
    const std::string why = "a message to rank " + std::to_string(r.destination.rank) + " came back: " + to_string(r.reason);
    // Where each of them carries the operation's number, in argument words.
    const size_t number_at = r.handler == m.fget_req.index ? 3 : r.handler == m.fput_req.index ? 0
                             : r.handler == m.fatomic_req.index ? 8 : SIZE_MAX;
    if (number_at != SIZE_MAX) {
      if (r.args.size() >= number_at + 2) async_detail::fail_operation(async_detail::get_id(r.args.data() + number_at), why);
      return;
    }
    const handler_index answered[] = {m.put_req.index,  m.get_req.index,    m.atomic_req.index,
                                      m.call_req.index, m.expect_req.index, m.pulled.index};
    if (m.pending && std::find(std::begin(answered), std::end(answered), r.handler) != std::end(answered))
      --m.pending;
    if (m.failure.empty()) m.failure = why;
  });

  // Everybody's name and tag; the segments must be alike.
  struct entry {
    endpoint_name name;
    tag_t tag;
    uint64_t length;
  };
  tag_t tag = 0;
  while (tag <= 1)
    if (::getrandom(&tag, sizeof tag, 0) != sizeof tag) tag = 0;
  m.ep.set_tag(tag);
  entry mine{m.ep.name(), tag, m.seg_len};
  std::vector<entry> all(static_cast<size_t>(m.size));
  rt.allgather(&mine, all.data(), sizeof mine);
  if (m.ep.translation_count() < m.size) m.ep.set_translation_count(m.size);
  for (int r = 0; r < m.size; ++r) {
    const entry& e = all[static_cast<size_t>(r)];
    if (e.length != m.seg_len)
      throw error(status::bad_arg, "creating the gas space",
                  "rank " + std::to_string(r) + " has a segment of " + std::to_string(e.length) + " bytes, this rank " +
                      std::to_string(m.seg_len) + ": give every rank the same size");
    m.ep.map(r, e.name, e.tag);
  }
  m.base.assign(static_cast<size_t>(m.size), nullptr);
  for (int r = 0; r < m.size; ++r) {
    std::span<std::byte> s = r == m.rank ? m.seg : m.ep.mapped_segment(r);
    if (s.size() == m.seg_len) m.base[static_cast<size_t>(r)] = s.data();
  }
  current_space = this;
  async_detail::use_bundle(&rt.bundle());  // futures of gas operations wait on it
  rt.barrier();  // every segment exists before anyone uses it
}

space::~space() {
  try {
    gas::barrier();
  } catch (...) {
  }
  current_space = nullptr;
  async_detail::drop_bundle(&impl_->rt.bundle());
}

space& space::current() {
  if (!current_space)
    throw error(status::bad_arg, "clump::gas", "no gas space: construct a clump::gas::space(runtime) first");
  return *current_space;
}

int space::rank() const noexcept { return impl_->rank; }
int space::size() const noexcept { return impl_->size; }
std::span<std::byte> space::segment() const noexcept { return impl_->seg; }
runtime& space::owner() const noexcept { return impl_->rt; }

// ---- memory --------------------------------------------------------------------

namespace detail {

uint64_t all_alloc_bytes(size_t bytes, size_t align) {
  space::impl& m = space::current().internals();
  const uint64_t at = align_up(m.sym_top, std::max<size_t>(align, 8));
  if (at > m.own_floor || bytes > m.own_floor - at)
    throw error(status::resource, "gas::all_alloc",
                std::to_string(bytes) + " bytes do not fit in the segment (CLUMP_GAS_SEGMENT, or the size given "
                                        "to the space)");
  m.sym_top = at + bytes;
  return at;
}

uint64_t alloc_bytes(size_t bytes, size_t align) {
  space::impl& m = space::current().internals();
  align = std::max<size_t>(align, 8);
  bytes = std::max<size_t>(bytes, 1);
  if (bytes > m.seg_len)  // before any sum with it can wrap
    throw error(status::resource, "gas::alloc",
                std::to_string(bytes) + " bytes are more than the whole segment (" + std::to_string(m.seg_len) + ")");
  // First fit among freed blocks, else below the lowest block.
  for (auto it = m.own_free.begin(); it != m.own_free.end(); ++it) {
    const uint64_t at = align_up(it->first, align);
    if (at + bytes > it->first + it->second) continue;
    const uint64_t start = it->first, end = it->first + it->second;
    m.own_free.erase(it);
    if (at > start) m.own_free[start] = at - start;
    if (end > at + bytes) m.own_free[at + bytes] = end - (at + bytes);
    m.own_blocks[at] = bytes;
    return at;
  }
  if (bytes > m.own_floor) throw error(status::resource, "gas::alloc", "the segment is full");
  const uint64_t at = (m.own_floor - bytes) / align * align;
  if (at < m.sym_top)
    throw error(status::resource, "gas::alloc",
                std::to_string(bytes) + " bytes do not fit in the segment (CLUMP_GAS_SEGMENT, or the size given to "
                                        "the space)");
  if (at + bytes < m.own_floor) m.own_free[at + bytes] = m.own_floor - (at + bytes);
  m.own_floor = at;
  m.own_blocks[at] = bytes;
  return at;
}

void too_many(const char* what, size_t n, size_t size) {
  throw error(status::bad_arg, what,
              std::to_string(n) + " elements of " + std::to_string(size) + " bytes are more bytes than a size holds");
}

void free_bytes(int rank, uint64_t offset) {
  space::impl& m = space::current().internals();
  auto it = m.own_blocks.find(offset);
  if (rank != m.rank || it == m.own_blocks.end())
    throw error(status::bad_arg, "gas::free", "not a block from gas::alloc on this rank");
  m.own_free[offset] = it->second;
  m.own_blocks.erase(it);
  // Merge with the free neighbours.
  auto f = m.own_free.find(offset);
  if (auto next = std::next(f); next != m.own_free.end() && f->first + f->second == next->first) {
    f->second += next->second;
    m.own_free.erase(next);
  }
  if (f != m.own_free.begin()) {
    auto prev = std::prev(f);
    if (prev->first + prev->second == f->first) {
      prev->second += f->second;
      m.own_free.erase(f);
      f = prev;
    }
  }
  // The lowest block freed: the floor rises.
  if (f->first == m.own_floor) {
    m.own_floor += f->second;
    m.own_free.erase(f);
  }
}

bool is_local(int rank) {
  space::impl& m = space::current().internals();
  return rank >= 0 && rank < m.size && m.base[static_cast<size_t>(rank)] != nullptr;
}

void* local_address(int rank, uint64_t offset, size_t bytes) {
  space::impl& m = space::current().internals();
  m.check(rank, offset, bytes, "gas::global_ptr::local");
  std::byte* b = m.base[static_cast<size_t>(rank)];
  if (!b)
    throw error(status::bad_arg, "gas::global_ptr::local",
                "rank " + std::to_string(rank) + " is on another node: reach it with read, get, put or store");
  return b + offset;
}

uint64_t to_offset(const void* p, size_t bytes) {
  space::impl& m = space::current().internals();
  const auto* b = static_cast<const std::byte*>(p);
  if (b < m.seg.data() + control_bytes || b > m.seg.data() + m.seg_len || bytes > static_cast<size_t>(m.seg.data() + m.seg_len - b))
    throw error(status::bad_arg, "gas::to_global", "the pointer is not inside this process's segment");
  return static_cast<uint64_t>(b - m.seg.data());
}

void get_bytes(void* dst, int rank, uint64_t offset, size_t bytes) {
  space::impl& m = space::current().internals();
  m.check(rank, offset, bytes, "gas::get");
  if (bytes == 0) return;
  if (std::byte* b = m.base[static_cast<size_t>(rank)]) {
    m.count(rank, bytes);
    std::memcpy(dst, b + offset, bytes);
    return;
  }
  const size_t piece = max_medium();
  if (bytes > 4 * piece) {
    // Big: one pull (a long reply) into a block of our own segment, copied
    // out when it lands; in pieces only when the segment has no room.
    uint64_t block = 0;
    try {
      block = alloc_bytes(bytes, line);
    } catch (const error&) {
      block = 0;
    }
    if (block) {
      m.count(rank, bytes);
      ++m.pending;
      m.sent(m.ep.get(rank, m.pulled, offset, block, bytes,
                      static_cast<uint64_t>(reinterpret_cast<uintptr_t>(dst)), block),
             "gas::get");
      return;
    }
  }
  m.count(rank, bytes, (bytes + piece - 1) / piece);
  for (size_t done = 0; done < bytes; done += piece) {
    const size_t n = std::min(piece, bytes - done);
    ++m.pending;
    m.sent(m.ep.request(rank, m.get_req, offset + done, static_cast<uint32_t>(n),
                        static_cast<uint64_t>(reinterpret_cast<uintptr_t>(static_cast<std::byte*>(dst) + done))),
           "gas::get");
  }
}

void put_bytes(int rank, uint64_t offset, const void* src, size_t bytes) {
  space::impl& m = space::current().internals();
  m.check(rank, offset, bytes, "gas::put");
  if (bytes == 0) return;
  m.count(rank, bytes);
  if (std::byte* b = m.base[static_cast<size_t>(rank)]) {
    std::memcpy(b + offset, src, bytes);
    return;
  }
  ++m.pending;
  const unhurried_sends one_way;  // it may share a datagram with what follows (a sync sends it)
  m.sent(m.ep.request_long(rank, m.put_req, std::span(static_cast<const std::byte*>(src), bytes), offset), "gas::put");
}

void store_bytes(int rank, uint64_t offset, const void* src, size_t bytes) {
  space::impl& m = space::current().internals();
  m.check(rank, offset, bytes, "gas::store");
  if (bytes == 0) return;
  m.count(rank, bytes);
  m.stored_to[static_cast<size_t>(rank)] += bytes;
  if (std::byte* b = m.base[static_cast<size_t>(rank)]) {
    std::memcpy(b + offset, src, bytes);
    core::sent_outside();  // see core/tsan.hpp
    // Release: the target that sees the count sees the bytes. Seq_cst
    // besides: the writer's half of the handshake with a sleeping waiter.
    reinterpret_cast<control_line*>(b)->stored.fetch_add(bytes, std::memory_order_seq_cst);
    m.ep.wake(rank);  // it may sleep in store_sync
    return;
  }
  const unhurried_sends one_way;  // it may share a datagram with what follows (a sync sends it)
  m.sent(m.ep.request_long(rank, m.store_req, std::span(static_cast<const std::byte*>(src), bytes), offset),
         "gas::store");
}

namespace {
// An atomic's word, checked (in the job, in the segment, aligned) and
// counted: its address here when it is on this node, else nullptr.
std::byte* atomic_word_at(space::impl& m, int rank, uint64_t offset, unsigned width) {
  m.check(rank, offset, width, "gas atomic");
  if (offset % width)
    throw error(status::bad_arg, "gas atomic",
                "the word at offset " + std::to_string(offset) + " is not aligned to its " + std::to_string(width) +
                    " bytes");
  m.count(rank, width);
  std::byte* b = m.base[static_cast<size_t>(rank)];
  return b ? b + offset : nullptr;
}
// Applies an atomic to a word of this node (under its owner's lock once there are procedures).
uint64_t apply_here(space::impl& m, std::byte* word, int owner, atomic_op op, unsigned width, bool is_signed,
                    uint64_t operand, uint64_t desired) {
  lock_guard g(m.locked_atomics ? m.control_of(owner) : nullptr, m.rank, false);
  return apply_word(word, op, width, is_signed, operand, desired);
}
}  // namespace

uint64_t atomic_bytes(atomic_op op, int rank, uint64_t offset, unsigned width, bool is_signed, uint64_t operand,
                      uint64_t desired) {
  space::impl& m = space::current().internals();
  if (std::byte* w = atomic_word_at(m, rank, offset, width)) return apply_here(m, w, rank, op, width, is_signed, operand, desired);
  ++m.pending;
  m.sent(m.ep.request(rank, m.atomic_req, static_cast<uint32_t>(op), width | (is_signed ? 0x100u : 0u), offset, operand,
                      desired),
         "gas atomic");
  m.wait_pending();
  const uint64_t r = m.atomic_result;
  // Sign-extend a 32-bit answer of a signed type, as the local path does.
  return width == 4 && is_signed ? static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(r))) : r;
}

uint64_t call_bytes(int procedure, int rank, uint64_t offset, size_t bytes, uint64_t argument) {
  space::impl& m = space::current().internals();
  m.check(rank, offset, bytes, "gas::call_atomic");
  if (procedure < 0 || static_cast<size_t>(procedure) >= m.procedures.size())
    throw error(status::bad_arg, "gas::call_atomic", "no atomic procedure " + std::to_string(procedure));
  m.count(rank, bytes);
  if (std::byte* b = m.base[static_cast<size_t>(rank)]) {
    lock_guard g(m.control_of(rank), m.rank, false);
    return m.procedures[static_cast<size_t>(procedure)](b + offset, argument);
  }
  ++m.pending;
  m.sent(m.ep.request(rank, m.call_req, static_cast<uint32_t>(procedure), offset, static_cast<uint64_t>(bytes), argument),
         "gas::call_atomic");
  m.wait_pending();
  return m.atomic_result;
}

// ---- operations with futures ------------------------------------------------------

namespace {

// A piece of a get: [its offset in the whole (2 words)], and its bytes.
bool deliver_piece(async_detail::state_base&, void* dst, size_t bytes, const uint32_t* w, unsigned n,
                   std::span<const std::byte> p) {
  if (n < 2) return false;
  const uint64_t at = async_detail::get_id(w);
  if (at > bytes || p.size() > bytes - at) return false;
  if (!p.empty()) std::memcpy(static_cast<std::byte*>(dst) + at, p.data(), p.size());
  return true;
}
bool deliver_done(async_detail::state_base&, void*, size_t, const uint32_t*, unsigned, std::span<const std::byte>) {
  return true;
}
// The old value of an atomic: [the value (2 words)], written as the word's width.
bool deliver_word(async_detail::state_base&, void* dst, size_t bytes, const uint32_t* w, unsigned n,
                  std::span<const std::byte>) {
  if (n < 2 || bytes > 8) return false;
  const uint64_t old = async_detail::get_id(w);
  std::memcpy(dst, &old, bytes);  // the low bytes: little-endian
  return true;
}

}  // namespace

void rget_bytes(async_detail::state_base& s, void* dst, int rank, uint64_t offset, size_t bytes) {
  space::impl& m = space::current().internals();
  m.check(rank, offset, bytes, "gas::rget");
  if (std::byte* b = m.base[static_cast<size_t>(rank)]) {
    m.count(rank, bytes);
    if (bytes) std::memcpy(dst, b + offset, bytes);
    s.finish();
    return;
  }
  if (bytes == 0) {
    s.finish();
    return;
  }
  const size_t piece = max_medium();
  const size_t pieces = (bytes + piece - 1) / piece;
  if (pieces > 0xffffffffu) throw error(status::bad_arg, "gas::rget", "too many pieces");
  m.count(rank, bytes, pieces);
  const uint64_t op = async_detail::begin_operation(s, &deliver_piece, dst, bytes, static_cast<uint32_t>(pieces), rank,
                                                    "gas::rget");
  for (size_t done = 0; done < bytes; done += piece) {
    const size_t n = std::min(piece, bytes - done);
    const status st = m.ep.request(rank, m.fget_req, offset + done, static_cast<uint32_t>(n), op, uint64_t{done});
    if (st != status::ok) {  // this piece and the rest will not be answered
      for (size_t left = done; left < bytes; left += piece)
        async_detail::fail_operation(op, std::string("the request could not be sent: ") + to_string(st), st);
      return;
    }
  }
}

void rput_bytes(async_detail::state_base& s, int rank, uint64_t offset, const void* src, size_t bytes) {
  space::impl& m = space::current().internals();
  m.check(rank, offset, bytes, "gas::rput");
  if (std::byte* b = m.base[static_cast<size_t>(rank)]) {
    m.count(rank, bytes);
    if (bytes) std::memcpy(b + offset, src, bytes);
    s.finish();
    return;
  }
  if (bytes == 0) {
    s.finish();
    return;
  }
  m.count(rank, bytes);
  const uint64_t op = async_detail::begin_operation(s, &deliver_done, nullptr, 0, 1, rank, "gas::rput");
  const status st = m.ep.request_long(rank, m.fput_req, std::span(static_cast<const std::byte*>(src), bytes), offset, op);
  if (st != status::ok) async_detail::fail_operation(op, std::string("the request could not be sent: ") + to_string(st), st);
}

void ratomic_bytes(async_detail::state_base& s, void* result, atomic_op op, int rank, uint64_t offset, unsigned width,
                   bool is_signed, uint64_t operand, uint64_t desired) {
  space::impl& m = space::current().internals();
  if (std::byte* w = atomic_word_at(m, rank, offset, width)) {
    const uint64_t old = apply_here(m, w, rank, op, width, is_signed, operand, desired);
    std::memcpy(result, &old, width);
    s.finish();
    return;
  }
  const uint64_t number = async_detail::begin_operation(s, &deliver_word, result, width, 1, rank, "gas atomic");
  const status st = m.ep.request(rank, m.fatomic_req, static_cast<uint32_t>(op), width | (is_signed ? 0x100u : 0u),
                                 offset, operand, desired, number);
  if (st != status::ok)
    async_detail::fail_operation(number, std::string("the request could not be sent: ") + to_string(st), st);
}

}  // namespace detail

int register_atomic_procedure(atomic_procedure_fn fn) {
  space::impl& m = space::current().internals();
  if (!fn) throw error(status::bad_arg, "gas::register_atomic_procedure", "null function");
  m.procedures.push_back(fn);
  m.locked_atomics = true;
  // Every rank takes the lock from here on before anyone runs a procedure.
  m.barrier();
  return static_cast<int>(m.procedures.size() - 1);
}

// ---- completion ----------------------------------------------------------------

void sync() { space::current().internals().wait_pending(); }

void store_sync(size_t bytes) {
  space::impl& m = space::current().internals();
  const uint64_t want = m.consumed + bytes;
  // Seq_cst: the waiter's half of the handshake with a storer of this node
  // that wakes us (store_bytes); any rank may be storing.
  m.spin_until([&] { return m.control().stored.load(std::memory_order_seq_cst) >= want; }, -1, "gas::store_sync");
  m.consumed = want;
}

void all_store_sync() {
  space::impl& m = space::current().internals();
  // Tell every rank how many more bytes this process stored into it...
  for (int t = 0; t < m.size; ++t) {
    const uint64_t more = m.stored_to[static_cast<size_t>(t)] - m.announced_to[static_cast<size_t>(t)];
    if (!more) continue;
    m.announced_to[static_cast<size_t>(t)] = m.stored_to[static_cast<size_t>(t)];
    if (control_line* c = m.control_of(t)) {
      c->expected.fetch_add(more, std::memory_order_acq_rel);  // read after the barrier that follows
    } else {
      ++m.pending;
      m.sent(m.ep.request(t, m.expect_req, more), "gas::all_store_sync");
    }
  }
  // ...and once everybody has (acknowledged, then a barrier), wait for as
  // many here; a second barrier and every store in the job has landed.
  m.barrier();
  const uint64_t expected = m.control().expected.load(std::memory_order_acquire);
  m.spin_until([&] { return m.control().stored.load(std::memory_order_seq_cst) >= expected; }, -1,
               "gas::all_store_sync");
  m.consumed = expected;
  m.barrier();
}

void barrier() { space::current().internals().barrier(); }

namespace detail {

void broadcast_bytes(void* data, size_t bytes, int root) {
  space::impl& m = space::current().internals();
  if (root < 0 || root >= m.size) throw error(status::bad_arg, "gas::broadcast", "root " + std::to_string(root) + " is outside the job");
  m.wait_pending();
  const uint64_t mark = m.sym_top;
  const uint64_t tmp = m.scratch(bytes, "gas::broadcast");
  std::byte* here = m.seg.data() + tmp;
  const int v = (m.rank - root + m.size) % m.size;  // rank relative to the root
  const uint64_t e = ++m.epoch;
  if (v == 0) {
    if (bytes) std::memcpy(here, data, bytes);
  } else {
    m.wait_signal(bcast_slot, e, (v - (v & -v) + root) % m.size, "gas::broadcast");  // from its parent in the tree
  }
  // A binomial tree: v passes to v + d for every power of two d below its lowest set bit.
  const int lowest = v == 0 ? m.size : (v & -v);
  int d = 1;
  while (d * 2 < lowest && d * 2 < m.size) d *= 2;
  for (; d >= 1; d /= 2) {
    if (d >= lowest || v + d >= m.size) continue;
    const int child = (v + d + root) % m.size;
    put_bytes(child, tmp, here, bytes);
    m.wait_pending();  // in place before the signal (over the network; locally it is already)
    m.signal(child, bcast_slot, e);
  }
  if (v != 0 && bytes) std::memcpy(data, here, bytes);
  m.barrier();  // nobody reuses the staging area while another still reads it
  m.sym_top = mark;
}

void reduce_bytes(void* data, size_t bytes, int root, void (*combine)(void* acc, const void* in, void* ctx), void* ctx) {
  space::impl& m = space::current().internals();
  if (root < 0 || root >= m.size) throw error(status::bad_arg, "gas::reduce", "root " + std::to_string(root) + " is outside the job");
  m.wait_pending();
  const uint64_t mark = m.sym_top;
  unsigned rounds = 0;
  while ((1 << rounds) < m.size) ++rounds;
  // One slot per round: the child of that round puts its partial result there.
  const uint64_t tmp = m.scratch(bytes * std::max(rounds, 1u), "gas::reduce");
  const int v = (m.rank - root + m.size) % m.size;
  const uint64_t e = ++m.epoch;
  // A binomial tree: in round k, v with bit k set sends its partial result to
  // v - 2^k and is done; the others take one from v + 2^k (if there is one).
  for (unsigned k = 0; k < rounds; ++k) {
    const int d = 1 << k;
    if (v & d) {
      const int parent = (v - d + root) % m.size;
      put_bytes(parent, tmp + k * bytes, data, bytes);
      m.wait_pending();
      m.signal(parent, reduce_slot + k, e);
      break;
    }
    if (v + d < m.size) {
      m.wait_signal(reduce_slot + k, e, (v + d + root) % m.size, "gas::reduce");
      if (bytes) combine(data, m.seg.data() + tmp + k * bytes, ctx);
    }
  }
  m.barrier();  // nobody reuses the staging area while another still reads it
  m.sym_top = mark;
}

namespace {

// The fixed-size exchanges: every rank puts `bytes` for each rank t (from
// source(t)) into its own slot of t's staging area, then, after a barrier,
// copies its whole area out; pairwise, rank r starting with r + 1, so that
// not everybody sends to rank 0 first.
template <class Source>
void exchange(space::impl& m, size_t bytes, void* dst, const char* what, Source source) {
  const uint64_t mark = m.sym_top;
  const size_t p = static_cast<size_t>(m.size);
  const uint64_t tmp = m.scratch(bytes * p, what);
  for (int i = 1; i <= m.size; ++i) {
    const int t = (m.rank + i) % m.size;
    put_bytes(t, tmp + static_cast<uint64_t>(m.rank) * bytes, source(t), bytes);
  }
  m.barrier();  // waits for this process's puts first
  if (bytes) std::memcpy(dst, m.seg.data() + tmp, bytes * p);
  m.barrier();  // nobody reuses the staging area while another still reads it
  m.sym_top = mark;
}

}  // namespace

void all_gather_bytes(const void* mine, void* all, size_t bytes) {
  exchange(space::current().internals(), bytes, all, "gas::all_gather", [&](int) { return mine; });
}

void all_to_all_bytes(const void* src, void* dst, size_t bytes) {
  exchange(space::current().internals(), bytes, dst, "gas::all_to_all",
           [&](int t) { return static_cast<const std::byte*>(src) + static_cast<size_t>(t) * bytes; });
}

void all_to_all_v_bytes(const void* src, const uint64_t* send_bytes, std::vector<std::byte>& out,
                        std::vector<uint64_t>& recv_bytes) {
  space::impl& m = space::current().internals();
  const size_t p = static_cast<size_t>(m.size);
  // Everybody's counts: row s says what s sends to each rank.
  std::vector<uint64_t> matrix(p * p);
  all_gather_bytes(send_bytes, matrix.data(), p * sizeof(uint64_t));
  uint64_t biggest = 0;
  std::vector<uint64_t> total(p, 0);
  for (size_t s = 0; s < p; ++s)
    for (size_t t = 0; t < p; ++t) total[t] += matrix[s * p + t];
  for (uint64_t t : total) biggest = std::max(biggest, t);
  const uint64_t mark = m.sym_top;
  const uint64_t tmp = m.scratch(biggest, "gas::all_to_all_v");
  const auto* from = static_cast<const std::byte*>(src);
  std::vector<uint64_t> start(p, 0);  // where each rank's data starts in what this rank sends
  for (size_t t = 1; t < p; ++t) start[t] = start[t - 1] + send_bytes[t - 1];
  for (int i = 1; i <= m.size; ++i) {
    const size_t t = static_cast<size_t>((m.rank + i) % m.size);
    uint64_t at = 0;  // what ranks before this one send to t
    for (size_t s = 0; s < static_cast<size_t>(m.rank); ++s) at += matrix[s * p + t];
    put_bytes(static_cast<int>(t), tmp + at, from + start[t], send_bytes[t]);
  }
  m.barrier();
  const size_t me = static_cast<size_t>(m.rank);
  out.assign(m.seg.data() + tmp, m.seg.data() + tmp + total[me]);
  recv_bytes.assign(p, 0);
  for (size_t s = 0; s < p; ++s) recv_bytes[s] = matrix[s * p + me];
  m.barrier();
  m.sym_top = mark;
}

}  // namespace detail

void poll() { space::current().internals().rt.bundle().poll(); }

traffic_counts traffic() { return space::current().internals().moved; }
void reset_traffic() { space::current().internals().moved = {}; }

}  // namespace clump::gas
