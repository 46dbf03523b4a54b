#pragma once
// What a program of apps/ keeps whatever it communicates with: the options
// (options.hpp), the phases, the failed checks and the notes for the report
// (report.hpp). app.hpp adds clump (barriers, reductions, the gas space) and
// apps/mpi/mpi_app.hpp adds MPI; a program uses one of those two.

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "options.hpp"
#include "report.hpp"

namespace apps {

class program {
 public:
  program(const program&) = delete;
  program& operator=(const program&) = delete;

  /// The input size: 0 test (a fraction of a second, for the test suite),
  /// 1 small (the default), 2 large (10-60 s with 4 processes on one node).
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
  std::string word(const char* name, const char* help, const char* choices) { return opts_.word(name, help, choices); }
  /// A flag `--name`.
  bool flag(const char* name, const char* help) { return opts_.flag(name, help); }
  /// --repeat R: how many inputs the program runs, made from the seeds
  /// seed, seed + 1, ...; each is timed and checked, and the times add up.
  /// 1 for the test and small sizes, `large` for the large one: for the
  /// programs whose largest input that fits in memory takes seconds.
  uint64_t repeats(uint64_t large) {
    return opts_.number("--repeat", "inputs to run, from the seeds seed, seed + 1, ... (their times add up)", 1, 1,
                        large);
  }

  /// Records a failed check when `ok` is false (printf-style reason).
  /// Not collective: call it on the ranks that check.
  void check(bool ok, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
  /// Adds a value to the report (parameters, results worth printing).
  void note(const std::string& key, double value);
  void note(const std::string& key, const std::string& value);

 protected:
  /// Reads the common options: --size test|small|large, --seed N, --json
  /// FILE, --help. `what` is one line for --help.
  program(int argc, char** argv, const char* name, const char* what) : opts_(argc, argv, name, what) {}
  ~program() = default;

  /// What is wrong with the command line after every option is read: empty
  /// when nothing is, "" with `help` set for --help.
  std::string command_line_problem(bool& help) const;
  /// On rank 0: the reason (when there is one) and the usage, `launcher`
  /// being how the program is started ("clumprun -n P [-N NODES]").
  void print_usage(const std::string& why, bool to_stderr, const char* launcher) const;

  /// The phase bookkeeping, between the subclass's barriers: ends the phase
  /// running, starts `name` (and a timed part, when none is running).
  void end_phase(const traffic& now) { log_.stop(now); }
  void begin_phase(const char* name, const traffic& now);
  /// Ends the timed part (after the barrier that follows its last phase);
  /// the total is the sum of the timed parts.
  void stop_clock();
  bool timing() const noexcept { return timing_; }

  /// This rank's report (its phases' times and traffic, its own total and
  /// failures), for the subclass to combine over the ranks; says the
  /// failures on stderr.
  run_report local_report() const;

  options opts_;
  int rank_ = 0, size_ = 1;

 private:
  phase_log log_;
  bool timing_ = false;  // a timed part is running
  std::chrono::steady_clock::time_point run_start_;
  double run_seconds_ = 0;
  std::vector<std::string> failures_;
  std::vector<std::pair<std::string, std::string>> notes_;
};

}  // namespace apps
