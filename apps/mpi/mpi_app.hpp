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

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "options.hpp"
#include "report.hpp"

namespace apps {

class mpi_app {
 public:
  mpi_app(int argc, char** argv, const char* name, const char* what)
      : mpi_started_(init(&argc, &argv)), opts_(argc, argv, name, what) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  mpi_app(const mpi_app&) = delete;
  mpi_app& operator=(const mpi_app&) = delete;

  int size_class() const noexcept { return opts_.size_class(); }
  uint64_t seed() const noexcept { return opts_.seed(); }
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }

  uint64_t number(const char* name, const char* help, uint64_t test, uint64_t small, uint64_t large) {
    return opts_.number(name, help, test, small, large);
  }
  double real(const char* name, const char* help, double test, double small, double large) {
    return opts_.real(name, help, test, small, large);
  }

  /// --help prints the options and ends the run (exit 0); a mistake ends it with the reason (exit 2).
  void parsed() {
    if (opts_.help_asked()) usage_exit(0, "");
    if (const std::string why = opts_.problem(); !why.empty()) usage_exit(2, why);
  }
  /// Ends the job with the reason (exit 2), like a bad option.
  [[noreturn]] void refuse(const std::string& why) { usage_exit(2, why); }

  void phase(const char* name) {
    log_.stop({});
    MPI_Barrier(MPI_COMM_WORLD);
    if (!timing_) {  // the timed part starts with the first phase, as app.hpp's
      timing_ = true;
      run_start_ = std::chrono::steady_clock::now();
    }
    log_.start(name, {});
  }
  void done_timing() {
    log_.stop({});
    MPI_Barrier(MPI_COMM_WORLD);
    if (!timing_) return;
    run_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start_).count();
  }

  void check(bool ok, const char* format, ...) __attribute__((format(printf, 3, 4))) {
    if (ok) return;
    char buf[512];
    va_list ap;
    va_start(ap, format);
    std::vsnprintf(buf, sizeof buf, format, ap);
    va_end(ap);
    std::fprintf(stderr, "%s: CHECK FAILED: rank %d: %s\n", opts_.name().c_str(), rank_, buf);
    ++failures_;
  }
  void note(const std::string& key, const std::string& value) { notes_.emplace_back(key, value); }
  void note(const std::string& key, double value) { notes_.emplace_back(key, fmt::format("{}", value)); }

  /// Prints the report on rank 0, writes --json, ends MPI; the exit code.
  int finish() {
    if (run_seconds_ == 0) done_timing();
    const std::vector<phase_log::phase>& phases = log_.phases();
    run_report r;
    r.processes = size_;
    r.with_traffic = false;
    r.notes = notes_;
    r.seconds.resize(phases.size());
    for (const phase_log::phase& p : phases) r.names.push_back(p.name);
    std::vector<double> mine(phases.size());
    for (size_t i = 0; i < phases.size(); ++i) mine[i] = phases[i].seconds;
    MPI_Allreduce(mine.data(), r.seconds.data(), static_cast<int>(mine.size()), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&run_seconds_, &r.total, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&failures_, &r.failures, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    std::fflush(stderr);
    const bool written = rank_ != 0 || publish(opts_, r);
    MPI_Finalize();
    return r.failures || !written ? 1 : 0;
  }

 private:
  static int init(int* argc, char*** argv) { return MPI_Init(argc, argv); }

  [[noreturn]] void usage_exit(int code, const std::string& why) {
    if (rank_ == 0) {
      if (!why.empty()) std::fprintf(stderr, "%s: %s\n", opts_.name().c_str(), why.c_str());
      std::fputs(fmt::format("usage: mpirun -np P {} [options]\n{}", opts_.name(), opts_.usage()).c_str(),
                 code ? stderr : stdout);
    }
    MPI_Finalize();
    std::exit(code);
  }

  int mpi_started_;  // before opts_: MPI_Init may take its own arguments out of argv
  options opts_;
  int rank_ = 0, size_ = 1;
  phase_log log_;
  bool timing_ = false;
  std::chrono::steady_clock::time_point run_start_;
  double run_seconds_ = 0;
  uint64_t failures_ = 0;
  std::vector<std::pair<std::string, std::string>> notes_;
};

}  // namespace apps
