#pragma once
// The report every program of apps/ prints and writes, the clump programs
// (app.hpp) and their MPI peers (apps/mpi) alike: time per phase, and for
// the clump programs the traffic of each phase (the SC97 paper's Table 4),
// then the total and the check's verdict; the same as JSON with --json.

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "options.hpp"

namespace apps {

/// A phase's traffic: operations and bytes to processes on this node,
/// messages and bytes to other nodes.
using traffic = std::array<uint64_t, 4>;

/// The phases of one process's run, in the order they first started. A
/// phase started again (every pass of a sort) adds to its record.
class phase_log {
 public:
  struct phase {
    std::string name;
    double seconds = 0;
    traffic moved{};
  };

  /// Ends the phase running (if any) and starts `name`; `now` is the traffic so far.
  void start(const char* name, const traffic& now);
  /// Ends the phase running, if any.
  void stop(const traffic& now);
  const std::vector<phase>& phases() const noexcept { return phases_; }

 private:
  std::vector<phase> phases_;
  size_t running_ = 0;  // index + 1 of the phase running, 0 for none
  std::chrono::steady_clock::time_point started_;
  traffic at_start_{};
};

/// What rank 0 reports: each phase's longest time over the processes and
/// its traffic summed over them.
struct run_report {
  int processes = 1;
  std::vector<std::string> names;
  std::vector<double> seconds;
  std::vector<traffic> moved;
  bool with_traffic = true;  // false for the MPI peers, which count none
  double total = 0;
  uint64_t failures = 0;
  std::vector<std::pair<std::string, std::string>> notes;
};

/// Prints the report on stdout and writes opts.json() when given. Returns
/// false (after saying so on stderr) when the JSON file cannot be written.
bool publish(const options& opts, const run_report& r);

}  // namespace apps
