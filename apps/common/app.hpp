#pragma once
// What every Split-C application of apps/ shares: its command line, its
// phases (time and communication of each, the SC97 paper's Table 4), its
// result check, and its report (a table on rank 0 and JSON).
//
//   int main(int argc, char** argv) {
//     clump::runtime rt{argc, argv};
//     clump::gas::space gs{rt};
//     apps::app app(argc, argv, "radix", "sorts keys with a one-way store permutation per pass");
//     const size_t keys = app.number("--keys", "keys per process", 1 << 12, 1 << 18, 1 << 22);
//     app.parsed();                      // unknown options end the job here (exit 2)
//     ... app.phase("local histogram"); ...; app.phase("permute"); ...
//     app.done_timing();                 // the run is over; the check is not timed
//     app.check(sorted, "the keys are not sorted (first bad index %zu)", bad);
//     return app.finish();               // prints, writes --json, returns the exit code
//   }
//
// Every rank calls the same functions in the same order: phase(), parsed(),
// done_timing(), check() and finish() are collective.

#include <clump/clump.hpp>
#include <clump/gas.hpp>

#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <string>
#include <vector>

#include "random64.hpp"

namespace apps {

class app {
 public:
  /// Reads the common options: --size test|small|large, --seed N, --json
  /// FILE, --help. `what` is one line for --help.
  app(int argc, char** argv, const char* name, const char* what);

  /// The input size: 0 test (a fraction of a second, for the test suite),
  /// 1 small (seconds, the default), 2 large (about a minute).
  int size_class() const noexcept { return size_class_; }
  uint64_t seed() const noexcept { return seed_; }
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }

  /// An integer option `--name N`, with a default for each size class.
  uint64_t number(const char* name, const char* help, uint64_t test, uint64_t small, uint64_t large);
  /// A real option `--name X`, with a default for each size class.
  double real(const char* name, const char* help, double test, double small, double large);
  /// A word option `--name WORD`, one of `choices` (comma-separated); the first is the default.
  std::string word(const char* name, const char* help, const char* choices);
  /// A flag `--name`.
  bool flag(const char* name, const char* help);

  /// After the options: --help prints them and ends the job (exit 0), an
  /// unknown option or a bad value ends it with the reason (exit 2).
  /// Collective (a barrier: the timing starts here).
  void parsed();

  /// Starts phase `name` (and ends the one before); collective. A phase's
  /// time is the longest any rank took; its traffic the sum over ranks.
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
  struct phase_record {
    std::string name;
    double seconds = 0;
    clump::gas::traffic_counts moved;
  };
  template <class T>
  T option(const char* name, const char* help, T test, T small, T large, const char* kind);
  void close_phase();
  [[noreturn]] void usage_exit(int code, const std::string& why);

  std::vector<std::string> args_;
  std::vector<bool> used_;
  std::string name_, what_, help_, json_, bad_;
  int size_class_ = 1;
  bool help_asked_ = false;
  uint64_t seed_ = 1;
  int rank_ = 0, size_ = 1;
  std::vector<phase_record> phases_;
  bool in_phase_ = false;
  std::chrono::steady_clock::time_point phase_start_, run_start_;
  clump::gas::traffic_counts phase_moved_{};
  double run_seconds_ = 0;
  std::vector<std::string> failures_;
  std::vector<std::pair<std::string, std::string>> notes_;
};

}  // namespace apps
