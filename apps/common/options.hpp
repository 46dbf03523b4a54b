#pragma once
// The command line every program of apps/ shares, the clump programs
// (app.hpp) and their MPI peers (apps/mpi) alike: --size test|small|large,
// --seed N, --json FILE, --help, and each program's own options with a
// default for each size class. It only reads; what to do about a mistake
// (print the usage, end the job) is the caller's.

#include <cstdint>
#include <string>
#include <vector>

namespace apps {

class options {
 public:
  /// Reads the common options. `what` is one line for --help.
  options(int argc, char** argv, const char* name, const char* what);

  /// The input size: 0 test (a fraction of a second, for the test suite),
  /// 1 small (the default), 2 large (10-60 s with 4 processes on one node).
  int size_class() const noexcept { return size_class_; }
  const char* size_name() const noexcept;
  uint64_t seed() const noexcept { return seed_; }
  const std::string& json() const noexcept { return json_; }
  const std::string& name() const noexcept { return name_; }

  /// An integer option `--name N`, with a default for each size class.
  uint64_t number(const char* name, const char* help, uint64_t test, uint64_t small, uint64_t large);
  /// A real option `--name X`, with a default for each size class.
  double real(const char* name, const char* help, double test, double small, double large);
  /// A word option `--name WORD`, one of `choices` (comma-separated); the first is the default.
  std::string word(const char* name, const char* help, const char* choices);
  /// A flag `--name`.
  bool flag(const char* name, const char* help);

  /// After every option is read: true when --help was asked for.
  bool help_asked() const noexcept { return help_asked_; }
  /// After every option is read: what is wrong (a bad value, a missing one,
  /// an unknown option), or empty.
  std::string problem() const;
  /// The usage text, with every option read so far.
  const std::string& usage() const noexcept { return help_; }

 private:
  template <class T>
  T option(const char* name, const char* help, T test, T small, T large, const char* kind);

  std::vector<std::string> args_;
  std::vector<bool> used_;
  std::string name_, help_, json_, bad_;
  int size_class_ = 1;
  bool help_asked_ = false;
  uint64_t seed_ = 1;
};

}  // namespace apps
