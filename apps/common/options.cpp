#include "options.hpp"

#include <cstdlib>
#include <type_traits>

#include <fmt/core.h>

namespace apps {

namespace {

const char* const size_names[] = {"test", "small", "large"};

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

options::options(int argc, char** argv, const char* name, const char* what) : name_(name) {
  for (int i = 1; i < argc; ++i) args_.emplace_back(argv[i]);
  used_.assign(args_.size(), false);
  help_ = fmt::format("{}\n\n  --size WORD         the input: test (a fraction of a second), small (the default; up to "
                      "seconds on one node), large (10-60 s with 4 processes on one node)\n"
                      "  --seed N            the input's random seed (default 1)\n"
                      "  --json FILE         also write the report as JSON\n",
                      what);
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

const char* options::size_name() const noexcept { return size_names[size_class_]; }

template <class T>
T options::option(const char* name, const char* help, T test, T small, T large, const char* kind) {
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

uint64_t options::number(const char* name, const char* help, uint64_t test, uint64_t small, uint64_t large) {
  return option(name, help, test, small, large, "a whole number");
}

double options::real(const char* name, const char* help, double test, double small, double large) {
  return option(name, help, test, small, large, "a number");
}

std::string options::word(const char* name, const char* help, const char* choices) {
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

bool options::flag(const char* name, const char* help) {
  if (help) help_ += fmt::format("  {:<19} {}\n", name, help);
  bool on = false;
  for (size_t i = 0; i < args_.size(); ++i)
    if (args_[i] == name) used_[i] = on = true;
  return on;
}

std::string options::problem() const {
  if (!bad_.empty()) return bad_;
  for (size_t i = 0; i < args_.size(); ++i)
    if (!used_[i]) return "unknown option " + args_[i];
  return {};
}

}  // namespace apps
