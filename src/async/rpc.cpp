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
#include "core/log.hpp"

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
  std::map<std::pair<uint32_t, uint64_t>, assembly> results;  // `got`: bytes fetched so far
  std::map<uint64_t, assembly> incoming;
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

void send_big_answer(const answer_to& to, uint64_t op, std::vector<std::byte>&& result) noexcept {
  if (!current_engine || op == 0) return;
  auto& m = current_engine->internals();
  const uint32_t caller = to.token ? to.token->source().rank : static_cast<uint32_t>(to.rank);
  uint32_t w[2];
  put_id(w, result.size());
  if (known_dead(caller)) return;  // it will never fetch it
  try {
    m.results[{caller, op}] = {std::move(result), 0};
  } catch (...) {
    send_answer(to, op, outcome::too_big, nullptr, 0, std::as_bytes(std::span("no memory to keep the result", 28)));
    return;
  }
  send_answer(to, op, outcome::big, w, 2, {});
}

void forget_failed() noexcept {
  if (!current_engine) return;
  auto& m = current_engine->internals();
  auto failed = [](const auto& e) { return known_dead(e.first.first); };
  std::erase_if(m.results, failed);
  std::erase_if(m.arguments, failed);
  // (A fetch from a rank that failed ended its operation; so did a wait that gave up.)
  std::erase_if(m.incoming, [](const auto& e) { return find_operation(e.first) == nullptr; });
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
    // In pieces: [the call's 5 words, sequence (2), total (2), offset (2)].
    uint32_t w[call_words + 6];
    std::copy(words, words + call_words, w);
    put_id(w + call_words, ++m.sequence);
    put_id(w + call_words + 2, payload.size());
    const size_t piece = max_medium();
    for (size_t at = 0; at < payload.size(); at += piece) {
      put_id(w + call_words + 4, at);
      const status s = m.ep.send_raw(rank, message_kind::medium, m.piece, w, call_words + 6, payload.data() + at,
                                     std::min(piece, payload.size() - at), 0, false);
      if (s != status::ok) {
        refuse(s, std::string("a piece of the call could not be sent: ") + to_string(s));
        break;
      }
    }
    // Give it back, unless these bytes were another call's (queued by a
    // handler) sent from a poll inside the send of the call that owns it.
    if (payload.data() == call_bytes.data() && call_bytes.size() > (size_t{4} << 20))
      std::vector<std::byte>().swap(call_bytes);
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
  dispatch(m, t, args, call_words, whole);  // answers this, the last piece
}

// A request for a piece of a big result kept here: [operation (2), offset (2), bytes (2)].
void on_fetch(void* ctx, token_base& t, const uint32_t* args, unsigned nargs, std::byte*, size_t) {
  auto& m = *static_cast<async_engine::impl*>(ctx);
  if (nargs < 6) return;
  const uint64_t op = get_id(args), at = get_id(args + 2), bytes = get_id(args + 4);
  auto it = m.results.find({t.source().rank, op});
  if (it == m.results.end() || at > it->second.bytes.size() || bytes > it->second.bytes.size() - at ||
      bytes > max_medium()) {
    send_answer({&t, -1}, op, outcome::lost, nullptr, 0, {});
    return;
  }
  uint32_t w[2];
  put_id(w, at);
  send_answer({&t, -1}, op, outcome::piece, w, 2, {it->second.bytes.data() + at, static_cast<size_t>(bytes)});
  if ((it->second.got += bytes) >= it->second.bytes.size()) m.results.erase(it);  // all fetched
}

// Fetches a big result's pieces (sent from progress(), not from the handler
// that heard of it: handlers may only reply).
struct fetcher final : continuation {
  async_engine::impl* m;
  uint64_t op;
  int rank;
  uint64_t total;
  void run() override {
    uint32_t w[6];
    put_id(w, op);
    const size_t piece = max_medium();
    for (uint64_t at = 0; at < total; at += piece) {
      put_id(w + 2, at);
      put_id(w + 4, std::min<uint64_t>(piece, total - at));
      const status s = m->ep.send_raw(rank, message_kind::short_message, m->fetch, w, 6, nullptr, 0, 0, false);
      if (s != status::ok) {
        m->incoming.erase(op);
        fail_operation(op, std::string("fetching the result failed: ") + to_string(s), s);
        break;
      }
    }
    this->~fetcher();
    pool_free(this, sizeof(fetcher));
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
          try {
            m.incoming[op] = {std::vector<std::byte>(total), 0};
          } catch (const std::bad_alloc&) {
            fail_operation(op, "no memory for a result of " + std::to_string(total) + " bytes", status::resource);
            return;
          }
          auto* f = new (pool_allocate(sizeof(fetcher))) fetcher;
          f->internal = true;  // it only sends: even from a rank that waits in a barrier
          f->m = &m;
          f->op = op;
          f->rank = static_cast<int>(t.source().rank);
          f->total = total;
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
  // A call or answer that came back: its destination failed.
  m.ep.on_returned([&m](const returned_message& r) {
    if (r.handler == m.fetch && r.args.size() >= 2) {
      const uint64_t op = get_id(r.args.data());
      m.incoming.erase(op);
      fail_operation(op, "fetching the result from rank " + std::to_string(r.destination.rank) +
                             " came back: " + to_string(r.reason));
      return;
    }
    if ((r.handler != m.call && r.handler != m.piece) || r.args.size() < call_words) return;
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

size_t async_engine::kept_bytes() const noexcept {
  size_t n = 0;
  for (const auto* kept : {&impl_->results, &impl_->arguments})
    for (const auto& [key, a] : *kept) n += a.bytes.size();
  for (const auto& [op, a] : impl_->incoming) n += a.bytes.size();
  return n;
}

}  // namespace clump
