// splitc: the Split-C paper's Table 1 for clump's gas layer: round-trip read,
// write and null active message, overhead and gap of get, put and store, the
// gap to two targets and in an exchange; plus a word get/put and bulk
// get/put bandwidth against memcpy. Rank 0 measures; ranks 1 and 2 are the
// targets (3 ranks: "gap to 2" and "exchange" need them) and poll until rank
// 0 is done. Whether the targets share rank 0's node decides the column:
//
//   clumprun -n 3 ./splitc [--json FILE] [--reps R]         # same node: memory
//   clumprun -n 3 -N 3 ./splitc [--json FILE] [--reps R]    # other nodes: messages
//
// bench/splitc-bench runs both, several times, and prints the table beside
// the paper's machines.
//
// Each figure is the median of R samples (default 7); a sample is a timed
// loop. Definitions (after the paper): round trip = time per blocking
// operation; overhead = time to issue one operation (a burst of 16, timed
// without its completion); gap = time per operation in a long stream
// (completion included, amortised); gap to 2 = the same alternating between
// two targets; exchange = rank 0 and rank 1 stream to each other at once.

#include <clump/clump.hpp>
#include <clump/gas.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gas = clump::gas;
using steady = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double micros_per(steady::time_point a, steady::time_point b, double ops) {
  return std::chrono::duration<double, std::micro>(b - a).count() / ops;
}

struct figure {
  std::string feature, op;
  double us = 0;
  std::vector<double> samples;
};

}  // namespace

int main(int argc, char** argv) {
  clump::runtime rt{argc, argv};
  gas::space gs{rt};
  int reps = 7;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--json" && i + 1 < argc) json_path = argv[++i];
  }
  const int me = gs.rank(), n = gs.size();
  if (n < 2) {
    if (me == 0) std::fprintf(stderr, "splitc: run it with 2 or 3 ranks (clumprun -n 3 ./splitc)\n");
    return 2;
  }
  const int t1 = 1, t2 = n > 2 ? 2 : 1;
  constexpr size_t bulk = size_t{4} << 20;
  auto words = gas::all_alloc<int64_t>(64);
  auto area = gas::all_alloc<std::byte>(bulk);
  auto done = gas::all_alloc<int64_t>(1);

  // The null active message, for the AM round trip.
  clump::endpoint& ep = rt.endpoint();
  int replies = 0;
  auto pong = ep.on_reply([&](clump::token&) { ++replies; });
  auto ping = ep.on_request([&](clump::token& t) { (void)t.reply(pong); });
  gas::barrier();

  std::vector<figure> figures;
  if (me != 0 && me != t1) {
    // Not a partner of the exchange: serve until rank 0 says it is done.
    while (gas::read(done.on(me)) == 0) gas::poll();
  } else if (me == t1) {
    // Target: serve; during the exchange, also stream to rank 0.
    while (true) {
      gas::poll();
      const int64_t cmd = *done.local();
      if (cmd == 1) break;
      if (cmd >= 10) {  // exchange of kind cmd - 10: mirror rank 0's stream
        const int kind = static_cast<int>(cmd - 10);
        *done.local() = 0;
        const int ops = 2000;
        int64_t v = 1;
        for (int i = 0; i < ops; ++i) {
          if (kind == 0) gas::get(&v, words.on(0) + (i & 63));
          else if (kind == 1) gas::put(words.on(0) + (i & 63), &v);
          else gas::store(words.on(0) + (i & 63), &v);
        }
        gas::sync();
        int64_t one = 1;
        gas::put(words.on(0) + 63, &one);  // "mine are done"
        gas::sync();
      }
    }
  } else {
    const bool local = words.on(t1).is_local();
    auto sample = [&](auto&& body) {
      std::vector<double> s;
      for (int r = 0; r < reps; ++r) s.push_back(body());
      return s;
    };
    auto add = [&](const char* feature, const char* op, std::vector<double> s) {
      figures.push_back({feature, op, median(s), std::move(s)});
    };
    const int rt_ops = local ? 200000 : 4000;
    add("RT latency", "AM", sample([&] {
          const auto a = steady::now();
          for (int i = 0; i < rt_ops; ++i) {
            const int want = replies + 1;
            (void)ep.request(t1, ping);
            rt.wait_until([&] { return replies == want; });
          }
          return micros_per(a, steady::now(), rt_ops);
        }));
    add("RT latency", "Read", sample([&] {
          int64_t x = 0;
          const auto a = steady::now();
          for (int i = 0; i < rt_ops; ++i) x += gas::read(words.on(t1) + (i & 31));
          const double us = micros_per(a, steady::now(), rt_ops);
          return us + static_cast<double>(x & 0) * 0;
        }));
    add("RT latency", "Write", sample([&] {
          const auto a = steady::now();
          for (int i = 0; i < rt_ops; ++i) gas::write(words.on(t1) + (i & 31), int64_t{i});
          return micros_per(a, steady::now(), rt_ops);
        }));
    // Overhead: issue 16, time only the issuing, then complete.
    const int bursts = local ? 20000 : 400;
    auto overhead = [&](int kind) {
      return sample([&] {
        double total = 0;
        int64_t v[16] = {};
        for (int b = 0; b < bursts; ++b) {
          const auto a = steady::now();
          for (int i = 0; i < 16; ++i) {
            if (kind == 0) gas::get(&v[i], words.on(t1) + i);
            else if (kind == 1) gas::put(words.on(t1) + i, &v[i]);
            else gas::store(words.on(t1) + i, &v[i]);
          }
          total += std::chrono::duration<double, std::micro>(steady::now() - a).count();
          gas::sync();
        }
        return total / (16.0 * bursts);
      });
    };
    // Gap: a long stream, completion included.
    const int stream = local ? 400000 : 4000;
    auto gap = [&](int kind, bool two) {
      return sample([&] {
        int64_t v = 7;
        const auto a = steady::now();
        for (int i = 0; i < stream; ++i) {
          const auto target = words.on(two && (i & 1) ? t2 : t1) + (i & 31);
          if (kind == 0) gas::get(&v, target);
          else if (kind == 1) gas::put(target, &v);
          else gas::store(target, &v);
        }
        gas::sync();
        return micros_per(a, steady::now(), stream);
      });
    };
    const char* kinds[] = {"Get", "Put", "Store"};
    for (int k = 0; k < 3; ++k) add("Overhead", kinds[k], overhead(k));
    for (int k = 0; k < 3; ++k) add("Gap", kinds[k], gap(k, false));
    for (int k = 0; k < 3; ++k) add("Gap (to 2)", kinds[k], gap(k, true));
    // Exchange: rank 1 streams to us while we stream to it.
    for (int k = 0; k < 3; ++k)
      add("Gap (exchange)", kinds[k], sample([&] {
            const int ops = 2000;
            const int64_t start = 10 + k;
            *(words.local() + 63) = 0;
            gas::write(done.on(t1), start);
            int64_t v = 3;
            const auto a = steady::now();
            for (int i = 0; i < ops; ++i) {
              if (k == 0) gas::get(&v, words.on(t1) + (i & 31));
              else if (k == 1) gas::put(words.on(t1) + (i & 31), &v);
              else gas::store(words.on(t1) + (i & 31), &v);
            }
            gas::sync();
            while (*(words.local() + 63) == 0) gas::poll();
            return micros_per(a, steady::now(), ops);
          }));
    // A word and bulk, against memcpy.
    add("Word", "get", sample([&] {
          int64_t v = 0, x = 0;
          const auto a = steady::now();
          for (int i = 0; i < rt_ops; ++i) {
            gas::get(&v, words.on(t1) + (i & 31));
            x += v;
          }
          gas::sync();
          return micros_per(a, steady::now(), rt_ops) + static_cast<double>(x & 0);
        }));
    add("Word", "put", sample([&] {
          const auto a = steady::now();
          for (int i = 0; i < rt_ops; ++i) {
            int64_t v = i;
            gas::put(words.on(t1) + (i & 31), &v);
          }
          gas::sync();
          return micros_per(a, steady::now(), rt_ops);
        }));
    std::vector<std::byte> buf(bulk, std::byte{1}), other(bulk, std::byte{2});
    const int bulk_ops = local ? 50 : 10;
    auto gbps = [&](auto&& op) {
      return sample([&] {
        const auto a = steady::now();
        for (int i = 0; i < bulk_ops; ++i) op();
        const double s = std::chrono::duration<double>(steady::now() - a).count();
        return static_cast<double>(bulk) * bulk_ops / s / 1e9;
      });
    };
    add("Bulk 4 MiB (GB/s)", "memcpy", gbps([&] { std::memcpy(other.data(), buf.data(), bulk); }));
    add("Bulk 4 MiB (GB/s)", "get", gbps([&] {
          gas::get(other.data(), area.on(t1), bulk);
          gas::sync();
        }));
    add("Bulk 4 MiB (GB/s)", "put", gbps([&] {
          gas::put(area.on(t1), buf.data(), bulk);
          gas::sync();
        }));
    for (int r = 1; r < n; ++r) gas::write(done.on(r), int64_t{1});

    // The table.
    std::printf("splitc: rank 0 against rank%s %s (%s), %d ranks, median of %d samples; times in us\n",
                n > 2 ? "s 1 and 2 on" : " 1 on", local ? "this node" : "other nodes",
                local ? "memory" : (std::getenv("CLUMP_PROTOCOL") ? "network protocol" : "network protocol, -N"), n,
                reps);
    std::printf("%-18s %-7s %12s %12s %12s\n", "feature", "op", "median", "min", "max");
    for (const figure& f : figures)
      std::printf("%-18s %-7s %12.4f %12.4f %12.4f\n", f.feature.c_str(), f.op.c_str(), f.us,
                  *std::min_element(f.samples.begin(), f.samples.end()),
                  *std::max_element(f.samples.begin(), f.samples.end()));
    if (!json_path.empty()) {
      nlohmann::json j;
      j["targets"] = local ? "same node" : "other node";
      j["ranks"] = n;
      j["reps"] = reps;
      for (const figure& f : figures) j["figures"].push_back({{"feature", f.feature}, {"op", f.op}, {"median", f.us}, {"samples", f.samples}});
      std::ofstream(json_path) << j.dump(1) << "\n";
    }
  }
  gas::barrier();
  return 0;
}
