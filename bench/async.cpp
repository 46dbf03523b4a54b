// async: what futures, coroutines and rpc cost (clump/async.hpp), against the
// active messages and gas operations they are built on, measured in the same
// run; and a distributed hash table's inserts per second.
//
//   clumprun -n 2 --bind core ./async [--reps R] [--only ID,..] [--json FILE]  # round trips, rank 0 to rank 1
//   clumprun -n 4 -N 2 --bind core ./async --dht [--keys K] [--json FILE]  # the hash table, every rank
//
// Round trips (rank 0 to --peer, one at a time; the median of R timed loops):
//   raw      a short request carrying an int, answered by a short reply with
//            the int + 1, rank 0 polling until it is there: what rpc is built on;
//   rpc      clump::rpc(peer, add_one, i).wait();
//   rpc co   the same rpc co_awaited in a coroutine, the loop inside it;
//   get sync gas::get of an int64 on the peer, then gas::sync();
//   get co   co_await gas::rget(p) in a coroutine;
//   rget     gas::rget(p).wait();
//   long     a long request of 1 MiB into the peer's segment, answered by a
//            short reply: what a big rpc's arguments cost at best;
//   rpc args rpc(peer, f, a span of 1 MiB), f answering its size;
//   get long a get of 1 MiB from the peer's segment into ours (AM_GetXfer):
//            what a big result costs at best;
//   get kept the same get, its handler copying the bytes into a new vector:
//            what a program that keeps the bytes pays (the rpc's caller gets
//            a vector). On this machine the copy out slows the peer's next
//            copy in several times: its lines are then in the other core's
//            cache;
//   rpc res  rpc(peer, f, n) returning a vector of n = 1 MiB bytes.
// --only runs the named measures (ids as printed); each needs the one it is compared to named too.
// The hash table (--dht): every rank inserts K keys (uint64 -> uint64) into
// an open-addressing table spread over the ranks by the key's hash, each an
// rpc to its owner with up to --window calls in flight (a vector of futures
// and when_all); the figure is the job's inserts a second, barrier to barrier.
// bench/async-bench runs both beside the same table written with MPI
// one-sided operations (bench/peers/dht_mpi.c, OpenMPI) in the same rounds.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "pingpong_driver.hpp"  // clump's headers, with GCC 12's false warning silenced
#include "report.hpp"

namespace gas = clump::gas;

namespace {

constexpr const char* usage =
    "usage: clumprun -n 2 async [--peer R] [--reps R] [--only ID[,ID...]] [--json FILE]\n"
    "       clumprun -n P async --dht|--dht-gas [--keys K] [--window W] [--reps R] [--json FILE]\n";

struct options {
  int peer = 1;
  int reps = 7;
  bool dht = false;
  bool gas_table = false;  // --dht-gas: the table in the global address space, by atomics
  long keys = 100000;
  long window = 1000;
  std::string json = "bench-async.json";
  std::string only;  // --only: these measures, comma-separated (each with the one it is compared to)
  bool help = false;
};

bool parse(int argc, char** argv, options& o, std::string& err) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](long lo, long hi, long& out) {
      if (i + 1 >= argc) return err = a + " needs a value", false;
      char* end = nullptr;
      const long v = std::strtol(argv[++i], &end, 10);
      if (*end || v < lo || v > hi)
        return err = a + " " + argv[i] + ": a whole number from " + std::to_string(lo) + " to " + std::to_string(hi),
               false;
      out = v;
      return true;
    };
    long v = 0;
    if (a == "--help" || a == "-h") {
      o.help = true;
    } else if (a == "--dht") {
      o.dht = true;
    } else if (a == "--dht-gas") {
      o.dht = o.gas_table = true;
    } else if (a == "--peer") {
      if (!value(0, 1 << 20, v)) return false;
      o.peer = static_cast<int>(v);
    } else if (a == "--reps") {
      if (!value(1, 1000, v)) return false;
      o.reps = static_cast<int>(v);
    } else if (a == "--keys") {
      if (!value(1, 100'000'000, o.keys)) return false;
    } else if (a == "--window") {
      if (!value(1, 1'000'000, o.window)) return false;
    } else if (a == "--only") {
      if (i + 1 >= argc || !*argv[i + 1]) return err = "--only needs measure ids", false;
      o.only = argv[++i];
    } else if (a == "--json") {
      if (i + 1 >= argc) return err = "--json needs a file", false;
      o.json = argv[++i];
    } else {
      return err = "unknown option " + a, false;
    }
  }
  return true;
}

const auto add_one = clump::rpc_function("bench.add_one", [](int v) { return v + 1; });
const auto count_bytes =
    clump::rpc_function("bench.count_bytes", [](std::span<const std::byte> b) { return uint64_t{b.size()}; });
const auto make_bytes = clump::rpc_function("bench.make_bytes", [](uint64_t n) { return std::vector<std::byte>(n); });
constexpr size_t big_bytes = size_t{1} << 20;

// ---- the hash table: open addressing, linear probing, in each rank's memory ----

struct table {
  std::vector<uint64_t> keys, values;  // key 0: empty
  uint64_t mask = 0;
  uint64_t inserted = 0;
  void reset(uint64_t slots) {
    keys.assign(slots, 0);
    values.assign(slots, 0);
    mask = slots - 1;
    inserted = 0;
  }
  bool insert(uint64_t key, uint64_t value) {
    for (uint64_t i = key & mask, probes = 0; probes <= mask; i = (i + 1) & mask, ++probes) {
      if (keys[i] == key || keys[i] == 0) {
        const bool fresh = keys[i] == 0;
        keys[i] = key;
        values[i] = value;
        inserted += fresh;
        return fresh;
      }
    }
    return false;  // full
  }
} local_table;

const auto dht_insert = clump::rpc_function("bench.dht_insert",
                                            [](uint64_t key, uint64_t value) { return local_table.insert(key, value); });

uint64_t mix(uint64_t x) {  // splitmix64: the keys, and their owners
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// --dht-gas: one insert, by compare-and-swap of the key into its slot at the
// owner (the next slot when another key holds it), then a put of the value.
clump::future<bool> gas_insert(gas::global_ptr<uint64_t> keys, gas::global_ptr<uint64_t> values, uint64_t mask,
                               int owner, uint64_t key, uint64_t value) {
  for (uint64_t slot = key & mask, probes = 0; probes <= mask; slot = (slot + 1) & mask, ++probes) {
    const auto at = static_cast<std::ptrdiff_t>(slot);
    const uint64_t old = co_await gas::rcompare_swap(keys.on(owner) + at, uint64_t{0}, key);
    if (old == 0 || old == key) {
      co_await gas::rput(values.on(owner) + at, value);
      co_return old == 0;
    }
  }
  co_return false;
}

clump::future<int> rpc_loop(int peer, long n) {
  int v = 0;
  for (long i = 0; i < n; ++i) v = co_await clump::rpc(peer, add_one, v);
  co_return v;
}

clump::future<int64_t> get_loop(gas::global_ptr<int64_t> p, long n) {
  int64_t sum = 0;
  for (long i = 0; i < n; ++i) sum += co_await gas::rget(p);
  co_return sum;
}

// A measure: a loop of n round trips, and its samples (µs per round trip).
struct measure {
  const char* id;
  const char* what;
  std::function<void(long)> loop;
  const char* against;  // the measure its ratio is taken to
  bench::series s;
};

// Sizes each loop to about 30 ms, then runs R rounds of every loop in turn,
// so that every measure sees the same moments of the machine.
void time_all(std::vector<measure>& ms, int reps) {
  for (auto& m : ms) {
    long n = 64;
    for (;;) {
      const auto t0 = std::chrono::steady_clock::now();
      m.loop(n);
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (secs > 0.01 || n > (1L << 26)) {
        n = std::max(16L, static_cast<long>(static_cast<double>(n) * 0.03 / std::max(secs, 1e-9)));
        break;
      }
      n *= 4;
    }
    m.s.iterations = static_cast<uint64_t>(n);
  }
  for (int r = 0; r < reps; ++r)
    for (auto& m : ms) {
      const long n = static_cast<long>(m.s.iterations);
      const auto t0 = std::chrono::steady_clock::now();
      m.loop(n);
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      m.s.samples.push_back(secs / static_cast<double>(n) * 1e6);
      m.s.seconds.push_back(secs);
    }
}

int round_trips(clump::runtime& rt, const options& o) {
  clump::async_engine engine(rt);
  gas::space gs(rt);
  auto cell = gas::all_alloc<int64_t>();
  *cell.local() = rt.rank();
  // The raw pair rpc is built on: a short request with an int, a short reply.
  clump::endpoint& ep = rt.endpoint();
  bool answered = false;
  int got = 0;
  auto pong = ep.on_reply([&](clump::token&, int v) {
    got = v;
    answered = true;
  });
  auto ping = ep.on_request([&](clump::token& t, int v) { (void)t.reply(pong, v + 1); });
  auto long_ack = ep.on_reply([&](clump::token&) { answered = true; });
  auto long_ping = ep.on_request([&](clump::token& t, std::span<const std::byte>) { (void)t.reply(long_ack); });
  auto got_long = ep.on_reply([&](clump::token&, std::span<const std::byte>) { answered = true; });
  std::vector<std::byte> kept;  // what get_1m_kept's handler copies out, as an rpc's result is
  auto got_long_kept = ep.on_reply([&](clump::token&, std::span<const std::byte> d) {
    kept.assign(d.begin(), d.end());
    answered = true;
  });
  bool stop = false;
  auto done = ep.on_request([&](clump::token&) { stop = true; });
  rt.barrier();
  if (rt.rank() != 0) {
    while (!stop) rt.bundle().poll();  // serves: polls without a pause, as rank 0 does
    rt.barrier();
    return 0;
  }
  const int peer = o.peer;
  clump::bundle& b = rt.bundle();
  std::vector<measure> ms;
  ms.push_back({"raw", "short request and reply (what rpc is built on)", [&](long n) {
                  int v = 0;
                  for (long i = 0; i < n; ++i) {
                    answered = false;
                    if (ep.request(peer, ping, v) != clump::status::ok) std::exit(1);
                    while (!answered) b.poll();
                    v = got;
                  }
                }, "raw", {}});
  ms.push_back({"rpc", "rpc(peer, add_one, v).wait()", [&](long n) {
                  int v = 0;
                  for (long i = 0; i < n; ++i) v = clump::rpc(peer, add_one, v).wait();
                }, "raw", {}});
  ms.push_back({"rpc_co", "co_await rpc(peer, add_one, v) in a coroutine", [&](long n) {
                  (void)rpc_loop(peer, n).wait();
                }, "raw", {}});
  const auto p = cell.on(peer);
  ms.push_back({"get_sync", "gas::get of an int64, then gas::sync()", [&](long n) {
                  int64_t v = 0, sum = 0;
                  for (long i = 0; i < n; ++i) {
                    gas::get(&v, p);
                    gas::sync();
                    sum += v;
                  }
                  if (sum != n * peer) std::exit(1);
                }, "get_sync", {}});
  ms.push_back({"get_co", "co_await gas::rget(p) in a coroutine", [&](long n) {
                  if (get_loop(p, n).wait() != n * peer) std::exit(1);
                }, "get_sync", {}});
  ms.push_back({"rget_wait", "gas::rget(p).wait()", [&](long n) {
                  int64_t sum = 0;
                  for (long i = 0; i < n; ++i) sum += gas::rget(p).wait();
                  if (sum != n * peer) std::exit(1);
                }, "get_sync", {}});
  // Big arguments and results, against the long messages they could be at best.
  if (ep.segment().size() < big_bytes) {
    std::fprintf(stderr, "async: the runtime's segment (CLUMP_SEGMENT_SIZE) is under 1 MiB\n");
    std::exit(1);
  }
  const std::vector<std::byte> big(big_bytes, std::byte{7});
  ms.push_back({"long_1m", "a long request of 1 MiB into the peer's segment, a short reply", [&](long n) {
                  for (long i = 0; i < n; ++i) {
                    answered = false;
                    if (ep.request_long(peer, long_ping, big, 0) != clump::status::ok) std::exit(1);
                    while (!answered) b.poll();
                  }
                }, "long_1m", {}});
  ms.push_back({"rpc_args_1m", "rpc(peer, count_bytes, a span of 1 MiB).wait()", [&](long n) {
                  for (long i = 0; i < n; ++i)
                    if (clump::rpc(peer, count_bytes, std::span<const std::byte>(big)).wait() != big_bytes) std::exit(1);
                }, "long_1m", {}});
  ms.push_back({"get_1m", "a get of 1 MiB from the peer's segment into ours", [&](long n) {
                  for (long i = 0; i < n; ++i) {
                    answered = false;
                    if (ep.get(peer, got_long, 0, 0, big_bytes) != clump::status::ok) std::exit(1);
                    while (!answered) b.poll();
                  }
                }, "get_1m", {}});
  ms.push_back({"get_1m_kept", "the same get, its handler copying the bytes into a vector (as an rpc's result is)",
                [&](long n) {
                  for (long i = 0; i < n; ++i) {
                    answered = false;
                    if (ep.get(peer, got_long_kept, 0, 0, big_bytes) != clump::status::ok) std::exit(1);
                    while (!answered) b.poll();
                    if (kept.size() != big_bytes) std::exit(1);
                    std::vector<std::byte>().swap(kept);
                  }
                }, "get_1m", {}});
  ms.push_back({"rpc_result_1m", "rpc(peer, make_bytes, 1 MiB).wait(), a vector of 1 MiB", [&](long n) {
                  for (long i = 0; i < n; ++i)
                    if (clump::rpc(peer, make_bytes, uint64_t{big_bytes}).wait().size() != big_bytes) std::exit(1);
                }, "get_1m_kept", {}});
  bool bad_only = false;  // an --only that names nothing, an unknown id, or a measure without its reference
  if (!o.only.empty()) {
    std::vector<std::string> ids;  // the list, split at commas
    for (size_t at = 0; at <= o.only.size();) {
      const size_t end = std::min(o.only.find(',', at), o.only.size());
      if (end > at) ids.push_back(o.only.substr(at, end - at));
      at = end + 1;
    }
    auto named = [&](const char* id) { return std::find(ids.begin(), ids.end(), id) != ids.end(); };
    for (const auto& id : ids)
      if (std::none_of(ms.begin(), ms.end(), [&](const measure& m) { return id == m.id; }))
        bad_only = true, std::fprintf(stderr, "async: --only: there is no measure %s\n", id.c_str());
    for (const auto& m : ms)
      if (named(m.id) && !named(m.against))
        bad_only = true, std::fprintf(stderr, "async: --only %s needs %s too (its ratio is taken to it)\n", m.id, m.against);
    if (ids.empty()) bad_only = true, std::fprintf(stderr, "async: --only %s names no measure\n", o.only.c_str());
    std::erase_if(ms, [&](const measure& m) { return !named(m.id); });
  }
  if (!bad_only) time_all(ms, o.reps);
  for (int r = 1; r < rt.size(); ++r)
    if (ep.request(r, done) != clump::status::ok) std::exit(1);
  rt.barrier();
  if (bad_only) return 2;

  bench::report rep;
  rep.machine = bench::machine_info();
  rep.job = {{"ranks", rt.size()}, {"peer", peer}, {"peer_on_this_node", p.is_local()}};
  rep.config = {{"reps", o.reps}, {"clump", bench::clump_environment()}};
  for (auto& m : ms) {
    bench::row r;
    r.section = "round trip, one at a time";
    r.id = m.id;
    r.size = m.id;
    r.unit = "us";
    r.data = m.s;
    const auto base = std::find_if(ms.begin(), ms.end(), [&](const measure& x) { return std::string(x.id) == m.against; });
    r.ratio = m.s.median() / base->s.median();
    r.ratio_of = m.against;
    rep.rows.push_back(r);
    rep.notes.push_back(std::string(m.id) + ": " + m.what);
  }
  rep.legend =
      "ratio: rpc against the raw request and reply, the gets against gas::get with sync(), big rpc arguments\n"
      "against a long request of as many bytes, a big result against a get of as many bytes copied into a vector\n"
      "(get_1m_kept; the bare get: get_1m); same run\n";
  rep.print(stdout);
  return bench::write_json(rep.to_json(), o.json) ? 0 : 1;
}

int hash_table(clump::runtime& rt, const options& o) {
  clump::async_engine engine(rt);
  const int me = rt.rank(), n = rt.size();
  uint64_t slots = 1;
  while (slots < static_cast<uint64_t>(o.keys) * 2) slots <<= 1;  // every rank's keys fit, half full on average
  std::optional<gas::space> gs;
  gas::global_ptr<uint64_t> gkeys, gvalues;
  if (o.gas_table) {
    gs.emplace(rt, 2 * slots * sizeof(uint64_t) + (1u << 20));
    gkeys = gas::all_alloc<uint64_t>(slots);
    gvalues = gas::all_alloc<uint64_t>(slots);
  }
  bench::series s;
  uint64_t salt = 0;
  auto round = [&] {
    if (o.gas_table) {
      std::fill_n(gkeys.local(), slots, uint64_t{0});
      std::fill_n(gvalues.local(), slots, uint64_t{0});
    } else {
      local_table.reset(slots);
    }
    ++salt;
    rt.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<clump::future<bool>> flight;
    flight.reserve(static_cast<size_t>(o.window));
    uint64_t fresh = 0;
    for (long i = 0; i < o.keys; ++i) {
      const uint64_t key = mix(salt << 40 ^ static_cast<uint64_t>(me) << 32 ^ static_cast<uint64_t>(i)) | 1;
      const int owner = static_cast<int>(mix(key) % static_cast<uint64_t>(n));
      flight.push_back(o.gas_table ? gas_insert(gkeys, gvalues, slots - 1, owner, key, key * 3)
                                   : clump::rpc(owner, dht_insert, key, key * 3));
      if (flight.size() == static_cast<size_t>(o.window) || i + 1 == o.keys) {
        for (bool f : clump::when_all(std::move(flight)).wait()) fresh += f;
        flight.clear();
      }
    }
    rt.barrier();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (fresh != static_cast<uint64_t>(o.keys)) {
      std::fprintf(stderr, "async --dht: rank %d: %llu of %ld keys were new\n", me,
                   static_cast<unsigned long long>(fresh), o.keys);
      std::exit(1);
    }
    return static_cast<double>(o.keys) * n / secs / 1e6;
  };
  round();  // warm-up
  for (int r = 0; r < o.reps; ++r) s.samples.push_back(round());
  if (me != 0) return 0;
  bench::report rep;
  rep.machine = bench::machine_info();
  rep.job = {{"ranks", n},
             {"node_ranks", rt.node_size()},
             {"keys_per_rank", o.keys},
             {"window", o.window},
             {"table", o.gas_table ? "gas" : "rpc"}};
  rep.config = {{"reps", o.reps}, {"clump", bench::clump_environment()}};
  bench::row r;
  r.section = "distributed hash table";
  r.id = o.gas_table ? "dht_gas_inserts" : "dht_inserts";
  r.size = "8 B + 8 B";
  r.unit = "M inserts/s";
  r.data = s;
  rep.rows.push_back(r);
  rep.notes.push_back(r.id + ": every rank inserts " + std::to_string(o.keys) + " uint64 keys and values, each " +
                      (o.gas_table ? "a coroutine of gas::rcompare_swap of the key into its slot at the owner, then "
                                     "gas::rput of the value"
                                   : "an rpc to the key's owner (open addressing there)") +
                      ", " + std::to_string(o.window) + " in flight; the job's inserts a second, barrier to barrier");
  rep.legend = "ratio: none; bench/async-bench puts this beside the same table with MPI one-sided operations\n";
  rep.print(stdout);
  return bench::write_json(rep.to_json(), o.json) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) try {
  clump::runtime rt{argc, argv};
  options o;
  std::string err;
  const bool parsed = parse(argc, argv, o, err);
  if (const int code = bench::usage_exit(rt.rank(), "async", parsed, o.help, err, usage); code >= 0) return code;
  if (!o.dht && (rt.size() < 2 || o.peer < 1 || o.peer >= rt.size())) {
    if (rt.rank() == 0) std::fprintf(stderr, "async: needs 2 ranks or more, and --peer from 1 to P - 1\n");
    return 2;
  }
  return o.dht ? hash_table(rt, o) : round_trips(rt, o);
} catch (const std::exception& e) {
  std::fprintf(stderr, "async: %s\n", e.what());
  return 1;
}
