// Remote procedure calls (clump/async.hpp): the registry of functions, and
// the engine, an endpoint of this process's that reaches every rank.
//
// A call is one request to the engine's call handler: argument words [the
// function's id (2 words), its signature's hash (1), the operation's number
// (2; 0 for rpc_ff)], then the arguments themselves when they fit in the
// words (a short message), else in the payload (a medium message). The
// function runs in that handler, and its result goes back as the one reply
// the handler may send: words [operation (2), outcome (1)], then the result
// in the words or the payload. A call or answer that comes back (its
// destination failed) fails the operation, named by the number it carries.

#include <clump/async.hpp>
#include <clump/runtime.hpp>

#include <sys/random.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "am/endpoint_impl.hpp"
#include "core/log.hpp"

namespace clump {

namespace {

struct registered {
  std::string name;
  uint32_t signature;
  async_detail::invoke_fn invoke;
  const void* fn;
};

// Function-local: registrations run during static initialisation, in any order.
std::unordered_map<uint64_t, registered>& registry() {
  static std::unordered_map<uint64_t, registered> r;
  return r;
}

async_engine* current_engine = nullptr;

}  // namespace

struct async_engine::impl {
  explicit impl(runtime& r) : rt(r), ep(r.bundle()) {}
  runtime& rt;
  endpoint ep;
  int rank = 0, size = 1;
  handler_index call = 0, answer = 0;
  std::vector<std::byte> call_bytes, answer_bytes;  // scratch (see async_detail::scratch)
  bool warned_unknown = false;
  uint64_t last_id = 0;  // the function the last call ran (registrations never move: a map's nodes stay)
  const void* last = nullptr;
};

namespace async_detail {

uint64_t register_function(std::string_view name, uint32_t signature, invoke_fn invoke, const void* fn) {
  if (name.empty()) throw error(status::bad_arg, "rpc_function", "a function needs a name");
  const uint64_t id = hash(name);
  auto [at, added] = registry().try_emplace(id, registered{std::string(name), signature, invoke, fn});
  if (!added) {
    if (at->second.name == name)
      throw error(status::bad_arg, "rpc_function", "the name '" + std::string(name) + "' is registered already");
    throw error(status::bad_arg, "rpc_function",
                "the names '" + std::string(name) + "' and '" + at->second.name +
                    "' have the same 64-bit hash: rename one");
  }
  return id;
}

std::string_view function_name(uint64_t id) noexcept {
  auto it = registry().find(id);
  return it == registry().end() ? std::string_view() : std::string_view(it->second.name);
}

std::byte* scratch(size_t bytes) {
  // Answers are written inside handlers, calls outside: two buffers, so that
  // a call whose send polls (a full queue) and runs a handler that answers
  // does not find its bytes overwritten.
  auto& m = async_engine::current().internals();
  auto& b = clump::detail::handler_depth > 0 ? m.answer_bytes : m.call_bytes;
  if (b.size() < bytes) b.resize(bytes);
  return b.data();
}

void send_answer(token_base& t, uint64_t op, outcome o, const uint32_t* words, unsigned nwords,
                 std::span<const std::byte> payload) noexcept {
  if (!current_engine || op == 0) return;
  uint32_t w[max_args];
  put_id(w, op);
  w[2] = static_cast<uint32_t>(o);
  for (unsigned i = 0; i < nwords && answer_words + i < max_args; ++i) w[answer_words + i] = words[i];
  const unsigned n = std::min<unsigned>(answer_words + nwords, max_args);
  // A failure to answer (the requester is gone) comes back to our handler 0.
  (void)t.reply_raw(payload.empty() ? message_kind::short_message : message_kind::medium,
                    current_engine->internals().answer, w, n, payload.data(), payload.size(), 0);
}

void send_call(int rank, uint64_t op, const uint32_t* words, unsigned nwords, std::span<const std::byte> payload,
               size_t payload_bytes, const char* name) {
  auto refuse = [&](status code, const std::string& why) {  // (out of the way: only on errors)
    if (op == 0) throw error(code, std::string("rpc '") + name + "'", why, rank);
    fail_operation(op, why, code);
  };
  if (!current_engine) {
    refuse(status::not_init, "no async_engine: construct a clump::async_engine(runtime) on every rank first");
    return;
  }
  auto& m = current_engine->internals();
  if (rank < 0 || rank >= m.size) {
    refuse(status::bad_arg, "rank " + std::to_string(rank) + " is outside the job (0.." + std::to_string(m.size - 1) + ")");
    return;
  }
  if (payload_bytes > max_medium()) {
    refuse(status::bad_arg, std::to_string(payload_bytes) + " bytes of arguments, more than max_medium() (" +
                                std::to_string(max_medium()) + " bytes, CLUMP_MAX_MEDIUM)");
    return;
  }
  if (clump::detail::handler_depth > 0) {
    refuse(status::bad_arg, "called inside a message handler (an rpc function runs in one), where only a reply may be "
                            "sent (AM-II): return a value instead");
    return;
  }
  const status s = m.ep.send_raw(rank, payload.empty() ? message_kind::short_message : message_kind::medium, m.call,
                                 words, nwords, payload.data(), payload.size(), 0, false);
  if (s != status::ok) refuse(s, std::string("the call could not be sent: ") + to_string(s));
}

}  // namespace async_detail

namespace {

using namespace async_detail;

// The call handler: finds the function and runs it; it answers.
void on_call(void* ctx, token_base& t, const uint32_t* args, unsigned nargs, std::byte* data, size_t length) {
  auto& m = *static_cast<async_engine::impl*>(ctx);
  if (nargs < call_words) return;  // not a call of ours: nothing to answer
  const uint64_t id = get_id(args), op = get_id(args + 3);
  const uint32_t signature = args[2];
  // The function called last is usually called next: no hash lookup then.
  if (id != m.last_id || !m.last) {
    auto it = registry().find(id);
    m.last = it == registry().end() ? nullptr : static_cast<const void*>(&it->second);
    m.last_id = id;
  }
  const auto* f = static_cast<const registered*>(m.last);
  if (!f || f->signature != signature) {
    const outcome o = !f ? outcome::unknown_function : outcome::other_signature;
    if (op != 0) {
      send_answer(t, op, o, nullptr, 0, {});
    } else if (!m.warned_unknown) {
      m.warned_unknown = true;
      core::log_warning("rpc_ff from rank %u: %s (id %016llx); dropped (said once)", t.source().rank,
                        o == outcome::unknown_function ? "no function of that name is registered here"
                                                       : "the function is registered here with other types",
                        static_cast<unsigned long long>(id));
    }
    return;
  }
  f->invoke(f->fn, t, args, nargs, {data, length}, op != 0);
}

// The answer handler: completes (or fails) the operation.
void on_answer(void*, token_base& t, const uint32_t* args, unsigned nargs, std::byte* data, size_t length) {
  if (nargs < answer_words) return;
  const uint64_t op = get_id(args);
  if (!find_operation(op)) return;
  const auto result = static_cast<outcome>(args[2]);
  if (result == outcome::ok) [[likely]] {
    answer(op, args + answer_words, nargs - answer_words, {data, length});
    return;
  }
  const std::string peer = "rank " + std::to_string(t.source().rank);
  const std::string_view text(reinterpret_cast<const char*>(data), length);
  switch (result) {
    case outcome::ok:
      return;
    case outcome::unknown_function:
      fail_operation(op, peer + " has no function registered under this name (register it with rpc_function on every process)",
                     status::bad_arg);
      return;
    case outcome::other_signature:
      fail_operation(op, peer + " registered this name with other argument or result types", status::bad_arg);
      return;
    case outcome::threw:
      fail_operation(op, "it threw on " + peer + ": " + std::string(text), status::resource);
      return;
    case outcome::malformed:
      fail_operation(op, peer + " could not read the arguments", status::bad_arg);
      return;
    case outcome::too_big:
      fail_operation(op, "on " + peer + ": " + std::string(text), status::bad_arg);
      return;
  }
  fail_operation(op, peer + " answered with an unknown outcome " + std::to_string(args[2]), status::bad_arg);
}

}  // namespace

async_engine::async_engine(runtime& rt) : impl_(new impl(rt)) {
  if (current_engine) {
    delete impl_;
    throw error(status::in_use, "creating the async_engine", "this process has one already");
  }
  impl& m = *impl_;
  m.rank = rt.rank();
  m.size = rt.size();
  m.call = m.ep.set_raw_handler(-1, &on_call, &m, detail::role::request, -1, -1);
  m.answer = m.ep.set_raw_handler(-1, &on_answer, &m, detail::role::reply, -1, -1);
  // A call or answer that came back: its destination failed.
  m.ep.on_returned([&m](const returned_message& r) {
    if (r.handler != m.call || r.args.size() < call_words) return;
    const uint64_t op = get_id(r.args.data() + 3);
    if (op == 0) {
      core::log_warning("rpc_ff to rank %u came back: %s", r.destination.rank, to_string(r.reason));
      return;
    }
    fail_operation(op, "the call to rank " + std::to_string(r.destination.rank) + " came back: " + to_string(r.reason));
  });

  struct entry {
    endpoint_name name;
    tag_t tag;
  };
  tag_t tag = 0;
  while (tag <= tag_all)
    if (::getrandom(&tag, sizeof tag, 0) != sizeof tag) tag = 0;
  m.ep.set_tag(tag);
  entry mine{m.ep.name(), tag};
  std::vector<entry> all(static_cast<size_t>(m.size));
  rt.allgather(&mine, all.data(), sizeof mine);
  if (m.ep.translation_count() < m.size) m.ep.set_translation_count(m.size);
  for (int r = 0; r < m.size; ++r) m.ep.map(r, all[static_cast<size_t>(r)].name, all[static_cast<size_t>(r)].tag);
  current_engine = this;
  async_detail::use_bundle(&rt.bundle());
  rt.barrier();  // every rank's engine exists before anyone calls
}

async_engine::~async_engine() {
  try {
    impl_->rt.barrier();  // nobody calls into an engine that is gone
  } catch (...) {
  }
  current_engine = nullptr;
  async_detail::drop_bundle(&impl_->rt.bundle());
  delete impl_;
}

async_engine& async_engine::current() {
  if (!current_engine)
    throw error(status::not_init, "clump::rpc", "no async_engine: construct a clump::async_engine(runtime) first");
  return *current_engine;
}

runtime& async_engine::owner() const noexcept { return impl_->rt; }

}  // namespace clump
