// loggp: the LogGP parameters of clump between rank 0 and one peer, measured
// the way the SC97 multi-protocol paper (Table 2) and Culler et al.'s
// "Assessing Fast Network Interfaces" measure them, plus latency and
// bandwidth against message size (the curves bench/run-all plots).
//
//   clumprun -n 2 --bind core ./loggp                       # shared memory
//   CLUMP_PROTOCOL=net clumprun -n 2 --bind core ./loggp    # UDP loopback
//   clumprun -n 4 -N 2 --bind core ./loggp --peer 1         # shm, network open
//   clumprun -n 4 -N 2 --bind core ./loggp --peer 3         # network, shm open
//
// What each parameter is (all in microseconds):
//   RTT  a short request with two argument words answered by a short reply
//        carrying them back, rank 0 spinning on poll();
//   o_s  the time inside request() during bursts of 8 short requests without
//        arguments whose handler only counts: short enough that no send waits
//        for room; a flush (request answered with the count) after each
//        burst, untimed;
//   o_r  the time from the first poll() to the end of the reply's handler,
//        when the reply has surely arrived: rank 0 sends a request (as for
//        RTT), then computes without polling for 2 RTT + 5 us, then polls;
//   g    the time per message of a long stream of short requests without
//        arguments whose handler only counts (1 / message rate);
//   L    RTT / 2 - o_s - o_r (negative when the overheads overlap);
//   G    the time per byte of bulk transfers, from the streams of the two
//        largest sizes: (T(4 MiB) - T(1 MiB)) / 3 MiB; 1/G is the bandwidth;
//   half-power point: the transfer size at which the stream reaches half of
//        the highest bandwidth measured (log-linear interpolation).
// A bulk transfer is one long request (request_long) into a rotating area of
// two transfer sizes of the peer's segment; clump fragments and pipelines it
// itself (the paper pipelined 8 KiB fragments by hand). Latency against size
// echoes n bytes both ways: a medium request and medium reply up to
// max_medium(), a long request and a long reply beyond.
//
// Every figure is sampled round-robin (measure.hpp); the derived parameters
// are computed for each repetition from that repetition's samples, so their
// spread is the spread of whole LogGP sets. Prints the table beside the
// paper's values and writes every sample to JSON.

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "measure.hpp"
#include "pingpong_driver.hpp"  // clump's headers, with GCC 12's false warning silenced
#include "report.hpp"

namespace {

constexpr int burst = 8;  // o_s: requests per burst, far below every queue and window
constexpr size_t max_bytes = 4u << 20;

const char* const usage =
    "usage: clumprun -n 2 --bind core loggp [--peer R] [--quick] [--reps R] [--sample-ms MS] [--json FILE]\n"
    "                                       [--label TEXT] [--no-curves]\n"
    "  --peer R        the rank rank 0 measures against (default 1); other ranks wait asleep\n"
    "  --quick         3 repetitions of 20 ms and fewer sizes (a few seconds)\n"
    "  --reps R        samples per figure; the median is reported (default 7)\n"
    "  --sample-ms MS  length of one timed loop (default 30, at least 5)\n"
    "  --json FILE     where to write every sample (default bench-loggp.json)\n"
    "  --label TEXT    the configuration's name in the output (default: worked out from the path)\n"
    "  --no-curves     only the LogGP figures (no latency or bandwidth against size; no G, 1/G or\n"
    "                  half-power point)\n";

struct options {
  int peer = 1;
  bool quick = false;
  int reps = 0;
  double sample_ms = 30;
  std::string json = "bench-loggp.json";
  std::string label;
  bool curves = true;
  bool help = false;
};

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "loggp: %s\n", why.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

void check(clump::status s, const char* what) {
  if (s != clump::status::ok) die(fmt::format("{} failed: {}", what, clump::to_string(s)));
}

bool parse(int argc, char** argv, options& o, std::string& err) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto number = [&](double lo, double hi, double& out) {
      if (i + 1 >= argc) {
        err = a + " needs a value";
        return false;
      }
      const char* v = argv[++i];
      char* end = nullptr;
      out = std::strtod(v, &end);
      if (end == v || *end || out < lo || out > hi) {
        err = fmt::format("{} {}: expected a number from {} to {}", a, v, lo, hi);
        return false;
      }
      return true;
    };
    auto text = [&](std::string& out) {
      if (i + 1 >= argc) {
        err = a + " needs a value";
        return false;
      }
      out = argv[++i];
      return true;
    };
    double x = 0;
    if (a == "--quick") {
      o.quick = true;
    } else if (a == "--peer") {
      if (!number(1, 1 << 20, x)) return false;
      o.peer = static_cast<int>(x);
    } else if (a == "--reps") {
      if (!number(1, 1000, x)) return false;
      o.reps = static_cast<int>(x);
    } else if (a == "--sample-ms") {
      if (!number(5, 10000, x)) return false;
      o.sample_ms = x;
    } else if (a == "--json") {
      if (!text(o.json)) return false;
    } else if (a == "--no-curves") {
      o.curves = false;
    } else if (a == "--label") {
      if (!text(o.label)) return false;
    } else if (a == "-h" || a == "--help") {
      o.help = true;
    } else {
      err = "unknown option " + a;
      return false;
    }
  }
  if (o.reps == 0) o.reps = o.quick ? 3 : 7;
  if (o.quick) o.sample_ms = std::min(o.sample_ms, 20.0);
  return true;
}

using pingpong::state;

/// pingpong's handlers (both ranks register them in the same order), and one
/// more: a long request echoed by a long reply into the requester's segment.
struct handlers : pingpong::handlers {
  clump::payload_request_handler<> echo_long;

  handlers(clump::endpoint& ep, state& st) : pingpong::handlers(ep, st) {
    // The payload sits in this rank's segment; it goes back to offset 0 of the requester's.
    echo_long = ep.on_request([this, &st](clump::token& t, std::span<const std::byte> p) {
      if (t.reply_long(pong_medium, p, 0) != clump::status::ok) st.failed = true;
    });
  }
};

/// Busy for `us` microseconds without polling.
void compute_for(double us) {
  const auto until = bench::steady::now() + std::chrono::duration_cast<bench::steady::duration>(
                                                std::chrono::duration<double, std::micro>(us));
  while (bench::steady::now() < until) {
  }
}

double micros(bench::steady::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

/// Rank 0's measures against the peer: pingpong's workloads where they are
/// the same (round trip, stream of short requests, bulk stream, medium
/// echo), reported in LogGP's units, and the ones LogGP adds.
class driver {
 public:
  driver(clump::runtime& rt, state& st, handlers& h, int peer)
      : pp_(rt, st, h, peer, 2), ep_(rt.endpoint()), b_(rt.bundle()), st_(st), h_(h), peer_(peer) {
    source_ = static_cast<std::byte*>(std::aligned_alloc(4096, max_bytes));
    if (!source_) die("out of memory for the payload buffer");
    for (size_t i = 0; i < max_bytes; ++i) source_[i] = static_cast<std::byte>(i * 131);
  }
  ~driver() { std::free(source_); }
  driver(const driver&) = delete;
  driver& operator=(const driver&) = delete;

  /// A short request with two words answered by a short reply; us per round trip.
  bench::workload round_trip() {
    bench::workload w = pp_.short_latency(2);
    w.value = [](double secs, uint64_t n) { return secs / static_cast<double>(n) * 1e6; };
    return w;
  }

  /// Time inside request() during bursts; us per send.
  bench::workload send_overhead() {
    auto inside = std::make_shared<double>(0);
    bench::workload w;
    w.run = [this, inside](uint64_t n, bench::steady::time_point deadline) -> uint64_t {
      double sum = 0;
      uint64_t i = 0;
      for (; i < n && !bench::past<15>(i, deadline); ++i) {
        const auto t0 = bench::steady::now();
        for (int k = 0; k < burst; ++k) check(ep_.request(peer_, h_.sink), "short request");
        sum += micros(bench::steady::now() - t0) - clock_us_;
        flush(burst);
      }
      *inside = sum;
      return i;
    };
    w.value = [inside](double, uint64_t n) { return *inside / static_cast<double>(n * burst); };
    return w;
  }

  /// Time from the first poll to the end of the reply's handler, the reply
  /// having arrived during a computation; us.
  bench::workload receive_overhead(double delay_us) {
    auto inside = std::make_shared<double>(0);
    bench::workload w;
    w.run = [this, inside, delay_us](uint64_t n, bench::steady::time_point deadline) -> uint64_t {
      double sum = 0;
      uint64_t i = 0;
      for (; i < n && !bench::past<15>(i, deadline); ++i) {
        check(ep_.request(peer_, h_.ping2, i), "short request");
        compute_for(delay_us);
        const auto t0 = bench::steady::now();
        while (!st_.done) b_.poll();
        sum += micros(bench::steady::now() - t0) - clock_us_;
        st_.done = false;
        if (st_.got != i) die(fmt::format("the reply carried {} instead of {}", st_.got, i));
      }
      *inside = sum;
      return i;
    };
    w.value = [inside](double, uint64_t n) { return *inside / static_cast<double>(n); };
    return w;
  }

  /// A stream of short requests whose handler only counts; us per message.
  bench::workload gap() {
    bench::workload w = pp_.message_rate();
    w.value = [](double secs, uint64_t n) { return secs / static_cast<double>(n) * 1e6; };
    return w;
  }

  /// Bulk transfers of `bytes` back to back into a rotating area of two; GB/s.
  bench::workload bulk(size_t bytes) { return pp_.long_bandwidth(bytes); }

  /// `bytes` echoed both ways: medium messages up to max_medium(), long beyond; us one way.
  bench::workload echo(size_t bytes) {
    if (bytes <= clump::max_medium()) return pp_.medium_latency(bytes);
    bench::workload w;
    w.run = [this, bytes](uint64_t n, bench::steady::time_point deadline) -> uint64_t {
      const std::span<const std::byte> p(source_, bytes);
      for (uint64_t i = 0; i < n; ++i) {
        if (bench::past<63>(i, deadline)) return i;
        check(ep_.request_long(peer_, h_.echo_long, p, 0), "long echo request");
        spin();
        if (st_.got != bytes) die(fmt::format("the echo carried {} bytes, not {}", st_.got, bytes));
      }
      return n;
    };
    w.value = [](double secs, uint64_t n) { return secs / static_cast<double>(n) / 2 * 1e6; };
    return w;
  }

  /// A quick round trip estimate (us) and the cost of two clock reads, before sampling.
  double estimate_round_trip() {
    // The cheapest of 20 batches: a batch the scheduler interrupted would
    // make the subtraction from o_s and o_r too big.
    clock_us_ = 1e9;
    for (int batch = 0; batch < 20; ++batch) {
      const auto t0 = bench::steady::now();
      for (int i = 0; i < 100; ++i) (void)bench::steady::now();
      clock_us_ = std::min(clock_us_, micros(bench::steady::now() - t0) / 100);
    }
    double best = 1e9;
    for (int round = 0; round < 5; ++round) {
      const auto t0 = bench::steady::now();
      for (uint64_t i = 0; i < 200; ++i) {
        check(ep_.request(peer_, h_.ping2, i), "short request");
        spin();
      }
      best = std::min(best, micros(bench::steady::now() - t0) / 200);
    }
    return best;
  }

  double clock_us() const { return clock_us_; }

 private:
  void spin() {
    while (!st_.done) b_.poll();
    st_.done = false;
    if (st_.failed) die("a reply from a request handler failed");
  }
  void flush(uint64_t n) {
    check(ep_.request(peer_, h_.flush), "flush request");
    while (!st_.acked) b_.poll();
    st_.acked = false;
    if (st_.acked_count != n) die(fmt::format("the peer counted {} messages, not {}", st_.acked_count, n));
  }

  pingpong::driver pp_;
  clump::endpoint& ep_;
  clump::bundle& b_;
  state& st_;
  handlers& h_;
  int peer_;
  std::byte* source_ = nullptr;
  double clock_us_ = 0;
};

struct figure {
  bench::row row;
  bench::workload work;
  uint64_t n = 0;
};

/// A row; `size` empty: the bytes as text.
figure make(const char* section, const char* id, uint64_t bytes, const char* unit, bench::workload w,
            std::string size = "") {
  figure f;
  f.row.section = section;
  f.row.id = id;
  f.row.bytes = bytes;
  f.row.size = size.empty() ? bench::bytes_text(bytes) : std::move(size);
  f.row.unit = unit;
  f.work = std::move(w);
  return f;
}

std::vector<size_t> sizes(bool quick) {
  if (quick) return {8, 4u << 10, 1u << 20, 4u << 20};
  return {8, 64, 512, 4u << 10, 32u << 10, 256u << 10, 1u << 20, 4u << 20};
}

/// One LogGP set from one repetition's samples.
struct loggp_set {
  double rtt = 0, os = 0, orr = 0, g = 0, L = 0, G_us_per_byte = 0, bandwidth = 0, half_power = 0;
};

/// G from the time per transfer of the two largest sizes; the half-power
/// point from the bandwidth curve (bytes, GB/s pairs in size order).
void bulk_parameters(const std::vector<std::pair<double, double>>& curve, loggp_set& s) {
  if (curve.size() < 2) return;
  const auto [n1, bw1] = curve[curve.size() - 2];
  const auto [n2, bw2] = curve.back();
  const double t1 = n1 / (bw1 * 1e3), t2 = n2 / (bw2 * 1e3);  // us per transfer
  s.G_us_per_byte = t2 > t1 ? (t2 - t1) / (n2 - n1) : t2 / n2;
  s.bandwidth = 1 / s.G_us_per_byte / 1e3;  // GB/s
  double peak = 0;
  for (const auto& [n, bw] : curve) peak = std::max(peak, bw);
  for (size_t i = 0; i < curve.size(); ++i) {
    if (curve[i].second < peak / 2) continue;
    if (i == 0) {
      s.half_power = curve[0].first;
    } else {  // interpolate log(size) linearly in bandwidth
      const auto [a, ba] = curve[i - 1];
      const auto [b, bb] = curve[i];
      const double f = (peak / 2 - ba) / (bb - ba);
      s.half_power = std::exp(std::log(a) + f * (std::log(b) - std::log(a)));
    }
    break;
  }
}

nlohmann::json to_json(const std::vector<loggp_set>& sets) {
  auto field = [&](double loggp_set::*m) {
    std::vector<double> v;
    for (const loggp_set& s : sets) v.push_back(s.*m);
    bench::series x;
    x.samples = v;
    return nlohmann::json{{"median", x.median()}, {"min", x.min()}, {"max", x.max()}, {"per_repetition", v}};
  };
  return {{"rtt_us", field(&loggp_set::rtt)},
          {"o_s_us", field(&loggp_set::os)},
          {"o_r_us", field(&loggp_set::orr)},
          {"g_us", field(&loggp_set::g)},
          {"L_us", field(&loggp_set::L)},
          {"G_us_per_byte", field(&loggp_set::G_us_per_byte)},
          {"bandwidth_GB_per_s", field(&loggp_set::bandwidth)},
          {"half_power_bytes", field(&loggp_set::half_power)}};
}

/// The SC97 paper's Table 2 (Sun Enterprise 5000 + Myrinet, 1997), us.
struct paper_column {
  const char* name;
  double L, os, orr, g, G, bw_MBps, half_kB, rtt;
};
constexpr paper_column paper[] = {
    {"SC97 shm", -0.3, 1.8, 1.3, 3.1, 0.00602, 166, 5.1, 5.6},
    {"SC97 multi shm", 0.1, 2.1, 1.4, 3.6, 0.00625, 160, 5.3, 7.2},
    {"SC97 Myrinet", 15.5, 3.3, 8.6, 17.6, 0.0305, 32.8, 8.6, 55},
    {"SC97 multi Myrinet", 13.8, 5.6, 8.1, 17.6, 0.0315, 31.7, 8.7, 55},
};

void print_table(const std::string& label, const nlohmann::json& j) {
  auto med = [&](const char* k) { return j[k]["median"].get<double>(); };
  auto spread = [&](const char* k, int digits) {
    return fmt::format("{:.{}f}..{:.{}f}", j[k]["min"].get<double>(), digits, j[k]["max"].get<double>(), digits);
  };
  fmt::print("\nLogGP, {} (median of the repetitions, min-max) beside the SC97 paper's Table 2 (1997)\n", label);
  fmt::print("{:<26} {:>10} {:>17}", "parameter", "clump", "spread");
  for (const paper_column& p : paper) fmt::print(" {:>18}", p.name);
  fmt::print("\n");
  auto line = [&](const char* name, const char* key, int digits, auto paper_value) {
    fmt::print("{:<26} {:>10.{}f} {:>17}", name, med(key), digits, spread(key, digits));
    for (const paper_column& p : paper) fmt::print(" {:>18}", paper_value(p));
    fmt::print("\n");
  };
  line("Latency L (us)", "L_us", 3, [](const paper_column& p) { return fmt::format("{}", p.L); });
  line("Send overhead o_s (us)", "o_s_us", 3, [](const paper_column& p) { return fmt::format("{}", p.os); });
  line("Receive overhead o_r (us)", "o_r_us", 3, [](const paper_column& p) { return fmt::format("{}", p.orr); });
  line("Gap g (us)", "g_us", 3, [](const paper_column& p) { return fmt::format("{}", p.g); });
  if (med("G_us_per_byte") > 0) {  // not with --no-curves
    fmt::print("{:<26} {:>10.3g} {:>17}", "Gap per byte G (us)", med("G_us_per_byte"), "");
    for (const paper_column& p : paper) fmt::print(" {:>18}", p.G);
    fmt::print("\n{:<26} {:>10.2f} {:>17}", "Bandwidth 1/G (GB/s)", med("bandwidth_GB_per_s"),
               spread("bandwidth_GB_per_s", 2));
    for (const paper_column& p : paper) fmt::print(" {:>18}", fmt::format("{} MB/s", p.bw_MBps));
    fmt::print("\n{:<26} {:>10} {:>17}", "Half-power point",
               bench::bytes_text(static_cast<uint64_t>(std::lround(med("half_power_bytes")))), "");
    for (const paper_column& p : paper) fmt::print(" {:>18}", fmt::format("{} kB", p.half_kB));
    fmt::print("\n");
  }
  line("Round trip RTT (us)", "rtt_us", 3, [](const paper_column& p) { return fmt::format("{}", p.rtt); });
}

}  // namespace

int main(int argc, char** argv) {
  clump::runtime rt{argc, argv};
  options o;
  std::string err;
  const bool parsed = parse(argc, argv, o, err);
  if (const int code = bench::usage_exit(rt.rank(), "loggp", parsed, o.help, err, usage); code >= 0) return code;
  const int peer = rt.size() == 1 ? 0 : o.peer;
  if (peer >= rt.size()) {
    if (rt.rank() == 0) std::fprintf(stderr, "loggp: --peer %d: the job has only %d ranks\n", o.peer, rt.size());
    return 2;
  }
  state st;
  handlers h(rt.endpoint(), st);
  int cpu = ::sched_getcpu();
  std::vector<int> cpus(static_cast<size_t>(rt.size()));
  rt.allgather(&cpu, cpus.data(), sizeof cpu);
  rt.barrier();

  if (rt.rank() != 0) {
    if (rt.rank() == peer)
      while (!st.stop) rt.bundle().poll();
    else
      rt.wait_until([&st] { return st.stop; });
    if (st.failed) die("a reply from a request handler failed");
    rt.barrier();
    return 0;
  }

  // A peer on another node has no segment mapped into this process.
  const bool over_network = peer != 0 && rt.endpoint().mapped_segment(peer).empty();
  const std::string path = peer == 0                          ? "alone (rank 0 to itself)"
                           : over_network                     ? "network"
                           : clump::network_address().empty() ? "shared memory"
                                                              : "shared memory, network open";
  const std::string label = o.label.empty() ? path : o.label;
  driver d(rt, st, h, peer);
  const double rtt0 = d.estimate_round_trip();
  const double delay = 2 * rtt0 + 5;
  fmt::print("loggp: {}; rank 0 on cpu {}, peer rank {} on cpu {}; RTT about {:.2f} us, o_r delay {:.1f} us; {} "
             "samples of ~{} ms per figure\n",
             label, cpus[0], peer, cpus[static_cast<size_t>(peer)], rtt0, delay, o.reps, o.sample_ms);
  std::fflush(stdout);

  std::vector<figure> figs;
  figs.push_back(make("LogGP", "rtt", 8, "us", d.round_trip(), "2 words"));
  figs.push_back(make("LogGP", "o_s", 0, "us", d.send_overhead(), "0 words"));
  figs.push_back(make("LogGP", "o_r", 8, "us", d.receive_overhead(delay), "2 words"));
  figs.push_back(make("LogGP", "g", 0, "us", d.gap(), "0 words"));
  if (o.curves) {
    for (size_t s : sizes(o.quick)) figs.push_back(make("bulk transfer, streaming", "bulk", s, "GB/s", d.bulk(s)));
    for (size_t s : sizes(o.quick)) figs.push_back(make("latency, one way (echo)", "echo", s, "us", d.echo(s)));
  }

  const bench::sampling how{o.reps, o.sample_ms / 1000};
  for (figure& f : figs) f.n = bench::calibrate(how, f.work);
  for (int r = 0; r < o.reps; ++r)
    for (figure& f : figs) bench::take_sample(how, f.work, f.n, f.row.data);
  for (int r = 1; r < rt.size(); ++r) check(rt.endpoint().request(r, h.stop), "stop request");

  bench::report rep;
  rep.machine = bench::machine_info();
  for (figure& f : figs) rep.rows.push_back(std::move(f.row));
  std::vector<loggp_set> sets(static_cast<size_t>(o.reps));
  for (int r = 0; r < o.reps; ++r) {
    loggp_set& s = sets[static_cast<size_t>(r)];
    auto at = [&](const char* id, uint64_t bytes) { return rep.find(id, bytes)->data.samples[static_cast<size_t>(r)]; };
    s.rtt = at("rtt", 8);
    s.os = at("o_s", 0);
    s.orr = at("o_r", 8);
    s.g = at("g", 0);
    s.L = s.rtt / 2 - s.os - s.orr;
    std::vector<std::pair<double, double>> curve;
    for (const bench::row& row : rep.rows)
      if (row.id == "bulk") curve.emplace_back(static_cast<double>(row.bytes), row.data.samples[static_cast<size_t>(r)]);
    bulk_parameters(curve, s);
  }
  const nlohmann::json loggp = to_json(sets);

  rep.legend = "ratio: none; LogGP below. bulk: request_long streams (GB/s = 1e9 B/s); echo: n bytes both ways\n";
  rep.print(stdout);
  print_table(label, loggp);
  fmt::print("o_r delay {:.1f} us; clock read pair {:.3f} us subtracted from o_s and o_r\n", delay, d.clock_us());

  nlohmann::json j = rep.to_json();
  j["benchmark"] = "loggp";
  j["label"] = label;
  j["path"] = path;
  j["loggp"] = loggp;
  j["job"] = {{"ranks", rt.size()}, {"peer", peer}, {"cpus", cpus}};
  j["config"] = {{"reps", o.reps},
                 {"sample_ms", o.sample_ms},
                 {"quick", o.quick},
                 {"burst", burst},
                 {"o_r_delay_us", delay},
                 {"clock_pair_us", d.clock_us()},
                 {"max_medium", clump::max_medium()},
                 {"clump_environment", bench::clump_environment()}};
  j["paper_table_2"] = nlohmann::json::array();
  for (const paper_column& p : paper)
    j["paper_table_2"].push_back({{"name", p.name},
                                  {"L_us", p.L},
                                  {"o_s_us", p.os},
                                  {"o_r_us", p.orr},
                                  {"g_us", p.g},
                                  {"G_us_per_byte", p.G},
                                  {"bandwidth_MB_per_s", p.bw_MBps},
                                  {"half_power_kB", p.half_kB},
                                  {"rtt_us", p.rtt}});
  j.erase("peers_reference_not_measured_here");
  j.erase("limits");
  const bool written = bench::write_json(j, o.json);
  rt.barrier();
  return written ? 0 : 1;
}
