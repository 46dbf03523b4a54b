#include "report.hpp"

#include <cstdio>
#include <fstream>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

namespace apps {

namespace {

std::string bytes_text(double b) {
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.2f} MB", b / 1e6);
  if (b >= 1e3) return fmt::format("{:.1f} kB", b / 1e3);
  return fmt::format("{:.0f} B", b);
}

}  // namespace

void phase_log::start(const char* name, const traffic& now) {
  stop(now);
  size_t i = 0;
  while (i < phases_.size() && phases_[i].name != name) ++i;
  if (i == phases_.size()) phases_.push_back({name, 0, {}});
  running_ = i + 1;
  at_start_ = now;
  started_ = std::chrono::steady_clock::now();
}

void phase_log::stop(const traffic& now) {
  if (!running_) return;
  phase& p = phases_[running_ - 1];
  p.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  for (size_t k = 0; k < now.size(); ++k) p.moved[k] += now[k] - at_start_[k];
  running_ = 0;
}

bool publish(const options& opts, const run_report& r) {
  fmt::print("{}: {} processes, {} input", opts.name(), r.processes, opts.size_name());
  for (const auto& [k, v] : r.notes) fmt::print(", {} {}", k, v);
  fmt::print("\n{:<22} {:>10}", "phase", "seconds");
  if (r.with_traffic) fmt::print(" {:>12} {:>12} {:>12} {:>12}", "node ops", "node bytes", "net msgs", "net bytes");
  fmt::print("\n");
  nlohmann::json phases = nlohmann::json::array();
  for (size_t i = 0; i < r.names.size(); ++i) {
    fmt::print("{:<22} {:>10.4f}", r.names[i], r.seconds[i]);
    nlohmann::json p{{"name", r.names[i]}, {"seconds", r.seconds[i]}};
    if (r.with_traffic) {
      const traffic& m = r.moved[i];
      fmt::print(" {:>12} {:>12} {:>12} {:>12}", m[0], bytes_text(static_cast<double>(m[1])), m[2],
                 bytes_text(static_cast<double>(m[3])));
      p["node_operations"] = m[0];
      p["node_bytes"] = m[1];
      p["network_messages"] = m[2];
      p["network_bytes"] = m[3];
    }
    fmt::print("\n");
    phases.push_back(std::move(p));
  }
  fmt::print("{:<22} {:>10.4f}\n", "total", r.total);
  fmt::print("{}: check {}\n", opts.name(),
             r.failures ? fmt::format("FAILED ({} failures)", r.failures) : std::string("passed"));
  std::fflush(stdout);
  if (opts.json().empty()) return true;
  nlohmann::json j{{"app", opts.name()},
                   {"processes", r.processes},
                   {"size", opts.size_name()},
                   {"seed", opts.seed()},
                   {"seconds", r.total},
                   {"phases", phases},
                   {"check", r.failures ? "failed" : "passed"},
                   {"failures", r.failures}};
  for (const auto& [k, v] : r.notes) j["notes"][k] = v;
  std::ofstream out(opts.json());
  out << j.dump(2) << "\n";
  if (out) return true;
  std::fprintf(stderr, "%s: could not write %s\n", opts.name().c_str(), opts.json().c_str());
  return false;
}

}  // namespace apps
