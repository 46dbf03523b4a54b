// Remote procedure calls (clump/rpc.hpp): the registry of functions, and
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
//
// Arguments or a result of more than max_medium() bytes land whole, by one
// long message, in the receiver's landing area (a segment of the engine's
// endpoint, CLUMP_RPC_LANDING; src/async/landing.hpp):
// - a big call first asks the callee for a place (a short request to its
//   `reserve` handler: [the call's 5 words, sequence (2), bytes (2)]); the
//   reply (`granted`: [sequence (2), offset (2)]) sends the arguments as a
//   long request to `landed` ([the call's 5 words, sequence (2)]) into that
//   place, where the function reads them; the place is given back when it
//   returns;
// - a big result stays at the callee, which answers `big` with its size; the
//   caller takes a place of its own and asks for the result there
//   (`fetch_whole`: [operation (2), offset (2)]), and the callee sends it as a
//   long reply (`whole`: [operation (2)]).
// With no place free (or CLUMP_RPC_LANDING=0) they travel in pieces of
// max_medium() instead (`piece` and `fetch`, see rpc.hpp).
//
// A function that returns a future not ready yet answers later: when that
// future completes, its value goes as a request to the caller's `late`
// handler, which reads it as the reply would have been read. Such sends, and
// the calls a function makes from its handler, wait in the async layer's
// queue of internal continuations, which the end of every poll of the
// engine's bundle runs (outside handlers): a rank that waits in a barrier
// still sends them.

#include <clump/rpc.hpp>
#include <clump/runtime.hpp>

#include <sys/random.h>

#include <algorithm>
#include <cstring>

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "am/endpoint_impl.hpp"
#include "am/process.hpp"  // known_dead: what is known, without a system call
#include "async/landing.hpp"
#include "core/log.hpp"
#include "core/settings.hpp"

namespace clump {

namespace {

struct registered {
  std::string name;
  uint32_t signature;
  async_detail::invoke_fn invoke;
  std::shared_ptr<const void> fn;
};

// Function-local: registrations run during static initialisation, in any order.
std::unordered_map<uint64_t, registered>& registry() {
  static std::unordered_map<uint64_t, registered> r;
  return r;
}

async_engine* current_engine = nullptr;
std::vector<std::byte> call_bytes, answer_bytes;  // scratch (see async_detail::scratch)

}  // namespace

struct async_engine::impl {
  explicit impl(runtime& r) : rt(r), ep(r.bundle()) {}
  runtime& rt;
  endpoint ep;
  int rank = 0, size = 1;
  handler_index call = 0, answer = 0;
  bool warned_unknown = false;
  uint64_t last_id = 0;  // the function the last call ran (registrations never move: a map's nodes stay)
  const void* last = nullptr;
  handler_index piece = 0, fetch = 0;  // big arguments in pieces; fetching a big result
  handler_index late = 0;              // an answer that came after its call's handler (a request)

  // Big arguments arriving here, by (caller, its sequence number); big
  // results kept here, by (caller, its operation); big results arriving here,
  // by operation.
  struct assembly {
    std::vector<std::byte> bytes;
    uint64_t got = 0;
  };
  uint64_t sequence = 0;  // of this process's calls in pieces
  std::map<std::pair<uint32_t, uint64_t>, assembly> arguments;
  struct kept_result {
    async_detail::big_result r;
    uint64_t got = 0;  // bytes fetched so far
  };
  std::map<std::pair<uint32_t, uint64_t>, kept_result> results;
  std::map<uint64_t, assembly> incoming;

  // Big arguments and results by long messages into the landing area.
  handler_index reserve = 0, granted = 0, landed = 0, fetch_whole = 0, whole = 0;
  std::byte* landing_base = nullptr;
  async_detail::landing_area landing;
  struct place {
    uint64_t offset = 0, bytes = 0;
    uint32_t rank = 0;  // whose message lands there
  };
  // Places given to callers' arguments, by (caller, its sequence number);
  // places of ours for results on their way, by operation.
  std::map<std::pair<uint32_t, uint64_t>, place> reserved;
  std::map<uint64_t, place> fetching;
  // Calls waiting for the callee's place, by sequence number.
  struct big_call {
    int rank = -1;
    uint64_t op = 0;
    uint32_t words[async_detail::call_words] = {};
    std::vector<std::byte> payload;
    const char* name = nullptr;
  };
  std::map<uint64_t, big_call> waiting;
  // Big messages that arrived here, whole (landed) or in pieces (CLUMP_VERBOSE=1 says).
  uint64_t landed_calls = 0, pieced_calls = 0, landed_results = 0, pieced_results = 0;
};

namespace async_detail {

uint64_t register_function(std::string_view name, uint32_t signature, invoke_fn invoke, std::shared_ptr<const void> fn) {
  if (name.empty()) throw error(status::bad_arg, "rpc_function", "a function needs a name");
  const uint64_t id = hash(name);
  auto [at, added] = registry().try_emplace(id, registered{std::string(name), signature, invoke, std::move(fn)});
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
  auto& b = clump::detail::handler_depth > 0 ? answer_bytes : call_bytes;
  if (b.size() < bytes) b.resize(bytes);
  return b.data();
}

namespace {
// A message to send from progress() or the end of a poll, outside handlers
// (where only a reply may be sent): a call an rpc function made, or a late
// answer produced inside a handler.
struct send_later final : continuation {
  int rank = -1;
  uint64_t op = 0;
  std::vector<uint32_t> words;
  std::vector<std::byte> payload;
  size_t payload_bytes = 0;
  const char* name = nullptr;  // a call's function; nullptr: a late answer
  void run() override {
    if (name) {
      try {
        send_call(rank, op, words.data(), static_cast<unsigned>(words.size()), payload, payload_bytes, name);
      } catch (const std::exception& e) {  // an rpc_ff that could not go: nobody to tell but the log
        core::log_warning("%s", e.what());
      }
    } else if (current_engine) {
      auto& m = current_engine->internals();
      (void)m.ep.send_raw(rank, payload.empty() ? message_kind::short_message : message_kind::medium, m.late,
                          words.data(), static_cast<unsigned>(words.size()), payload.data(), payload.size(), 0, false);
    }
    delete this;
  }
};

void queue_send(int rank, uint64_t op, const uint32_t* words, unsigned nwords, std::span<const std::byte> payload,
                size_t payload_bytes, const char* name) {
  auto* c = new send_later;
  c->internal = true;
  c->rank = rank;
  c->op = op;
  c->words.assign(words, words + nwords);
  c->payload.assign(payload.begin(), payload.end());
  c->payload_bytes = payload_bytes;
  c->name = name;
  schedule(c);
}
}  // namespace

void send_answer(const answer_to& to, uint64_t op, outcome o, const uint32_t* words, unsigned nwords,
                 std::span<const std::byte> payload) noexcept {
  if (!current_engine || op == 0) return;
  uint32_t w[max_args];
  put_id(w, op);
  w[2] = static_cast<uint32_t>(o);
  for (unsigned i = 0; i < nwords && answer_words + i < max_args; ++i) w[answer_words + i] = words[i];
  const unsigned n = std::min<unsigned>(answer_words + nwords, max_args);
  auto& m = current_engine->internals();
  const message_kind kind = payload.empty() ? message_kind::short_message : message_kind::medium;
  if (to.token) {
    // A failure to answer (the requester is gone) comes back to our handler 0.
    (void)to.token->reply_raw(kind, m.answer, w, n, payload.data(), payload.size(), 0);
    return;
  }
  // A late answer: a request to the caller's engine (one that comes back
  // means the caller is gone, and is dropped).
  if (clump::detail::handler_depth > 0) {
    try {
      queue_send(to.rank, op, w, n, payload, payload.size(), nullptr);
    } catch (...) {  // no memory: the caller's wait ends when it learns of a failure, or never
      core::log_warning("rpc: no memory to keep a late answer for rank %d; it is dropped", to.rank);
    }
    return;
  }
  (void)m.ep.send_raw(to.rank, kind, m.late, w, n, payload.data(), payload.size(), 0, false);
}

void send_failure(const answer_to& to, uint64_t op, std::exception_ptr e) noexcept {
  std::string why = "an exception";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    try {
      why.assign(x.what(), std::min(std::strlen(x.what()), size_t{1024}));
    } catch (...) {
    }
  } catch (...) {
  }
  send_answer(to, op, outcome::threw, nullptr, 0, std::as_bytes(std::span(why.data(), why.size())));
}

namespace {
// A failure this process knows of (a look at a flag: no system call on the
// message path; progress() calls forget_failed when a new one is known).
bool known_dead(uint32_t rank) noexcept {
  const am::process* p = am::process::existing();
  return p && p->known_dead(static_cast<int>(rank));
}

}  // namespace

big_result make_big_result(uint64_t size) {
  big_result r;
  r.size = size;
  if (current_engine) {
    auto& m = current_engine->internals();
    if (const auto at = m.landing.take(size)) {
      r.offset = *at;
      r.bytes = m.landing_base + *at;
      return r;
    }
  }
  r.own.resize(size);
  r.bytes = r.own.data();
  return r;
}

namespace {
// Lets go of a kept result (its place, or its vector).
void drop(async_engine::impl& m, const big_result& r) noexcept {
  if (r.offset != ~uint64_t{0}) m.landing.give_back(r.offset, r.size);
}
}  // namespace

void send_big_answer(const answer_to& to, uint64_t op, big_result&& result) noexcept {
  if (!current_engine) return;
  auto& m = current_engine->internals();
  const uint32_t caller = to.token ? to.token->source().rank : static_cast<uint32_t>(to.rank);
  uint32_t w[2];
  put_id(w, result.size);
  if (op == 0 || known_dead(caller)) {  // nobody will fetch it
    drop(m, result);
    return;
  }
  try {
    m.results[{caller, op}] = {std::move(result), 0};
  } catch (...) {
    drop(m, result);
    send_answer(to, op, outcome::too_big, nullptr, 0, std::as_bytes(std::span("no memory to keep the result", 28)));
    return;
  }
  send_answer(to, op, outcome::big, w, 2, {});
}

void forget_failed() noexcept {
  if (!current_engine) return;
  auto& m = current_engine->internals();
  auto failed = [](const auto& e) { return known_dead(e.first.first); };
  std::erase_if(m.results, [&](const auto& e) {
    if (!failed(e)) return false;
    drop(m, e.second.r);
    return true;
  });
  std::erase_if(m.arguments, failed);
  // Places for the messages of a rank that failed: none will land now.
  auto give_back = [&](const auto& e) {
    if (!known_dead(e.second.rank)) return false;
    m.landing.give_back(e.second.offset, e.second.bytes);
    return true;
  };
  std::erase_if(m.reserved, give_back);
  std::erase_if(m.fetching, give_back);
  std::erase_if(m.waiting, [](const auto& e) { return known_dead(static_cast<uint32_t>(e.second.rank)); });
  // (A fetch from a rank that failed ended its operation; so did a wait that gave up.)
  std::erase_if(m.incoming, [](const auto& e) { return find_operation(e.first) == nullptr; });
}

namespace {
// A call's arguments in pieces: medium requests to the piece handler,
// [the call's 5 words, sequence (2), total (2), offset (2)].
status send_pieces(async_engine::impl& m, int rank, const uint32_t* words, std::span<const std::byte> payload,
                   uint64_t seq) noexcept {
  uint32_t w[call_words + 6];
  std::copy(words, words + call_words, w);
  put_id(w + call_words, seq);
  put_id(w + call_words + 2, payload.size());
  const size_t piece = max_medium();
  for (size_t at = 0; at < payload.size(); at += piece) {
    put_id(w + call_words + 4, at);
    const status s = m.ep.send_raw(rank, message_kind::medium, m.piece, w, call_words + 6, payload.data() + at,
                                   std::min(piece, payload.size() - at), 0, false);
    if (s != status::ok) return s;
  }
  return status::ok;
}
}  // namespace

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
  if (payload_bytes > max_rpc_bytes) {
    refuse(status::bad_arg, std::to_string(payload_bytes) + " bytes of arguments, more than the " +
                                std::to_string(max_rpc_bytes) + " an rpc takes");
    return;
  }
  if (clump::detail::handler_depth > 0) {
    // Inside a handler (an rpc function runs in one) only a reply may be
    // sent (AM-II): the call goes at the end of this poll, or at the next
    // progress(); its future (which the function may return) completes as
    // any other.
    try {
      queue_send(rank, op, words, nwords, payload, payload_bytes, name);
    } catch (const std::bad_alloc&) {
      refuse(status::resource, "no memory to keep the call until the handler has returned");
    }
    return;
  }
  if (payload.size() > max_medium()) {
    const uint64_t seq = ++m.sequence;
    if (payload.size() > m.landing.size()) {
      if (const status s = send_pieces(m, rank, words, payload, seq); s != status::ok)
        refuse(s, std::string("a piece of the call could not be sent: ") + to_string(s));
      // Give it back, unless these bytes were another call's (queued by a
      // handler) sent from a poll inside the send of the call that owns it.
      if (payload.data() == call_bytes.data() && call_bytes.size() > (size_t{4} << 20))
        std::vector<std::byte>().swap(call_bytes);
      return;
    }
    // Whole, by a long message into a place the callee gives: the bytes
    // wait here until it answers (the scratch buffer's own, taken over).
    try {
      async_engine::impl::big_call& c = m.waiting[seq];
      c.rank = rank;
      c.op = op;
      std::copy(words, words + call_words, c.words);
      c.name = name;
      if (payload.data() == call_bytes.data()) {
        c.payload.swap(call_bytes);
        c.payload.resize(payload.size());
      } else {
        c.payload.assign(payload.begin(), payload.end());
      }
    } catch (const std::bad_alloc&) {
      m.waiting.erase(seq);
      refuse(status::resource, "no memory to keep the arguments until the callee has room for them");
      return;
    }
    uint32_t w[call_words + 4];
    std::copy(words, words + call_words, w);
    put_id(w + call_words, seq);
    put_id(w + call_words + 2, payload.size());
    const status s = m.ep.send_raw(rank, message_kind::short_message, m.reserve, w, call_words + 4, nullptr, 0, 0, false);
    if (s != status::ok) {
      m.waiting.erase(seq);
      refuse(s, std::string("the call could not be sent: ") + to_string(s));
    }
    return;
  }
  const status s = m.ep.send_raw(rank, payload.empty() ? message_kind::short_message : message_kind::medium, m.call,
                                 words, nwords, payload.data(), payload.size(), 0, false);
  if (s != status::ok) refuse(s, std::string("the call could not be sent: ") + to_string(s));
}

}  // namespace async_detail

namespace {

using namespace async_detail;

// Finds the function of a call and runs it; it answers.
void dispatch(async_engine::impl& m, token_base& t, const uint32_t* args, unsigned nargs,
              std::span<const std::byte> payload) {
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
      send_answer({&t, -1}, op, o, nullptr, 0, {});
    } else if (!m.warned_unknown) {
      m.warned_unknown = true;
      core::log_warning("rpc_ff from rank %u: %s (id %016llx); dropped (said once)", t.source().rank,
                        o == outcome::unknown_function ? "no function of that name is registered here"
                                                       : "the function is registered here with other types",
                        static_cast<unsigned long long>(id));
    }
    return;
  }
  f->invoke(f->fn.get(), t, args, nargs, payload, op != 0);
}

// The call handler.
void on_call(void* ctx, token_base& t, const uint32_t* args, unsigned nargs, std::byte* data, size_t length) {
  if (nargs < call_words) return;  // not a call of ours: nothing to answer
  dispatch(*static_cast<async_engine::impl*>(ctx), t, args, nargs, {data, length});
}

// A piece of a call's arguments: kept until all have come, then the call runs.
void on_piece(void* ctx, token_base& t, const uint32_t* args, unsigned nargs, std::byte* data, size_t length) {
  auto& m = *static_cast<async_engine::impl*>(ctx);
  if (nargs < call_words + 6) return;
  const uint64_t op = get_id(args + 3), total = get_id(args + call_words + 2), at = get_id(args + call_words + 4);
  const std::pair<uint32_t, uint64_t> key{t.source().rank, get_id(args + call_words)};
  auto it = m.arguments.find(key);
  if (it == m.arguments.end()) {
    // Pieces from a rank known to have failed (sent before it died, read
    // after): nothing starts for it, or they would be kept for ever (what
    // was kept for it went when its failure became known).
    if (known_dead(key.first)) return;
    if (total > max_rpc_bytes || total <= max_medium()) {
      if (op != 0) send_answer({&t, -1}, op, outcome::malformed, nullptr, 0, {});
      return;
    }
    try {
      it = m.arguments.emplace(key, async_engine::impl::assembly{std::vector<std::byte>(total), 0}).first;
    } catch (const std::bad_alloc&) {
      if (op != 0) send_answer({&t, -1}, op, outcome::too_big, nullptr, 0, std::as_bytes(std::span("no memory for the arguments", 27)));
      return;
    }
  }
  auto& a = it->second;
  if (total != a.bytes.size() || at > total || length > total - at || a.got + length > total) {
    m.arguments.erase(it);
    if (op != 0) send_answer({&t, -1}, op, outcome::malformed, nullptr, 0, {});
    return;
  }
  std::memcpy(a.bytes.data() + at, data, length);
  a.got += length;
  if (a.got < total) return;
  std::vector<std::byte> whole = std::move(a.bytes);
  m.arguments.erase(it);
  ++m.pieced_calls;
  dispatch(m, t, args, call_words, whole);  // answers this, the last piece
}

// The offset of "no place": the arguments come in pieces.
constexpr uint64_t no_place = ~uint64_t{0};

// A caller asks for a place for its big arguments: [the call's 5 words,
// sequence (2), bytes (2)]. The answer is the place, or no_place.
void on_reserve(void* ctx, token_base& t, const uint32_t* args, unsigned nargs, std::byte*, size_t) {
  auto& m = *static_cast<async_engine::impl*>(ctx);
  if (nargs < call_words + 4) return;
  const uint32_t caller = t.source().rank;
  const uint64_t seq = get_id(args + call_words), bytes = get_id(args + call_words + 2);
  uint64_t offset = no_place;
  const std::pair<uint32_t, uint64_t> key{caller, seq};
  if (bytes > max_medium() && !m.reserved.contains(key) && !known_dead(caller)) {
    if (const auto at = m.landing.take(bytes)) {
      try {
        m.reserved.emplace(key, async_engine::impl::place{*at, bytes, caller});
        offset = *at;
      } catch (const std::bad_alloc&) {
        m.landing.give_back(*at, bytes);
      }
    }
  }
  uint32_t w[4];
  put_id(w, seq);
  put_id(w + 2, offset);
  (void)t.reply_raw(message_kind::short_message, m.granted, w, 4, nullptr, 0, 0);
}

// Sends a big call's arguments once the callee has answered: into its
// place, or in pieces (from the end of the poll: handlers may only reply).
struct big_sender final : continuation {
  async_engine::impl* m = nullptr;
  uint64_t seq = 0, offset = 0;
  async_engine::impl::big_call call;
  void run() override {
    status s;
    if (offset == no_place) {
      s = send_pieces(*m, call.rank, call.words, call.payload, seq);
    } else {
      uint32_t w[call_words + 2];
      std::copy(call.words, call.words + call_words, w);
      put_id(w + call_words, seq);
      s = m->ep.send_raw(call.rank, message_kind::long_message, m->landed, w, call_words + 2, call.payload.data(),
                         call.payload.size(), offset, false);
    }
    if (s != status::ok) {
      const std::string why = std::string("the call's arguments could not be sent: ") + to_string(s);
      if (call.op) fail_operation(call.op, why, s);
      else core::log_warning("rpc_ff '%s' to rank %d: %s", call.name, call.rank, why.c_str());
    }
    // The scratch buffer the bytes came from, back for the next call (when
    // no send uses it now: it is empty only after such a call took it over).
    if (call_bytes.capacity() == 0 && call.payload.capacity() <= (size_t{4} << 20)) call_bytes.swap(call.payload);
    delete this;
  }
};

// The callee's answer to a reserve: [sequence (2), offset (2)].
void on_granted(void* ctx, token_base&, const uint32_t* args, unsigned nargs, std::byte*, size_t) {
  auto& m = *static_cast<async_engine::impl*>(ctx);
  if (nargs < 4) return;
  auto it = m.waiting.find(get_id(args));
  if (it == m.waiting.end()) return;  // (its operation failed meanwhile)
  auto* c = new (std::nothrow) big_sender;
  if (!c) {
    if (it->second.op) fail_operation(it->second.op, "no memory to send the arguments", status::resource);
    m.waiting.erase(it);
    return;
  }
  c->internal = true;  // it only sends: even from a rank that waits in a barrier
  c->m = &m;
  c->seq = it->first;
  c->offset = get_id(args + 2);
  c->call = std::move(it->second);
  m.waiting.erase(it);
  schedule(c);
}

// Big arguments, landed in the place given for them: [the call's 5 words,
// sequence (2)]. The function reads them there; then the place is free.
void on_landed(void* ctx, token_base& t, const uint32_t* args, unsigned nargs, std::byte* data, size_t length) {
  auto& m = *static_cast<async_engine::impl*>(ctx);
  if (nargs < call_words + 2) return;
  const uint64_t op = get_id(args + 3);
  auto it = m.reserved.find({t.source().rank, get_id(args + call_words)});
  if (it == m.reserved.end()) {
    if (op != 0) send_answer({&t, -1}, op, outcome::malformed, nullptr, 0, {});
    return;
  }
  const async_engine::impl::place p = it->second;
  m.reserved.erase(it);
  struct give_back {
    async_engine::impl& m;
    async_engine::impl::place p;
    ~give_back() { m.landing.give_back(p.offset, p.bytes); }
  } later{m, p};
  if (data != m.landing_base + p.offset || length != p.bytes) {  // not where, or not as long as, it said
    if (op != 0) send_answer({&t, -1}, op, outcome::malformed, nullptr, 0, {});
    return;
  }
  ++m.landed_calls;
  dispatch(m, t, args, call_words, {data, length});
}

// A request for a piece of a big result kept here: [operation (2), offset (2), bytes (2)].
void on_fetch(void* ctx, token_base& t, const uint32_t* args, unsigned nargs, std::byte*, size_t) {
  auto& m = *static_cast<async_engine::impl*>(ctx);
  if (nargs < 6) return;
  const uint64_t op = get_id(args), at = get_id(args + 2), bytes = get_id(args + 4);
  auto it = m.results.find({t.source().rank, op});
  if (it == m.results.end() || at > it->second.r.size || bytes > it->second.r.size - at ||
      bytes > max_medium()) {
    send_answer({&t, -1}, op, outcome::lost, nullptr, 0, {});
    return;
  }
  uint32_t w[2];
  put_id(w, at);
  send_answer({&t, -1}, op, outcome::piece, w, 2, {it->second.r.bytes + at, static_cast<size_t>(bytes)});
  if ((it->second.got += bytes) >= it->second.r.size) {  // all fetched
    drop(m, it->second.r);
    m.results.erase(it);
  }
}

// A request for a whole big result kept here, into the caller's place at
// `offset`: [operation (2), offset (2)]. It goes as one long reply.
void on_fetch_whole(void* ctx, token_base& t, const uint32_t* args, unsigned nargs, std::byte*, size_t) {
  auto& m = *static_cast<async_engine::impl*>(ctx);
  if (nargs < 4) return;
  const uint64_t op = get_id(args), offset = get_id(args + 2);
  auto it = m.results.find({t.source().rank, op});
  if (it == m.results.end() || it->second.got != 0) {
    send_answer({&t, -1}, op, outcome::lost, nullptr, 0, {});
    return;
  }
  uint32_t w[2];
  put_id(w, op);
  const status s = t.reply_raw(message_kind::long_message, m.whole, w, 2, it->second.r.bytes, it->second.r.size, offset);
  drop(m, it->second.r);
  m.results.erase(it);
  if (s != status::ok) send_answer({&t, -1}, op, outcome::lost, nullptr, 0, {});  // (a place outside its segment)
}

// A whole big result, landed in our place: [operation (2)].
void on_whole(void* ctx, token_base& t, const uint32_t* args, unsigned nargs, std::byte* data, size_t length) {
  auto& m = *static_cast<async_engine::impl*>(ctx);
  if (nargs < 2) return;
  const uint64_t op = get_id(args);
  auto it = m.fetching.find(op);
  if (it == m.fetching.end() || it->second.rank != t.source().rank) return;
  const async_engine::impl::place p = it->second;
  m.fetching.erase(it);
  if (data == m.landing_base + p.offset && length == p.bytes) {
    ++m.landed_results;
    answer(op, nullptr, 0, {data, length});
  } else {
    fail_operation(op, "rank " + std::to_string(p.rank) + " sent a result of the wrong size or place", status::bad_arg);
  }
  m.landing.give_back(p.offset, p.bytes);
}

// Fetches a big result: whole into a place of ours, or in pieces (sent from
// progress(), not from the handler that heard of it: handlers may only reply).
struct fetcher final : continuation {
  async_engine::impl* m;
  uint64_t op;
  int rank;
  uint64_t total;
  uint64_t offset;  // of our place; no_place: in pieces
  void run() override {
    send();
    this->~fetcher();
    pool_free(this, sizeof(fetcher));
  }
  void send() {
    uint32_t w[6];
    put_id(w, op);
    if (offset != no_place) {
      put_id(w + 2, offset);
      const status s = m->ep.send_raw(rank, message_kind::short_message, m->fetch_whole, w, 4, nullptr, 0, 0, false);
      if (s != status::ok) {
        m->fetching.erase(op);
        m->landing.give_back(offset, total);
        fail_operation(op, std::string("fetching the result failed: ") + to_string(s), s);
      }
      return;
    }
    const size_t piece = max_medium();
    for (uint64_t at = 0; at < total; at += piece) {
      put_id(w + 2, at);
      put_id(w + 4, std::min<uint64_t>(piece, total - at));
      const status s = m->ep.send_raw(rank, message_kind::short_message, m->fetch, w, 6, nullptr, 0, 0, false);
      if (s != status::ok) {
        m->incoming.erase(op);
        fail_operation(op, std::string("fetching the result failed: ") + to_string(s), s);
        return;
      }
    }
  }
};

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
    case outcome::big:
      if (nargs >= answer_words + 2) {
        auto& m = async_engine::current().internals();
        const uint64_t total = get_id(args + answer_words);
        if (total > max_medium() && total <= max_rpc_bytes) {
          // Whole into a place of ours when one is free, else in pieces.
          uint64_t offset = no_place;
          try {
            if (const auto at = m.landing.take(total)) {
              offset = *at;
              m.fetching[op] = {offset, total, t.source().rank};
            } else {
              m.incoming[op] = {std::vector<std::byte>(total), 0};
            }
          } catch (const std::bad_alloc&) {
            if (offset != no_place) m.landing.give_back(offset, total);
            fail_operation(op, "no memory for a result of " + std::to_string(total) + " bytes", status::resource);
            return;
          }
          auto* f = new (pool_allocate(sizeof(fetcher))) fetcher;
          f->internal = true;  // it only sends: even from a rank that waits in a barrier
          f->m = &m;
          f->op = op;
          f->rank = static_cast<int>(t.source().rank);
          f->total = total;
          f->offset = offset;
          schedule(f);
          return;
        }
      }
      break;
    case outcome::piece:
      if (nargs >= answer_words + 2) {
        auto& m = async_engine::current().internals();
        auto it = m.incoming.find(op);
        const uint64_t at = get_id(args + answer_words);
        if (it != m.incoming.end() && at <= it->second.bytes.size() && length <= it->second.bytes.size() - at) {
          std::memcpy(it->second.bytes.data() + at, data, length);
          if ((it->second.got += length) >= it->second.bytes.size()) {
            std::vector<std::byte> whole = std::move(it->second.bytes);
            m.incoming.erase(it);
            ++m.pieced_results;
            answer(op, nullptr, 0, whole);
          }
          return;
        }
      }
      break;
    case outcome::lost:
      async_engine::current().internals().incoming.erase(op);
      fail_operation(op, peer + " no longer has the result", status::resource);
      return;
  }
  async_engine::current().internals().incoming.erase(op);
  fail_operation(op, peer + " answered with a malformed message (outcome " + std::to_string(args[2]) + ")",
                 status::bad_arg);
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
  m.piece = m.ep.set_raw_handler(-1, &on_piece, &m, detail::role::request, -1, -1);
  m.fetch = m.ep.set_raw_handler(-1, &on_fetch, &m, detail::role::request, -1, -1);
  m.late = m.ep.set_raw_handler(-1, &on_answer, &m, detail::role::request, -1, -1);
  m.reserve = m.ep.set_raw_handler(-1, &on_reserve, &m, detail::role::request, -1, -1);
  m.granted = m.ep.set_raw_handler(-1, &on_granted, &m, detail::role::reply, -1, -1);
  m.landed = m.ep.set_raw_handler(-1, &on_landed, &m, detail::role::request, -1, -1);
  m.fetch_whole = m.ep.set_raw_handler(-1, &on_fetch_whole, &m, detail::role::request, -1, -1);
  m.whole = m.ep.set_raw_handler(-1, &on_whole, &m, detail::role::reply, -1, -1);
  if (const size_t landing = core::settings().rpc_landing) {
    try {
      m.landing_base = m.ep.allocate_segment(landing).data();
      m.landing.reset(landing);
    } catch (const error& e) {  // (a region full of other segments): big ones go in pieces
      core::log_warning("rpc: no landing area of %zu bytes (CLUMP_RPC_LANDING): %s; big arguments and results go in "
                        "pieces",
                        landing, e.what());
    }
  }
  // A call or answer that came back: its destination failed.
  m.ep.on_returned([&m](const returned_message& r) {
    if ((r.handler == m.fetch || r.handler == m.fetch_whole) && r.args.size() >= 2) {
      const uint64_t op = get_id(r.args.data());
      m.incoming.erase(op);
      if (auto it = m.fetching.find(op); it != m.fetching.end()) {  // (nothing landed: it came back)
        m.landing.give_back(it->second.offset, it->second.bytes);
        m.fetching.erase(it);
      }
      fail_operation(op, "fetching the result from rank " + std::to_string(r.destination.rank) +
                             " came back: " + to_string(r.reason));
      return;
    }
    if ((r.handler != m.call && r.handler != m.piece && r.handler != m.reserve && r.handler != m.landed) ||
        r.args.size() < call_words)
      return;
    if (r.handler == m.reserve && r.args.size() >= call_words + 2) m.waiting.erase(get_id(r.args.data() + call_words));
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
  const impl& m = *impl_;
  if (m.landed_calls + m.pieced_calls + m.landed_results + m.pieced_results)
    core::log_info("rpc: big arguments that arrived here: %llu whole into the landing area, %llu in pieces; big results: "
                   "%llu whole, %llu in pieces",
                   static_cast<unsigned long long>(m.landed_calls), static_cast<unsigned long long>(m.pieced_calls),
                   static_cast<unsigned long long>(m.landed_results), static_cast<unsigned long long>(m.pieced_results));
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

size_t async_engine::kept_bytes() const noexcept {
  size_t n = 0;
  for (const auto& [key, a] : impl_->arguments) n += a.bytes.size();
  for (const auto& [key, k] : impl_->results) n += k.r.size;
  for (const auto& [op, a] : impl_->incoming) n += a.bytes.size();
  for (const auto& [seq, c] : impl_->waiting) n += c.payload.size();
  for (const auto& [key, p] : impl_->reserved) n += p.bytes;
  for (const auto& [op, p] : impl_->fetching) n += p.bytes;
  return n;
}

}  // namespace clump
