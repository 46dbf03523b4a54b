// The async conformance program (futures, coroutines, rpc, the gas layer's
// future-returning operations): one scenario per run, chosen by argv[1], run
// under clumprun by async_test.cpp with 1 to 4 ranks, on one node, on
// emulated nodes and over the network protocol. Every check compares with a
// value computed here; a failed check says what was expected.

#include <clump/rpc.hpp>
#include <clump/clump.hpp>
#include <clump/gas.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "check.hpp"

namespace gas = clump::gas;
using clump::test::failures;
using clump::test::my_rank;

namespace {

struct point {
  int32_t x;
  double y;
  char tag[5];
};

int ff_calls = 0;  // rpc_ff calls that ran here
int64_t ff_sum = 0;

// Functions every rank registers at start-up, before main.
const auto add = clump::rpc_function("add", [](int a, int b) { return a + b; });
const auto where = clump::rpc_function("where", [] { return my_rank; });
const auto shift = clump::rpc_function("shift", [](point p, int64_t by) {
  p.x += static_cast<int32_t>(by);
  p.y *= 2;
  return p;
});
const auto greet = clump::rpc_function("greet", [](std::string_view who, const std::string& how) {
  return std::string(how) + ", " + std::string(who) + " from " + std::to_string(my_rank);
});
const auto total = clump::rpc_function("total", [](std::span<const int64_t> v) {
  return std::accumulate(v.begin(), v.end(), int64_t{0});
});
const auto reversed = clump::rpc_function("reversed", [](std::vector<uint16_t> v) {
  return std::vector<uint16_t>(v.rbegin(), v.rend());
});
// Big arguments and results carry a pattern that depends on their size:
// every byte is checked where they arrive (in the landing area or put
// together from pieces), so that bytes of another call, or of a place given
// out twice, are seen.
// Byte i of n is (7i + n) mod 256: it repeats every 256 bytes, so it is
// written and compared 256 bytes at a time (memcpy and memcmp: a byte loop
// over megabytes takes seconds under TSan).
std::array<char, 256> period_of(size_t n) {
  std::array<char, 256> p;
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<char>((i * 7 + n) & 0xff);
  return p;
}
void fill_pattern(void* to, size_t n) {
  const auto p = period_of(n);
  for (size_t at = 0; at < n; at += p.size()) std::memcpy(static_cast<char*>(to) + at, p.data(), std::min(p.size(), n - at));
}
bool is_pattern(const void* b, size_t n) {
  const auto p = period_of(n);
  for (size_t at = 0; at < n; at += p.size())
    if (std::memcmp(static_cast<const char*>(b) + at, p.data(), std::min(p.size(), n - at)) != 0) return false;
  return true;
}
// The size when every byte is right, else ~0.
const auto count_bytes = clump::rpc_function("count_bytes", [](std::span<const std::byte> b) {
  return is_pattern(b.data(), b.size()) ? b.size() : ~size_t{0};
});
const auto make_bytes = clump::rpc_function("make_bytes", [](uint64_t n) {
  std::vector<char> v(n);
  fill_pattern(v.data(), n);
  return v;
});
const auto sixty = clump::rpc_function("sixty", [](int64_t a, int64_t b, int64_t c, int64_t d, int64_t e, int64_t f,
                                                   int64_t g, int32_t h) { return a + b + c + d + e + f + g + h; });
const auto sixty_four = clump::rpc_function("sixty_four", [](int64_t a, int64_t b, int64_t c, int64_t d, int64_t e,
                                                             int64_t f, int64_t g, int64_t h) {
  return a + b + c + d + e + f + g + h;
});
const auto thrower = clump::rpc_function("thrower", [](int v) -> int {
  if (v < 0) throw std::runtime_error("negative: " + std::to_string(v));
  return v;
});
// Deferred answers: functions that return a future. The calls they make from
// their handler go once it has returned; the caller's future completes when
// the returned one does.
const auto forward = clump::rpc_function("forward", [](int to, int a) { return clump::rpc(to, add, a, 1); });
const auto forward_big = clump::rpc_function("forward_big",
                                             [](int to, uint64_t n) { return clump::rpc(to, make_bytes, n); });
const auto forward_throw = clump::rpc_function("forward_throw", [](int to, int v) { return clump::rpc(to, thrower, v); });
// Answered only when the same caller's `unhold` gives the value.
std::map<int, clump::promise<int64_t>> held;
const auto hold = clump::rpc_function("hold", [](int from) { return held[from].get_future(); });
const auto unhold = clump::rpc_function("unhold", [](int from, int64_t v) {
  auto it = held.find(from);
  if (it == held.end()) return false;
  it->second.set_value(v);
  held.erase(it);
  return true;
});
std::map<int, clump::promise<>> held_void;
const auto hold_void = clump::rpc_function("hold_void", [](int from) { return held_void[from].get_future(); });
const auto fail_void = clump::rpc_function("fail_void", [](int from) {
  auto it = held_void.find(from);
  if (it == held_void.end()) return false;
  it->second.set_error(std::make_exception_ptr(std::runtime_error("failed by rank " + std::to_string(from))));
  held_void.erase(it);
  return true;
});
const auto waits = clump::rpc_function("waits", [](int) {
  clump::promise<int> p;
  return p.get_future().wait();  // throws: it would never return
});
int64_t big_ff_sum = 0;  // what rpc_ff calls with big arguments added here
const auto add_all = clump::rpc_function("add_all", [](const std::vector<int64_t>& v) {
  for (int64_t x : v) big_ff_sum += x;
});
bool released = false;  // (dead) rank 0 has done its checks: the others may leave
const auto release = clump::rpc_function("release", [] { released = true; });
int finished = 0;  // (dead) the other living ranks that are past every collective
const auto finish = clump::rpc_function("finish", [] { ++finished; });
int past = 0;        // (dead) the living ranks past the last collective, told to the rank that dies
const auto is_past = clump::rpc_function("is_past", [] { ++past; });
int big_served = 0;  // (dead) big results made here for the rank that dies
const auto make_big = clump::rpc_function("make_big", [](uint64_t n) {
  ++big_served;
  return std::vector<std::byte>(n, std::byte{7});
});
const auto bump = clump::rpc_function("bump", [](int64_t v) {
  ++ff_calls;
  ff_sum += v;
});

// ---- futures alone ---------------------------------------------------------------

clump::future<int> add_later(clump::future<int> a, clump::future<int> b) { co_return co_await a + co_await b; }
clump::future<> throws_later(clump::future<int> a) {
  int v = co_await a;
  if (v > 0) throw std::runtime_error("from a coroutine");
}

int scenario_futures() {
  // promise, then, chains, errors through them
  clump::promise<int> p;
  auto f = p.get_future();
  CHECK(!f.ready(), "a new promise's future is not ready");
  bool threw = false;
  try {
    (void)f.result();
  } catch (const clump::error& e) {
    threw = e.code() == clump::status::in_use;
  }
  CHECK(threw, "result() of a future that is not ready throws in_use");
  auto g = f.then([](int v) { return v * 2; }).then([](int v) { return std::to_string(v); });
  p.set_value(21);
  CHECK(g.wait() == "42", "then-chain gives %s", g.wait().c_str());
  bool twice = false;
  try {
    p.set_value(1);
  } catch (const clump::error&) {
    twice = true;
  }
  CHECK(twice, "a promise fulfilled twice throws");

  clump::promise<int> q;
  int ran = 0;
  auto h = q.get_future().then([&](int v) {
    ++ran;
    return v;
  });
  q.set_error(std::make_exception_ptr(std::runtime_error("boom")));
  std::string why;
  try {
    h.wait();
  } catch (const std::runtime_error& e) {
    why = e.what();
  }
  CHECK(why == "boom" && ran == 0, "an error passes through then without running it (%s, ran %d)", why.c_str(), ran);

  // then on a ready future runs at once; a then returning a future is flattened
  int at_once = 0;
  auto r = clump::make_ready_future(5).then([&](int v) {
    at_once = v;
    return clump::make_ready_future(v + 1);
  });
  CHECK(at_once == 5 && r.ready() && r.wait() == 6, "then on a ready future: ran %d, got %d", at_once, r.wait());

  // when_all: values in order; the first error
  clump::promise<int> a, b;
  auto all = clump::when_all(a.get_future(), b.get_future(), clump::make_ready_future(std::string("s")));
  b.set_value(2);
  CHECK(!all.ready(), "when_all waits for every input");
  a.set_value(1);
  auto [x, y, s] = all.wait();
  CHECK(x == 1 && y == 2 && s == "s", "when_all values %d %d %s", x, y, s.c_str());
  std::vector<clump::future<int>> many;
  std::vector<clump::promise<int>> ps(100);
  for (auto& pr : ps) many.push_back(pr.get_future());
  auto every = clump::when_all(std::move(many));
  for (int i = 99; i >= 0; --i) ps[static_cast<size_t>(i)].set_value(i);
  auto v = every.wait();
  bool in_order = v.size() == 100;
  for (int i = 0; in_order && i < 100; ++i) in_order = v[static_cast<size_t>(i)] == i;
  CHECK(in_order, "when_all of a vector keeps the order");
  clump::promise<int> bad;
  auto mixed = clump::when_all(clump::make_ready_future(1), bad.get_future());
  bad.set_error(std::make_exception_ptr(std::logic_error("second")));
  why.clear();
  try {
    mixed.wait();
  } catch (const std::logic_error& e) {
    why = e.what();
  }
  CHECK(why == "second", "when_all fails with its input's error (%s)", why.c_str());

  // coroutines: suspended until their inputs are ready, run by progress
  clump::promise<int> c1, c2;
  auto sum = add_later(c1.get_future(), c2.get_future());
  CHECK(!sum.ready(), "a coroutine waits at its first co_await");
  c1.set_value(40);
  c2.set_value(2);
  CHECK(sum.wait() == 42, "coroutine result %d", sum.wait());
  clump::promise<int> c3;
  auto t = throws_later(c3.get_future());
  c3.set_value(1);
  why.clear();
  try {
    t.wait();
  } catch (const std::runtime_error& e) {
    why = e.what();
  }
  CHECK(why == "from a coroutine", "a coroutine's exception fails its future (%s)", why.c_str());

  // futures of void: then, when_all, a failed one
  int after_void = 0;
  clump::promise<> pv;
  auto tv = pv.get_future().then([&] {
    after_void = 7;
    return 8;
  });
  CHECK(!tv.ready() && after_void == 0, "then on a future<void> waits");
  pv.set_value();
  CHECK(tv.wait() == 8 && after_void == 7, "then on a future<void> ran");
  auto voids = clump::when_all(clump::make_ready_future(), clump::make_ready_future(3));
  CHECK(std::get<1>(voids.wait()) == 3, "when_all with a future<void>");
  auto gone = clump::make_failed_future<int>(std::make_exception_ptr(std::runtime_error("made so")));
  CHECK(gone.ready() && gone.failed(), "a failed future is ready and failed");
  why.clear();
  try {
    gone.wait();
  } catch (const std::runtime_error& e) {
    why = e.what();
  }
  CHECK(why == "made so", "make_failed_future's error (%s)", why.c_str());

  // a future with no state
  clump::future<int> none;
  threw = false;
  try {
    none.wait();
  } catch (const clump::error&) {
    threw = true;
  }
  CHECK(threw && !none.valid(), "waiting on a future with no state throws");
  CHECK(clump::async_detail::operations_in_flight() == 0, "%zu operations left in flight",
        clump::async_detail::operations_in_flight());
  return failures;
}

// ---- rpc --------------------------------------------------------------------------------

template <class F>
std::string error_of(F&& f) {
  try {
    f.wait();
  } catch (const clump::error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not a clump::error: ") + e.what();
  }
  return "";
}

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

int scenario_rpc(clump::runtime& rt) {
  clump::async_engine engine(rt);
  const int me = rt.rank(), n = rt.size();
  // A function only rank 0 has, and one whose types differ between ranks.
  const auto only_zero = me == 0 ? std::optional(clump::rpc_function("only_zero", [](int v) { return v; }))
                                 : std::nullopt;
  const auto shape_int = me == 0 ? std::optional(clump::rpc_function("shape", [](int v) { return v; })) : std::nullopt;
  [[maybe_unused]] const auto shape_double = me != 0 ? std::optional(clump::rpc_function("shape", [](double v) { return v; }))
                                    : std::nullopt;
  for (int r = 0; r < n; ++r) {
    CHECK(clump::rpc(r, add, me, r).wait() == me + r, "add on %d", r);
    CHECK(clump::rpc(r, where).wait() == r, "where on %d", r);
    point p = clump::rpc(r, shift, point{3, 1.5, "abcd"}, int64_t{-10}).wait();
    CHECK(p.x == -7 && p.y == 3.0 && std::strcmp(p.tag, "abcd") == 0, "shift on %d: %d %g %s", r, p.x, p.y, p.tag);
    const std::string hi = clump::rpc(r, greet, std::string(300, 'w'), "hello").wait();
    CHECK(hi == "hello, " + std::string(300, 'w') + " from " + std::to_string(r), "greet on %d: %.40s", r, hi.c_str());
    std::vector<int64_t> v(1000);
    std::iota(v.begin(), v.end(), int64_t{me});
    const int64_t want = std::accumulate(v.begin(), v.end(), int64_t{0});
    CHECK(clump::rpc(r, total, v).wait() == want, "total on %d", r);
    CHECK(clump::rpc(r, total, std::span<const int64_t>()).wait() == 0, "total of nothing on %d", r);
    std::vector<uint16_t> u{1, 2, 3, 65535};
    CHECK((clump::rpc(r, reversed, u).wait() == std::vector<uint16_t>{65535, 3, 2, 1}), "reversed on %d", r);
    // 60 bytes of plain arguments go in a short message, 64 in a medium one: both arrive.
    CHECK(clump::rpc(r, sixty, 1, 2, 3, 4, 5, 6, 7, 8).wait() == 36, "sixty on %d", r);
    CHECK(clump::rpc(r, sixty_four, 1, 2, 3, 4, 5, 6, 7, 8).wait() == 36, "sixty_four on %d", r);
    // Arguments and results about the medium limit (one message; then pieces), and large ones.
    const size_t most = clump::max_medium() - 8;  // the count takes 8 bytes
    for (size_t bytes : {most, most + 1, 3 * clump::max_medium() + 5, size_t{5} << 20}) {
      std::vector<std::byte> big(bytes);
      fill_pattern(big.data(), bytes);
      CHECK(clump::rpc(r, count_bytes, big).wait() == bytes, "%zu bytes of arguments to %d", bytes, r);
      const std::vector<char> got = clump::rpc(r, make_bytes, uint64_t{bytes}).wait();
      CHECK(got.size() == bytes && is_pattern(got.data(), bytes), "%zu bytes of result from %d", bytes, r);
    }
    // Many big ones in flight at once, of many sizes, both ways: more than
    // a small landing area holds, so that some go in pieces beside them.
    {
      std::vector<std::vector<std::byte>> args;
      std::vector<clump::future<size_t>> counted;
      std::vector<clump::future<std::vector<char>>> made;
      for (size_t k = 0; k < 12; ++k) {
        const size_t bytes = clump::max_medium() + 1 + k * 50001;
        args.emplace_back(bytes);
        fill_pattern(args.back().data(), bytes);
      }
      for (size_t k = 0; k < 12; ++k) {
        counted.push_back(clump::rpc(r, count_bytes, args[k]));
        made.push_back(clump::rpc(r, make_bytes, uint64_t{args[k].size()}));
      }
      const std::vector<size_t> sizes = clump::when_all(std::move(counted)).wait();
      const std::vector<std::vector<char>> results = clump::when_all(std::move(made)).wait();
      for (size_t k = 0; k < 12; ++k) {
        CHECK(sizes[k] == args[k].size(), "%zu bytes of arguments to %d, 12 at once: %zu", args[k].size(), r, sizes[k]);
        CHECK(results[k].size() == args[k].size() && is_pattern(results[k].data(), results[k].size()),
              "%zu bytes of result from %d, 12 at once", args[k].size(), r);
      }
    }
    std::vector<uint16_t> wide(300000);
    for (size_t i = 0; i < wide.size(); ++i) wide[i] = static_cast<uint16_t>(i * 13);
    const std::vector<uint16_t> back = clump::rpc(r, reversed, wide).wait();  // big both ways
    CHECK(back.size() == wide.size() && back.front() == wide.back() && back.back() == wide.front() &&
              back[1234] == wide[wide.size() - 1235],
          "600 KB reversed by %d", r);
    // Past the limit: refused here, without reading the bytes (the span is never read).
    const std::byte* nowhere = reinterpret_cast<const std::byte*>(&wide);
    std::string e = error_of(clump::rpc(r, count_bytes, std::span<const std::byte>(nowhere, (size_t{1} << 32) + 1)));
    CHECK(has(e, "an rpc takes") && has(e, "count_bytes"), "arguments too big: %s", e.c_str());
    // Errors, each naming the function and the rank.
    e = error_of(clump::rpc(r, thrower, -5));
    CHECK(has(e, "thrower") && has(e, "negative: -5") && has(e, ("rank " + std::to_string(r)).c_str()), "throw: %s",
          e.c_str());
    CHECK(clump::rpc(r, thrower, 5).wait() == 5, "thrower(5)");
    // Deferred answers, through a second rank (every kind of result, and an error).
    const int to = (r + 1) % n;
    CHECK(clump::rpc(r, forward, to, 41).wait() == 42, "forward through %d to %d", r, to);
    for (uint64_t bytes : {uint64_t{100}, uint64_t{3 * clump::max_medium() + 5}}) {
      const std::vector<char> got = clump::rpc(r, forward_big, to, bytes).wait();
      CHECK(got.size() == bytes && is_pattern(got.data(), got.size()), "%llu bytes forwarded through %d",
            static_cast<unsigned long long>(bytes), r);
    }
    e = error_of(clump::rpc(r, forward_throw, to, -3));
    CHECK(has(e, "forward_throw") && has(e, "negative: -3"), "a forwarded error: %s", e.c_str());
    clump::rpc_ff(r, forward, to, 1);  // its answer is nobody's
    // Held until this rank says: the answer is late by a whole round trip.
    auto later = clump::rpc(r, hold, me);
    CHECK(clump::rpc(r, add, 1, 2).wait() == 3 && !later.ready(), "a held answer waits on %d", r);
    CHECK(clump::rpc(r, unhold, me, int64_t{77 + r}).wait(), "unhold on %d", r);
    CHECK(later.wait() == 77 + r, "the held answer from %d", r);
    auto done = clump::rpc(r, hold_void, me);
    CHECK(clump::rpc(r, fail_void, me).wait(), "fail_void on %d", r);
    e = error_of(std::move(done));
    CHECK(has(e, ("failed by rank " + std::to_string(me)).c_str()) && has(e, "hold_void"),
          "a held future<void> that fails: %s", e.c_str());
    e = error_of(clump::rpc(r, waits, 0));
    CHECK(has(e, "inside a message handler") && has(e, "waits"), "a wait inside an rpc function: %s", e.c_str());
    if (me == 0 && r != 0) {
      e = error_of(clump::rpc(r, *only_zero, 1));
      CHECK(has(e, "no function registered") && has(e, "only_zero") && has(e, ("rank " + std::to_string(r)).c_str()),
            "unknown function: %s", e.c_str());
      e = error_of(clump::rpc(r, *shape_int, 1));
      CHECK(has(e, "other argument or result types") && has(e, "shape"), "other types: %s", e.c_str());
    }
  }
  // Bad ranks: a failed future, nothing sent.
  std::string e = error_of(clump::rpc(n, add, 1, 1));
  CHECK(has(e, "outside the job"), "rank n: %s", e.c_str());
  e = error_of(clump::rpc(-1, add, 1, 1));
  CHECK(has(e, "outside the job"), "rank -1: %s", e.c_str());
  bool threw = false;
  try {
    clump::rpc_ff(n + 5, bump, int64_t{1});
  } catch (const clump::error& x) {
    threw = has(x.what(), "outside the job");
  }
  CHECK(threw, "rpc_ff to a bad rank throws");

  // rpc_ff: every rank sends 500 to every rank; each counts what it got.
  constexpr int each = 500;
  for (int i = 0; i < each; ++i)
    for (int r = 0; r < n; ++r) clump::rpc_ff(r, bump, int64_t{i});
  rt.wait_until([&] { return ff_calls == each * n; });
  CHECK(ff_sum == int64_t{n} * each * (each - 1) / 2, "rpc_ff sum %lld", static_cast<long long>(ff_sum));
  // rpc_ff with arguments in pieces: 3 calls of 100000 values to every rank.
  std::vector<int64_t> many_values(100000);
  std::iota(many_values.begin(), many_values.end(), int64_t{1});
  for (int k = 0; k < 3; ++k)
    for (int r = 0; r < n; ++r) clump::rpc_ff(r, add_all, many_values);
  const int64_t want_big = int64_t{3} * n * (100000LL * 100001 / 2);
  rt.wait_until([&] { return big_ff_sum >= want_big; });
  CHECK(big_ff_sum == want_big, "rpc_ff in pieces: sum %lld", static_cast<long long>(big_ff_sum));

  // Many calls in flight at once, answered in any order.
  std::vector<clump::future<int>> many;
  for (int i = 0; i < 5000; ++i) many.push_back(clump::rpc(i % n, add, i, 1));
  auto all = clump::when_all(std::move(many)).wait();
  bool right = true;
  for (int i = 0; i < 5000; ++i) right = right && all[static_cast<size_t>(i)] == i + 1;
  CHECK(right, "5000 rpcs in flight");
  CHECK(clump::async_detail::operations_in_flight() == 0, "%zu operations left in flight",
        clump::async_detail::operations_in_flight());
  rt.barrier();
  return failures;
}

// ---- gas futures and coroutines -------------------------------------------------------

clump::future<int64_t> walk(gas::global_ptr<int64_t> base, int n, int start, int steps, gas::global_ptr<int64_t> counter) {
  // Follows a chain of pointers through every rank's array, counting each visit.
  int64_t at = start, sum = 0;
  for (int s = 0; s < steps; ++s) {
    const int owner = static_cast<int>(at % n);
    const int64_t next = co_await gas::rget(base.on(owner) + static_cast<std::ptrdiff_t>(at / n));
    (void)co_await gas::rfetch_add(counter.on(owner), int64_t{1});
    sum += next;
    at = next;
  }
  co_return sum;
}

int scenario_gas(clump::runtime& rt) {
  gas::space gs(rt);
  const int me = gs.rank(), n = gs.size();
  constexpr int per = 256;
  auto base = gas::all_alloc<int64_t>(per);
  auto counter = gas::all_alloc<int64_t>();
  auto words = gas::all_alloc<uint32_t>(4);
  auto area = gas::all_alloc<std::byte>(3 << 20);
  // Element i (on rank i % n) holds (i * 7 + 3) % (per * n): a permutation walk.
  for (int k = 0; k < per; ++k) base.local()[k] = (static_cast<int64_t>(k * n + me) * 7 + 3) % (per * n);
  *counter.local() = 0;
  for (int k = 0; k < 4; ++k) words.local()[k] = 0;
  gas::barrier();

  // Single values, every rank, every type.
  for (int r = 0; r < n; ++r) {
    const int64_t want = (static_cast<int64_t>(5 * n + r) * 7 + 3) % (per * n);
    CHECK(gas::rget(base.on(r) + 5).wait() == want, "rget from %d", r);
  }
  // Bulk: sizes about the pieces, odd alignments, into and out of every rank.
  const int right = (me + 1) % n;
  const size_t sizes[] = {0, 1, 7, clump::max_medium() - 1, clump::max_medium() + 3, (1u << 20) + 5, 3u << 20};
  std::vector<std::byte> out(3 << 20), in(3 << 20);
  for (size_t s : sizes) {
    const size_t at = s >= (3u << 20) ? 0 : 3;
    for (size_t i = 0; i < s; ++i) out[i] = static_cast<std::byte>((i * 31 + s + static_cast<size_t>(me)) & 0xff);
    gas::rput(area.on(right) + static_cast<std::ptrdiff_t>(at), out.data(), s).wait();
    std::fill(in.begin(), in.end(), std::byte{0});
    gas::rget(in.data(), area.on(right) + static_cast<std::ptrdiff_t>(at), s).wait();
    CHECK(s == 0 || std::memcmp(in.data(), out.data(), s) == 0, "%zu bytes to and from rank %d", s, right);
  }
  gas::barrier();

  // Atomics through futures, all in flight at once: counts are exact.
  std::vector<clump::future<uint32_t>> adds;
  for (int i = 0; i < 1000; ++i) adds.push_back(gas::rfetch_add(words.on(i % n), uint32_t{1}));
  auto olds = clump::when_all(std::move(adds)).wait();
  CHECK(olds.size() == 1000, "1000 answers");
  gas::barrier();
  for (int r = 0; r < n; ++r) {
    const uint32_t got = gas::read(words.on(r));
    uint32_t want = 0;
    for (int i = 0; i < 1000; ++i) want += i % n == r;
    CHECK(got == want * static_cast<uint32_t>(n), "rank %d's counter %u, want %u", r, got, want * n);
  }
  if (me == 0) {
    CHECK(gas::rcompare_swap(words.on(n - 1) + 1, uint32_t{0}, uint32_t{9}).wait() == 0, "compare_swap old");
    CHECK(gas::rswap(words.on(n - 1) + 1, uint32_t{4}).wait() == 9, "swap old");
    CHECK(gas::rget(words.on(n - 1) + 1).wait() == 4, "swapped in");
  }
  gas::barrier();

  // Thousands of coroutines at once, each a walk of remote reads and atomics.
  constexpr int walks = 2000, steps = 5;
  std::vector<clump::future<int64_t>> tasks;
  for (int w = 0; w < walks; ++w) tasks.push_back(walk(base, n, (w * 13 + me) % (per * n), steps, counter));
  const auto sums = clump::when_all(std::move(tasks)).wait();
  bool same = true;
  for (int w = 0; w < walks; ++w) {
    int64_t at = (w * 13 + me) % (per * n), sum = 0;
    for (int s = 0; s < steps; ++s) at = (at * 7 + 3) % (per * n), sum += at;
    same = same && sums[static_cast<size_t>(w)] == sum;
  }
  CHECK(same, "every walk's sum");
  gas::barrier();
  int64_t visits = 0;
  for (int r = 0; r < n; ++r) visits += gas::read(counter.on(r));
  CHECK(visits == int64_t{walks} * steps * n, "visits %lld", static_cast<long long>(visits));
  // sync() still works beside the futures.
  int64_t plain = 0;
  gas::get(&plain, base.on(right));
  gas::sync();
  CHECK(plain == (static_cast<int64_t>(right) * 7 + 3) % (per * n), "get with sync");
  CHECK(clump::async_detail::operations_in_flight() == 0, "%zu operations left in flight",
        clump::async_detail::operations_in_flight());
  // A bad pointer throws at once, as the blocking forms do.
  bool threw = false;
  try {
    (void)gas::rget(gas::global_ptr<int64_t>(n, 64));
  } catch (const clump::error&) {
    threw = true;
  }
  CHECK(threw, "rget from a rank outside the job throws");
  gas::barrier();
  return failures;
}

// ---- a rank that dies ----------------------------------------------------------------

int scenario_dead(clump::runtime& rt) {
  // The last rank leaves without a word (run with --keep-going); the others'
  // rpcs and gets to it fail with an error naming it, and nothing hangs;
  // calls between the living go on. Before it leaves it asks rank 0 for a
  // big result that it never fetches: rank 0 lets go of it once the
  // failure is known.
  clump::async_engine engine(rt);
  gas::space gs(rt);
  auto cell = gas::all_alloc<int64_t>();
  const int victim = rt.size() - 1;
  std::vector<pid_t> pids(static_cast<size_t>(rt.size()));
  pid_t mine = getpid();
  rt.allgather(&mine, pids.data(), sizeof mine);
  rt.barrier();
  const size_t big = 4 * clump::max_medium() + 3;
  // The victim leaves only once every other rank is past that barrier
  // (clumprun ends the job when a rank exits while another waits for it in
  // a collective; the victim's calls below are answered even inside one).
  if (rt.rank() != victim) clump::rpc_ff(victim, is_past);
  // Rank 0 says it has made the big result through a file (the launcher's
  // pid names it): the victim must not poll once it has called, or the
  // answer would arrive and its fetch start at the end of that poll.
  const char* launcher = std::getenv("CLUMP_LAUNCHER_PID");
  const std::string made = std::string("/tmp/clump-async-dead-") + (launcher ? launcher : "0");
  if (rt.rank() == victim) {
    rt.wait_until([&] { return past == victim; });
    auto never_fetched = clump::rpc(0, make_big, uint64_t{big});
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (access(made.c_str(), F_OK) != 0 && std::chrono::steady_clock::now() < give_up)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // looks at the file, not the network
    std::fflush(nullptr);
    std::_Exit(0);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  bool told = false;
  while (kill(pids[static_cast<size_t>(victim)], 0) == 0 && std::chrono::steady_clock::now() < deadline) {
    rt.bundle().poll();  // (rank 0 answers the victim's calls meanwhile)
    if (rt.rank() == 0 && big_served == 1 && !told) {
      told = true;
      if (FILE* f = std::fopen(made.c_str(), "w")) std::fclose(f);
    }
  }
  if (told) std::remove(made.c_str());
  const size_t kept_at_death = engine.kept_bytes();
  const auto t0 = std::chrono::steady_clock::now();
  std::string e = error_of(clump::rpc(victim, add, 1, 2));
  const std::string who = "rank " + std::to_string(victim);
  CHECK(has(e, who.c_str()) && has(e, "add"), "rpc to the dead rank: %s", e.c_str());
  if (!cell.on(victim).is_local()) {  // (on this node its memory is still mapped: the read is a load)
    e = error_of(gas::rget(cell.on(victim)));
    CHECK(has(e, who.c_str()), "rget from the dead rank: %s", e.c_str());
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(secs < 20, "took %.1f s", secs);
  if (victim > 1) CHECK(clump::rpc(1 - rt.rank() + 0, add, 2, 2).wait() == 4, "rpc between the living");
  if (rt.rank() == 0) {
    CHECK(big_served == 1 && kept_at_death >= big, "rank 0 made %d big results and kept %zu bytes when rank %d died",
          big_served, kept_at_death, victim);
    // (Its failure is known here: the rpc to it failed.)
    clump::progress();
    CHECK(engine.kept_bytes() == 0, "%zu bytes still kept for rank %d after its failure", engine.kept_bytes(), victim);
  }
  std::printf("dead: rank %d's calls to rank %d failed in %.2f s: %s\n", rt.rank(), victim, secs, e.c_str());
  // No rank leaves before rank 0 is past every collective (clumprun ends the
  // job when a rank exits while another waits for it in one).
  // Each says so to rank 0 once it is past them (an rpc is answered even
  // inside a barrier, so the answer alone would not show it), and rank 0
  // lets them go once all have.
  // The failure is handled: the waits below must not end because of it
  // (a wait ends with an error when a rank has failed and nothing arrived
  // for a second, and rank 0's own checks take that long).
  clump::acknowledge_failures();
  if (rt.rank() == 0) {
    rt.wait_until([&] { return finished == victim - 1; });
    for (int r = 1; r < victim; ++r) clump::rpc(r, release).wait();
  } else {
    clump::rpc(0, finish).wait();
    rt.wait_until([] { return released; });
    // The answer to release may not have left yet (it is sent at the end of
    // the poll that ran it, or later if packed): leaving now failed rank 0's
    // wait for it (3 jobs in 150, 3 at a time). Rank 0 leaves once it has
    // it; until then this rank polls on (its process looked at, as the
    // victim's above).
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (kill(pids[0], 0) == 0 && std::chrono::steady_clock::now() < until) rt.bundle().poll();
  }
  std::fflush(nullptr);
  std::_Exit(failures ? 1 : 0);  // the engine's and runtime's barriers would wait for the victim
}

}  // namespace

int main(int argc, char** argv) try {
  clump::runtime rt{argc, argv};
  my_rank = rt.rank();
  const std::string what = argc > 1 ? argv[1] : "";
  int failed = 0;
  if (what == "futures") failed = scenario_futures();
  else if (what == "rpc") failed = scenario_rpc(rt);
  else if (what == "gas") failed = scenario_gas(rt);
  else if (what == "dead") failed = rt.size() >= 2 ? scenario_dead(rt) : (std::fprintf(stderr, "dead needs 2 ranks\n"), 1);
  else {
    std::fprintf(stderr, "unknown scenario %s\n", what.c_str());
    return 2;
  }
  if (failed) std::fprintf(stderr, "rank %d: %d checks failed\n", rt.rank(), failed);
  else std::printf("rank %d: %s passed\n", rt.rank(), what.c_str());
  return failed ? 1 : 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "rank %d: %s\n", my_rank, e.what());
  return 1;
}
