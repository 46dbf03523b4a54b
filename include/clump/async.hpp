#pragma once
/// \file
/// Futures and coroutines on clump's active messages; remote procedure calls
/// that return them are in clump/rpc.hpp.
///
/// \code
///   // With clump/gas.hpp (gas::space gs(rt) made on every rank):
///   clump::future<int64_t> v = gas::rget(p);          // a remote read, in flight
///   clump::future<int64_t> sum(gas::global_ptr<int64_t> a, gas::global_ptr<int64_t> b) {   // a coroutine
///     co_return co_await gas::rget(a) + co_await gas::rget(b);
///   }
///   int64_t s = sum(p, q).wait();                     // polls, then sleeps
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
  /// Only sends messages (the rpc engine's late answers and the calls its
  /// functions make): runs at the end of any poll of the engine's bundle,
  /// outside handlers, as well as in progress(), so that a rank that waits
  /// in a barrier still sends it.
  bool internal = false;
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
/// Lets go of what the rpc engine keeps for ranks that have failed (results
/// they will never fetch, arguments they will never finish) and of results
/// being fetched for operations that have ended. progress() calls it when a
/// failure becomes known.
void forget_failed() noexcept;

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

}  // namespace clump
