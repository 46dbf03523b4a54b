#pragma once
// What em3d, con and wator measure beside the phases: one process's time in
// a part of a phase, and the spread of a figure over the processes (the SC97
// paper's Table 4 minimum/maximum columns and Table 6 balance rows).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "app.hpp"

namespace apps {

/// Seconds since `t`.
inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

/// Every rank's value of one figure; collective (an all_gather).
struct rank_spread {
  double min = 0, median = 0, max = 0, mean = 0;

  explicit rank_spread(double mine) {
    std::vector<double> all(static_cast<size_t>(clump::gas::space::current().size()));
    clump::gas::all_gather(&mine, all.data(), 1);
    std::sort(all.begin(), all.end());
    min = all.front();
    max = all.back();
    const size_t n = all.size();
    median = n % 2 ? all[n / 2] : (all[n / 2 - 1] + all[n / 2]) / 2;
    for (double v : all) mean += v / static_cast<double>(n);
  }

  /// "min / median / max" with printf format `f` for each.
  std::string text(const char* f = "%.4g") const {
    const std::string fmt3 = std::string(f) + " / " + f + " / " + f;
    char buf[128];
    std::snprintf(buf, sizeof buf, fmt3.c_str(), min, median, max);
    return buf;
  }
};

/// The network messages this rank sent since `since` (a gas::traffic() snapshot).
inline double network_messages_since(const clump::gas::traffic_counts& since) {
  return static_cast<double>(clump::gas::traffic().network_messages - since.network_messages);
}

}  // namespace apps
