#pragma once
// The applications' deterministic random numbers (no clump dependency, so the
// MPI versions in apps/mpi make the very same inputs).

#include <cstdint>

namespace apps {

/// A deterministic 64-bit generator (splitmix64): the same stream on every
/// machine, so every rank can make any rank's input.
class random64 {
 public:
  explicit random64(uint64_t seed) noexcept : s_(seed) {}
  uint64_t next() noexcept {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, 1).
  double uniform() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t s_;
};

}  // namespace apps
