#pragma once
// The sorting programs' input and its multiset fingerprint, without clump,
// so that apps/mpi's MPI radix sort sorts the very same keys.

#include <cstdint>
#include <vector>

#include "random64.hpp"

namespace apps::radix {

/// Reads --keys, the keys per process, with a default for each size class
/// (by default radixb's and radix_mpi's). A is apps::app or apps::mpi_app.
template <class A>
size_t keys_option(A& a, uint64_t test = 1u << 12, uint64_t small = 1u << 18, uint64_t large = 1u << 27) {
  return a.number("--keys", "keys per process", test, small, large);
}

/// Rank r's input: n keys from the seed and the rank.
inline std::vector<uint32_t> input_of(uint64_t seed, int r, size_t n) {
  random64 g(seed * 1000003 + static_cast<uint64_t>(r));
  std::vector<uint32_t> keys(n);
  for (uint32_t& k : keys) k = static_cast<uint32_t>(g.next());
  return keys;
}

/// From every rank's count of each digit (`all_hist`, rank by rank, `digits`
/// a rank): place[d], the global index of rank `me`'s first key with digit d
/// in the order of a stable sort (smaller digits first, then lower ranks).
inline void places_of(const std::vector<uint64_t>& all_hist, int me, int p, size_t digits,
                      std::vector<uint64_t>& place) {
  uint64_t at = 0;
  for (size_t d = 0; d < digits; ++d)
    for (int r = 0; r < p; ++r) {
      if (r == me) place[d] = at;
      at += all_hist[static_cast<size_t>(r) * digits + d];
    }
}

/// Sum, sum of squares and xor of the keys: equal for equal multisets.
struct fingerprint {
  uint64_t sum = 0, squares = 0, bits = 0;
  void add(uint32_t k) {
    sum += k;
    squares += static_cast<uint64_t>(k) * k;
    bits ^= static_cast<uint64_t>(k) * 0x9e3779b97f4a7c15ull;
  }
};

}  // namespace apps::radix
