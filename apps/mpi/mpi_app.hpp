#pragma once
// apps/common/app.hpp for the MPI peers: the same command line (options.hpp),
// the same phases, check and report (report.hpp), over MPI instead of
// clump. There is no traffic to count, so the report has time alone.
//
//   int main(int argc, char** argv) {
//     apps::mpi_app a(argc, argv, "radix_mpi", "what it does");  // MPI_Init
//     const size_t n = a.number("--keys", "keys per process", ...);
//     a.parsed();
//     a.phase("histogram"); ...; a.done_timing();
//     a.check(ok, "why %d", x);
//     return a.finish();                                         // MPI_Finalize
//   }

#include <mpi.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "program.hpp"

namespace apps {

/// MPI_Init, as a base: it comes before program's, which reads the options
/// (MPI_Init may take its own out of argv).
struct mpi_session {
  mpi_session(int& argc, char**& argv) { MPI_Init(&argc, &argv); }
};

class mpi_app : private mpi_session, public program {
 public:
  /// MPI_Init, then the common options (program.hpp).
  mpi_app(int argc, char** argv, const char* name, const char* what)
      : mpi_session(argc, argv), program(argc, argv, name, what) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }

  /// --help prints the options and ends the run (exit 0); a mistake ends it with the reason (exit 2).
  void parsed() {
    bool help = false;
    const std::string why = command_line_problem(help);
    if (help || !why.empty()) usage_exit(help ? 0 : 2, why);
  }
  /// Ends the run with the reason (exit 2), like a bad option.
  [[noreturn]] void refuse(const std::string& why) { usage_exit(2, why); }

  /// As app.hpp's: collective; the timed part starts with the first phase.
  void phase(const char* name) {
    end_phase({});
    MPI_Barrier(MPI_COMM_WORLD);
    begin_phase(name, {});
  }
  void done_timing() {
    end_phase({});
    MPI_Barrier(MPI_COMM_WORLD);
    stop_clock();
  }

  /// Prints the report on rank 0, writes --json, ends MPI; the exit code.
  int finish() {
    if (timing()) done_timing();
    run_report r = local_report();
    r.with_traffic = false;
    const std::vector<double> mine = r.seconds;
    const double total = r.total;
    const uint64_t failures = r.failures;
    MPI_Allreduce(mine.data(), r.seconds.data(), static_cast<int>(mine.size()), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&total, &r.total, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&failures, &r.failures, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    const bool written = rank_ != 0 || publish(opts_, r);
    MPI_Finalize();
    return r.failures || !written ? 1 : 0;
  }

 private:
  [[noreturn]] void usage_exit(int code, const std::string& why) {
    print_usage(why, code != 0, "mpirun -np P");
    MPI_Finalize();
    std::exit(code);
  }
};

}  // namespace apps
