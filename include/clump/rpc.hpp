#pragma once
/// \file
/// Remote procedure calls on clump's active messages, returning futures
/// (clump/async.hpp).
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
/// Remote procedure calls. `rpc(rank, f, args...)` runs `f(args...)` on
/// `rank`, inside the message's handler there (so `f` must not wait; it may
/// use the gas layer's local memory, its own data structures, and return a
/// value, or a future of one: a deferred answer, sent when that future
/// completes there; the rpcs it makes go once its handler has returned),
/// and returns a `future<R>`; `rpc_ff` sends it without an answer.
/// Functions are registered by name with `rpc_function`, the same name on
/// every process, and are found across processes by that name's hash, never
/// by code address; the first call of a function to a process that does not
/// have it, or has it with other argument types, fails with an error naming
/// it. Arguments and results are trivially copyable values, `std::string`
/// (`std::string_view` for arguments), `std::vector<T>` and `std::span<const
/// T>` of trivially copyable `T`: up to 60 bytes of plain values go in the
/// words of a short message, anything else as one medium message payload;
/// larger than `clump::max_medium()`, as one long message into the
/// receiver's landing area (CLUMP_RPC_LANDING), or in pieces of
/// max_medium() bytes when it has no room (up to 4 GiB; a call beyond that
/// fails with status::bad_arg and says so). A `std::span<const T>` argument
/// is a view into the arriving message (or its place in the landing area,
/// or the pieces put together), without a copy, valid while the function
/// runs.

#include <clump/async.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace clump {

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
  /// Bytes this process holds for rpcs whose arguments or results are bigger
  /// than max_medium(): arguments still being put together, results kept
  /// until their caller has fetched them, results being fetched here. 0 when
  /// no such call is under way; what is kept for a rank that fails is let go
  /// at the first progress() after its failure is known, or when a wait()
  /// ends because of it.
  size_t kept_bytes() const noexcept;

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
// Arguments or a result of more than max_medium() bytes land whole by one
// long message in the receiver's landing area (see src/async/rpc.cpp); when
// it has no room, in pieces of max_medium(): a call's pieces are medium
// requests to the engine's piece handler, which puts them together and then
// runs the function; a result stays at the callee, which answers `big` with
// its size, and the caller fetches it (medium replies, outcome `piece`).
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

/// Whom an answer goes to: the caller through the call's token (the reply,
/// from inside the call's handler), or, for an answer that comes later (an
/// rpc function that returned a future not ready then), the caller's rank:
/// a request to its engine, sent outside handlers.
struct answer_to {
  token_base* token = nullptr;
  int rank = -1;
};
/// Where a result of more than max_medium() bytes is written, and kept until
/// its caller has fetched it: a place in the engine's landing area when one
/// is free (no allocation), else a vector of its own.
struct big_result {
  std::vector<std::byte> own;
  uint64_t offset = ~uint64_t{0};  // in the landing area; ~0: in `own`
  uint64_t size = 0;
  std::byte* bytes = nullptr;
};
/// Room for a big result of `size` bytes (throws std::bad_alloc).
big_result make_big_result(uint64_t size);
/// Answers a call with a big result: keeps it for the caller to fetch.
void send_big_answer(const answer_to& to, uint64_t op, big_result&& result) noexcept;
/// Queues `c` to run in progress() (a continuation that sends, for instance).
void schedule(continuation* c) noexcept;
/// Answers a call: the result's words or bytes (or an error's text).
void send_answer(const answer_to& to, uint64_t op, outcome o, const uint32_t* words, unsigned nwords,
                 std::span<const std::byte> payload) noexcept;
/// Answers a call with the error `e` (its what(), cut at 1 KiB).
void send_failure(const answer_to& to, uint64_t op, std::exception_ptr e) noexcept;
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

/// Answers call `op` with `result`: in the answer's words when it fits,
/// else one medium message, else kept for the caller to fetch.
template <class R>
void send_result(const answer_to& to, uint64_t op, const R& result) {
  if constexpr (fits_words<R>(max_args - answer_words)) {
    uint32_t w[max_args] = {};
    writer out{reinterpret_cast<std::byte*>(w)};
    codec<R>::write(out, result);
    send_answer(to, op, outcome::ok, w, static_cast<unsigned>((out.size + 3) / 4), {});
  } else {
    writer count{nullptr};
    codec<R>::write(count, result);
    if (count.size > max_medium()) {
      if (count.size > max_rpc_bytes) {
        const std::string why = std::to_string(count.size) + " bytes of result, more than the " +
                                std::to_string(max_rpc_bytes) + " an rpc takes";
        send_answer(to, op, outcome::too_big, nullptr, 0, std::as_bytes(std::span(why)));
        return;
      }
      big_result kept = make_big_result(count.size);
      writer out{kept.bytes};
      codec<R>::write(out, result);
      send_big_answer(to, op, std::move(kept));
      return;
    }
    // A late answer has a buffer of its own: it may go from a poll inside
    // a call's send, whose bytes are in the scratch buffer.
    std::vector<std::byte> own(to.token ? 0 : count.size);
    writer out{to.token ? scratch(count.size) : own.data()};
    codec<R>::write(out, result);
    send_answer(to, op, outcome::ok, nullptr, 0, {out.at, out.size});
  }
}

/// The answer of an rpc function that returned a future not ready then: sent
/// to the caller when that future completes, with its value or its error.
template <class T>
struct late_answer final : continuation {
  future<T> in;
  int caller;
  uint64_t op;
  late_answer(future<T>&& f, int rank, uint64_t id) : in(std::move(f)), caller(rank), op(id) { internal = true; }
  void run() override {
    const answer_to to{nullptr, caller};
    try {
      if (in.failed()) {
        send_failure(to, op, in.raw()->failure);
      } else if constexpr (std::is_void_v<T>) {
        send_answer(to, op, outcome::ok, nullptr, 0, {});
      } else {
        send_result<T>(to, op, in.result());
      }
    } catch (...) {
      send_failure(to, op, std::current_exception());
    }
    delete this;
  }
};

template <class R, class... P>
struct call_of {
  template <class F>
  static void invoke(const void* fn, token_base& t, const uint32_t* words, unsigned nwords,
                     std::span<const std::byte> payload, bool answer) {
    const uint64_t op = get_id(words + 3);
    const answer_to to{&t, -1};
    std::vector<std::byte> keep;
    reader r{payload.empty() ? std::span(reinterpret_cast<const std::byte*>(words + call_words),
                                         (nwords - call_words) * 4u)
                             : payload};
    // Braced initialisation reads the arguments left to right.
    struct ordered {
      std::tuple<std::decay_t<P>...> v;
    } args{{read_one<std::decay_t<P>>(r, keep)...}};
    if (r.bad) {
      if (answer) send_answer(to, op, outcome::malformed, nullptr, 0, {});
      return;
    }
    const F& f = *static_cast<const F*>(fn);
    try {
      if constexpr (std::is_void_v<R>) {
        std::apply(f, args.v);
        if (answer) send_answer(to, op, outcome::ok, nullptr, 0, {});
      } else if constexpr (is_future<R>::value) {
        // A deferred answer: the value comes when the future completes.
        using T = typename R::value_type;
        R result = std::apply(f, args.v);
        if (!answer) return;  // rpc_ff: whatever the future does, nobody waits for it
        if (!result.valid()) {
          send_answer(to, op, outcome::threw, nullptr, 0,
                      std::as_bytes(std::span("it returned a future with no state", 34)));
        } else if (!result.ready()) {
          auto* c = new late_answer<T>(std::move(result), static_cast<int>(t.source().rank), op);
          c->in.raw()->await(c);  // runs, and sends, when it completes (outside handlers)
        } else if (result.failed()) {
          send_failure(to, op, result.raw()->failure);
        } else if constexpr (std::is_void_v<T>) {
          send_answer(to, op, outcome::ok, nullptr, 0, {});
        } else {
          send_result<T>(to, op, result.result());
        }
      } else {
        R result = std::apply(f, args.v);
        if (answer) send_result<R>(to, op, result);
      }
    } catch (...) {
      if (answer) send_failure(to, op, std::current_exception());
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

/// Runs `f(args...)` on `rank`; a future of its result. When `f` returns a
/// `future<T>`, this is a `future<T>`, completed when that one completes on
/// `rank` (a deferred answer).
template <class R, class... P, class... A>
future<typename async_detail::unwrap<R>::type> rpc(int rank, const remote_function<R(P...)>& f, A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "rpc: give the function's arguments, no more and no fewer");
  using T = typename async_detail::unwrap<R>::type;
  auto* s = async_detail::state<T>::make();
  future<T> result{async_detail::state_ref<T>(s)};
  const uint64_t op = async_detail::begin_operation(*s, &async_detail::deliver_result<T>, nullptr, 0, 1, rank,
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
