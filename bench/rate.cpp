// rate: the short-message rate of a whole job, every rank sending to every
// other rank at once (all-to-all), with no replies.
//
//   clumprun -n 4 -N 2 ./rate [--messages N] [--reps R] [--json FILE]
//
// In each sample every rank sends N short requests (no arguments) to each
// other rank, round-robin over the destinations, then waits until the
// (P - 1) x N sent to it have arrived; a barrier ends the sample. The figure
// is the job's messages per second, P (P - 1) N over rank 0's time from the
// barrier before to the barrier after. bench/run-all runs it on 4 ranks on 2
// emulated nodes, with the network packing messages into datagrams
// (CLUMP_NET_COALESCE_US, the default) and with a datagram per message
// (CLUMP_NET_COALESCE_US=0), in the same round.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "pingpong_driver.hpp"  // clump's headers, with GCC 12's false warning silenced
#include "report.hpp"

namespace {

constexpr const char* usage = "usage: clumprun -n P [-N NODES] rate [--messages N] [--reps R] [--json FILE]\n";

struct options {
  long messages = 20000;
  int reps = 7;
  std::string json = "bench-rate.json";
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
    } else if (a == "--messages") {
      if (!value(1, 100'000'000, o.messages)) return false;
    } else if (a == "--reps") {
      if (!value(1, 1000, v)) return false;
      o.reps = static_cast<int>(v);
    } else if (a == "--json") {
      if (i + 1 >= argc) return err = "--json needs a file", false;
      o.json = argv[++i];
    } else {
      return err = "unknown option " + a, false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  clump::runtime rt{argc, argv};
  options o;
  std::string err;
  const bool parsed = parse(argc, argv, o, err);
  if (const int code = bench::usage_exit(rt.rank(), "rate", parsed, o.help, err, usage); code >= 0) return code;
  const int p = rt.size();
  if (p < 2) {
    if (rt.rank() == 0) std::fprintf(stderr, "rate: needs 2 ranks or more\n");
    return 2;
  }
  clump::endpoint& ep = rt.endpoint();
  uint64_t received = 0;
  auto count = ep.on_request([&](clump::token&) { ++received; });
  const uint64_t per_sample = static_cast<uint64_t>(p - 1) * static_cast<uint64_t>(o.messages);
  uint64_t expected = 0;
  bench::series samples;
  auto sample = [&] {
    rt.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < o.messages; ++i)
      for (int d = 1; d < p; ++d)
        if (const clump::status s = ep.request((rt.rank() + d) % p, count); s != clump::status::ok) {
          std::fprintf(stderr, "rate: rank %d: a request failed: %s\n", rt.rank(), clump::to_string(s));
          std::exit(1);
        }
    expected += per_sample;
    rt.wait_until([&] { return received >= expected; });
    rt.barrier();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return static_cast<double>(p) * static_cast<double>(per_sample) / secs / 1e6;
  };
  sample();  // warm-up: every peer's state made, every path taken once
  const clump::network_stats before = clump::network_statistics();
  for (int r = 0; r < o.reps; ++r) samples.samples.push_back(sample());
  const clump::network_stats after = clump::network_statistics();
  if (received != expected) {
    std::fprintf(stderr, "rate: rank %d received %llu messages, %llu were sent to it\n", rt.rank(),
                 static_cast<unsigned long long>(received), static_cast<unsigned long long>(expected));
    return 1;
  }
  if (rt.rank() != 0) return 0;

  bench::report rep;
  rep.machine = bench::machine_info();
  rep.job = {{"ranks", p}, {"messages_per_pair", o.messages}};
  rep.config = {{"reps", o.reps}, {"clump", bench::clump_environment()}};
  bench::row r;
  r.section = "message rate, all-to-all";
  r.id = "all_to_all";
  r.size = "0 words";
  r.unit = "M msg/s";
  r.data = samples;
  const uint64_t sent = after.messages_sent - before.messages_sent;
  const uint64_t datagrams = after.datagrams_sent - before.datagrams_sent;
  r.extra = {{"rank0_network_messages_sent", sent}, {"rank0_datagrams_sent", datagrams}};
  rep.rows.push_back(r);
  rep.notes.push_back("all_to_all: every rank sends " + std::to_string(o.messages) +
                      " short requests without arguments to each other rank, round-robin, no replies, then waits for "
                      "the ones sent to it; the job's messages a second, from barrier to barrier on rank 0");
  rep.notes.push_back("rank 0 sent " + std::to_string(sent) + " messages over the network in " +
                      std::to_string(datagrams) + " datagrams (acknowledgements included)");
  rep.legend = "ratio: none; bench/run-all puts this figure beside the same run with a datagram per message\n";
  rep.print(stdout);
  return bench::write_json(rep.to_json(), o.json) ? 0 : 1;
}
