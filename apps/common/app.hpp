#pragma once
// What every Split-C application of apps/ shares: its command line, its
// phases (time and communication of each, the SC97 paper's Table 4), its
// result check, and its report (a table on rank 0 and JSON).
//
//   int main(int argc, char** argv) {
//     clump::runtime rt{argc, argv};
//     apps::app app(rt, argc, argv, "radix", "sorts keys with a one-way store permutation per pass");
//     const size_t keys = app.number("--keys", "keys per process", 1 << 12, 1 << 18, 1 << 22);
//     app.parsed(2 * keys * 4);          // unknown options end the job here (exit 2); then the
//                                        // gas space, with room for this input
//     ... app.phase("local histogram"); ...; app.phase("permute"); ...
//     app.done_timing();                 // the run is over; the check is not timed
//     app.check(sorted, "the keys are not sorted (first bad index %zu)", bad);
//     return app.finish();               // prints, writes --json, returns the exit code
//   }
//
// Every rank calls the same functions in the same order: phase(), parsed(),
// done_timing(), check() and finish() are collective.
//
// The app makes the gas space once the options are read, so that a program
// can size its segment for its input: the 64 MiB default (CLUMP_GAS_SEGMENT)
// holds the small inputs, not the large ones.

#include <clump/clump.hpp>
#include <clump/gas.hpp>

#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "options.hpp"
#include "random64.hpp"
#include "report.hpp"

namespace apps {

class app {
 public:
  /// Reads the common options: --size test|small|large, --seed N, --json
  /// FILE, --help (options.hpp). `what` is one line for --help. The gas
  /// space comes with parsed().
  app(clump::runtime& rt, int argc, char** argv, const char* name, const char* what);

  /// The input size: 0 test (a fraction of a second, for the test suite),
  /// 1 small (seconds, the default), 2 large (about a minute with 4 processes on one node).
  int size_class() const noexcept { return opts_.size_class(); }
  uint64_t seed() const noexcept { return opts_.seed(); }
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }

  /// An integer option `--name N`, with a default for each size class.
  uint64_t number(const char* name, const char* help, uint64_t test, uint64_t small, uint64_t large) {
    return opts_.number(name, help, test, small, large);
  }
  /// A real option `--name X`, with a default for each size class.
  double real(const char* name, const char* help, double test, double small, double large) {
    return opts_.real(name, help, test, small, large);
  }
  /// A word option `--name WORD`, one of `choices` (comma-separated); the first is the default.
  std::string word(const char* name, const char* help, const char* choices) {
    return opts_.word(name, help, choices);
  }
  /// A flag `--name`.
  bool flag(const char* name, const char* help) { return opts_.flag(name, help); }

  /// After the options: --help prints them and ends the job (exit 0), an
  /// unknown option or a bad value ends it with the reason (exit 2). Then
  /// makes the gas space, with a segment of at least `gas_bytes` (what the
  /// program allocates on each process, its collectives' staging included)
  /// plus room for the allocator; CLUMP_GAS_SEGMENT when that is larger.
  /// Collective.
  void parsed(size_t gas_bytes = 0);

  /// Starts phase `name` (and ends the one before); collective. The timed
  /// part starts with the first phase: what comes before (allocation, the
  /// input) is not timed. A phase started again (every pass of a sort) adds
  /// to its record. A phase's time is the longest any rank spent in it; its
  /// traffic the sum over ranks.
  void phase(const char* name);
  /// Ends the timed part (and the last phase); collective.
  void done_timing();

  /// Records a failed check when `ok` is false (printf-style reason).
  /// Not collective: call it on the ranks that check.
  void check(bool ok, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
  /// Adds a value to the report (parameters, results worth printing).
  void note(const std::string& key, double value);
  void note(const std::string& key, const std::string& value);

  /// Collective: gathers the failed checks, prints the report on rank 0,
  /// writes --json, returns the exit code (1 when any check failed on any rank).
  int finish();

 private:
  [[noreturn]] void usage_exit(int code, const std::string& why);

  clump::runtime& rt_;
  options opts_;
  std::optional<clump::gas::space> space_;  // made by parsed(); goes after the program's gas objects
  int rank_ = 0, size_ = 1;
  phase_log log_;
  bool timing_ = false;  // a phase has started
  std::chrono::steady_clock::time_point run_start_;
  double run_seconds_ = 0;
  std::vector<std::string> failures_;
  std::vector<std::pair<std::string, std::string>> notes_;
};

}  // namespace apps
