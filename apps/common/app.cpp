#include "app.hpp"

#include <algorithm>

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
  space_.emplace(rt_, gas_bytes ? gas_bytes + gas_bytes / 16 + (4u << 20) : 0);
  gas::barrier();
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
