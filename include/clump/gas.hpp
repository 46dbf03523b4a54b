#pragma once
/// \file
/// The Split-C global address space on clump's active messages.
///
/// A program is one thread of control per process (SPMD). Every process
/// contributes a segment of shared memory to one global address space; a
/// `global_ptr<T>` names a place in it as (rank, offset). Reads and writes
/// block; `get` and `put` are split-phase and complete together at `sync()`;
/// `store` is one-way: the target counts the bytes that arrive
/// (`store_sync(n)`), and `all_store_sync()` is a barrier after which every
/// store in the job has landed.
///
/// A place on a process of this node is reached with plain loads, stores and
/// memcpy through the cross-mapped segment, with no message at all; a place
/// on another node with active messages (long messages for put and store,
/// request and reply for get).
///
/// \code
///   clump::runtime rt;
///   clump::gas::space gs(rt);                         // collective
///   auto counts = clump::gas::all_alloc<int64_t>(8);  // the same offset on every rank
///   auto right = counts.on((gs.rank() + 1) % gs.size());
///   clump::gas::write(right, int64_t{42});
///   clump::gas::barrier();
/// \endcode
///
/// One space per process, used from the thread that owns the runtime's
/// bundle. Errors (a null or out-of-segment pointer, a rank out of range, a
/// misaligned atomic) throw clump::error with the reason; nothing writes
/// outside a segment.

#include <clump/async.hpp>
#include <clump/runtime.hpp>
#include <clump/status.hpp>

#include <algorithm>
#include <compare>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

namespace clump::gas {

class space;

/// A place in the global address space: a rank and a byte offset into that
/// rank's segment. A default-constructed pointer is null.
template <class T>
class global_ptr {
 public:
  using element_type = T;

  constexpr global_ptr() noexcept = default;
  constexpr global_ptr(int rank, uint64_t offset) noexcept : rank_(rank), offset_(offset) {}

  constexpr int rank() const noexcept { return rank_; }
  constexpr uint64_t offset() const noexcept { return offset_; }
  constexpr bool is_null() const noexcept { return rank_ < 0; }
  constexpr explicit operator bool() const noexcept { return !is_null(); }

  /// The same offset on another rank (a symmetric allocation's copy there).
  constexpr global_ptr on(int rank) const noexcept { return {rank, offset_}; }

  /// True when this process reaches the place with loads and stores: it is
  /// on this process or on another process of this node.
  bool is_local() const;
  /// The place as a pointer of this process (see is_local); throws
  /// clump::error when it is not directly addressable here.
  T* local() const;

  template <class U>
  constexpr global_ptr<U> cast() const noexcept {
    return {rank_, offset_};
  }

  constexpr global_ptr& operator+=(std::ptrdiff_t n) noexcept {
    offset_ += static_cast<uint64_t>(n * static_cast<std::ptrdiff_t>(sizeof(T)));
    return *this;
  }
  constexpr global_ptr& operator-=(std::ptrdiff_t n) noexcept { return *this += -n; }
  constexpr global_ptr& operator++() noexcept { return *this += 1; }
  constexpr global_ptr& operator--() noexcept { return *this -= 1; }
  constexpr global_ptr operator++(int) noexcept {
    global_ptr old = *this;
    *this += 1;
    return old;
  }
  constexpr global_ptr operator--(int) noexcept {
    global_ptr old = *this;
    *this -= 1;
    return old;
  }
  friend constexpr global_ptr operator+(global_ptr p, std::ptrdiff_t n) noexcept { return p += n; }
  friend constexpr global_ptr operator+(std::ptrdiff_t n, global_ptr p) noexcept { return p += n; }
  friend constexpr global_ptr operator-(global_ptr p, std::ptrdiff_t n) noexcept { return p -= n; }
  /// Elements between two places of one rank.
  friend constexpr std::ptrdiff_t operator-(global_ptr a, global_ptr b) noexcept {
    return (static_cast<std::ptrdiff_t>(a.offset_) - static_cast<std::ptrdiff_t>(b.offset_)) /
           static_cast<std::ptrdiff_t>(sizeof(T));
  }
  friend constexpr bool operator==(global_ptr, global_ptr) noexcept = default;
  /// Ordered by rank, then offset.
  friend constexpr std::strong_ordering operator<=>(global_ptr a, global_ptr b) noexcept {
    if (auto c = a.rank_ <=> b.rank_; c != 0) return c;
    return a.offset_ <=> b.offset_;
  }

 private:
  int rank_ = -1;
  uint64_t offset_ = 0;
};

/// The global address of `p`, which must point into this process's segment.
template <class T>
global_ptr<T> to_global(T* p);

/// The global address space of this process's job. Constructing it is
/// collective: every rank constructs one, with the same segment size.
class space {
 public:
  /// Creates this process's segment in shared memory, and exchanges every
  /// rank's. The segment has `segment_bytes` bytes, or the CLUMP_GAS_SEGMENT
  /// setting's when that is larger (so 0 means the setting): a program asks
  /// for what its input needs, and a user can still give it more. Pages are
  /// used only where touched.
  explicit space(runtime& rt, size_t segment_bytes = 0);
  /// Collective: a barrier first, so that nobody's segment goes while others use it.
  ~space();
  space(const space&) = delete;
  space& operator=(const space&) = delete;

  /// The space of this process; throws clump::error when there is none.
  static space& current();

  int rank() const noexcept;
  int size() const noexcept;
  /// This process's segment (the part of it the allocators hand out from).
  std::span<std::byte> segment() const noexcept;
  runtime& owner() const noexcept;

  struct impl;
  impl& internals() const noexcept { return *impl_; }

 private:
  std::unique_ptr<impl> impl_;
};

// ---- memory ------------------------------------------------------------------

namespace detail {
uint64_t all_alloc_bytes(size_t bytes, size_t align);
uint64_t alloc_bytes(size_t bytes, size_t align);
void free_bytes(int rank, uint64_t offset);
void* local_address(int rank, uint64_t offset, size_t bytes);  // nullptr when not mapped here
bool is_local(int rank);
void get_bytes(void* dst, int rank, uint64_t offset, size_t bytes);
void put_bytes(int rank, uint64_t offset, const void* src, size_t bytes);
void store_bytes(int rank, uint64_t offset, const void* src, size_t bytes);
uint64_t to_offset(const void* p, size_t bytes);
/// Throws clump::error (bad_arg): `n` elements of `size` bytes do not fit in a size_t.
[[noreturn]] void too_many(const char* what, size_t n, size_t size);
/// The bytes of `n` elements of T, refused (never wrapped) when they overflow.
template <class T>
inline size_t bytes_of(size_t n, const char* what) {
  if (n > SIZE_MAX / sizeof(T)) [[unlikely]]
    too_many(what, n, sizeof(T));
  return n * sizeof(T);
}
}  // namespace detail

/// Collective: `n` elements at the same offset in every rank's segment;
/// returns this rank's. Ranks must make the same all_alloc calls in the same
/// order. Throws clump::error when the segment is full.
template <class T>
global_ptr<T> all_alloc(size_t n = 1) {
  return {space::current().rank(), detail::all_alloc_bytes(detail::bytes_of<T>(n, "gas::all_alloc"), alignof(T))};
}

/// `n` elements in this rank's segment, for this rank alone to hand out.
template <class T>
global_ptr<T> alloc(size_t n = 1) {
  return {space::current().rank(), detail::alloc_bytes(detail::bytes_of<T>(n, "gas::alloc"), alignof(T))};
}

/// Gives back memory from alloc (on this rank).
template <class T>
void free(global_ptr<T> p) {
  detail::free_bytes(p.rank(), p.offset());
}

template <class T>
bool global_ptr<T>::is_local() const {
  return !is_null() && detail::is_local(rank_);
}

template <class T>
T* global_ptr<T>::local() const {
  return static_cast<T*>(detail::local_address(rank_, offset_, sizeof(T)));
}

template <class T>
global_ptr<T> to_global(T* p) {
  return {space::current().rank(), detail::to_offset(p, sizeof(T))};
}

// ---- spread arrays --------------------------------------------------------------

/// How a spread array lays its elements over the ranks.
enum class layout {
  cyclic,   ///< element i on rank i % P
  blocked,  ///< consecutive blocks of ceil(n / P) elements, rank 0 first
};

/// An array of `n` elements spread over every rank (Split-C's spread arrays):
/// element i is a global place, and each rank holds its share in its
/// segment. Constructing one is collective (an all_alloc).
template <class T>
class spread_array {
 public:
  spread_array(size_t n, layout l = layout::cyclic)
      : n_(n), ranks_(static_cast<size_t>(space::current().size())), per_rank_((n + ranks_ - 1) / ranks_),
        layout_(l), base_(all_alloc<T>(std::max<size_t>(per_rank_, 1))) {}

  size_t size() const noexcept { return n_; }
  layout arrangement() const noexcept { return layout_; }
  /// The rank that holds element i.
  int owner(size_t i) const noexcept {
    return static_cast<int>(layout_ == layout::cyclic ? i % ranks_ : i / per_rank_);
  }
  /// Element i's index within its owner's share.
  size_t slot(size_t i) const noexcept { return layout_ == layout::cyclic ? i / ranks_ : i % per_rank_; }
  /// The place of element i (read, write, get, put, store and the atomics take it).
  global_ptr<T> operator[](size_t i) const noexcept {
    return base_.on(owner(i)) + static_cast<std::ptrdiff_t>(slot(i));
  }
  /// How many elements `rank` holds.
  size_t count_on(int rank) const noexcept {
    const size_t r = static_cast<size_t>(rank);
    if (layout_ == layout::cyclic) return n_ / ranks_ + (r < n_ % ranks_ ? 1 : 0);
    const size_t first = r * per_rank_;
    return first >= n_ ? 0 : std::min(per_rank_, n_ - first);
  }
  /// The global index of this rank's k-th element.
  size_t index_of(size_t k) const noexcept {
    const size_t r = static_cast<size_t>(space::current().rank());
    return layout_ == layout::cyclic ? k * ranks_ + r : r * per_rank_ + k;
  }
  /// This rank's share, for plain loads and stores.
  std::span<T> local() const { return {base_.local(), count_on(space::current().rank())}; }

 private:
  size_t n_, ranks_, per_rank_;
  layout layout_;
  global_ptr<T> base_;
};

// ---- operations --------------------------------------------------------------

/// Waits until every get and put of this process has completed.
void sync();

/// Blocking read of one value.
template <class T>
T read(global_ptr<T> p) {
  static_assert(std::is_trivially_copyable_v<T>);
  T v;
  detail::get_bytes(&v, p.rank(), p.offset(), sizeof(T));
  sync();
  return v;
}

/// Blocking write of one value: returns once it is in place.
template <class T>
void write(global_ptr<T> p, const std::type_identity_t<T>& v) {
  static_assert(std::is_trivially_copyable_v<T>);
  detail::put_bytes(p.rank(), p.offset(), &v, sizeof(T));
  sync();
}

/// Blocking read of `n` elements into `dst`.
template <class T>
void read(T* dst, global_ptr<T> src, size_t n) {
  static_assert(std::is_trivially_copyable_v<T>);
  detail::get_bytes(dst, src.rank(), src.offset(), detail::bytes_of<T>(n, "gas::get"));
  sync();
}

/// Blocking write of `n` elements from `src`: returns once they are in place.
template <class T>
void write(global_ptr<T> dst, const T* src, size_t n) {
  static_assert(std::is_trivially_copyable_v<T>);
  detail::put_bytes(dst.rank(), dst.offset(), src, detail::bytes_of<T>(n, "gas::put"));
  sync();
}

/// Split-phase: `n` elements from `src` into `dst`, complete at the next sync().
template <class T>
void get(T* dst, global_ptr<T> src, size_t n = 1) {
  static_assert(std::is_trivially_copyable_v<T>);
  detail::get_bytes(dst, src.rank(), src.offset(), detail::bytes_of<T>(n, "gas::get"));
}

/// Split-phase: `n` elements from `src` into `dst`. `src` may be reused at
/// once; the data is in place at the next sync().
template <class T>
void put(global_ptr<T> dst, const T* src, size_t n = 1) {
  static_assert(std::is_trivially_copyable_v<T>);
  detail::put_bytes(dst.rank(), dst.offset(), src, detail::bytes_of<T>(n, "gas::put"));
}

/// One-way: `n` elements from `src` into `dst`, counted at the target (see
/// store_sync). `src` may be reused at once; the sender learns nothing.
template <class T>
void store(global_ptr<T> dst, const T* src, size_t n = 1) {
  static_assert(std::is_trivially_copyable_v<T>);
  detail::store_bytes(dst.rank(), dst.offset(), src, detail::bytes_of<T>(n, "gas::store"));
}

/// Waits until `bytes` more bytes have been stored into this process (since
/// the last store_sync or all_store_sync), polling meanwhile.
void store_sync(size_t bytes);

/// Collective: a barrier after which every store made before it, by any
/// rank, has landed; resets the counts store_sync waits on.
void all_store_sync();

/// Collective: every rank has arrived (and every put and get of this process
/// has completed). A dissemination barrier: log2(P) rounds of signals, flags
/// in shared memory inside a node, short messages between nodes.
void barrier();

// ---- collectives -------------------------------------------------------------------
// Every rank calls the same collectives in the same order. They stage data
// in a temporary symmetric area of the segment, so a collective needs that
// much room free in every segment.

namespace detail {
void broadcast_bytes(void* data, size_t bytes, int root);
void all_gather_bytes(const void* mine, void* all, size_t bytes);
void all_to_all_bytes(const void* src, void* dst, size_t bytes);
void all_to_all_v_bytes(const void* src, const uint64_t* send_bytes, std::vector<std::byte>& out,
                        std::vector<uint64_t>& recv_bytes);
void reduce_bytes(void* data, size_t bytes, int root, void (*combine)(void* acc, const void* in, void* ctx), void* ctx);
}  // namespace detail

/// `n` elements at `data` on `root` are copied to `data` on every rank (a binomial tree).
template <class T>
void broadcast(T* data, size_t n, int root) {
  static_assert(std::is_trivially_copyable_v<T>);
  detail::broadcast_bytes(data, detail::bytes_of<T>(n, "gas::broadcast"), root);
}

/// Rank r's `n` elements at `mine` land at `all + r * n` on every rank.
template <class T>
void all_gather(const T* mine, T* all, size_t n = 1) {
  static_assert(std::is_trivially_copyable_v<T>);
  detail::all_gather_bytes(mine, all, detail::bytes_of<T>(n, "gas::all_gather"));
}

/// Elements `src + t * n` (n of them) go to rank t, which finds them at `dst + r * n` (r: the sender).
template <class T>
void all_to_all(const T* src, T* dst, size_t n = 1) {
  static_assert(std::is_trivially_copyable_v<T>);
  detail::all_to_all_bytes(src, dst, detail::bytes_of<T>(n, "gas::all_to_all"));
}

/// Variable sizes: `src` holds counts[0] elements for rank 0, then counts[1]
/// for rank 1, ... Returns what every rank sent here, in rank order; with
/// `received`, also how many came from each rank.
template <class T>
std::vector<T> all_to_all_v(std::span<const T> src, std::span<const size_t> counts,
                            std::vector<size_t>* received = nullptr) {
  static_assert(std::is_trivially_copyable_v<T>);
  std::vector<uint64_t> send_bytes(counts.size()), recv_bytes;
  for (size_t i = 0; i < counts.size(); ++i) send_bytes[i] = detail::bytes_of<T>(counts[i], "gas::all_to_all_v");
  if (counts.size() != static_cast<size_t>(space::current().size()))
    throw error(status::bad_arg, "gas::all_to_all_v", "give one count per rank");
  std::vector<std::byte> out;
  detail::all_to_all_v_bytes(src.data(), send_bytes.data(), out, recv_bytes);
  std::vector<T> result(out.size() / sizeof(T));
  if (!out.empty()) std::memcpy(result.data(), out.data(), out.size());
  if (received) {
    received->clear();
    for (uint64_t b : recv_bytes) received->push_back(static_cast<size_t>(b / sizeof(T)));
  }
  return result;
}

/// The smaller and the larger of two values, as reduction operations.
template <class T = void>
struct minimum {
  constexpr T operator()(const T& a, const T& b) const { return b < a ? b : a; }
};
template <class T = void>
struct maximum {
  constexpr T operator()(const T& a, const T& b) const { return a < b ? b : a; }
};

/// Every rank's `n` elements at `data` combined element by element with
/// `op` along a binomial tree rooted at `root` (log2 P rounds), the result
/// left at `data` on `root`. The tree is fixed, so the result is
/// reproducible from run to run (floating point included); `op` should be
/// associative and commutative.
template <class T, class Op = std::plus<T>>
void reduce(T* data, size_t n, int root, Op op = {}) {
  static_assert(std::is_trivially_copyable_v<T>);
  struct context {
    size_t n;
    Op* op;
  } c{n, &op};
  detail::reduce_bytes(
      data, detail::bytes_of<T>(n, "gas::reduce"), root,
      [](void* acc, const void* in, void* ctx) {
        auto* cx = static_cast<context*>(ctx);
        T* a = static_cast<T*>(acc);
        for (size_t i = 0; i < cx->n; ++i) {
          T x;
          std::memcpy(&x, static_cast<const std::byte*>(in) + i * sizeof(T), sizeof x);
          a[i] = (*cx->op)(a[i], x);
        }
      },
      &c);
}

/// reduce to rank 0, then broadcast: every rank gets the same result, bit for bit.
template <class T, class Op = std::plus<T>>
void all_reduce(T* data, size_t n, Op op = {}) {
  reduce(data, n, 0, std::move(op));
  broadcast(data, n, 0);
}

// ---- atomics -----------------------------------------------------------------------

/// The read-modify-write operations of the remote atomics.
enum class atomic_op : uint32_t { add, bit_and, bit_or, bit_xor, min, max, swap, compare_swap };

/// The types the remote atomics take.
template <class T>
concept atomic_word = std::same_as<T, int32_t> || std::same_as<T, uint32_t> || std::same_as<T, int64_t> ||
                      std::same_as<T, uint64_t>;

namespace detail {
uint64_t atomic_bytes(atomic_op op, int rank, uint64_t offset, unsigned width, bool is_signed, uint64_t operand,
                      uint64_t desired);
}

/// Applies `op` with `operand` to the word at `p` atomically and returns the
/// value it had before. Atomic with respect to every atomic on that word
/// from any rank (same-node ranks use hardware atomics on the shared segment,
/// others are served by the owner). `p` must be aligned to sizeof(T).
template <atomic_word T>
T fetch_op(atomic_op op, global_ptr<T> p, T operand) {
  return static_cast<T>(detail::atomic_bytes(op, p.rank(), p.offset(), sizeof(T), std::is_signed_v<T>,
                                             static_cast<uint64_t>(operand), 0));
}
template <atomic_word T> T fetch_add(global_ptr<T> p, std::type_identity_t<T> v) { return fetch_op(atomic_op::add, p, v); }
template <atomic_word T> T fetch_and(global_ptr<T> p, std::type_identity_t<T> v) { return fetch_op(atomic_op::bit_and, p, v); }
template <atomic_word T> T fetch_or(global_ptr<T> p, std::type_identity_t<T> v) { return fetch_op(atomic_op::bit_or, p, v); }
template <atomic_word T> T fetch_xor(global_ptr<T> p, std::type_identity_t<T> v) { return fetch_op(atomic_op::bit_xor, p, v); }
template <atomic_word T> T fetch_min(global_ptr<T> p, std::type_identity_t<T> v) { return fetch_op(atomic_op::min, p, v); }
template <atomic_word T> T fetch_max(global_ptr<T> p, std::type_identity_t<T> v) { return fetch_op(atomic_op::max, p, v); }
template <atomic_word T> T swap(global_ptr<T> p, std::type_identity_t<T> v) { return fetch_op(atomic_op::swap, p, v); }
/// Stores `desired` if the word equals `expected`; returns the value it had.
template <atomic_word T>
T compare_swap(global_ptr<T> p, std::type_identity_t<T> expected, std::type_identity_t<T> desired) {
  return static_cast<T>(detail::atomic_bytes(atomic_op::compare_swap, p.rank(), p.offset(), sizeof(T),
                                             std::is_signed_v<T>, static_cast<uint64_t>(expected),
                                             static_cast<uint64_t>(desired)));
}

/// An atomic procedure: runs at the owner of `target` (or, on the same node,
/// in the caller under the owner's lock), atomically with respect to every
/// other atomic procedure and remote atomic on that rank, and returns a value.
/// It gets the target's memory and the caller's argument.
using atomic_procedure_fn = uint64_t (*)(std::byte* target, uint64_t argument);

/// Collective: registers `fn` under the same number on every rank (ranks
/// register the same procedures in the same order). From then on the remote
/// atomics on every rank take the rank's lock too.
int register_atomic_procedure(atomic_procedure_fn fn);

namespace detail {
uint64_t call_bytes(int procedure, int rank, uint64_t offset, size_t bytes, uint64_t argument);
}

/// Runs procedure `procedure` on the `n` elements at `target`, atomically,
/// and returns what it returned.
template <class T>
uint64_t call_atomic(int procedure, global_ptr<T> target, uint64_t argument, size_t n = 1) {
  return detail::call_bytes(procedure, target.rank(), target.offset(), detail::bytes_of<T>(n, "gas::call"), argument);
}

// ---- operations that return futures ---------------------------------------------
//
// The same operations as above, each with a future of its completion (see
// clump/async.hpp): `co_await gas::rget(p)` in a coroutine, or `wait()`.
// On this node they complete in the call (the future is ready); to another
// node they send the same messages as get, put and the atomics, and the
// future completes when the answer arrives, or fails with a clump::error
// naming the rank when it cannot (the rank failed). sync() does not wait
// for them: their futures do.

namespace detail {
void rget_bytes(async_detail::state_base& s, void* dst, int rank, uint64_t offset, size_t bytes);
void rput_bytes(async_detail::state_base& s, int rank, uint64_t offset, const void* src, size_t bytes);
void ratomic_bytes(async_detail::state_base& s, void* result, atomic_op op, int rank, uint64_t offset, unsigned width,
                   bool is_signed, uint64_t operand, uint64_t desired);
}  // namespace detail

/// A future of the value at `p`.
template <class T>
future<T> rget(global_ptr<T> p) {
  static_assert(std::is_trivially_copyable_v<T> && std::is_default_constructible_v<T>);
  auto* s = async_detail::state<T>::make();
  future<T> f{async_detail::state_ref<T>(s)};
  s->value.emplace();  // the bytes land here; the future is ready when all have
  detail::rget_bytes(*s, &*s->value, p.rank(), p.offset(), sizeof(T));
  return f;
}
/// `n` elements from `src` into `dst`; the future is ready when they are there.
template <class T>
future<> rget(T* dst, global_ptr<T> src, size_t n) {
  static_assert(std::is_trivially_copyable_v<T>);
  auto* s = async_detail::state<void>::make();
  future<> f{async_detail::state_ref<void>(s)};
  s->value.emplace();
  detail::rget_bytes(*s, dst, src.rank(), src.offset(), detail::bytes_of<T>(n, "gas::rget"));
  return f;
}
/// `n` elements from `src` into `dst` (`src` may be reused at once); the
/// future is ready when they are in place.
template <class T>
future<> rput(global_ptr<T> dst, const T* src, size_t n) {
  static_assert(std::is_trivially_copyable_v<T>);
  auto* s = async_detail::state<void>::make();
  future<> f{async_detail::state_ref<void>(s)};
  s->value.emplace();
  detail::rput_bytes(*s, dst.rank(), dst.offset(), src, detail::bytes_of<T>(n, "gas::rput"));
  return f;
}
/// `v` into `p`; the future is ready when it is in place.
template <class T>
future<> rput(global_ptr<T> p, const std::type_identity_t<T>& v) {
  return rput(p, &v, 1);
}
/// fetch_op with a future of the old value.
template <atomic_word T>
future<T> rfetch_op(atomic_op op, global_ptr<T> p, T operand, T desired = 0) {
  auto* s = async_detail::state<T>::make();
  future<T> f{async_detail::state_ref<T>(s)};
  s->value.emplace();
  detail::ratomic_bytes(*s, &*s->value, op, p.rank(), p.offset(), sizeof(T), std::is_signed_v<T>,
                        static_cast<uint64_t>(operand), static_cast<uint64_t>(desired));
  return f;
}
template <atomic_word T> future<T> rfetch_add(global_ptr<T> p, std::type_identity_t<T> v) { return rfetch_op(atomic_op::add, p, v); }
template <atomic_word T> future<T> rswap(global_ptr<T> p, std::type_identity_t<T> v) { return rfetch_op(atomic_op::swap, p, v); }
template <atomic_word T>
future<T> rcompare_swap(global_ptr<T> p, std::type_identity_t<T> expected, std::type_identity_t<T> desired) {
  return rfetch_op(atomic_op::compare_swap, p, expected, desired);
}

/// Runs the handlers of pending messages (for use inside computation loops).
void poll();

/// What this process's gas operations moved, split by where the target was
/// (the SC97 paper's Table 4): on this node, through the mapped segment with
/// no message, or on another node, with active messages. Every operation
/// counts, the collectives' own puts and signals included; an operation to
/// another node counts the messages it sent (a get of many medium pieces is
/// several) and the payload bytes it moved either way.
struct traffic_counts {
  uint64_t node_operations = 0;  ///< reads, writes, copies and atomics on this node
  uint64_t node_bytes = 0;
  uint64_t network_messages = 0;  ///< requests sent to other nodes
  uint64_t network_bytes = 0;
};
/// This process's counts since the space was made or since reset_traffic().
traffic_counts traffic();
void reset_traffic();

/// Polls until `done()` is true, sleeping in the kernel when nothing comes
/// (a polite wait; `done` may look at memory other processes of the node
/// write directly only if something else wakes this one: use it for
/// conditions set by handlers).
template <class Pred>
void wait_until(Pred&& done) {
  space::current().owner().wait_until(std::forward<Pred>(done));
}

}  // namespace clump::gas
