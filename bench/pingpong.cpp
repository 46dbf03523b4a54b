// pingpong: latency, bandwidth and message rate of clump's shared-memory path
// between two ranks, next to the physical limits of the same two cores
// measured in the same run (cache-line ping-pong, memcpy).
//
//   clumprun -n 2 --bind core ./pingpong [--quick] [--json FILE] [--reps R]
//
// Rank 0 drives and rank 1 echoes; both spin on bundle::poll() while they
// wait, so no figure includes wait_until's sleep. Every figure, the limits
// included, is sampled round-robin (see measure.hpp) and reported as the
// median of its samples with their min and max. Started alone, the program is
// a job of one: rank 0 talks to itself, and the cache-line partner is a forked
// helper on another CPU. Prints a table; writes every sample and the machine
// to JSON.

#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <new>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "limits.hpp"
#include "measure.hpp"
#include "pingpong_driver.hpp"
#include "report.hpp"

extern char** environ;

namespace {

using pingpong::die;

// ---- options ------------------------------------------------------------------

struct options {
  bool quick = false;
  std::string json = "bench-pingpong.json";
  int reps = 0;           // 0: 7, or 3 with --quick
  double sample_ms = 30;  // length of one timed loop
  int slots = 2;          // long streaming: rotating area of this many message sizes
  std::vector<std::string> only;  // empty: every measure
  bool help = false;

  bool wants(const std::string& id) const {
    return only.empty() || std::find(only.begin(), only.end(), id) != only.end();
  }
};

const char* const measures[] = {"short", "medium_echo", "long", "long_stream", "medium_stream", "short_stream"};

const char* usage =
    "usage: clumprun -n 2 --bind core pingpong [--quick] [--json FILE] [--reps R] [--sample-ms MS] [--slots S]\n"
    "                                          [--only LIST]\n"
    "  --quick         fewer sizes and 3 repetitions (a few seconds)\n"
    "  --json FILE     where to write every sample (default bench-pingpong.json)\n"
    "  --reps R        samples per figure; the median is reported (default 7, --quick 3)\n"
    "  --sample-ms MS  length of one timed loop (default 30, at least 20)\n"
    "  --slots S       long streaming writes into a rotating area of S message sizes (default 2)\n"
    "  --only LIST     only these measures (comma-separated): short, medium_echo, long, long_stream,\n"
    "                  medium_stream, short_stream; the physical limits always run\n";

bool parse(int argc, char** argv, options& o, std::string& err) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* what) -> const char* {
      if (i + 1 >= argc) {
        err = a + " needs " + what;
        return nullptr;
      }
      return argv[++i];
    };
    auto number = [&](const char* what, double lo, double hi, double& out) {
      const char* v = value(what);
      if (!v) return false;
      char* end = nullptr;
      out = std::strtod(v, &end);
      if (end == v || *end || out < lo || out > hi) {
        err = fmt::format("{} {}: expected {} from {} to {}", a, v, what, lo, hi);
        return false;
      }
      return true;
    };
    double x = 0;
    if (a == "--quick") {
      o.quick = true;
    } else if (a == "--json") {
      const char* v = value("a file name");
      if (!v) return false;
      o.json = v;
    } else if (a == "--reps") {
      if (!number("a count", 1, 1000, x)) return false;
      o.reps = static_cast<int>(x);
    } else if (a == "--sample-ms") {
      if (!number("milliseconds", 20, 10000, x)) return false;
      o.sample_ms = x;
    } else if (a == "--slots") {
      if (!number("a count", 1, 8, x)) return false;
      o.slots = static_cast<int>(x);
    } else if (a == "--only") {
      const char* v = value("a list of measures");
      if (!v) return false;
      const std::string list = v;
      for (size_t start = 0; start <= list.size();) {
        const size_t comma = std::min(list.find(',', start), list.size());
        const std::string id = list.substr(start, comma - start);
        if (std::none_of(std::begin(measures), std::end(measures), [&](const char* m) { return id == m; })) {
          err = "--only: unknown measure '" + id + "'";
          return false;
        }
        o.only.push_back(id);
        start = comma + 1;
      }
    } else if (a == "-h" || a == "--help") {
      o.help = true;
    } else {
      err = "unknown option " + a;
      return false;
    }
  }
  if (o.reps == 0) o.reps = o.quick ? 3 : 7;
  return true;
}

// ---- the figures ----------------------------------------------------------------

/// A row of the report and the workload that fills it.
struct figure {
  bench::row row;
  bench::workload work;
  uint64_t n = 0;
};

constexpr const char* limits_section = "physical limits";
const char* peers_latency = "8 B one way: OpenMPI shm 0.26 us, GASNet-EX smp 0.35 us";
const char* peers_rate = "OpenMPI shm 12.3, GASNet-EX smp 16.4 M msg/s";

std::string peers_bandwidth(size_t bytes) {
  if (bytes >= (64u << 10) && bytes <= (1u << 20)) return "peers 20-26 GB/s (64 KiB-1 MiB)";
  if (bytes == (4u << 20)) return "peers 10-16 GB/s (4 MiB)";
  return "";
}

figure make(const char* section, const char* id, std::string size, uint64_t bytes, const char* unit,
            bench::workload w, std::string peers = "") {
  figure f;
  f.row.section = section;
  f.row.id = id;
  f.row.size = std::move(size);
  f.row.bytes = bytes;
  f.row.unit = unit;
  f.row.peers = std::move(peers);
  f.work = std::move(w);
  return f;
}

/// 8, 64, 512, ... (times 8) below `last`, then `last`.
std::vector<size_t> times8(size_t last) {
  std::vector<size_t> v;
  for (size_t s = 8; s < last; s *= 8) v.push_back(s);
  v.push_back(last);
  return v;
}

/// The memcpy sizes: every bandwidth size that has a ratio.
std::vector<size_t> memcpy_sizes(const options& o) {
  return o.quick ? std::vector<size_t>{4u << 10, 64u << 10, 1u << 20, 4u << 20}
                 : std::vector<size_t>{512, 4u << 10, 16u << 10, 64u << 10, 256u << 10, 1u << 20, 4u << 20};
}

void add_clump_figures(std::vector<figure>& figs, pingpong::driver& d, const options& o, size_t segment) {
  const size_t max_medium = clump::max_medium();
  const char* lat = "latency, one way";
  if (o.wants("short"))
    for (unsigned w : o.quick ? std::vector<unsigned>{0, 2, 8} : std::vector<unsigned>{0, 2, 8, 16})
      figs.push_back(make(lat, "short", fmt::format("{} words", w), 4 * w, "us", d.short_latency(w),
                          w <= 2 ? peers_latency : ""));
  if (o.wants("medium_echo"))
    for (size_t s : o.quick ? std::vector<size_t>{8, 4u << 10, max_medium} : times8(max_medium))
      figs.push_back(make(lat, "medium_echo", bench::bytes_text(s), s, "us", d.medium_latency(s),
                          s == 8 ? peers_latency : ""));
  if (o.wants("long"))
    for (size_t s : o.quick ? std::vector<size_t>{8, 64u << 10, pingpong::driver::max_payload}
                            : times8(pingpong::driver::max_payload))
      if (s <= segment) figs.push_back(make(lat, "long", bench::bytes_text(s), s, "us", d.long_latency(s)));

  const char* bw = "bandwidth, streaming";
  if (o.wants("long_stream"))
    for (size_t s : o.quick ? std::vector<size_t>{64u << 10, 1u << 20, 4u << 20}
                            : std::vector<size_t>{64u << 10, 256u << 10, 1u << 20, 4u << 20})
      if (s * static_cast<size_t>(o.slots) <= segment)
        figs.push_back(make(bw, "long_stream", bench::bytes_text(s), s, "GB/s", d.long_bandwidth(s),
                            peers_bandwidth(s)));
  if (o.wants("medium_stream"))
    for (size_t s : o.quick ? std::vector<size_t>{4u << 10, max_medium}
                            : std::vector<size_t>{512, 4u << 10, 16u << 10, max_medium})
      if (s <= max_medium)
        figs.push_back(make(bw, "medium_stream", bench::bytes_text(s), s, "GB/s", d.medium_bandwidth(s),
                            peers_bandwidth(s)));
  if (o.wants("short_stream"))
    figs.push_back(make("message rate", "short_stream", "0 words", 0, "M msg/s", d.message_rate(), peers_rate));
}

/// Ratios of each figure to its physical limit, from the medians.
void add_ratios(bench::report& rep) {
  const bench::row* cl = rep.find("cache_line_one_way", 64);
  for (bench::row& r : rep.rows) {
    if (r.id == "short" && cl && cl->data.median() > 0) {
      r.ratio = r.data.median() / cl->data.median();
      r.ratio_of = "cache_line_one_way";
    }
    if (r.id == "long_stream" || r.id == "medium_stream" || r.id == "memcpy_to_shm") {
      if (const bench::row* m = rep.find("memcpy", r.bytes); m && m->data.median() > 0) {
        r.ratio = r.data.median() / m->data.median();
        r.ratio_of = "memcpy " + m->size;
      }
    }
  }
}

/// The headline: short latency against the cache line, the message rate,
/// long bandwidth against memcpy.
std::string summarize(const bench::report& rep) {
  std::string s;
  const bench::row* cl = rep.find("cache_line_one_way", 64);
  const bench::row* sh = rep.find("short", 8);
  if (!sh) sh = rep.find("short", 0);
  if (cl && sh && sh->ratio)
    s += fmt::format("short one-way ({}) {:.3f} us = {:.2f} x the cache-line one-way ({:.3f} us)", sh->size,
                     sh->data.median(), *sh->ratio, cl->data.median());
  if (const bench::row* r = rep.find("short_stream", 0))
    s += fmt::format("{}short-message rate {:.1f} M msg/s", s.empty() ? "" : "; ", r->data.median());
  std::string bw;
  for (uint64_t b : {64u << 10, 1u << 20, 4u << 20})
    if (const bench::row* r = rep.find("long_stream", b); r && r->ratio)
      bw += fmt::format("{}{} {:.1f} GB/s = {:.2f} x memcpy", bw.empty() ? "" : ", ", r->size, r->data.median(),
                        *r->ratio);
  if (!bw.empty()) s += (s.empty() ? "" : "; ") + std::string("long bandwidth ") + bw;
  return s;
}

// ---- machine state ---------------------------------------------------------------

/// Jiffies of all CPUs from /proc/stat: total and stolen by the hypervisor.
struct cpu_times {
  unsigned long long total = 0, steal = 0;
};
cpu_times read_cpu_times() {
  cpu_times t;
  std::ifstream in("/proc/stat");
  std::string cpu;
  unsigned long long v[8] = {};
  if (in >> cpu >> v[0] >> v[1] >> v[2] >> v[3] >> v[4] >> v[5] >> v[6] >> v[7]) {
    for (unsigned long long x : v) t.total += x;
    t.steal = v[7];
  }
  return t;
}

std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

void describe(bench::report& rep, const options& o, bool alone) {
  rep.notes.push_back(fmt::format("each figure is the median of {} samples, taken round-robin over all figures; a "
                                  "sample is one timed loop of about {} ms (steady_clock) after an untimed warm-up "
                                  "of 1/16 of it; min and max show the spread",
                                  o.reps, o.sample_ms));
  rep.notes.push_back("latency = round trip / 2; the driver spins on bundle::poll() (never wait_until's sleep), the "
                      "echoing rank spins on poll() throughout");
  rep.notes.push_back("short: a request with the given argument words, answered by a short reply carrying them back");
  rep.notes.push_back("medium_echo: the reply echoes the payload (medium reply of the same size): both directions "
                      "carry it");
  rep.notes.push_back("long: request_long of the payload to offset 0 of the peer's segment, answered by a short "
                      "reply without arguments (one payload copy per round trip)");
  rep.notes.push_back(fmt::format("long_stream: request_long back to back into a rotating area of {} message sizes "
                                  "of the peer's segment; the handler only counts (it does not read the payload); "
                                  "a flush request answered with the count ends each loop",
                                  o.slots));
  rep.notes.push_back("medium_stream: medium requests back to back; the handler only counts; flush as above");
  rep.notes.push_back("short_stream: short requests without arguments whose handler only counts (no reply); flush "
                      "as above");
  rep.notes.push_back(alone ? "cache_line_one_way: this process and a forked helper, each pinned to its own CPU and "
                              "spinning on its own 64-byte line (128 bytes apart) that only the other writes; "
                              "release store, acquire load; round trip / 2"
                            : "cache_line_one_way: the two ranks themselves, on their own cores, through a small "
                              "POSIX shm area, each spinning on its own 64-byte line (128 bytes apart) that only "
                              "the other writes; release store, acquire load; round trip / 2");
  rep.notes.push_back("memcpy: glibc memcpy between two private page-aligned buffers, reused and warm, on rank 0 "
                      "(rank 1 keeps polling on its core); memcpy_to_shm: the same into rank 0's own clump segment "
                      "(shared memory, the kind of pages long messages land in)");
  if (alone)
    rep.notes.push_back("ALONE: a job of one; rank 0 sent every message to itself on one core (run it under "
                        "clumprun -n 2 --bind core for the two-core figures)");
}

/// The cache-line ping-pong's partner: rank 1 through a small POSIX shm
/// area, or, alone, a helper process forked onto another CPU (this process
/// then stays pinned to its CPU for the whole run).
struct partner {
  std::unique_ptr<bench::shared_area> area;
  bench::echo_helper helper;
  bench::pingpong_lines* lines = nullptr;
  int alone_cpus[2] = {-1, -1};  // alone: this process's CPU, the helper's CPU
};

void set_up_partner(clump::runtime& rt, const cpu_set_t& mine, partner& p) {
  if (rt.size() > 1) {
    const std::string name = fmt::format("/clump-pingpong-{:x}", rt.job_id());
    if (rt.rank() == 0) {
      ::shm_unlink(name.c_str());  // left over from a crashed run with the same job id
      p.area = std::make_unique<bench::shared_area>(bench::shared_area::create(name, sizeof(bench::pingpong_lines)));
      new (p.area->data()) bench::pingpong_lines;
    }
    rt.barrier();
    if (rt.rank() == 1)
      p.area = std::make_unique<bench::shared_area>(bench::shared_area::open(name, sizeof(bench::pingpong_lines)));
    rt.barrier();
    if (rt.rank() == 0) p.area->unlink();
    p.lines = static_cast<bench::pingpong_lines*>(p.area->data());
    return;
  }
  const int here = ::sched_getcpu();
  int other = here;
  for (int c : bench::cpus_of(mine))
    if (c != here) other = c;
  if (!bench::pin_to(here)) throw std::runtime_error("could not pin this process to its CPU");
  p.helper.start(other);
  p.lines = &p.helper.lines();
  p.alone_cpus[0] = here;
  p.alone_cpus[1] = other;
}

/// Rank 1: answers requests, and runs a cache-line session when asked to.
void serve(clump::runtime& rt, pingpong::state& st, bench::pingpong_lines& lines) {
  uint64_t last = 0;
  while (!st.stop) {
    rt.bundle().poll();
    if (st.echo) {
      st.echo = false;
      bench::echo_session(lines, last);
    }
  }
  if (st.failed) die("a reply from a request handler failed");
}

/// The machine, the job and the options, before any figure.
bench::report begin_report(clump::runtime& rt, const options& o, const std::vector<std::vector<int>>& rank_cpus,
                           const partner& p) {
  const bool alone = rt.size() == 1;
  bench::report rep;
  rep.machine = bench::machine_info();
  rep.job["ranks"] = rt.size();
  rep.job["mode"] = alone ? "alone (rank 0 talks to itself)" : "two ranks over shared memory";
  nlohmann::json binding = nlohmann::json::array();
  for (size_t r = 0; r < rank_cpus.size(); ++r) binding.push_back({{"rank", r}, {"cpus", rank_cpus[r]}});
  rep.job["binding"] = binding;
  if (alone) rep.job["cache_line_cpus"] = {p.alone_cpus[0], p.alone_cpus[1]};
  rep.config = {{"quick", o.quick},
                {"reps", o.reps},
                {"sample_ms", o.sample_ms},
                {"slots", o.slots},
                {"only", o.only},
                {"max_medium", clump::max_medium()},
                {"segment_bytes", rt.endpoint().segment().size()}};
  nlohmann::json env = nlohmann::json::object();
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "CLUMP_", 6) == 0)
      if (const char* eq = std::strchr(*e, '=')) env[std::string(*e, static_cast<size_t>(eq - *e))] = eq + 1;
  rep.config["clump_environment"] = env;

  describe(rep, o, alone);
  if (alone) {
    rep.notes.push_back(fmt::format("alone: this process was pinned to cpu {}, the cache-line helper to cpu {}",
                                    p.alone_cpus[0], p.alone_cpus[1]));
    if (p.alone_cpus[0] == p.alone_cpus[1])
      rep.notes.push_back("only one CPU is available: the cache-line ping-pong ran on one core and means little");
  } else {
    for (size_t r = 0; r < rank_cpus.size(); ++r)
      if (rank_cpus[r].size() != 1)
        rep.notes.push_back(fmt::format("rank {} is not pinned to one CPU (cpus {}): figures may include "
                                        "migrations; run under clumprun --bind core",
                                        r, bench::cpu_list_text(rank_cpus[r])));
    if (rank_cpus[0] == rank_cpus[1])
      rep.notes.push_back("both ranks may run on the same CPUs: the two-core figures may be one-core figures");
  }

  std::string where;
  for (size_t r = 0; r < rank_cpus.size(); ++r)
    where += fmt::format("{}rank {} on cpu {}", r ? ", " : "", r,
                         bench::cpu_list_text(alone ? std::vector<int>{p.alone_cpus[0]} : rank_cpus[r]));
  fmt::print("pingpong: {}; {}; {}; {} samples of ~{} ms per figure{}\n", rep.machine["cpu_model"].get<std::string>(),
             rep.job["mode"].get<std::string>(), where, o.reps, o.sample_ms, o.quick ? " (--quick)" : "");
  std::fflush(stdout);
  return rep;
}

/// Every figure of the run, limits first.
std::vector<figure> plan(clump::runtime& rt, const options& o, bench::cache_line_driver& cl, pingpong::driver& d) {
  std::vector<figure> figs;
  bench::workload w = cl.make();
  if (rt.size() > 1) w.begin = [&d] { d.start_echo_session(); };
  w.end = [&cl] { cl.end_session(); };
  figs.push_back(make(limits_section, "cache_line_one_way", "64 B", 64, "us", std::move(w)));
  const std::span<std::byte> seg = rt.endpoint().segment();
  for (size_t s : memcpy_sizes(o))
    figs.push_back(make(limits_section, "memcpy", bench::bytes_text(s), s, "GB/s", bench::memcpy_workload(s)));
  // The same copy into this rank's own segment: not a limit, but it tells
  // whether shared-memory pages cost anything against private ones.
  for (size_t s : memcpy_sizes(o))
    if (s >= (64u << 10) && s <= seg.size())
      figs.push_back(make(limits_section, "memcpy_to_shm", bench::bytes_text(s), s, "GB/s",
                          bench::memcpy_workload(s, seg.data())));
  add_clump_figures(figs, d, o, seg.size());
  return figs;
}

}  // namespace

int main(int argc, char** argv) {
  clump::runtime rt{argc, argv};
  options o;
  std::string err;
  if (!parse(argc, argv, o, err) || o.help) {
    if (rt.rank() == 0) {
      if (!err.empty()) std::fprintf(stderr, "pingpong: %s\n", err.c_str());
      std::fputs(usage, o.help ? stdout : stderr);
    }
    return o.help ? 0 : 2;
  }
  if (rt.size() > 2) {
    if (rt.rank() == 0) std::fprintf(stderr, "pingpong: run it with 1 or 2 ranks (clumprun -n 2), not %d\n", rt.size());
    return 2;
  }
  const bench::sampling how{o.reps, o.sample_ms / 1000};

  // Handlers first: the barriers below separate registration from sending.
  pingpong::state st;
  pingpong::handlers h(rt.endpoint(), st);

  cpu_set_t mine;
  if (::sched_getaffinity(0, sizeof mine, &mine) != 0) die("sched_getaffinity failed");
  std::vector<cpu_set_t> all(static_cast<size_t>(rt.size()));
  rt.allgather(&mine, all.data(), sizeof mine);
  std::vector<std::vector<int>> rank_cpus;
  for (const cpu_set_t& s : all) rank_cpus.push_back(bench::cpus_of(s));

  partner p;
  try {
    set_up_partner(rt, mine, p);
  } catch (const std::exception& e) {
    die(std::string("setting up the cache-line ping-pong: ") + e.what());
  }
  rt.barrier();

  if (rt.rank() == 1) {
    serve(rt, st, *p.lines);
    rt.barrier();
    return 0;
  }

  bench::report rep = begin_report(rt, o, rank_cpus, p);
  bench::cache_line_driver cl(*p.lines);
  pingpong::driver d(rt, st, h, rt.size() > 1 ? 1 : 0, o.slots);
  std::vector<figure> figs = plan(rt, o, cl, d);

  const cpu_times t0 = read_cpu_times();
  const std::string load0 = first_line("/proc/loadavg");
  for (figure& f : figs) f.n = bench::calibrate(how, f.work);
  for (int r = 0; r < o.reps; ++r)
    for (figure& f : figs) bench::take_sample(how, f.work, f.n, f.row.data);
  const cpu_times t1 = read_cpu_times();

  if (rt.size() > 1 && rt.endpoint().request(1, h.stop) != clump::status::ok) die("the stop request failed");
  rt.barrier();
  p.helper.stop();

  for (figure& f : figs) rep.rows.push_back(std::move(f.row));
  add_ratios(rep);
  rep.summary = summarize(rep);
  const double steal = t1.total > t0.total ? 100.0 * static_cast<double>(t1.steal - t0.steal) /
                                                 static_cast<double>(t1.total - t0.total)
                                           : 0;
  rep.machine["loadavg_at_start"] = load0;
  rep.machine["loadavg_at_end"] = first_line("/proc/loadavg");
  rep.machine["cpu_steal_percent_during_sampling"] = steal;
  int cut = 0;
  for (const bench::row& r : rep.rows) cut += r.data.cut_short;
  if (cut)
    rep.notes.push_back(fmt::format("{} samples hit their deadline (4 x the sample length) before finishing their "
                                    "loop: other processes were taking the cores; those figures are noisy",
                                    cut));
  rep.notes.push_back(fmt::format("load average at start: {}; at end: {}; CPU time stolen by the hypervisor while "
                                  "sampling: {:.1f}%",
                                  load0, rep.machine["loadavg_at_end"].get<std::string>(), steal));
  std::printf("\n");
  rep.print(stdout);
  std::ofstream out(o.json);
  out << rep.to_json().dump(2) << "\n";
  out.close();
  if (!out) die("could not write " + o.json);
  std::printf("wrote %s\n", o.json.c_str());
  return 0;
}
