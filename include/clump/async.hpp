#pragma once
/// \file
/// Futures, coroutines and remote procedure calls on clump's active messages.
///
/// \code
///   // At start-up, the same name on every process (namespace scope is best):
///   const auto add = clump::rpc_function("add", [](int a, int b) { return a + b; });
///
///   clump::runtime rt;
///   clump::async_engine engine(rt);                 // collective
///   clump::future<int> f = clump::rpc(1, add, 2, 3);   // runs add(2, 3) on rank 1
///   int five = f.wait();                              // polls, then sleeps
///
///   clump::future<int> twice(int r) {                 // a coroutine
///     int a = co_await clump::rpc(r, add, 1, 1);
///     co_return a + co_await clump::rpc(r, add, a, a);
///   }
/// \endcode
///
/// A `future<T>` is the result of an operation that completes later: an rpc,
/// a gas operation (`gas::rget`, `gas::rput`, the `gas::rfetch_*` atomics),
/// a `promise<T>`, a `then`, a `when_all`, or a coroutine that returns
/// `future<T>` (it starts at once and runs until its first `co_await` of an
/// unfinished future). Futures belong to one thread of one process (the
/// thread that polls the runtime's bundle): no locks; their states come from
/// a pool, so the data path allocates nothing once warm.
///
/// Completion and continuations. An operation completes when its answer
/// arrives, in a poll. The continuations waiting on it (a `then`, a
/// coroutine suspended in `co_await`) run in `clump::progress()`, which
/// `wait()` calls: never inside a message handler. `then` on a future that
/// is ready runs at once.
///
/// Errors. An operation that fails (its message came back: the peer's
/// process is gone, the function is unknown there, it threw) makes its
/// future fail with a `clump::error` naming the peer and the reason;
/// `wait()`, `result()` and `co_await` throw it, `then` and `when_all` pass
/// it on without running their function.
///
/// Remote procedure calls. `rpc(rank, f, args...)` runs `f(args...)` on
/// `rank`, inside the message's handler there (so `f` must not wait; it may
/// use the gas layer's local memory, its own data structures, and return a
/// value), and returns a `future<R>`; `rpc_ff` sends it without an answer.
/// Functions are registered by name with `rpc_function`, the same name on
/// every process, and are found across processes by that name's hash, never
/// by code address; the first call of a function to a process that does not
/// have it, or has it with other argument types, fails with an error naming
/// it. Arguments and results are trivially copyable values, `std::string`
/// (`std::string_view` for arguments), `std::vector<T>` and `std::span<const
/// T>` of trivially copyable `T`: up to 60 bytes of plain values go in the
/// words of a short message, anything else as one medium message payload,
/// or in pieces of `clump::max_medium()` bytes when larger (up to 4 GiB; a
/// call beyond that fails with status::bad_arg and says so). A
/// `std::span<const T>` argument is a view into the arriving message (or
/// into the pieces put together), without a copy.

#include <clump/am.hpp>
#include <clump/status.hpp>

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace clump {

class runtime;
template <class T = void>
class future;
template <class T = void>
class promise;

/// Runs the continuations of the operations that have completed (and polls
/// the runtime's bundle once when an async_engine or a gas space exists).
/// Returns how many continuations ran.
unsigned progress();

namespace async_detail {

// ---- memory: states and coroutine frames come from size classes, reused ----
void* pool_allocate(size_t bytes);
void pool_free(void* p, size_t bytes) noexcept;

// ---- shared state -----------------------------------------------------------

/// Something that waits for a state: a then, a when_all, a coroutine.
struct continuation {
  continuation* next = nullptr;
  virtual void run() = 0;

 protected:
  ~continuation() = default;
};

/// The part of a future's state that does not depend on its type.
struct state_base {
  uint32_t refs = 1;
  bool ready = false;
  std::exception_ptr failure;
  continuation* waiters = nullptr;  // run once the state is ready

  virtual void destroy() noexcept = 0;  // back to the pool
  void retain() noexcept { ++refs; }
  void release() noexcept {
    if (--refs == 0) destroy();
  }
  /// Marks the state ready and queues its waiters for progress().
  void finish() noexcept;
  void fail(std::exception_ptr e) noexcept {
    failure = std::move(e);
    finish();
  }
  /// Registers `c` to run (from progress()) once the state is ready; at once
  /// into the queue when it already is.
  void await(continuation* c) noexcept;
  /// Waits until ready: progress, polls, sleeps. Throws clump::error when
  /// nothing could ever make it ready (inside a handler; no engine).
  void wait();

 protected:
  ~state_base() = default;
};

template <class T>
struct state final : state_base {
  using stored = std::conditional_t<std::is_void_v<T>, std::monostate, T>;
  std::optional<stored> value;

  static state* make() { return new (pool_allocate(sizeof(state))) state; }
  void destroy() noexcept override {
    this->~state();
    pool_free(this, sizeof(state));
  }
  template <class... V>
  void set(V&&... v) {
    value.emplace(std::forward<V>(v)...);
    finish();
  }
  stored& get() {
    if (failure) std::rethrow_exception(failure);
    return *value;
  }
};

/// A reference to a state (futures and promises hold one).
template <class T>
struct state_ref {
  state<T>* s = nullptr;
  state_ref() = default;
  explicit state_ref(state<T>* p) noexcept : s(p) {}
  state_ref(const state_ref& o) noexcept : s(o.s) {
    if (s) s->retain();
  }
  state_ref(state_ref&& o) noexcept : s(std::exchange(o.s, nullptr)) {}
  state_ref& operator=(state_ref o) noexcept {
    std::swap(s, o.s);
    return *this;
  }
  ~state_ref() {
    if (s) s->release();
  }
};

[[noreturn]] void no_state(const char* what);
[[noreturn]] void not_ready(const char* what);

// ---- operations in flight, found again by number ----------------------------
//
// An operation that sends a message keeps its state here under a 64-bit
// number, (generation << 32 | slot), that travels in the message and comes
// back in the answer (or in the returned message). A stale or forged number
// finds nothing: the answer is dropped, nothing is written.

/// Delivers an answer into the operation's state: the answer's argument
/// words and payload. Returns false when they are malformed.
/// `context` and `bytes` are the operation's: where the deliverer may write.
using deliver_fn = bool (*)(state_base& s, void* context, size_t bytes, const uint32_t* words, unsigned nwords,
                            std::span<const std::byte> payload);

struct operation {
  state_base* s = nullptr;  // one reference, held while in flight
  deliver_fn deliver = nullptr;
  void* context = nullptr;  // the deliverer's (the destination of a get)
  size_t bytes = 0;         // what the deliverer may write at `context`
  uint32_t remaining = 1;   // answers still to come (a get in pieces has several)
  int peer = -1;            // whom it went to (for errors)
  const char* what = "";    // what it was (for errors)
  bool call = false;        // an rpc: `what` is the function's name
  uint32_t generation = 0;
};

/// Records an operation in flight; takes a reference to `s`. Returns its number.
/// `what` names it in errors: a gas operation ("gas::rget"), or with `call`, an rpc's function name.
uint64_t begin_operation(state_base& s, deliver_fn deliver, void* context, size_t bytes, uint32_t answers, int peer,
                         const char* what, bool call = false);
/// The operation with this number, or nullptr (stale, forged or finished).
operation* find_operation(uint64_t id) noexcept;
/// One answer of operation `id` arrived: delivers it and, at the last,
/// finishes the state. Ignores a number that finds nothing; a malformed
/// answer fails the operation.
void answer(uint64_t id, const uint32_t* words, unsigned nwords, std::span<const std::byte> payload) noexcept;
/// Operation `id` failed (`why` names the reason); finishes it at the last answer.
void fail_operation(uint64_t id, const std::string& why, status code = status::resource) noexcept;
/// Operations in flight now (tests and leak checks).
size_t operations_in_flight() noexcept;

/// The bundle wait() polls (set by async_engine and gas::space; nullptr: none).
void use_bundle(bundle* b) noexcept;
void drop_bundle(bundle* b) noexcept;

inline void put_id(uint32_t* w, uint64_t id) noexcept {
  w[0] = static_cast<uint32_t>(id);
  w[1] = static_cast<uint32_t>(id >> 32);
}
inline uint64_t get_id(const uint32_t* w) noexcept { return uint64_t{w[0]} | uint64_t{w[1]} << 32; }

}  // namespace async_detail

// ---- future ---------------------------------------------------------------------

template <class T>
class [[nodiscard]] future {
 public:
  using value_type = T;
  /// A future with no state (default-constructed, moved from): not valid.
  future() = default;
  explicit future(async_detail::state_ref<T> r) noexcept : ref_(std::move(r)) {}

  bool valid() const noexcept { return ref_.s != nullptr; }
  /// True once the operation has completed, well or not.
  bool ready() const noexcept { return ref_.s && ref_.s->ready; }
  /// True when it has completed with an error.
  bool failed() const noexcept { return ready() && ref_.s->failure != nullptr; }

  /// Waits for completion (polls, runs continuations, sleeps when idle) and
  /// returns the value, or throws the error the operation failed with. On a
  /// future that is going away (`rpc(...).wait()`) the value is moved out.
  decltype(auto) wait() & {
    state().wait();
    return result();
  }
  auto wait() && {
    state().wait();
    return std::move(*this).result();
  }
  /// The value of a ready future (throws its error; throws when not ready).
  decltype(auto) result() & {
    auto& s = ready_state();
    if constexpr (std::is_void_v<T>) {
      (void)s.get();
    } else {
      return static_cast<T&>(s.get());
    }
  }
  auto result() && {
    auto& s = ready_state();
    if constexpr (std::is_void_v<T>) {
      (void)s.get();
    } else {
      return T(std::move(static_cast<T&>(s.get())));
    }
  }

  /// A future of `f(value)` (or `f()` for future<void>), which runs once this
  /// one is ready: at once if it is, else in progress(). When this one fails,
  /// `f` does not run and the new future fails with the same error; when `f`
  /// throws, the new future fails with that. `f` may return a future: then
  /// the new future completes when that one does.
  template <class F>
  auto then(F f);

  async_detail::state<T>* raw() const noexcept { return ref_.s; }

  // C++20 coroutines: a function returning future<T> may co_await and co_return.
  struct promise_type;
  struct awaiter;
  awaiter operator co_await() && noexcept { return awaiter{std::move(ref_), true}; }
  awaiter operator co_await() & noexcept { return awaiter{ref_, false}; }

 private:
  async_detail::state<T>& state() const {
    if (!ref_.s) async_detail::no_state("future");
    return *ref_.s;
  }
  async_detail::state<T>& ready_state() const {
    if (!state().ready) async_detail::not_ready("future::result");
    return *ref_.s;
  }
  async_detail::state_ref<T> ref_;
};

/// A future that is ready now with `v`.
template <class T>
future<std::decay_t<T>> make_ready_future(T&& v) {
  auto* s = async_detail::state<std::decay_t<T>>::make();
  s->set(std::forward<T>(v));
  return future<std::decay_t<T>>(async_detail::state_ref<std::decay_t<T>>(s));
}
inline future<void> make_ready_future() {
  auto* s = async_detail::state<void>::make();
  s->set();
  return future<void>(async_detail::state_ref<void>(s));
}
/// A future that has failed with `e`.
template <class T = void>
future<T> make_failed_future(std::exception_ptr e) {
  auto* s = async_detail::state<T>::make();
  s->fail(std::move(e));
  return future<T>(async_detail::state_ref<T>(s));
}

/// The producer's side: set_value or set_error once; get_future any number of times.
template <class T>
class promise {
 public:
  promise() : ref_(async_detail::state<T>::make()) {}
  future<T> get_future() const noexcept { return future<T>(ref_); }
  template <class... V>
  void set_value(V&&... v) {
    check("promise::set_value");
    ref_.s->set(std::forward<V>(v)...);
  }
  void set_error(std::exception_ptr e) {
    check("promise::set_error");
    ref_.s->fail(std::move(e));
  }

 private:
  void check(const char* what) const {
    if (!ref_.s) async_detail::no_state(what);
    if (ref_.s->ready) throw error(status::bad_arg, what, "the promise has been fulfilled already");
  }
  async_detail::state_ref<T> ref_;
};

namespace async_detail {

template <class T>
struct is_future : std::false_type {};
template <class T>
struct is_future<future<T>> : std::true_type {};

template <class R, class F, class... A>
void fulfil(state<R>& out, F& f, A&&... a) {
  try {
    if constexpr (is_future<std::invoke_result_t<F&, A...>>::value) {
      // A future from f: forward its completion.
      auto inner = f(std::forward<A>(a)...);
      struct forward final : continuation {
        state_ref<R> out;
        decltype(inner) in;
        void run() override {
          if (in.raw()->failure) {
            out.s->fail(in.raw()->failure);
          } else if constexpr (std::is_void_v<R>) {
            out.s->set();
          } else {
            out.s->set(std::move(static_cast<R&>(in.raw()->get())));
          }
          this->~forward();
          pool_free(this, sizeof(forward));
        }
      };
      if (!inner.valid()) no_state("then");
      out.retain();
      auto* c = new (pool_allocate(sizeof(forward))) forward;
      c->out = state_ref<R>(&out);
      c->in = std::move(inner);
      if (c->in.raw()->ready)
        c->run();  // ready already: no need to wait for progress()
      else
        c->in.raw()->await(c);
    } else if constexpr (std::is_void_v<R>) {
      f(std::forward<A>(a)...);
      out.set();
    } else {
      out.set(f(std::forward<A>(a)...));
    }
  } catch (...) {
    out.fail(std::current_exception());
  }
}

template <class T, class F>
struct then_result {
  using type = std::invoke_result_t<F&, T&>;
};
template <class F>
struct then_result<void, F> {
  using type = std::invoke_result_t<F&>;
};

template <class T>
struct unwrap {
  using type = T;
};
template <class T>
struct unwrap<future<T>> {
  using type = T;
};

}  // namespace async_detail

template <class T>
template <class F>
auto future<T>::then(F f) {
  using R = typename async_detail::unwrap<typename async_detail::then_result<T, F>::type>::type;
  struct node final : async_detail::continuation {
    async_detail::state_ref<T> in;
    async_detail::state_ref<R> out;
    F fn;
    node(async_detail::state_ref<T> i, F&& g) : in(std::move(i)), out(async_detail::state<R>::make()), fn(std::move(g)) {}
    void run() override {
      if (in.s->failure) {
        out.s->fail(in.s->failure);
      } else if constexpr (std::is_void_v<T>) {
        async_detail::fulfil(*out.s, fn);
      } else {
        async_detail::fulfil(*out.s, fn, static_cast<T&>(*in.s->value));
      }
      this->~node();
      async_detail::pool_free(this, sizeof(node));
    }
  };
  auto& s = state();
  auto* c = new (async_detail::pool_allocate(sizeof(node))) node(ref_, std::move(f));
  future<R> result(c->out);
  if (s.ready)
    c->run();
  else
    s.await(c);
  return result;
}

// ---- when_all ---------------------------------------------------------------------

namespace async_detail {
template <class T>
using value_of = std::conditional_t<std::is_void_v<T>, std::monostate, T>;
}

/// A future of every value, in order, ready when all are; it fails with the
/// first error (in argument order) when any fails. Futures of void give
/// std::monostate in the tuple.
template <class... T>
future<std::tuple<async_detail::value_of<T>...>> when_all(future<T>... fs) {
  using tuple = std::tuple<async_detail::value_of<T>...>;
  struct node final : async_detail::continuation {
    std::tuple<future<T>...> in;
    async_detail::state_ref<tuple> out;
    unsigned left = sizeof...(T);
    struct one final : async_detail::continuation {
      node* owner = nullptr;
      void run() override {
        if (--owner->left == 0) owner->run();
      }
    } ones[sizeof...(T) ? sizeof...(T) : 1];
    void run() override {
      std::exception_ptr first;
      std::apply([&](auto&... f) { ((first = first ? first : f.raw()->failure), ...); }, in);
      if (first) {
        out.s->fail(first);
      } else {
        out.s->set(std::apply([](auto&... f) { return tuple(std::move(*f.raw()->value)...); }, in));
      }
      this->~node();
      async_detail::pool_free(this, sizeof(node));
    }
  };
  auto* n = new (async_detail::pool_allocate(sizeof(node))) node;
  n->out = async_detail::state_ref<tuple>(async_detail::state<tuple>::make());
  future<tuple> result(n->out);
  n->in = std::tuple<future<T>...>(std::move(fs)...);
  if constexpr (sizeof...(T) == 0) {
    n->run();
  } else {
    unsigned i = 0;
    std::apply(
        [&](auto&... f) {
          ((f.valid() ? void() : async_detail::no_state("when_all")), ...);
          ((n->ones[i].owner = n, f.raw()->await(&n->ones[i++])), ...);
        },
        n->in);
  }
  return result;
}

/// A future of every value of `fs`, in order; fails with the first error.
template <class T>
future<std::vector<async_detail::value_of<T>>> when_all(std::vector<future<T>> fs) {
  using vector = std::vector<async_detail::value_of<T>>;
  struct one;
  struct node {
    std::vector<future<T>> in;
    std::vector<one> ones;
    async_detail::state_ref<vector> out{async_detail::state<vector>::make()};
    size_t left = 0;
    void arrived() {
      if (--left != 0) return;
      std::exception_ptr first;
      for (auto& f : in)
        if (!first && f.raw()->failure) first = f.raw()->failure;
      if (first) {
        out.s->fail(first);
      } else {
        vector v;
        v.reserve(in.size());
        for (auto& f : in) v.push_back(std::move(*f.raw()->value));
        out.s->set(std::move(v));
      }
      delete this;  // (the continuation running now is one of ours: it returns at once)
    }
  };
  struct one final : async_detail::continuation {
    node* owner = nullptr;
    void run() override { owner->arrived(); }
  };
  for (auto& f : fs)
    if (!f.valid()) async_detail::no_state("when_all");
  auto* n = new node;
  n->in = std::move(fs);
  n->ones.resize(n->in.size());
  n->left = n->in.size() + 1;
  future<vector> result(n->out);
  for (size_t i = 0; i < n->in.size(); ++i) {
    n->ones[i].owner = n;
    n->in[i].raw()->await(&n->ones[i]);
  }
  n->arrived();  // the +1: every input has been registered
  return result;
}
// ---- coroutines ---------------------------------------------------------------------

template <class T>
struct future<T>::awaiter final : async_detail::continuation {
  async_detail::state_ref<T> ref;
  bool owned;  // the awaited future was a temporary: its value may be moved out
  std::coroutine_handle<> waiting;
  awaiter(async_detail::state_ref<T> r, bool o) noexcept : ref(std::move(r)), owned(o) {}
  bool await_ready() const {
    if (!ref.s) async_detail::no_state("co_await");
    return ref.s->ready;
  }
  void await_suspend(std::coroutine_handle<> h) noexcept {
    waiting = h;
    ref.s->await(this);
  }
  auto await_resume() {
    if constexpr (std::is_void_v<T>) {
      (void)ref.s->get();
    } else {
      T& v = ref.s->get();
      return owned ? T(std::move(v)) : T(v);
    }
  }
  void run() override { waiting.resume(); }
};

namespace async_detail {
template <class T>
struct promise_base {
  state_ref<T> ref{state<T>::make()};
  future<T> get_return_object() noexcept { return future<T>(ref); }
  std::suspend_never initial_suspend() const noexcept { return {}; }
  std::suspend_never final_suspend() const noexcept { return {}; }
  void unhandled_exception() noexcept { ref.s->fail(std::current_exception()); }
  static void* operator new(size_t bytes) { return pool_allocate(bytes); }
  static void operator delete(void* p, size_t bytes) noexcept { pool_free(p, bytes); }
};
}  // namespace async_detail

template <class T>
struct future<T>::promise_type : async_detail::promise_base<T> {
  template <class V>
  void return_value(V&& v) {
    this->ref.s->set(std::forward<V>(v));
  }
};
template <>
struct future<void>::promise_type : async_detail::promise_base<void> {
  void return_void() { this->ref.s->set(); }
};

// ---- remote procedure calls ----------------------------------------------------------

/// The rpc machinery of this process: an endpoint in the runtime's bundle
/// that reaches every rank. Collective: every rank makes one (after the
/// runtime, before any rpc), and it lives until the ranks are done (its
/// destructor is a barrier).
class async_engine {
 public:
  explicit async_engine(runtime& rt);
  ~async_engine();
  async_engine(const async_engine&) = delete;
  async_engine& operator=(const async_engine&) = delete;
  /// The engine of this process; throws clump::error when there is none.
  static async_engine& current();
  runtime& owner() const noexcept;

  struct impl;
  impl& internals() const noexcept { return *impl_; }

 private:
  impl* impl_;
};

namespace async_detail {

// ---- how arguments and results travel ----
//
// A message's bytes: each value in turn, trivially copyable ones aligned to
// their alignment (at most 8), strings, vectors and spans as a 64-bit count
// (8-aligned) and then their elements.

struct writer {
  std::byte* at;  // nullptr: only count
  size_t size = 0;
  void align(size_t a) {
    const size_t to = (size + a - 1) / a * a;
    if (at) std::memset(at + size, 0, to - size);
    size = to;
  }
  void bytes(const void* p, size_t n) {
    if (at && n) std::memcpy(at + size, p, n);
    size += n;
  }
};

struct reader {
  std::span<const std::byte> in;
  size_t at = 0;
  bool bad = false;
  bool align(size_t a) {
    at = (at + a - 1) / a * a;
    if (at > in.size()) bad = true;
    return !bad;
  }
  const std::byte* take(size_t n) {
    if (bad || n > in.size() - at) {
      bad = true;
      return nullptr;
    }
    const std::byte* p = in.data() + at;
    at += n;
    return p;
  }
};

constexpr size_t align_of(size_t a) { return a > 8 ? 8 : a; }

template <class T>
struct codec;

/// A trivially copyable value.
template <class T>
  requires std::is_trivially_copyable_v<T>
struct codec<T> {
  static_assert(!std::is_pointer_v<T> && !std::is_member_pointer_v<T>,
                "rpc: a pointer means nothing in another process: send the data (a span, a vector, a string) "
                "or a gas::global_ptr");
  using sent = const T&;
  static constexpr bool plain = true;
  static void write(writer& w, const T& v) {
    w.align(align_of(alignof(T)));
    w.bytes(&v, sizeof(T));
  }
  static T read(reader& r) {
    T v{};
    if (r.align(align_of(alignof(T))))
      if (const std::byte* p = r.take(sizeof(T))) std::memcpy(&v, p, sizeof(T));
    return v;
  }
};

template <class T>
struct array_codec {
  static_assert(std::is_trivially_copyable_v<T>, "rpc sends arrays of trivially copyable elements only");
  static constexpr bool plain = false;
  static void write(writer& w, std::span<const T> v) {
    const uint64_t n = v.size();
    w.align(8);
    w.bytes(&n, 8);
    w.align(align_of(alignof(T)));
    w.bytes(v.data(), v.size_bytes());
  }
  // The elements in the message (nullptr when malformed or misaligned).
  static std::span<const std::byte> raw(reader& r, size_t& n) {
    uint64_t count = 0;
    if (r.align(8))
      if (const std::byte* p = r.take(8)) std::memcpy(&count, p, 8);
    n = 0;
    if (r.bad || !r.align(align_of(alignof(T))) || count > (r.in.size() - r.at) / sizeof(T)) {
      r.bad = true;
      return {};
    }
    n = static_cast<size_t>(count);
    return {r.take(n * sizeof(T)), n * sizeof(T)};
  }
};

template <class T>
struct codec<std::vector<T>> : array_codec<T> {
  using sent = std::span<const T>;
  static std::vector<T> read(reader& r) {
    size_t n = 0;
    auto b = array_codec<T>::raw(r, n);
    std::vector<T> v(n);
    if (n) std::memcpy(v.data(), b.data(), n * sizeof(T));
    return v;
  }
};
/// A view of the elements in the arriving message (copied only when the
/// message leaves them misaligned for T, into a buffer that lives as long).
template <class T>
struct codec<std::span<const T>> : array_codec<T> {
  using sent = std::span<const T>;
  static std::span<const T> read(reader& r, std::vector<std::byte>& keep) {
    size_t n = 0;
    auto b = array_codec<T>::raw(r, n);
    if (n == 0) return {};
    if (reinterpret_cast<uintptr_t>(b.data()) % alignof(T) == 0)
      return {reinterpret_cast<const T*>(b.data()), n};
    const size_t start = (keep.size() + alignof(T) - 1) / alignof(T) * alignof(T);
    keep.resize(start + b.size() + alignof(T));
    std::byte* to = keep.data() + start;
    while (reinterpret_cast<uintptr_t>(to) % alignof(T)) ++to;
    std::memcpy(to, b.data(), b.size());
    return {reinterpret_cast<const T*>(to), n};
  }
};
/// A span of elements another process would write into: refused.
template <class T>
  requires(!std::is_const_v<T>)
struct codec<std::span<T>> {
  static_assert(std::is_const_v<T>, "rpc: take std::span<const T>: the callee gets a view of the message, which it "
                                    "cannot write back; return a std::vector<T> for results");
};

template <>
struct codec<std::string> : array_codec<char> {
  using sent = std::string_view;
  static void write(writer& w, std::string_view v) { array_codec<char>::write(w, std::span<const char>(v)); }
  static std::string read(reader& r) {
    size_t n = 0;
    auto b = raw(r, n);
    return std::string(reinterpret_cast<const char*>(b.data()), n);
  }
};
template <>
struct codec<std::string_view> : codec<std::string> {
  static std::string_view read(reader& r, std::vector<std::byte>&) {
    size_t n = 0;
    auto b = raw(r, n);
    return {reinterpret_cast<const char*>(b.data()), n};
  }
};

template <class T>
T read_one(reader& r, std::vector<std::byte>& keep) {
  if constexpr (requires { codec<T>::read(r, keep); })
    return codec<T>::read(r, keep);
  else
    return codec<T>::read(r);
}

/// True when every one of P... is a plain value and all fit in `words` 32-bit words.
template <class... P>
constexpr bool fits_words(unsigned words) {
  if constexpr (!(codec<std::decay_t<P>>::plain && ...)) {
    return false;
  } else {
    size_t at = 0;
    ((at = (at + align_of(alignof(P)) - 1) / align_of(alignof(P)) * align_of(alignof(P)) + sizeof(P)), ...);
    return at <= words * 4u;
  }
}

/// A stable 64-bit hash (FNV-1a).
constexpr uint64_t hash(std::string_view s) noexcept {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}
/// The types of a function, as a compiler spells them (the same within one build).
template <class R, class... P>
constexpr std::string_view signature_text() noexcept {
  return __PRETTY_FUNCTION__;
}

// The wire: a call's argument words are [function id (2), signature (1),
// operation (2; 0: no answer)] and then, for a short call, the arguments.
// An answer's are [operation (2), outcome (1)] and then, when short, the result.
inline constexpr unsigned call_words = 5;
inline constexpr unsigned answer_words = 3;
// Arguments or a result of more than max_medium() bytes travel in pieces of
// max_medium(): a call's pieces are medium requests to the engine's piece
// handler, which puts them together and then runs the function; a result's
// stay at the callee, which answers `big` with its size, and the caller
// fetches them (medium replies, outcome `piece`).
enum class outcome : uint32_t {
  ok = 0, unknown_function = 1, other_signature = 2, threw = 3, malformed = 4, too_big = 5, big = 6, piece = 7, lost = 8
};
/// The most bytes of arguments, or of a result, that an rpc takes.
inline constexpr uint64_t max_rpc_bytes = uint64_t{1} << 32;

/// How one registered function is run from a message.
using invoke_fn = void (*)(const void* fn, token_base& t, const uint32_t* words, unsigned nwords,
                           std::span<const std::byte> payload, bool answer);
/// Registers a function under `name` (throws clump::error for a name taken,
/// or two names with one hash); the registry keeps `fn`. Returns its id.
uint64_t register_function(std::string_view name, uint32_t signature, invoke_fn invoke, std::shared_ptr<const void> fn);
/// The name registered under `id` (for errors), or "".
std::string_view function_name(uint64_t id) noexcept;

/// Answers a call with a result of more than max_medium() bytes: keeps it
/// for the caller to fetch.
void send_big_answer(token_base& t, uint64_t op, std::vector<std::byte>&& result) noexcept;
/// Queues `c` to run in progress() (a continuation that sends, for instance).
void schedule(continuation* c) noexcept;
/// Answers a call: the result's words or bytes (or an error's text).
void send_answer(token_base& t, uint64_t op, outcome o, const uint32_t* words, unsigned nwords,
                 std::span<const std::byte> payload) noexcept;
/// Sends a call; fails the operation (when there is one) if it cannot go.
void send_call(int rank, uint64_t op, const uint32_t* words, unsigned nwords, std::span<const std::byte> payload,
               size_t payload_bytes, const char* name);
/// A buffer for one message's bytes (reused; one thread).
std::byte* scratch(size_t bytes);

template <class R>
bool deliver_result(state_base& base, void*, size_t, const uint32_t* words, unsigned nwords, std::span<const std::byte> payload) {
  auto& s = static_cast<state<R>&>(base);
  if constexpr (std::is_void_v<R>) {
    s.value.emplace();
    return true;
  } else {
    std::vector<std::byte> keep;
    if constexpr (fits_words<R>(max_args - answer_words)) {
      if (payload.empty()) {
        reader r{std::span(reinterpret_cast<const std::byte*>(words), nwords * 4u)};
        s.value.emplace(read_one<R>(r, keep));
        return !r.bad;
      }
    }
    reader r{payload};
    s.value.emplace(read_one<R>(r, keep));
    return !r.bad;
  }
}

template <class R, class... P>
struct call_of {
  template <class F>
  static void invoke(const void* fn, token_base& t, const uint32_t* words, unsigned nwords,
                     std::span<const std::byte> payload, bool answer) {
    const uint64_t op = get_id(words + 3);
    std::vector<std::byte> keep;
    reader r{payload.empty() ? std::span(reinterpret_cast<const std::byte*>(words + call_words),
                                         (nwords - call_words) * 4u)
                             : payload};
    // Braced initialisation reads the arguments left to right.
    struct ordered {
      std::tuple<std::decay_t<P>...> v;
    } args{{read_one<std::decay_t<P>>(r, keep)...}};
    if (r.bad) {
      if (answer) send_answer(t, op, outcome::malformed, nullptr, 0, {});
      return;
    }
    const F& f = *static_cast<const F*>(fn);
    try {
      if constexpr (std::is_void_v<R>) {
        std::apply(f, args.v);
        if (answer) send_answer(t, op, outcome::ok, nullptr, 0, {});
      } else {
        R result = std::apply(f, args.v);
        if (!answer) return;
        if constexpr (fits_words<R>(max_args - answer_words)) {
          uint32_t w[max_args] = {};
          writer out{reinterpret_cast<std::byte*>(w)};
          codec<R>::write(out, result);
          send_answer(t, op, outcome::ok, w, static_cast<unsigned>((out.size + 3) / 4), {});
        } else {
          writer count{nullptr};
          codec<R>::write(count, result);
          if (count.size > max_medium()) {
            if (count.size > max_rpc_bytes) {
              const std::string why = std::to_string(count.size) + " bytes of result, more than the " +
                                      std::to_string(max_rpc_bytes) + " an rpc takes";
              send_answer(t, op, outcome::too_big, nullptr, 0, std::as_bytes(std::span(why)));
              return;
            }
            std::vector<std::byte> kept(count.size);
            writer out{kept.data()};
            codec<R>::write(out, result);
            send_big_answer(t, op, std::move(kept));
            return;
          }
          writer out{scratch(count.size)};
          codec<R>::write(out, result);
          send_answer(t, op, outcome::ok, nullptr, 0, {out.at, out.size});
        }
      }
    } catch (const std::exception& e) {
      const std::string_view why = e.what();
      if (answer) send_answer(t, op, outcome::threw, nullptr, 0, std::as_bytes(std::span(why.data(), std::min(why.size(), size_t{1024}))));
    } catch (...) {
      if (answer) send_answer(t, op, outcome::threw, nullptr, 0, std::as_bytes(std::span("an exception", 12)));
    }
  }
};

}  // namespace async_detail

/// A function registered for rpc: its id is the hash of its name.
template <class Signature>
class remote_function;
template <class R, class... P>
class remote_function<R(P...)> {
 public:
  uint64_t id() const noexcept { return id_; }
  std::string_view name() const noexcept { return name_; }
  /// A hash of the argument and result types (computed at compile time).
  static constexpr uint32_t signature() noexcept { return signature_; }
  remote_function(uint64_t id, std::string_view name) : id_(id), name_(name) {}
  /// Runs a registered F from a call message (the engine's dispatch).
  template <class F>
  static void invoke(const void* fn, token_base& t, const uint32_t* words, unsigned nwords,
                     std::span<const std::byte> payload, bool answer) {
    async_detail::call_of<R, P...>::template invoke<F>(fn, t, words, nwords, payload, answer);
  }

 private:
  static constexpr uint32_t signature_ =
      static_cast<uint32_t>(async_detail::hash(async_detail::signature_text<R, std::decay_t<P>...>()));
  uint64_t id_;
  std::string_view name_;
};

namespace async_detail {
template <class R, class... P>
remote_function<R(P...)> remote_of(R (*)(P...));
template <class C, class R, class... P>
remote_function<R(P...)> remote_of(R (C::*)(P...) const);
template <class C, class R, class... P>
remote_function<R(P...)> remote_of(R (C::*)(P...));
template <class F>
auto remote_of(F*) -> decltype(remote_of(&F::operator()));
template <class F>
using remote_type = decltype(remote_of(static_cast<F*>(nullptr)));

}  // namespace async_detail

/// Registers `f` (a function pointer, or a lambda or function object with
/// one call operator) for rpc under `name`. Call it at start-up, the same
/// name with the same function on every process: a namespace-scope
/// variable is the usual way. Throws clump::error when the name is taken.
template <class F>
auto rpc_function(std::string_view name, F f) {
  using fn_type = std::decay_t<F>;
  using remote = async_detail::remote_type<std::conditional_t<std::is_pointer_v<fn_type>, std::remove_pointer_t<fn_type>, fn_type>>;
  auto kept = std::make_shared<const fn_type>(std::move(f));  // the registry keeps it for the process's life
  const uint64_t id = async_detail::register_function(name, remote::signature(), &remote::template invoke<fn_type>,
                                                      std::move(kept));
  return remote(id, async_detail::function_name(id));
}

namespace async_detail {
template <class... P, class... A>
void encode_call(int rank, uint64_t op, uint64_t id, uint32_t sig, std::string_view name, A&&... a) {
  uint32_t w[max_args] = {};
  w[0] = static_cast<uint32_t>(id);
  w[1] = static_cast<uint32_t>(id >> 32);
  w[2] = sig;
  put_id(w + 3, op);
  if constexpr (fits_words<P...>(max_args - call_words)) {
    writer out{reinterpret_cast<std::byte*>(w + call_words)};
    (codec<std::decay_t<P>>::write(out, static_cast<typename codec<std::decay_t<P>>::sent>(a)), ...);
    send_call(rank, op, w, call_words + static_cast<unsigned>((out.size + 3) / 4), {}, 0, name.data());
  } else {
    writer count{nullptr};
    (codec<std::decay_t<P>>::write(count, static_cast<typename codec<std::decay_t<P>>::sent>(a)), ...);
    if (count.size > max_rpc_bytes) {
      send_call(rank, op, w, call_words, {}, count.size, name.data());  // refused, with the sizes
      return;
    }
    writer out{scratch(count.size)};
    (codec<std::decay_t<P>>::write(out, static_cast<typename codec<std::decay_t<P>>::sent>(a)), ...);
    send_call(rank, op, w, call_words, {out.at, out.size}, out.size, name.data());
  }
}
}  // namespace async_detail

/// Runs `f(args...)` on `rank`; a future of its result.
template <class R, class... P, class... A>
future<R> rpc(int rank, const remote_function<R(P...)>& f, A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "rpc: give the function's arguments, no more and no fewer");
  auto* s = async_detail::state<R>::make();
  future<R> result{async_detail::state_ref<R>(s)};
  const uint64_t op = async_detail::begin_operation(*s, &async_detail::deliver_result<R>, nullptr, 0, 1, rank,
                                                    f.name().data(), true);
  async_detail::encode_call<P...>(rank, op, f.id(), f.signature(), f.name(), std::forward<A>(args)...);
  return result;
}

/// Runs `f(args...)` on `rank`, with no answer (its result is dropped).
/// Throws clump::error when the call cannot be sent (a bad rank, too many
/// bytes); a function unknown there is reported there, on its stderr.
template <class R, class... P, class... A>
void rpc_ff(int rank, const remote_function<R(P...)>& f, A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "rpc_ff: give the function's arguments, no more and no fewer");
  async_detail::encode_call<P...>(rank, 0, f.id(), f.signature(), f.name(), std::forward<A>(args)...);
}

}  // namespace clump
