#include "app.hpp"

#include <cstdio>

#include <fmt/core.h>

namespace gas = clump::gas;

namespace apps {

namespace {

traffic traffic_now() {
  const gas::traffic_counts t = gas::traffic();
  return {t.node_operations, t.node_bytes, t.network_messages, t.network_bytes};
}

}  // namespace

app::app(clump::runtime& rt, int argc, char** argv, const char* name, const char* what)
    : rt_(rt), opts_(argc, argv, name, what), rank_(rt.rank()), size_(rt.size()) {}

void app::usage_exit(int code, const std::string& why) {
  if (rank_ == 0) {
    if (!why.empty()) std::fprintf(stderr, "%s: %s\n", opts_.name().c_str(), why.c_str());
    std::fputs(fmt::format("usage: clumprun -n P [-N NODES] {} [options]\n{}", opts_.name(), opts_.usage()).c_str(),
               code ? stderr : stdout);
    std::fflush(nullptr);
  }
  rt_.barrier();  // rank 0 has printed before anyone ends the job
  rt_.exit(code);
}

void app::parsed(size_t gas_bytes) {
  if (opts_.help_asked()) usage_exit(0, "");
  if (const std::string why = opts_.problem(); !why.empty()) usage_exit(2, why);
  // The allocator aligns every allocation to a cache line and keeps its own
  // records in the segment: a sixteenth more and 4 MiB cover that.
  space_.emplace(rt_, gas_bytes ? gas_bytes + gas_bytes / 16 + (4u << 20) : 0);
  gas::barrier();
}

void app::phase(const char* name) {
  log_.stop(traffic_now());
  gas::barrier();
  if (!timing_) {
    timing_ = true;
    run_start_ = std::chrono::steady_clock::now();
  }
  log_.start(name, traffic_now());
}

void app::done_timing() {
  log_.stop(traffic_now());
  gas::barrier();
  if (!timing_) return;  // nothing was timed
  run_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start_).count();
}

void app::check(bool ok, const char* format, ...) {
  if (ok) return;
  char buf[512];
  va_list ap;
  va_start(ap, format);
  std::vsnprintf(buf, sizeof buf, format, ap);
  va_end(ap);
  failures_.push_back(fmt::format("rank {}: {}", rank_, buf));
}

void app::note(const std::string& key, double value) { notes_.emplace_back(key, fmt::format("{}", value)); }
void app::note(const std::string& key, const std::string& value) { notes_.emplace_back(key, value); }

int app::finish() {
  if (run_seconds_ == 0) done_timing();
  // Every phase's longest time and total traffic; every rank's failure count.
  // Every rank started the same phases in the same order.
  const std::vector<phase_log::phase>& phases = log_.phases();
  const size_t n = phases.size();
  run_report r;
  r.processes = size_;
  r.notes = notes_;
  r.seconds.resize(n);
  std::vector<uint64_t> moved(4 * n);
  for (size_t i = 0; i < n; ++i) {
    r.names.push_back(phases[i].name);
    r.seconds[i] = phases[i].seconds;
    std::copy(phases[i].moved.begin(), phases[i].moved.end(), moved.begin() + static_cast<std::ptrdiff_t>(4 * i));
  }
  if (n) {
    gas::all_reduce(r.seconds.data(), n, gas::maximum<double>());
    gas::all_reduce(moved.data(), moved.size());
  }
  for (size_t i = 0; i < n; ++i) r.moved.push_back({moved[4 * i], moved[4 * i + 1], moved[4 * i + 2], moved[4 * i + 3]});
  r.total = run_seconds_;
  gas::all_reduce(&r.total, 1, gas::maximum<double>());
  r.failures = failures_.size();
  gas::all_reduce(&r.failures, 1);
  for (const std::string& f : failures_) std::fprintf(stderr, "%s: CHECK FAILED: %s\n", opts_.name().c_str(), f.c_str());
  std::fflush(stderr);
  gas::barrier();
  if (rank_ != 0) return r.failures ? 1 : 0;
  const bool written = publish(opts_, r);
  return r.failures || !written ? 1 : 0;
}

}  // namespace apps
