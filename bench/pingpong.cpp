// pingpong: latency, bandwidth and message rate of clump between two ranks,
// next to the physical limits of the same two cores measured in the same run
// (cache-line ping-pong, memcpy; and raw UDP when the ranks talk over the
// network).
//
//   clumprun -n 2 --bind core ./pingpong [--quick] [--json FILE] [--reps R]
//   CLUMP_PROTOCOL=net clumprun -n 2 --bind core ./pingpong     # over UDP
//   clumprun -n 4 -N 2 --bind core ./pingpong   # shared memory, network open
//
// Rank 0 drives and rank 1 echoes; both spin on bundle::poll() while they
// wait, so no figure includes wait_until's sleep. Every figure, the limits
// included, is sampled round-robin (see measure.hpp) and reported as the
// median of its samples with their min and max. Started alone, the program is
// a job of one: rank 0 talks to itself, and the cache-line partner is a forked
// helper on another CPU. Ranks 2 and up, when there are any, only wait (asleep
// in wait_until) until the end: they make rank 0's process open its network
// without sending anything. Rank 0 probes whether it reaches rank 1 through
// the network; if so (or with --udp on) the raw UDP limits of udp_limits.hpp
// run too and the latencies and bandwidths are compared with them. Prints a
// table; writes every sample, the machine and clump's network counters to JSON.

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

#include "capi_pingpong.h"
#include "limits.hpp"
#include "measure.hpp"
#include "pingpong_driver.hpp"
#include "pingpong_net.hpp"
#include "pingpong_options.hpp"
#include "report.hpp"
#include "udp_limits.hpp"

namespace {

using pingpong::die;
using pingpong::options;
using pingpong::path;

// ---- the figures ----------------------------------------------------------------

/// A row of the report and the workload that fills it.
struct figure {
  bench::row row;
  bench::workload work;
  uint64_t n = 0;
  clump::network_stats net{};                    // rank 0's network counters over the samples
  std::shared_ptr<bench::stream_totals> totals;  // raw UDP streams: sent and arrived
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

void add_clump_figures(std::vector<figure>& figs, pingpong::driver& d, const options& o, size_t segment, bool net) {
  const size_t max_medium = clump::max_medium();
  const char* lat = "latency, one way";
  const char* lat_peers = net ? pingpong::net_peers_latency : peers_latency;
  if (o.wants("short"))
    for (unsigned w : o.quick ? std::vector<unsigned>{0, 2, 8} : std::vector<unsigned>{0, 2, 8, 16})
      figs.push_back(make(lat, "short", fmt::format("{} words", w), 4 * w, "us", d.short_latency(w),
                          w == 2 || (!net && w == 0) ? lat_peers : ""));
  if (o.wants("medium_echo"))
    for (size_t s : o.quick ? std::vector<size_t>{8, 4u << 10, max_medium} : times8(max_medium))
      figs.push_back(make(lat, "medium_echo", bench::bytes_text(s), s, "us", d.medium_latency(s),
                          s == 8 ? lat_peers : ""));
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
                            !net                ? peers_bandwidth(s)
                            : s == (1u << 20) ? pingpong::net_peers_bandwidth
                                                : ""));
  if (o.wants("long_stream"))
    for (size_t s : o.quick ? std::vector<size_t>{1u << 20} : std::vector<size_t>{64u << 10, 256u << 10, 1u << 20, 4u << 20})
      figs.push_back(make(bw, "long_stream_private", bench::bytes_text(s), s, "GB/s", d.capi_private_bandwidth(s)));
  if (o.wants("medium_stream"))
    for (size_t s : o.quick ? std::vector<size_t>{4u << 10, max_medium}
                            : std::vector<size_t>{512, 4u << 10, 16u << 10, max_medium})
      if (s <= max_medium)
        figs.push_back(make(bw, "medium_stream", bench::bytes_text(s), s, "GB/s", d.medium_bandwidth(s),
                            net ? "" : peers_bandwidth(s)));
  if (o.wants("short"))
    figs.push_back(make(lat, "short_capi", "2 words", 8, "us", d.capi_short_latency()));
  if (o.wants("short_stream"))
    figs.push_back(
        make("message rate", "short_stream", "0 words", 0, "M msg/s", d.message_rate(), net ? "" : peers_rate));
}

/// Ratios of each figure to its physical limit, from the medians: over the
/// network, latencies to the raw UDP busy-poll ping-pong and bandwidths to the
/// raw UDP stream of clump's datagram size.
void add_ratios(bench::report& rep, bool net) {
  // The C API's short latency against the C++ API's, same words, same run.
  if (const bench::row* cpp = rep.find("short", 8); cpp && cpp->data.median() > 0)
    for (bench::row& r : rep.rows)
      if (r.id == "short_capi") {
        r.ratio = r.data.median() / cpp->data.median();
        r.ratio_of = "short 2 words (C++ API)";
      }
  auto set = [](bench::row& r, const bench::row* limit) {
    if (!limit || limit->data.median() <= 0) return;
    r.ratio = r.data.median() / limit->data.median();
    r.ratio_of = limit->id + " " + limit->size;
  };
  if (net) {
    const bench::row* ping = rep.find("udp_pingpong_busy", 8);
    const bench::row* stream = rep.find("udp_stream", pingpong::clump_net_mtu());
    for (bench::row& r : rep.rows) {
      if (r.id == "short" || (r.id == "medium_echo" && r.bytes == 8)) set(r, ping);
      if (r.id == "medium_echo" && r.bytes > 8) set(r, rep.find("udp_echo", r.bytes));
      if (r.id == "long_stream" || r.id == "medium_stream") set(r, stream);
    }
    return;
  }
  const bench::row* cl = rep.find("cache_line_one_way", 64);
  for (bench::row& r : rep.rows) {
    if (r.id == "short" && cl && cl->data.median() > 0) {
      r.ratio = r.data.median() / cl->data.median();
      r.ratio_of = "cache_line_one_way";
    }
    if (r.id == "long_stream" || r.id == "long_stream_private" || r.id == "medium_stream" || r.id == "memcpy_to_shm") {
      if (const bench::row* m = rep.find("memcpy", r.bytes); m && m->data.median() > 0) {
        r.ratio = r.data.median() / m->data.median();
        r.ratio_of = "memcpy " + m->size;
      }
    }
  }
}

/// Over the network: short latency against raw UDP, long bandwidth against the raw stream.
std::string summarize_net(const bench::report& rep) {
  std::string s;
  const bench::row* sh = rep.find("short", 8);
  const bench::row* ping = rep.find("udp_pingpong_busy", 8);
  if (sh && ping && sh->ratio)
    s += fmt::format("short one-way over the network ({}) {:.2f} us = {:.2f} x raw UDP busy-poll ping-pong ({:.2f} us)",
                     sh->size, sh->data.median(), *sh->ratio, ping->data.median());
  const bench::row* raw = rep.find("udp_stream", pingpong::clump_net_mtu());
  if (const bench::row* r = rep.find("long_stream", 1u << 20); r && r->ratio && raw)
    s += fmt::format("{}long bandwidth 1 MiB {:.2f} GB/s = {:.2f} x the raw UDP stream of {} datagrams ({:.2f} GB/s)",
                     s.empty() ? "" : "; ", r->data.median(), *r->ratio, raw->size, raw->data.median());
  return s;
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
  if (const bench::row* c = rep.find("short_capi", 8); c && c->ratio)
    s += fmt::format("; through the AM-2 C API {:.3f} us = {:.2f} x the C++ API", c->data.median(), *c->ratio);
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
  rep.notes.push_back("short_capi: the same 2-word ping-pong through the AM-2 C API (bench/capi_pingpong.c: "
                      "AM_Request2 answered by AM_Reply2, spinning on AM_Poll, on the endpoint AMX_SPMDStartup made); "
                      "its ratio is to the C++ API's 2-word figure");
  rep.notes.push_back("medium_echo: the reply echoes the payload (medium reply of the same size): both directions "
                      "carry it");
  rep.notes.push_back("long: request_long of the payload to offset 0 of the peer's segment, answered by a short "
                      "reply without arguments (one payload copy per round trip)");
  rep.notes.push_back(fmt::format("long_stream: request_long back to back into a rotating area of {} message sizes "
                                  "of the peer's segment; the handler only counts (it does not read the payload); "
                                  "a flush request answered with the count ends each loop",
                                  o.slots));
  rep.notes.push_back("long_stream_private: the same stream through the AM-2 C API (AM_RequestXfer0) into a segment "
                      "of malloc'd memory given to AM_SetSeg, as AM-2 programs have; on one node, from CLUMP_CMA_SPLIT "
                      "(64 KiB) on, a shared copy by cross-memory attach (the sender writes the front half into "
                      "the receiver's memory while the receiver pulls the rest from the sender's: one copy on each "
                      "core), or, with CLUMP_CMA_MAX=0 or where the kernel refuses, through the medium ring in "
                      "pieces; a flush every 16 messages");
  rep.notes.push_back("medium_stream: medium requests back to back; the handler only counts; flush as above");
  rep.notes.push_back("short_stream: short requests without arguments whose handler only counts (no reply); flush "
                      "as above");
  rep.notes.push_back(alone ? "cache_line_one_way: this process and a forked helper, each pinned to its own CPU and "
                              "spinning on its own 64-byte line (128 bytes apart) that only the other writes; "
                              "release store, acquire load; round trip / 2"
                            : "cache_line_one_way: the two ranks themselves, on their own cores, through a small "
                              "POSIX shm area, each spinning on its own 64-byte line (128 bytes apart) that only "
                              "the other writes; release store, acquire load; round trip / 2");
  rep.notes.push_back("memcpy_rotating: the same memcpy into as many rotating areas as long_stream writes (--slots): "
                      "the limit of long_stream's own access pattern");
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
    if (p.area) p.lines = static_cast<bench::pingpong_lines*>(p.area->data());  // ranks 2 and up: none
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

/// Rank 1: answers requests, and runs a cache-line or raw UDP session when asked to.
void serve(clump::runtime& rt, pingpong::state& st, bench::pingpong_lines& lines, bench::udp_link* udp) {
  uint64_t last = 0, entered = 0;
  while (!st.stop) {
    rt.bundle().poll();
    if (st.capi) {
      st.capi = false;
      capi_serve();
    }
    if (st.echo) {
      st.echo = false;
      // Relaxed: only tells the driver to start; the session's own stores carry the ordering.
      lines.entered.value.store(++entered, std::memory_order_relaxed);
      bench::echo_session(lines, last);
    }
    if (st.udp) {
      const uint64_t session_mode = std::exchange(st.udp, 0);
      if (!udp) die("rank 0 asked for a raw UDP session, but there is no raw UDP socket");
      udp->serve(session_mode >> 8, static_cast<bench::udp_mode>(session_mode & 0xff));
    }
  }
  if (st.failed) die("a reply from a request handler failed");
}

/// The machine, the job and the options, before any figure.
bench::report begin_report(clump::runtime& rt, const options& o, const std::vector<std::vector<int>>& rank_cpus,
                           const partner& p, path to_peer, const pingpong::udp_partner& u) {
  const bool alone = rt.size() == 1;
  bench::report rep;
  rep.machine = bench::machine_info();
  rep.job["ranks"] = rt.size();
  rep.job["mode"] = alone                        ? "alone (rank 0 talks to itself)"
                    : to_peer == path::network   ? "two ranks over the network (UDP)"
                    : clump::network_address().empty() ? "two ranks over shared memory"
                                                 : "two ranks over shared memory, network open to other nodes";
  nlohmann::json binding = nlohmann::json::array();
  for (size_t r = 0; r < rank_cpus.size(); ++r) binding.push_back({{"rank", r}, {"cpus", rank_cpus[r]}});
  rep.job["binding"] = binding;
  if (alone) rep.job["cache_line_cpus"] = {p.alone_cpus[0], p.alone_cpus[1]};
  rep.config = {{"quick", o.quick},
                {"reps", o.reps},
                {"sample_ms", o.sample_ms},
                {"slots", o.slots},
                {"only", o.only},
                {"udp", o.udp},
                {"max_medium", clump::max_medium()},
                {"segment_bytes", rt.endpoint().segment().size()}};
  rep.config["clump_environment"] = bench::clump_environment();

  describe(rep, o, alone);
  pingpong::describe_net(rep, to_peer, u, rt.size());
  if (alone) {
    rep.notes.push_back(fmt::format("alone: this process was pinned to cpu {}, the cache-line helper to cpu {}",
                                    p.alone_cpus[0], p.alone_cpus[1]));
    if (p.alone_cpus[0] == p.alone_cpus[1])
      rep.notes.push_back("only one CPU is available: the cache-line ping-pong ran on one core and means little");
  } else {
    for (size_t r = 0; r < 2; ++r)
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

/// The raw UDP limits: ping-pong both ways of waiting, and streams of clump's
/// datagram size and of an Ethernet MTU's.
void add_udp_figures(std::vector<figure>& figs, bench::udp_driver& u, const options& o) {
  const char* peers = "quoted: busy-poll 1.85 us, blocking 5.6 us";
  figs.push_back(make(limits_section, "udp_pingpong_busy", "8 B", 8, "us", u.pingpong(bench::udp_mode::echo_busy),
                      peers));
  figs.push_back(make(limits_section, "udp_pingpong_mmsg", "8 B", 8, "us", u.pingpong(bench::udp_mode::echo_mmsg)));
  figs.push_back(make(limits_section, "udp_pingpong_blocking", "8 B", 8, "us",
                      u.pingpong(bench::udp_mode::echo_blocking), peers));
  {
    auto totals = std::make_shared<bench::stream_totals>();
    figs.push_back(make(limits_section, "udp_rate_small", "8 B", 8, "M msg/s", u.rate_small(totals)));
    figs.back().totals = std::move(totals);
  }
  const size_t mtu = pingpong::clump_net_mtu();
  // The limit of each medium echo above 8 bytes (8 bytes: the ping-pong's).
  if (o.wants("medium_echo"))
    for (size_t s : o.quick ? std::vector<size_t>{4u << 10, clump::max_medium()} : times8(clump::max_medium()))
      if (s > 8)
        figs.push_back(make(limits_section, "udp_echo", bench::bytes_text(s), s, "us", u.message_echo(s, mtu)));
  for (size_t s : o.quick ? std::vector<size_t>{mtu} : std::vector<size_t>{mtu, 1472}) {
    auto totals = std::make_shared<bench::stream_totals>();
    figs.push_back(make(limits_section, "udp_stream", bench::bytes_text(s), s, "GB/s", u.stream(s, totals),
                        s == 1472 ? "quoted: MTU-sized 0.8 GB/s" : "quoted: 65000 B datagrams 10.6 GB/s"));
    figs.back().totals = std::move(totals);
  }
  // The limit of a long stream whose messages are a little larger than a
  // datagram (two each), as 64 KiB ones are.
  if (o.wants("long_stream")) {
    auto totals = std::make_shared<bench::stream_totals>();
    figs.push_back(make(limits_section, "udp_message_stream", "64 KiB", 64u << 10, "GB/s",
                        u.stream(64u << 10, totals, mtu)));
    figs.back().totals = std::move(totals);
  }
}

/// Every figure of the run, limits first.
std::vector<figure> plan(clump::runtime& rt, const options& o, bench::cache_line_driver& cl, pingpong::driver& d,
                         bench::pingpong_lines& lines, bench::udp_driver* udp, bool net) {
  std::vector<figure> figs;
  bench::workload w = cl.make();
  if (rt.size() > 1)
    w.begin = [&d, &rt, &lines, entered = uint64_t{0}]() mutable {
      d.start_echo_session();
      // Polling clump meanwhile: over the network the request may need a retransmission.
      ++entered;
      while (lines.entered.value.load(std::memory_order_relaxed) != entered) rt.bundle().poll();
    };
  w.end = [&cl] { cl.end_session(); };
  figs.push_back(make(limits_section, "cache_line_one_way", "64 B", 64, "us", std::move(w)));
  const std::span<std::byte> seg = rt.endpoint().segment();
  for (size_t s : memcpy_sizes(o))
    figs.push_back(make(limits_section, "memcpy", bench::bytes_text(s), s, "GB/s", bench::memcpy_workload(s)));
  // The same copy into as many rotating areas as long_stream writes: the
  // limit of that access pattern (its areas together may not fit the cache
  // that one reused buffer fits).
  for (size_t s : memcpy_sizes(o))
    if (s >= (1u << 20) && o.slots > 1)
      figs.push_back(make(limits_section, "memcpy_rotating", bench::bytes_text(s), s, "GB/s",
                          bench::memcpy_workload(s, nullptr, o.slots)));
  // The same copy into this rank's own segment: not a limit, but it tells
  // whether shared-memory pages cost anything against private ones.
  for (size_t s : memcpy_sizes(o))
    if (s >= (64u << 10) && s <= seg.size())
      figs.push_back(make(limits_section, "memcpy_to_shm", bench::bytes_text(s), s, "GB/s",
                          bench::memcpy_workload(s, seg.data())));
  if (udp) add_udp_figures(figs, *udp, o);
  add_clump_figures(figs, d, o, seg.size(), net);
  return figs;
}

/// Every rank's network counters, in rank order (collective).
std::vector<clump::network_stats> gather_network_stats(clump::runtime& rt) {
  const clump::network_stats mine = clump::network_statistics();
  std::vector<clump::network_stats> all(static_cast<size_t>(rt.size()));
  rt.allgather(&mine, all.data(), sizeof mine);
  return all;
}

/// The counters and raw stream totals that go with each row in the JSON.
void attach_extras(std::vector<figure>& figs) {
  for (figure& f : figs) {
    if (f.net.messages_sent || f.net.datagrams_sent)
      f.row.extra["network_counters_rank_0_over_the_samples"] = pingpong::to_json(f.net);
    if (f.totals) {
      const double lost = f.totals->sent ? 1.0 - static_cast<double>(f.totals->arrived) / f.totals->sent : 0;
      f.row.extra["datagrams_sent"] = f.totals->sent;
      f.row.extra["datagrams_arrived"] = f.totals->arrived;
      f.row.extra["dropped_fraction"] = lost;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  clump::runtime rt{argc, argv};
  options o;
  std::string err;
  const bool parsed = pingpong::parse(argc, argv, o, err);
  if (const int code = bench::usage_exit(rt.rank(), "pingpong", parsed, o.help, err, pingpong::usage); code >= 0)
    return code;
  const bench::sampling how{o.reps, o.sample_ms / 1000};

  // Handlers first: the barriers below separate registration from sending.
  pingpong::state st;
  pingpong::handlers h(rt.endpoint(), st);
  // The C API's endpoint beside the C++ one (its startup ends with a barrier),
  // with a segment of malloc'd memory for the largest long stream.
  if (int rc = capi_start(&argc, &argv); rc != 0) die(fmt::format("AMX_SPMDStartup failed: AM code {}", rc));
  if (int rc = capi_private_segment(static_cast<uint64_t>(o.slots) * pingpong::driver::max_payload); rc != 0)
    die(fmt::format("AM_SetSeg of malloc'd memory failed: AM code {}", rc));

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

  // How rank 0 reaches rank 1 (rank 1 answers the probe from the barrier).
  path to_peer = path::self;
  if (rt.rank() == 0) to_peer = pingpong::probe_path(rt, st, h);
  rt.barrier();
  rt.broadcast(&to_peer, sizeof to_peer, 0);
  pingpong::udp_partner u;
  try {
    pingpong::set_up_udp(rt, o.udp == "on" || (o.udp == "auto" && to_peer == path::network), u);
  } catch (const std::exception& e) {
    die(std::string("setting up the raw UDP sockets: ") + e.what());
  }
  rt.barrier();

  if (rt.rank() >= 1) {
    if (rt.rank() == 1)
      serve(rt, st, *p.lines, u.link.get());
    else
      rt.wait_until([&st] { return st.stop; });
    gather_network_stats(rt);
    rt.barrier();
    return 0;
  }

  bench::report rep = begin_report(rt, o, rank_cpus, p, to_peer, u);
  bench::cache_line_driver cl(*p.lines);
  pingpong::driver d(rt, st, h, rt.size() > 1 ? 1 : 0, o.slots);
  std::unique_ptr<bench::udp_driver> udp;
  if (u.link)
    udp = std::make_unique<bench::udp_driver>(
        *u.link, [&d](uint64_t session, bench::udp_mode m) { d.start_udp_session(session, static_cast<uint8_t>(m)); },
        [&rt] { rt.bundle().poll(); });
  const bool net = to_peer == path::network;
  std::vector<figure> figs = plan(rt, o, cl, d, *p.lines, udp.get(), net);

  const bool has_network = !clump::network_address().empty();
  const cpu_times t0 = read_cpu_times();
  const std::string load0 = first_line("/proc/loadavg");
  for (figure& f : figs) f.n = bench::calibrate(how, f.work);
  for (int r = 0; r < o.reps; ++r)
    for (figure& f : figs) {
      const clump::network_stats before = has_network ? clump::network_statistics() : clump::network_stats{};
      bench::take_sample(how, f.work, f.n, f.row.data);
      if (has_network) pingpong::add_difference(f.net, clump::network_statistics(), before);
    }
  const cpu_times t1 = read_cpu_times();

  for (int r = 1; r < rt.size(); ++r)
    if (rt.endpoint().request(r, h.stop) != clump::status::ok) die("the stop request failed");
  const std::vector<clump::network_stats> net_stats = gather_network_stats(rt);
  rt.barrier();
  p.helper.stop();

  if (has_network) {
    nlohmann::json per_rank = nlohmann::json::array();
    for (const clump::network_stats& s : net_stats) per_rank.push_back(pingpong::to_json(s));
    rep.job["network_counters_by_rank"] = per_rank;
  }
  attach_extras(figs);
  for (figure& f : figs) rep.rows.push_back(std::move(f.row));
  add_ratios(rep, net);
  rep.summary = net ? summarize_net(rep) : summarize(rep);
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
  return bench::write_json(rep.to_json(), o.json) ? 0 : 1;
}
