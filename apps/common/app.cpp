#include "app.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <type_traits>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

namespace gas = clump::gas;

namespace apps {

namespace {

const char* const size_names[] = {"test", "small", "large"};

double max_over_ranks(double v) {
  gas::all_reduce(&v, 1, gas::maximum<double>());
  return v;
}

gas::traffic_counts minus(const gas::traffic_counts& a, const gas::traffic_counts& b) {
  return {a.node_operations - b.node_operations, a.node_bytes - b.node_bytes,
          a.network_messages - b.network_messages, a.network_bytes - b.network_bytes};
}

std::string bytes_text(double b) {
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.2f} MB", b / 1e6);
  if (b >= 1e3) return fmt::format("{:.1f} kB", b / 1e3);
  return fmt::format("{:.0f} B", b);
}

}  // namespace

app::app(int argc, char** argv, const char* name, const char* what) : name_(name), what_(what) {
  rank_ = gas::space::current().rank();
  size_ = gas::space::current().size();
  for (int i = 1; i < argc; ++i) args_.emplace_back(argv[i]);
  used_.assign(args_.size(), false);
  help_ = fmt::format("usage: clumprun -n P [-N NODES] {} [options]\n{}\n\n  --size WORD         the input: test "
                      "(a fraction of a second), small (seconds; the default), large (about a minute)\n"
                      "  --seed N            the input's random seed (default 1)\n"
                      "  --json FILE         also write the report as JSON\n",
                      name, what);
  const std::string size = word("--size", nullptr, "small,test,large");
  size_class_ = size == "test" ? 0 : size == "small" ? 1 : 2;
  seed_ = number("--seed", nullptr, 1, 1, 1);
  for (size_t i = 0; i < args_.size(); ++i) {
    if (args_[i] == "--help" || args_[i] == "-h") {
      help_asked_ = true;
      used_[i] = true;
    } else if (args_[i] == "--json") {
      used_[i] = true;
      if (i + 1 < args_.size()) {
        json_ = args_[i + 1];
        used_[i + 1] = true;
      } else if (bad_.empty()) {
        bad_ = "--json needs a file name";
      }
    }
  }
}

namespace {

/// The value after `name` in args, or nullptr; marks both used; records a missing value in `bad`.
const std::string* value_of(const std::vector<std::string>& args, std::vector<bool>& used, const char* name,
                            std::string& bad) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] != name) continue;
    used[i] = true;
    if (i + 1 >= args.size()) {
      if (bad.empty()) bad = std::string(name) + " needs a value";
      return nullptr;
    }
    used[i + 1] = true;
    return &args[i + 1];
  }
  return nullptr;
}

}  // namespace

namespace {

/// Reads `text` as a T: a whole number (no sign) or a real; false when it is not one.
template <class T>
bool read_as(const std::string& text, T& out) {
  char* end = nullptr;
  if constexpr (std::is_floating_point_v<T>) {
    out = std::strtod(text.c_str(), &end);
  } else {
    if (!text.empty() && text[0] == '-') return false;
    out = std::strtoull(text.c_str(), &end, 0);
  }
  return !text.empty() && *end == 0;
}

}  // namespace

template <class T>
T app::option(const char* name, const char* help, T test, T small, T large, const char* kind) {
  if (help)
    help_ += fmt::format("  {:<19} {} (default {}; test {}, large {})\n",
                         fmt::format("{} {}", name, std::is_floating_point_v<T> ? "X" : "N"), help, small, test, large);
  T v = size_class_ == 0 ? test : size_class_ == 1 ? small : large;
  if (const std::string* s = value_of(args_, used_, name, bad_)) {
    T x{};
    if (read_as(*s, x))
      v = x;
    else if (bad_.empty())
      bad_ = fmt::format("{} {}: expected {}", name, *s, kind);
  }
  return v;
}

uint64_t app::number(const char* name, const char* help, uint64_t test, uint64_t small, uint64_t large) {
  return option(name, help, test, small, large, "a whole number");
}

double app::real(const char* name, const char* help, double test, double small, double large) {
  return option(name, help, test, small, large, "a number");
}

std::string app::word(const char* name, const char* help, const char* choices) {
  const std::string list = choices;
  const std::string first = list.substr(0, list.find(','));
  if (help) help_ += fmt::format("  {:<19} {}: {} (default {})\n", fmt::format("{} WORD", name), help, list, first);
  const std::string* s = value_of(args_, used_, name, bad_);
  if (!s) return first;
  const std::string padded = "," + list + ",";
  if (padded.find("," + *s + ",") == std::string::npos) {
    if (bad_.empty()) bad_ = fmt::format("{} {}: expected one of {}", name, *s, list);
    return first;
  }
  return *s;
}

bool app::flag(const char* name, const char* help) {
  if (help) help_ += fmt::format("  {:<19} {}\n", name, help);
  bool on = false;
  for (size_t i = 0; i < args_.size(); ++i)
    if (args_[i] == name) used_[i] = on = true;
  return on;
}

void app::usage_exit(int code, const std::string& why) {
  if (rank_ == 0) {
    if (!why.empty()) std::fprintf(stderr, "%s: %s\n", name_.c_str(), why.c_str());
    std::fputs(help_.c_str(), code ? stderr : stdout);
    std::fflush(nullptr);
  }
  gas::barrier();  // rank 0 has printed before anyone ends the job
  gas::space::current().owner().exit(code);
}

void app::parsed() {
  if (help_asked_) usage_exit(0, "");
  if (!bad_.empty()) usage_exit(2, bad_);
  for (size_t i = 0; i < args_.size(); ++i)
    if (!used_[i]) usage_exit(2, "unknown option " + args_[i]);
  gas::barrier();
  run_start_ = std::chrono::steady_clock::now();
}

void app::close_phase() {
  if (!in_phase_) return;
  phase_record& p = phases_.back();
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - phase_start_).count();
  p.moved = minus(gas::traffic(), phase_moved_);
  in_phase_ = false;
}

void app::phase(const char* name) {
  close_phase();
  gas::barrier();
  phases_.push_back({name, 0, {}});
  in_phase_ = true;
  phase_moved_ = gas::traffic();
  phase_start_ = std::chrono::steady_clock::now();
}

void app::done_timing() {
  close_phase();
  gas::barrier();
  run_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start_).count();
}

void app::check(bool ok, const char* format, ...) {
  if (ok) return;
  char buf[512];
  va_list ap;
  va_start(ap, format);
  std::vsnprintf(buf, sizeof buf, format, ap);
  va_end(ap);
  failures_.push_back(fmt::format("rank {}: {}", rank_, buf));
}

void app::note(const std::string& key, double value) { notes_.emplace_back(key, fmt::format("{}", value)); }
void app::note(const std::string& key, const std::string& value) { notes_.emplace_back(key, value); }

int app::finish() {
  if (run_seconds_ == 0) done_timing();
  // Every phase's longest time and total traffic; every rank's failure count.
  const size_t n = phases_.size();
  std::vector<double> seconds(n);
  std::vector<uint64_t> moved(4 * n);
  for (size_t i = 0; i < n; ++i) {
    seconds[i] = phases_[i].seconds;
    const gas::traffic_counts& t = phases_[i].moved;
    moved[4 * i] = t.node_operations;
    moved[4 * i + 1] = t.node_bytes;
    moved[4 * i + 2] = t.network_messages;
    moved[4 * i + 3] = t.network_bytes;
  }
  if (n) {
    gas::all_reduce(seconds.data(), n, gas::maximum<double>());
    gas::all_reduce(moved.data(), moved.size());
  }
  const double total = max_over_ranks(run_seconds_);
  uint64_t failed = failures_.size();
  gas::all_reduce(&failed, 1);
  for (const std::string& f : failures_) std::fprintf(stderr, "%s: CHECK FAILED: %s\n", name_.c_str(), f.c_str());
  std::fflush(stderr);
  gas::barrier();
  if (rank_ != 0) return failed ? 1 : 0;

  fmt::print("{}: {} processes, {} input", name_, size_, size_names[size_class_]);
  for (const auto& [k, v] : notes_) fmt::print(", {} {}", k, v);
  fmt::print("\n{:<22} {:>10} {:>12} {:>12} {:>12} {:>12}\n", "phase", "seconds", "node ops", "node bytes",
             "net msgs", "net bytes");
  nlohmann::json jp = nlohmann::json::array();
  for (size_t i = 0; i < n; ++i) {
    const uint64_t* m = &moved[4 * i];
    fmt::print("{:<22} {:>10.4f} {:>12} {:>12} {:>12} {:>12}\n", phases_[i].name, seconds[i], m[0],
               bytes_text(static_cast<double>(m[1])), m[2], bytes_text(static_cast<double>(m[3])));
    jp.push_back({{"name", phases_[i].name},
                  {"seconds", seconds[i]},
                  {"node_operations", m[0]},
                  {"node_bytes", m[1]},
                  {"network_messages", m[2]},
                  {"network_bytes", m[3]}});
  }
  fmt::print("{:<22} {:>10.4f}\n", "total", total);
  fmt::print("{}: check {}\n", name_, failed ? fmt::format("FAILED ({} failures)", failed) : "passed");
  std::fflush(stdout);
  if (!json_.empty()) {
    nlohmann::json j{{"app", name_},      {"processes", size_}, {"size", size_names[size_class_]},
                     {"seed", seed_},     {"seconds", total},   {"phases", jp},
                     {"check", failed ? "failed" : "passed"}, {"failures", failed}};
    for (const auto& [k, v] : notes_) j["notes"][k] = v;
    std::ofstream out(json_);
    out << j.dump(2) << "\n";
    if (!out) {
      std::fprintf(stderr, "%s: could not write %s\n", name_.c_str(), json_.c_str());
      return 1;
    }
  }
  return failed ? 1 : 0;
}

}  // namespace apps
