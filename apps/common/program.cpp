#include "program.hpp"

#include <cstdarg>
#include <cstdio>

#include <fmt/core.h>

namespace apps {

void program::check(bool ok, const char* format, ...) {
  if (ok) return;
  char buf[512];
  va_list ap;
  va_start(ap, format);
  std::vsnprintf(buf, sizeof buf, format, ap);
  va_end(ap);
  failures_.push_back(fmt::format("rank {}: {}", rank_, buf));
}

void program::note(const std::string& key, double value) { notes_.emplace_back(key, fmt::format("{}", value)); }
void program::note(const std::string& key, const std::string& value) { notes_.emplace_back(key, value); }

std::string program::command_line_problem(bool& help) const {
  help = opts_.help_asked();
  return help ? std::string() : opts_.problem();
}

void program::print_usage(const std::string& why, bool to_stderr, const char* launcher) const {
  if (rank_ != 0) return;
  if (!why.empty()) std::fprintf(stderr, "%s: %s\n", opts_.name().c_str(), why.c_str());
  std::fputs(fmt::format("usage: {} {} [options]\n{}", launcher, opts_.name(), opts_.usage()).c_str(),
             to_stderr ? stderr : stdout);
  std::fflush(nullptr);
}

void program::begin_phase(const char* name, const traffic& now) {
  if (!timing_) {
    timing_ = true;
    run_start_ = std::chrono::steady_clock::now();
  }
  log_.start(name, now);
}

void program::stop_clock() {
  if (timing_) run_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start_).count();
  timing_ = false;
}

run_report program::local_report() const {
  run_report r;
  r.processes = size_;
  r.notes = notes_;
  for (const phase_log::phase& p : log_.phases()) {
    r.names.push_back(p.name);
    r.seconds.push_back(p.seconds);
    r.moved.push_back(p.moved);
  }
  r.total = run_seconds_;
  r.failures = failures_.size();
  for (const std::string& f : failures_)
    std::fprintf(stderr, "%s: CHECK FAILED: %s\n", opts_.name().c_str(), f.c_str());
  std::fflush(stderr);
  return r;
}

}  // namespace apps
