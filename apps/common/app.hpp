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

#include <cstddef>
#include <exception>
#include <optional>

#include "program.hpp"
#include "random64.hpp"

namespace apps {

/// Prints why a program cannot go on (a clump::error from setup: a segment
/// too small, an address not of this host; memory that ran out) and returns
/// 1, its exit code. Every main ends with it:
///   int main(int argc, char** argv) try { ... } catch (const std::exception& e) { return apps::failed(e); }
int failed(const std::exception& e) noexcept;
/// Bytes of memory this machine can still give (MemAvailable, or less under
/// a cgroup limit); 0 when it cannot tell.
uint64_t available_memory() noexcept;

class app : public program {
 public:
  /// Reads the common options (program.hpp); the gas space comes with parsed().
  app(clump::runtime& rt, int argc, char** argv, const char* name, const char* what);

  /// After the options: --help prints them and ends the job (exit 0), an
  /// unknown option or a bad value ends it with the reason (exit 2). Then
  /// makes the gas space, with a segment of at least `gas_bytes` (what the
  /// program allocates on each process, its collectives' staging included)
  /// plus room for the allocator; CLUMP_GAS_SEGMENT when that is larger.
  /// An input whose segments cannot fit in the memory this node has left
  /// (its processes' segments together) is refused before any is made, and
  /// the job ends with the reason (exit 1). Collective.
  void parsed(size_t gas_bytes = 0);

  /// Starts phase `name` (and ends the one before); collective. A timed
  /// part runs from a phase to done_timing(): what comes before the first
  /// phase (allocation, the input) is not timed. A program that runs several
  /// inputs (repeats()) times each from its first phase to done_timing(),
  /// and the total adds them up. A phase started again (every pass of a
  /// sort) adds to its record. A phase's time is the longest any rank spent
  /// in it; its traffic the sum over ranks.
  void phase(const char* name);
  /// Ends the timed part (and its last phase); collective.
  void done_timing();

  /// Collective: gathers the failed checks, prints the report on rank 0,
  /// writes --json, returns the exit code (1 when any check failed on any rank).
  int finish();

 private:
  clump::runtime& rt_;
  std::optional<clump::gas::space> space_;  // made by parsed(); goes after the program's gas objects
};

}  // namespace apps
