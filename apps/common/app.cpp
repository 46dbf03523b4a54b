#include "app.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <new>

namespace gas = clump::gas;

namespace apps {

namespace {

traffic traffic_now() {
  const gas::traffic_counts t = gas::traffic();
  return {t.node_operations, t.node_bytes, t.network_messages, t.network_bytes};
}

}  // namespace

app::app(clump::runtime& rt, int argc, char** argv, const char* name, const char* what)
    : program(argc, argv, name, what), rt_(rt) {
  rank_ = rt.rank();
  size_ = rt.size();
}

void app::parsed(size_t gas_bytes) {
  bool help = false;
  const std::string why = command_line_problem(help);
  if (help || !why.empty()) {
    print_usage(why, !help, "clumprun -n P [-N NODES]");
    rt_.barrier();  // rank 0 has printed before anyone ends the job
    rt_.exit(help ? 0 : 2);
  }
  // The allocator aligns every allocation to a cache line and keeps its own
  // records in the segment: a sixteenth more and 4 MiB cover that.
  const size_t segment = gas_bytes ? gas_bytes + gas_bytes / 16 + (4u << 20) : 0;
  // An input that cannot fit is refused now, with the figures, rather than
  // found out by the kernel's OOM killer halfway through.
  const uint64_t available = available_memory();
  const uint64_t need = static_cast<uint64_t>(segment) * static_cast<uint64_t>(rt_.node_size());
  if (available && need > available) {
    if (rank_ == 0)
      std::fprintf(stderr,
                   "%s: this input needs about %llu MiB of memory a process, %llu MiB for the %d processes of a "
                   "node, and this machine has %llu MiB available: give a smaller input, or spread the processes "
                   "over more nodes\n",
                   opts_.name().c_str(), static_cast<unsigned long long>(segment >> 20), static_cast<unsigned long long>(need >> 20),
                   rt_.node_size(), static_cast<unsigned long long>(available >> 20));
    rt_.barrier();  // rank 0 has printed before anyone ends the job
    rt_.exit(1);
  }
  space_.emplace(rt_, segment);
  gas::barrier();
}

uint64_t available_memory() noexcept {
  // What the kernel says it can give without swapping (MemAvailable), or
  // less when a cgroup limit (cgroup v2: memory.max) is nearer.
  uint64_t avail = 0;
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    unsigned long long kib = 0;
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) avail = static_cast<uint64_t>(kib) << 10;
    std::fclose(f);
  }
  unsigned long long max = 0, current = 0;
  std::FILE* m = std::fopen("/sys/fs/cgroup/memory.max", "r");
  std::FILE* c = std::fopen("/sys/fs/cgroup/memory.current", "r");
  if (m && c && std::fscanf(m, "%llu", &max) == 1 && std::fscanf(c, "%llu", &current) == 1 && max > current)
    avail = avail ? std::min<uint64_t>(avail, max - current) : max - current;
  if (m) std::fclose(m);
  if (c) std::fclose(c);
  return avail;
}

int failed(const std::exception& e) noexcept {
  if (dynamic_cast<const std::bad_alloc*>(&e))
    std::fprintf(stderr, "error: memory ran out (%s): give a smaller input, or run fewer processes a node\n", e.what());
  else
    std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}

void app::phase(const char* name) {
  end_phase(traffic_now());
  gas::barrier();
  begin_phase(name, traffic_now());
}

void app::done_timing() {
  end_phase(traffic_now());
  gas::barrier();
  stop_clock();
}

int app::finish() {
  if (timing()) done_timing();
  // Every phase's longest time and total traffic; every rank's failure count.
  // Every rank started the same phases in the same order.
  run_report r = local_report();
  const size_t n = r.names.size();
  std::vector<uint64_t> moved(4 * n);
  for (size_t i = 0; i < n; ++i) std::copy(r.moved[i].begin(), r.moved[i].end(), moved.begin() + 4 * i);
  if (n) {
    gas::all_reduce(r.seconds.data(), n, gas::maximum<double>());
    gas::all_reduce(moved.data(), moved.size());
  }
  for (size_t i = 0; i < n; ++i) std::copy_n(moved.begin() + 4 * i, 4, r.moved[i].begin());
  gas::all_reduce(&r.total, 1, gas::maximum<double>());
  gas::all_reduce(&r.failures, 1);
  gas::barrier();  // every rank has said its failures before rank 0 prints
  if (rank_ != 0) return r.failures ? 1 : 0;
  const bool written = publish(opts_, r);
  return r.failures || !written ? 1 : 0;
}

}  // namespace apps
