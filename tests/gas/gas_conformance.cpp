// The gas conformance program: one scenario per run, chosen by argv[1], run
// under clumprun by gas_test.cpp with 1 to 4 ranks, on one node, on emulated
// nodes and over the network protocol. Every check compares with a reference
// computed here; a failed check prints what was expected, and the program
// exits non-zero.

#include <clump/clump.hpp>
#include <clump/gas.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace gas = clump::gas;
using clock_type = std::chrono::steady_clock;

#include "check.hpp"

namespace {

using clump::test::failures;
using clump::test::my_rank;

std::byte pattern(size_t i, uint32_t seed) { return static_cast<std::byte>((i * 131 + seed * 7 + (i >> 9)) & 0xff); }

/// True when p holds seed's pattern; else says on stderr which bytes differ
/// and what they hold instead (zeros, or another seed's pattern), which
/// tells a late, lost or stale transfer apart.
bool matches(const std::byte* p, size_t n, uint32_t seed) {
  size_t first = n, last = 0, bad = 0, zeros = 0;
  for (size_t i = 0; i < n; ++i)
    if (p[i] != pattern(i, seed)) {
      if (first == n) first = i;
      last = i;
      ++bad;
      zeros += p[i] == std::byte{0};
    }
  if (!bad) return true;
  long other = -1;  // a seed whose pattern the first 64 wrong bytes hold
  for (uint32_t s = 0; s < 100000 && other < 0; ++s) {
    bool all = s != seed;
    for (size_t i = first; all && i < std::min(last + 1, first + 64); ++i) all = p[i] == pattern(i, s);
    if (all) other = s;
  }
  std::fprintf(stderr,
               "rank %d: %zu of %zu bytes differ from seed %u's pattern, from byte %zu to %zu; %zu of those are 0; the "
               "first ones hold seed %ld's pattern (-1: none)\n",
               my_rank, bad, n, seed, first, last, zeros, other);
  for (size_t i = first; i < std::min(last + 1, first + 16); ++i)
    std::fprintf(stderr, " %02x/%02x", static_cast<unsigned>(p[i]), static_cast<unsigned>(pattern(i, seed)));
  std::fprintf(stderr, " (held/meant from byte %zu)\n", first);
  return false;
}

void fill(std::byte* p, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; ++i) p[i] = pattern(i, seed);
}

// Spins without polling: the process does not answer anything meanwhile.
void compute_for(std::chrono::milliseconds d) {
  const auto until = clock_type::now() + d;
  while (clock_type::now() < until) {
  }
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now().time_since_epoch()).count();
}

struct pod {
  int32_t a;
  double b;
  char c[5];
  bool operator==(const pod&) const = default;
};

// ---- single values of every type ---------------------------------------------

template <class T>
void one_type(gas::space& gs, T (*value)(int rank, int i)) {
  const int me = gs.rank(), n = gs.size();
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  auto cells = gas::all_alloc<T>(3);
  for (int i = 0; i < 3; ++i) gas::write(cells.on(right) + i, value(me, i));
  gas::barrier();
  for (int i = 0; i < 3; ++i) {
    T got = gas::read(cells.on(left) + i);  // what left's left wrote there
    const int writer = (left + n - 1) % n;
    CHECK(got == value(writer, i), "read of element %d at rank %d (%zu-byte type)", i, left, sizeof(T));
    T mine{};
    std::memcpy(&mine, gs.segment().data() + (cells + i).offset(), sizeof mine);
    CHECK(mine == value(left, i), "element %d written here by rank %d (%zu-byte type)", i, left, sizeof(T));
  }
  gas::barrier();
}

template <class T>
T int_value(int rank, int i) {
  return static_cast<T>(static_cast<int64_t>(rank * 1000003 + i * 77 + 1) * (i % 2 ? -1 : 1));
}

int scenario_values(gas::space& gs) {
  one_type<int8_t>(gs, int_value<int8_t>);
  one_type<uint8_t>(gs, int_value<uint8_t>);
  one_type<int16_t>(gs, int_value<int16_t>);
  one_type<int32_t>(gs, int_value<int32_t>);
  one_type<uint32_t>(gs, int_value<uint32_t>);
  one_type<int64_t>(gs, [](int r, int i) { return (int64_t{r} << 40) + i * 3 - 7; });
  one_type<uint64_t>(gs, [](int r, int i) { return ~uint64_t{0} - static_cast<uint64_t>(r * 5 + i); });
  one_type<float>(gs, [](int r, int i) { return 0.5f * static_cast<float>(r) - static_cast<float>(i); });
  one_type<double>(gs, [](int r, int i) { return 1e300 / (r + 1) + i; });
  one_type<pod>(gs, [](int r, int i) { return pod{r, r * 0.25 + i, {'g', 'a', static_cast<char>('0' + i), 's', 0}}; });
  return failures;
}

// ---- bulk transfers at odd alignments ----------------------------------------------

int scenario_bulk(gas::space& gs) {
  const int me = gs.rank(), n = gs.size();
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  const size_t sizes[] = {0, 1, 7, 4095, 65536 + 3, (size_t{1} << 20) + 17, 3 << 20};
  const size_t biggest = (3 << 20) + 64;
  auto area = gas::all_alloc<std::byte>(biggest);
  std::vector<std::byte> out(biggest), in(biggest);
  int round = 0;
  for (size_t len : sizes) {
    for (size_t skew : {size_t{0}, size_t{3}, size_t{61}}) {
      const uint32_t seed = static_cast<uint32_t>(me * 100 + round);
      // put to the right, at an odd offset, from an odd source address
      fill(out.data() + skew, len, seed);
      gas::put(area.on(right) + static_cast<std::ptrdiff_t>(skew), out.data() + skew, len);
      std::memset(out.data() + skew, 0xee, len);  // put's source may be reused at once
      gas::sync();
      gas::barrier();
      const uint32_t left_seed = static_cast<uint32_t>(left * 100 + round);
      CHECK(matches(gs.segment().data() + area.offset() + skew, len, left_seed), "put of %zu bytes at +%zu from rank %d",
            len, skew, left);
      // get it back from the left neighbour's area (what its left put there), into an odd address
      std::memset(in.data(), 0, len + 64);
      gas::get(in.data() + (skew ^ 5), area.on(left) + static_cast<std::ptrdiff_t>(skew), len);
      gas::sync();
      const int writer = (left + n - 1) % n;
      CHECK(matches(in.data() + (skew ^ 5), len, static_cast<uint32_t>(writer * 100 + round)),
            "get of %zu bytes at +%zu from rank %d", len, skew, left);
      // The blocking bulk forms: write it back to the left (once the left
      // has checked its area: a barrier), read it again.
      gas::barrier();
      gas::write(area.on(left) + static_cast<std::ptrdiff_t>(skew), in.data() + (skew ^ 5), len);
      std::memset(in.data(), 0, len + 64);
      gas::read(in.data(), area.on(left) + static_cast<std::ptrdiff_t>(skew), len);
      CHECK(matches(in.data(), len, static_cast<uint32_t>(writer * 100 + round)), "blocking bulk read of %zu bytes", len);
      gas::barrier();
      ++round;
    }
  }
  return failures;
}

// ---- stores and their counts ---------------------------------------------------------

int scenario_store(gas::space& gs) {
  const int me = gs.rank(), n = gs.size();
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  // To the right in pieces; the right waits for exactly that many bytes.
  const size_t piece = 10007, pieces = 40;
  auto area = gas::all_alloc<std::byte>(piece * pieces);
  std::vector<std::byte> src(piece);
  for (size_t k = 0; k < pieces; ++k) {
    fill(src.data(), piece, static_cast<uint32_t>(me * 1000 + k));
    gas::store(area.on(right) + static_cast<std::ptrdiff_t>(k * piece), src.data(), piece);
  }
  gas::store_sync(piece * pieces);
  for (size_t k = 0; k < pieces; ++k)
    CHECK(matches(gs.segment().data() + area.offset() + k * piece, piece, static_cast<uint32_t>(left * 1000 + k)),
          "stored piece %zu from rank %d", k, left);
  gas::barrier();

  // Everybody to everybody (itself too), then all_store_sync.
  auto grid = gas::all_alloc<uint64_t>(static_cast<size_t>(n) * 64);
  std::vector<uint64_t> row(64);
  for (int t = 0; t < n; ++t) {
    for (size_t i = 0; i < row.size(); ++i) row[i] = (uint64_t(me) << 32) + uint64_t(t) * 1000 + i;
    gas::store(grid.on(t) + me * 64, row.data(), row.size());
  }
  gas::all_store_sync();
  for (int s = 0; s < n; ++s)
    for (size_t i = 0; i < 64; ++i) {
      uint64_t v;
      std::memcpy(&v, gs.segment().data() + (grid + s * 64 + static_cast<std::ptrdiff_t>(i)).offset(), sizeof v);
      CHECK(v == (uint64_t(s) << 32) + uint64_t(me) * 1000 + i, "all_store_sync: element %zu from rank %d", i, s);
    }
  // The counts start again after all_store_sync: one more round with store_sync.
  auto extra = gas::all_alloc<uint64_t>(1);
  const uint64_t value = 0xabcdef00u + static_cast<uint64_t>(me);
  gas::store(extra.on(right), &value, 1);
  gas::store_sync(sizeof value);
  uint64_t got;
  std::memcpy(&got, gs.segment().data() + extra.offset(), sizeof got);
  CHECK(got == 0xabcdef00u + static_cast<uint64_t>(left), "store after all_store_sync");
  gas::barrier();
  return failures;
}

// ---- no early completion: the other side is busy ---------------------------------------

// Rank 0 works against the last rank, which computes for a while without
// polling. sync() after a put or get, and store_sync() while the store is
// late, must not return before the data is there.
int scenario_late(gas::space& gs) {
  const int me = gs.rank(), n = gs.size();
  const int last = n - 1;
  const size_t len = 300000;
  auto area = gas::all_alloc<std::byte>(len);
  auto stamp = gas::all_alloc<int64_t>(1);
  std::vector<std::byte> buf(len);
  if (n == 1) return failures;
  if (me == last) fill(gs.segment().data() + area.offset(), len, 99);
  gas::barrier();
  const auto busy = std::chrono::milliseconds(300);
  // 1. get from a busy target.
  if (me == last) {
    compute_for(busy);
    const int64_t resumed = now_ns();
    gas::put(stamp.on(0), &resumed, 1);
  } else if (me == 0) {
    gas::get(buf.data(), area.on(last), len);
    gas::sync();
    CHECK(matches(buf.data(), len, 99), "get from a busy rank");
  }
  gas::barrier();
  // 2. put to a busy target: sync returns after the target took it (over the
  // network: after it resumed polling). The target says it is busy (a store
  // rank 0 waits for) before it computes, so the put arrives meanwhile.
  auto busy_flag = gas::all_alloc<int64_t>(1);
  if (me == last) {
    const int64_t one = 1;
    gas::store(busy_flag.on(0), &one, 1);
    compute_for(busy);
    const int64_t resumed = now_ns();
    gas::put(stamp.on(0), &resumed, 1);
  } else if (me == 0) {
    gas::store_sync(sizeof(int64_t));
    fill(buf.data(), len, 5);
    gas::put(area.on(last), buf.data(), len);
    gas::sync();
    const int64_t synced = now_ns();
    gas::barrier();
    int64_t resumed = 0;
    std::memcpy(&resumed, gs.segment().data() + stamp.offset(), sizeof resumed);
    // A put into a process of this node is done when put returns; over the
    // network sync must wait for the target.
    if (!area.on(last).is_local()) CHECK(synced >= resumed, "sync returned %lld ns before the target took the put", (long long)(resumed - synced));
  }
  if (me != 0) gas::barrier();
  if (me == last) CHECK(matches(gs.segment().data() + area.offset(), len, 5), "put to a busy rank");
  gas::barrier();
  // 3. store_sync while the store is late.
  if (me == 0) {
    compute_for(busy);
    fill(buf.data(), len, 77);
    gas::store(area.on(last), buf.data(), len);
  } else if (me == last) {
    gas::store_sync(len);
    CHECK(matches(gs.segment().data() + area.offset(), len, 77), "store_sync returned before the store landed");
  }
  gas::barrier();
  return failures;
}

// ---- pointers and allocation ---------------------------------------------------------

int scenario_memory(gas::space& gs) {
  const int me = gs.rank(), n = gs.size();
  auto a = gas::all_alloc<int32_t>(10);
  auto b = gas::all_alloc<double>(3);
  // Same offsets everywhere.
  std::vector<uint64_t> mine = {a.offset(), b.offset()}, all(2 * static_cast<size_t>(n));
  gs.owner().allgather(mine.data(), all.data(), sizeof(uint64_t) * 2);
  for (int r = 0; r < n; ++r)
    CHECK(all[2 * r] == a.offset() && all[2 * r + 1] == b.offset(), "all_alloc offsets differ on rank %d", r);
  CHECK(b.offset() % alignof(double) == 0, "all_alloc alignment");
  // Arithmetic and comparison.
  auto p = a + 4;
  CHECK(p - a == 4 && p > a && (p - 4) == a && (++p - a) == 5, "pointer arithmetic");
  CHECK(a.on(0) < a.on(n - 1) || n == 1, "ordered by rank first");
  CHECK(!gas::global_ptr<int>() && gas::global_ptr<int>().is_null(), "default is null");
  // Own memory: local() and to_global() agree.
  int32_t* l = a.local();
  CHECK(gas::to_global(l) == a && gas::to_global(l + 3) == a + 3, "to_global(local())");
  l[2] = 12345;
  CHECK(gas::read(a + 2) == 12345, "read of own memory");
  // Per-process allocation: blocks, reuse after free.
  auto x = gas::alloc<char>(1000);
  auto y = gas::alloc<int64_t>(10);
  CHECK(x.offset() != y.offset() && y.offset() % 8 == 0 && x.rank() == me, "alloc");
  gas::free(x);
  auto z = gas::alloc<char>(500);
  CHECK(z.offset() >= x.offset() && z.offset() < x.offset() + 1000, "alloc reuses freed memory");
  gas::free(y);
  gas::free(z);
  bool threw = false;
  try {
    gas::all_alloc<std::byte>(gs.segment().size());
  } catch (const clump::error&) {
    threw = true;
  }
  CHECK(threw, "all_alloc beyond the segment throws");
  gas::barrier();
  return failures;
}

// ---- bad pointers ----------------------------------------------------------------------

int scenario_errors(gas::space& gs) {
  const int me = gs.rank(), n = gs.size();
  auto cell = gas::all_alloc<int64_t>(1);
  int64_t v = 7;
  auto expect_error = [&](const char* what, auto&& f, const char* says) {
    try {
      f();
      CHECK(false, "%s did not throw", what);
    } catch (const clump::error& e) {
      CHECK(std::strstr(e.what(), says) != nullptr, "%s: the message says \"%s\"", what, e.what());
    }
  };
  expect_error("write through null", [&] { gas::write(gas::global_ptr<int64_t>(), v); }, "null global pointer");
  expect_error("read of rank n", [&] { (void)gas::read(cell.on(n)); }, "is outside the job");
  expect_error("put past the segment", [&] { gas::put(cell.on(me) + static_cast<std::ptrdiff_t>(gs.segment().size()), &v, 1); },
               "outside its segment");
  expect_error("store over the end", [&] {
    gas::store(gas::global_ptr<int64_t>(me, gs.segment().size() - 4), &v, 1);
  }, "outside its segment");
  expect_error("get of the control line", [&] { gas::get(&v, gas::global_ptr<int64_t>(me, 0), 1); }, "outside its segment");
  expect_error("to_global of a stack address", [&] { (void)gas::to_global(&v); }, "not inside this process's segment");
  gas::barrier();
  // Nothing was written.
  int64_t here = -1;
  std::memcpy(&here, gs.segment().data() + cell.offset(), sizeof here);
  CHECK(here == 0, "a refused write changed memory (%lld)", (long long)here);
  return failures;
}

// ---- atomics under contention from every rank ------------------------------------------

// An atomic procedure: appends `argument` to the list at `target` (a count,
// then the items) and returns its index.
uint64_t push(std::byte* target, uint64_t argument) {
  uint64_t count;
  std::memcpy(&count, target, sizeof count);
  std::memcpy(target + 8 + count * 8, &argument, sizeof argument);
  ++count;
  std::memcpy(target, &count, sizeof count);
  return count - 1;
}

int scenario_atomics(gas::space& gs) {
  const int me = gs.rank(), n = gs.size();
  const int k = 400;
  auto words = gas::all_alloc<int64_t>(4);
  auto small = gas::all_alloc<int32_t>(4);
  auto bits = gas::all_alloc<uint64_t>(2);
  auto cas = gas::all_alloc<uint32_t>(1);
  // Every rank works on rank 0's words (and the last rank's, for 32-bit).
  const int home = 0, home32 = n - 1;
  std::vector<int64_t> olds;
  for (int i = 0; i < k; ++i) olds.push_back(gas::fetch_add(words.on(home), int64_t{1}));
  for (int i = 0; i < k; ++i) (void)gas::fetch_add(words.on(home) + 1, int64_t{me + 1});
  (void)gas::fetch_min(small.on(home32), int32_t{-1000 * me - 7});
  (void)gas::fetch_max(small.on(home32) + 1, int32_t{1000 * me + 7});
  (void)gas::fetch_or(bits.on(home), uint64_t{1} << me);
  (void)gas::fetch_xor(bits.on(home) + 1, uint64_t{1} << me);
  (void)gas::fetch_xor(bits.on(home) + 1, uint64_t{3} << (2 * me));
  // A counter made of compare_swap loops.
  for (int i = 0; i < k; ++i) {
    uint32_t seen = gas::read(cas.on(home32));
    for (uint32_t old; (old = gas::compare_swap(cas.on(home32), seen, seen + 1)) != seen;) seen = old;
  }
  const int64_t swapped = gas::swap(words.on(home) + 2, int64_t{me + 100});
  gas::barrier();
  // fetch_add's old values: every one of 0 .. n*k-1 exactly once.
  std::vector<int64_t> all(static_cast<size_t>(n * k));
  gs.owner().allgather(olds.data(), all.data(), sizeof(int64_t) * static_cast<size_t>(k));
  std::vector<bool> seen(static_cast<size_t>(n * k), false);
  bool unique = true;
  for (int64_t v : all) {
    if (v < 0 || v >= n * k || seen[static_cast<size_t>(v)]) unique = false;
    else seen[static_cast<size_t>(v)] = true;
  }
  CHECK(unique, "fetch_add returned every old value once");
  CHECK(gas::read(words.on(home)) == n * k, "fetch_add total");
  CHECK(gas::read(words.on(home) + 1) == int64_t{k} * n * (n + 1) / 2, "weighted fetch_add total");
  CHECK(gas::read(small.on(home32)) == -1000 * (n - 1) - 7, "fetch_min %d", gas::read(small.on(home32)));
  CHECK(gas::read(small.on(home32) + 1) == 1000 * (n - 1) + 7, "fetch_max");
  CHECK(gas::read(bits.on(home)) == (n == 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1), "fetch_or");
  uint64_t x = 0;
  for (int r = 0; r < n; ++r) x ^= (uint64_t{1} << r) ^ (uint64_t{3} << (2 * r));
  CHECK(gas::read(bits.on(home) + 1) == x, "fetch_xor");
  CHECK(gas::read(cas.on(home32)) == static_cast<uint32_t>(n * k), "compare_swap counter");
  // swap: the old values and the final one are 0 (the start) and every rank's value, once each.
  std::vector<int64_t> swaps(static_cast<size_t>(n));
  gs.owner().allgather(&swapped, swaps.data(), sizeof swapped);
  swaps.push_back(gas::read(words.on(home) + 2));
  std::sort(swaps.begin(), swaps.end());
  std::vector<int64_t> want{0};
  for (int r = 0; r < n; ++r) want.push_back(r + 100);
  CHECK(swaps == want, "swap chain");
  // fetch_and clears what or set; a misaligned word is refused.
  gas::barrier();
  (void)gas::fetch_and(bits.on(home), ~(uint64_t{1} << me));
  gas::barrier();
  CHECK(gas::read(bits.on(home)) == 0, "fetch_and");
  bool threw = false;
  try {
    (void)gas::fetch_add((words.on(home).cast<std::byte>() + 4).cast<int64_t>(), int64_t{1});
  } catch (const clump::error& e) {
    threw = std::strstr(e.what(), "not aligned") != nullptr;
  }
  CHECK(threw, "a misaligned atomic is refused");

  // An atomic procedure, under contention, beside plain atomics on the same rank.
  const int proc = gas::register_atomic_procedure(&push);
  auto list = gas::all_alloc<uint64_t>(1 + static_cast<size_t>(n * k));
  std::vector<uint64_t> index;
  for (int i = 0; i < k; ++i) index.push_back(gas::call_atomic(proc, list.on(home), uint64_t(me) * 100000 + i));
  for (int i = 0; i < k; ++i) (void)gas::fetch_add(words.on(home) + 3, int64_t{1});
  gas::barrier();
  CHECK(gas::read(list.on(home)) == static_cast<uint64_t>(n * k), "procedure count");
  std::vector<uint64_t> items(static_cast<size_t>(n * k));
  gas::get(items.data(), list.on(home) + 1, items.size());
  gas::sync();
  std::sort(items.begin(), items.end());
  bool all_there = true;
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < k; ++i) all_there &= items[static_cast<size_t>(r * k + i)] == uint64_t(r) * 100000 + i;
  CHECK(all_there, "every pushed item once");
  CHECK(gas::read(words.on(home) + 3) == n * k, "plain atomics beside procedures");
  gas::barrier();
  return failures;
}

// ---- collectives with every root and odd sizes ------------------------------------------

int scenario_collectives(gas::space& gs) {
  const int me = gs.rank(), n = gs.size();
  // Barriers in a row, with a counter that must not run ahead.
  auto ticks = gas::all_alloc<int64_t>(1);
  for (int round = 1; round <= 20; ++round) {
    (void)gas::fetch_add(ticks.on(0), int64_t{1});
    gas::barrier();
    CHECK(gas::read(ticks.on(0)) == int64_t{round} * n, "barrier round %d let a rank through early", round);
    gas::barrier();
  }
  // Broadcast from every root, odd sizes.
  for (size_t len : {size_t{0}, size_t{1}, size_t{13}, size_t{70001}}) {
    for (int root = 0; root < n; ++root) {
      std::vector<std::byte> buf(len + 1, std::byte{0x5a});
      if (me == root) fill(buf.data(), len, static_cast<uint32_t>(root * 10 + len));
      gas::broadcast(buf.data(), len, root);
      CHECK(matches(buf.data(), len, static_cast<uint32_t>(root * 10 + len)), "broadcast of %zu bytes from %d", len, root);
      CHECK(buf[len] == std::byte{0x5a}, "broadcast wrote past its buffer");
    }
  }
  // All-gather and all-to-all, odd sizes.
  for (size_t len : {size_t{1}, size_t{7}, size_t{5000}}) {
    std::vector<std::byte> mine(len), all(len * static_cast<size_t>(n));
    fill(mine.data(), len, static_cast<uint32_t>(me + len));
    gas::all_gather(mine.data(), all.data(), len);
    for (int r = 0; r < n; ++r)
      CHECK(matches(all.data() + static_cast<size_t>(r) * len, len, static_cast<uint32_t>(r + len)), "all_gather %zu from %d", len, r);
    std::vector<std::byte> src(len * static_cast<size_t>(n)), dst(len * static_cast<size_t>(n));
    for (int t = 0; t < n; ++t) fill(src.data() + static_cast<size_t>(t) * len, len, static_cast<uint32_t>(me * 100 + t));
    gas::all_to_all(src.data(), dst.data(), len);
    for (int r = 0; r < n; ++r)
      CHECK(matches(dst.data() + static_cast<size_t>(r) * len, len, static_cast<uint32_t>(r * 100 + me)), "all_to_all %zu from %d", len, r);
  }
  // All-to-all with a different count for every pair (some zero).
  std::vector<size_t> counts(static_cast<size_t>(n));
  std::vector<int32_t> send;
  for (int t = 0; t < n; ++t) {
    counts[static_cast<size_t>(t)] = static_cast<size_t>((me * 3 + t * 5) % 7);
    for (size_t i = 0; i < counts[static_cast<size_t>(t)]; ++i) send.push_back(me * 10000 + t * 100 + static_cast<int32_t>(i));
  }
  std::vector<size_t> got_counts;
  auto got = gas::all_to_all_v(std::span<const int32_t>(send), std::span<const size_t>(counts), &got_counts);
  std::vector<int32_t> want;
  for (int s = 0; s < n; ++s) {
    const size_t c = static_cast<size_t>((s * 3 + me * 5) % 7);
    CHECK(got_counts[static_cast<size_t>(s)] == c, "all_to_all_v count from %d", s);
    for (size_t i = 0; i < c; ++i) want.push_back(s * 10000 + me * 100 + static_cast<int32_t>(i));
  }
  CHECK(got == want, "all_to_all_v data");
  // Reductions: sum, min, max and a user operation, integers and doubles.
  std::vector<int64_t> v = {me + 1, -me, int64_t{1} << me, me * me};
  auto sum = v, mn = v, mx = v, orr = v;
  gas::all_reduce(sum.data(), sum.size());
  gas::all_reduce(mn.data(), mn.size(), gas::minimum<int64_t>{});
  gas::all_reduce(mx.data(), mx.size(), gas::maximum<int64_t>{});
  gas::all_reduce(orr.data(), orr.size(), [](int64_t a, int64_t b) { return a | b; });
  int64_t s0 = 0, s3 = 0, or2 = 0;
  for (int r = 0; r < n; ++r) s0 += r + 1, s3 += r * r, or2 |= int64_t{1} << r;
  CHECK(sum[0] == s0 && sum[1] == -int64_t{n} * (n - 1) / 2 && sum[3] == s3, "all_reduce sum");
  CHECK(mn[0] == 1 && mn[1] == -(n - 1) && mx[0] == n && mx[3] == int64_t{n - 1} * (n - 1), "all_reduce min/max");
  CHECK(orr[2] == or2, "all_reduce with a user operation");
  double d = 1.0 / (me + 3);
  gas::all_reduce(&d, 1);
  double dref = 0;
  for (int r = 0; r < n; ++r) dref += 1.0 / (r + 3);
  CHECK(std::abs(d - dref) <= 1e-15 * dref, "all_reduce of doubles (%.17g, expected %.17g)", d, dref);
  std::vector<double> everyone(static_cast<size_t>(n));
  gas::all_gather(&d, everyone.data());
  for (int r = 0; r < n; ++r) CHECK(everyone[static_cast<size_t>(r)] == d, "all_reduce differs on rank %d", r);
  std::vector<int64_t> big(5000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<int64_t>(i) * (me + 1);
  gas::all_reduce(big.data(), big.size());
  bool big_ok = true;
  for (size_t i = 0; i < big.size(); ++i) big_ok &= big[i] == static_cast<int64_t>(i) * n * (n + 1) / 2;
  CHECK(big_ok, "all_reduce of 5000 elements");
  for (int root = 0; root < n; ++root) {
    int64_t x = me + 5;
    gas::reduce(&x, 1, root);
    if (me == root) CHECK(x == int64_t{n} * 5 + int64_t{n} * (n - 1) / 2, "reduce to %d", root);
  }
  gas::barrier();
  return failures;
}

// ---- spread arrays ------------------------------------------------------------------------

int scenario_spread(gas::space& gs) {
  const int me = gs.rank(), n = gs.size();
  for (gas::layout l : {gas::layout::cyclic, gas::layout::blocked}) {
    for (size_t len : {size_t{1}, size_t{10}, size_t{1001}}) {
      gas::spread_array<int64_t> a(len, l);
      // Each rank fills its own share by plain stores...
      auto mine = a.local();
      for (size_t k = 0; k < mine.size(); ++k) mine[k] = static_cast<int64_t>(a.index_of(k)) * 3 + 1;
      size_t total = 0;
      for (int r = 0; r < n; ++r) total += a.count_on(r);
      CHECK(total == len, "shares add up to %zu, not %zu", total, len);
      gas::barrier();
      // ...and every rank reads every element through the global index.
      int64_t sum = 0;
      for (size_t i = 0; i < len; ++i) sum += gas::read(a[i]);
      CHECK(sum == static_cast<int64_t>(3 * (len * (len - 1) / 2) + len), "sum over a %zu-element %s array", len,
            l == gas::layout::cyclic ? "cyclic" : "blocked");
      CHECK(a.owner(len - 1) < n && (l != gas::layout::cyclic || a.owner(len - 1) == static_cast<int>((len - 1) % n)),
            "owner of the last element");
      gas::barrier();
      // Rank 0 writes every element; the owners see it in their shares.
      if (me == 0)
        for (size_t i = 0; i < len; ++i) gas::write(a[i], -static_cast<int64_t>(i));
      gas::barrier();
      for (size_t k = 0; k < mine.size(); ++k)
        CHECK(mine[k] == -static_cast<int64_t>(a.index_of(k)), "element %zu after rank 0 wrote it", a.index_of(k));
      gas::barrier();
    }
  }
  return failures;
}

}  // namespace

// gas::traffic counts each operation once, on the side of the target's
// place: node operations for ranks of this node, messages for the others.
int scenario_traffic(gas::space& gs) {
  const int me = gs.rank(), n = gs.size();
  auto area = gas::all_alloc<std::byte>(4096);
  std::vector<std::byte> buf(4096, std::byte{7});
  gas::barrier();
  gas::reset_traffic();
  gas::traffic_counts want;
  for (int t = 0; t < n; ++t) {
    if (t == me) continue;
    const bool node = area.on(t).is_local();
    gas::put(area.on(t), buf.data(), 1000);  // one long message, or one copy
    gas::get(buf.data(), area.on(t) + 1000, 24);  // one request, or one copy
    gas::store(area.on(t) + 2048, buf.data(), 8);
    (node ? want.node_operations : want.network_messages) += 3;
    (node ? want.node_bytes : want.network_bytes) += 1000 + 24 + 8;
  }
  gas::sync();
  const gas::traffic_counts got = gas::traffic();
  CHECK(got.node_operations == want.node_operations && got.node_bytes == want.node_bytes,
        "node: %llu operations, %llu bytes; expected %llu, %llu", (unsigned long long)got.node_operations,
        (unsigned long long)got.node_bytes, (unsigned long long)want.node_operations,
        (unsigned long long)want.node_bytes);
  CHECK(got.network_messages == want.network_messages && got.network_bytes == want.network_bytes,
        "network: %llu messages, %llu bytes; expected %llu, %llu", (unsigned long long)got.network_messages,
        (unsigned long long)got.network_bytes, (unsigned long long)want.network_messages,
        (unsigned long long)want.network_bytes);
  gas::all_store_sync();
  gas::reset_traffic();
  CHECK(gas::traffic().node_operations == 0 && gas::traffic().network_messages == 0, "reset_traffic");
  return failures;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: gas_conformance values|bulk|store|late|memory|errors|atomics|collectives|spread|traffic\n");
    return 2;
  }
  const std::string what = argv[1];
  clump::runtime rt;
  my_rank = rt.rank();
  gas::space gs(rt);
  int failed = 0;
  if (what == "values") failed = scenario_values(gs);
  else if (what == "bulk") failed = scenario_bulk(gs);
  else if (what == "store") failed = scenario_store(gs);
  else if (what == "late") failed = scenario_late(gs);
  else if (what == "memory") failed = scenario_memory(gs);
  else if (what == "errors") failed = scenario_errors(gs);
  else if (what == "atomics") failed = scenario_atomics(gs);
  else if (what == "collectives") failed = scenario_collectives(gs);
  else if (what == "spread") failed = scenario_spread(gs);
  else if (what == "traffic") failed = scenario_traffic(gs);
  else {
    std::fprintf(stderr, "unknown scenario %s\n", what.c_str());
    return 2;
  }
  if (failed) {
    std::fprintf(stderr, "rank %d: %s: %d checks failed\n", my_rank, what.c_str(), failed);
    return 1;
  }
  std::printf("rank %d: %s passed\n", my_rank, what.c_str());
  return 0;
}
