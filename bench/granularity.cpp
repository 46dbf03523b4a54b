// granularity: the Split-C paper's polling-granularity experiment (its
// Figures 7 and 8). Every rank computes a fixed amount of work per iteration
// in pieces of a given granularity, polling between pieces; in iteration j,
// rank j % P is the busy one and every other rank first needs one word from
// it (an 8-byte get) before it can compute. When the busy rank answers at
// once, all ranks compute in parallel and an iteration takes about the work;
// when it answers only after its work, the others idle and it takes twice
// that. The figure is the time per iteration against the granularity.
//
//   clumprun -n 2 -N 2 --bind core ./granularity                 # polling
//   CLUMP_PROGRESS=thread clumprun -n 2 -N 2 --bind core ./granularity
//
// Run it with the ranks on different nodes (or CLUMP_PROTOCOL=net): on one
// node a get is a copy from the mapped segment and needs nobody's attention.
// "none" in the granularities means no polling during the work at all. The
// work is a fixed count of dependent multiply-adds, calibrated once to the
// microseconds asked for, so time taken from it by the progress thread shows
// in the figure. Iterations end with an all-to-all barrier of short messages.

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "measure.hpp"
#include "pingpong_driver.hpp"  // clump's headers, with GCC 12's false warning silenced
#include "report.hpp"

namespace {

const char* const usage =
    "usage: clumprun -n 2 -N 2 --bind core granularity [--work-us US] [--grains LIST] [--iterations N] [--reps R]\n"
    "                                                  [--quick] [--json FILE]\n"
    "  --work-us US      work per iteration and rank, in microseconds of computing (default 200)\n"
    "  --grains LIST     microseconds of work between polls, comma-separated; 'none': no polling\n"
    "                    (default 0.5,1,2,5,10,20,50,100,none)\n"
    "  --iterations N    iterations per sample (default 100)\n"
    "  --reps R          samples per granularity, taken round-robin; the median is reported (default 5)\n"
    "  --quick           3 granularities, 2 repetitions, 20 iterations\n"
    "  --json FILE       where to write every sample (default bench-granularity.json)\n";

struct options {
  double work_us = 200;
  std::vector<double> grains{0.5, 1, 2, 5, 10, 20, 50, 100, 0};  // 0: none
  int iterations = 100;
  int reps = 5;
  bool quick = false;
  std::string json = "bench-granularity.json";
  bool help = false;
};

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "granularity: %s\n", why.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

bool parse(int argc, char** argv, options& o, std::string& err) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    auto number = [&](const std::string& v, double lo, double hi, double& out) {
      char* end = nullptr;
      out = std::strtod(v.c_str(), &end);
      if (v.empty() || *end || out < lo || out > hi) {
        err = fmt::format("{} {}: expected a number from {} to {}", a, v, lo, hi);
        return false;
      }
      return true;
    };
    double x = 0;
    if (a == "--quick") {
      o.quick = true;
      o.grains = {1, 20, 0};
      o.reps = 2;
      o.iterations = 20;
    } else if (a == "-h" || a == "--help") {
      o.help = true;
    } else if (!has_value && (a == "--work-us" || a == "--grains" || a == "--iterations" || a == "--reps" ||
                              a == "--json")) {
      err = a + " needs a value";
      return false;
    } else if (a == "--work-us") {
      if (!number(argv[++i], 1, 1e6, o.work_us)) return false;
    } else if (a == "--iterations") {
      if (!number(argv[++i], 1, 1e6, x)) return false;
      o.iterations = static_cast<int>(x);
    } else if (a == "--reps") {
      if (!number(argv[++i], 1, 1000, x)) return false;
      o.reps = static_cast<int>(x);
    } else if (a == "--json") {
      o.json = argv[++i];
    } else if (a == "--grains") {
      o.grains.clear();
      const std::string list = argv[++i];
      for (size_t start = 0; start <= list.size();) {
        const size_t comma = std::min(list.find(',', start), list.size());
        const std::string item = list.substr(start, comma - start);
        if (item == "none") {
          o.grains.push_back(0);
        } else {
          if (!number(item, 0.01, 1e6, x)) return false;
          o.grains.push_back(x);
        }
        start = comma + 1;
      }
    } else {
      err = "unknown option " + a;
      return false;
    }
  }
  return true;
}

/// Dependent multiply-adds: a fixed amount of work whatever else runs.
double spin_work(uint64_t steps, double x) {
  for (uint64_t i = 0; i < steps; ++i) x = x * 1.0000001 + 1e-9;
  return x;
}

/// Steps of spin_work per microsecond, the fastest of a few tries.
double calibrate_steps_per_us() {
  double best = 0;
  volatile double sink = 0;
  for (int t = 0; t < 5; ++t) {
    const uint64_t steps = 2'000'000;
    const auto t0 = bench::steady::now();
    sink = spin_work(steps, sink + 1);
    const double us = std::chrono::duration<double, std::micro>(bench::steady::now() - t0).count();
    best = std::max(best, static_cast<double>(steps) / us);
  }
  return best;
}

struct state {
  bool got = false;          // the get's reply ran
  std::vector<int> arrived;  // barrier messages per iteration parity
};

}  // namespace

int main(int argc, char** argv) {
  clump::runtime rt{argc, argv};
  options o;
  std::string err;
  const bool parsed = parse(argc, argv, o, err);
  if (const int code = bench::usage_exit(rt.rank(), "granularity", parsed, o.help, err, usage); code >= 0)
    return code;
  clump::endpoint& ep = rt.endpoint();
  clump::bundle& b = rt.bundle();
  const int me = rt.rank(), p = rt.size();
  state st;
  st.arrived.assign(2, 0);
  auto got = ep.on_reply([&st](clump::token&, std::span<const std::byte>) { st.got = true; });
  auto arrive = ep.on_request([&st](clump::token&, uint32_t parity) { ++st.arrived[parity & 1]; });

  // Every rank's work calibration is rank 0's, so that all do the same work.
  double steps_per_us = calibrate_steps_per_us();
  rt.broadcast(&steps_per_us, sizeof steps_per_us, 0);
  int remote_peers = 0;
  for (int r = 0; r < p; ++r) remote_peers += r != me && ep.mapped_segment(r).empty();
  const int cpu = ::sched_getcpu();
  std::vector<int> cpus(static_cast<size_t>(p));
  rt.allgather(&cpu, cpus.data(), sizeof cpu);
  rt.barrier();

  volatile double sink = 0;
  uint64_t iteration = 0;
  auto work = [&](double grain_us) {
    const uint64_t total = static_cast<uint64_t>(o.work_us * steps_per_us);
    const uint64_t piece = grain_us > 0 ? std::max<uint64_t>(1, static_cast<uint64_t>(grain_us * steps_per_us)) : total;
    double x = sink + 1;
    for (uint64_t done = 0; done < total; done += piece) {
      x = spin_work(std::min(piece, total - done), x);
      if (grain_us > 0) b.poll();
    }
    sink = x;
  };
  auto one_iteration = [&](double grain_us) {
    const int busy = static_cast<int>(iteration % static_cast<uint64_t>(p));
    if (me != busy) {
      st.got = false;
      // Rank me's word of the busy rank's segment, into our own segment.
      const uint64_t at = 64 * static_cast<uint64_t>(me);
      if (ep.get(busy, got, at, at, 8) != clump::status::ok) die("the get failed");
      while (!st.got) b.poll();
    }
    work(grain_us);
    const uint32_t parity = static_cast<uint32_t>(iteration & 1);
    for (int r = 0; r < p; ++r)
      if (r != me && ep.request(r, arrive, parity) != clump::status::ok) die("a barrier message failed");
    while (st.arrived[parity] < p - 1) b.poll();
    st.arrived[parity] = 0;
    ++iteration;
  };

  // Round-robin over granularities; every rank runs the same schedule.
  std::vector<bench::series> per_grain(o.grains.size());
  for (int rep = 0; rep < o.reps; ++rep)
    for (size_t gi = 0; gi < o.grains.size(); ++gi) {
      for (int w = 0; w < std::max(2, o.iterations / 10); ++w) one_iteration(o.grains[gi]);  // warm-up
      const auto t0 = bench::steady::now();
      for (int it = 0; it < o.iterations; ++it) one_iteration(o.grains[gi]);
      const double secs = std::chrono::duration<double>(bench::steady::now() - t0).count();
      per_grain[gi].samples.push_back(secs / o.iterations * 1e6);
      per_grain[gi].seconds.push_back(secs);
      per_grain[gi].iterations = static_cast<uint64_t>(o.iterations);
    }
  rt.barrier();
  if (me != 0) return 0;

  const char* progress = std::getenv("CLUMP_PROGRESS");
  const std::string mode = progress && std::string(progress) == "thread" ? "progress thread" : "polling";
  fmt::print("granularity: {} ranks ({} of them reached over the network from rank 0), cpus", p, remote_peers);
  for (int c : cpus) fmt::print(" {}", c);
  fmt::print("; work {} us per iteration; {}; {} iterations per sample, median of {}\n", o.work_us, mode,
             o.iterations, o.reps);
  if (remote_peers == 0 && p > 1)
    fmt::print("note: every peer is on this node, so gets need no attention from the busy rank; run with -N {}\n", p);
  fmt::print("{:>12} {:>12} {:>10} {:>10} {:>12}\n", "grain (us)", "us/iter", "min", "max", "x work");
  bench::report rep;
  rep.machine = bench::machine_info();
  for (size_t gi = 0; gi < o.grains.size(); ++gi) {
    bench::row r;
    r.section = "time per iteration";
    r.id = "iteration";
    r.size = o.grains[gi] > 0 ? fmt::format("{} us", o.grains[gi]) : "none";
    r.bytes = 0;
    r.unit = "us";
    r.data = per_grain[gi];
    r.extra = {{"grain_us", o.grains[gi] > 0 ? nlohmann::json(o.grains[gi]) : nlohmann::json(nullptr)}};
    fmt::print("{:>12} {:>12.1f} {:>10.1f} {:>10.1f} {:>12.2f}\n", r.size, r.data.median(), r.data.min(), r.data.max(),
               r.data.median() / o.work_us);
    rep.rows.push_back(std::move(r));
  }
  nlohmann::json j = rep.to_json();
  j["benchmark"] = "granularity";
  j["mode"] = mode;
  j["job"] = {{"ranks", p}, {"remote_peers_of_rank_0", remote_peers}, {"cpus", cpus}};
  j["config"] = {{"work_us", o.work_us}, {"iterations", o.iterations}, {"reps", o.reps}, {"steps_per_us", steps_per_us}};
  j.erase("peers_reference_not_measured_here");
  j.erase("limits");
  return bench::write_json(j, o.json) ? 0 : 1;
}
