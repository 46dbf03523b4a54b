#pragma once
// What the Split-C paper's comparison sorts share (apps/sample, sampleb,
// bitonic and shell): the key type, every rank's input, and the result check.
//
// The input: n keys per process, radix's (apps/radix/keys.hpp: rank r's
// made from the seed and r alone, so that rank 0 can make everybody's again
// for the sequential reference), reduced below --key-range when that is
// given, to make many equal keys.
//
// The check (collective, not timed): every process's keys are sorted; the
// last key of every process that holds some is at most the first key of the
// next process that holds some; there are n keys per process in all; the
// keys are the input's as a multiset by radix's fingerprint (sum, sum of
// squares and xor of a hash); and for up to 4 Mi keys in all, rank 0
// gathers every key, sorts everybody's input with std::sort and compares
// key by key.

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "../radix/all_fingerprint.hpp"  // radix's input and fingerprint
#include "app.hpp"

namespace apps::sorting {

namespace gas = clump::gas;

using key = uint32_t;

/// The input: n keys per process, uniform in [0, range) (over all 32 bits
/// when range is 0), rank r's made from the seed and r alone.
struct input {
  size_t n = 0;
  uint64_t range = 0, seed = 1;

  /// Rank r's keys (with range 0, radix's input: the same keys as radix sorts).
  std::vector<key> of(int r) const {
    std::vector<key> keys = radix::input_of(seed, r, n);
    if (range)
      for (key& k : keys) k = static_cast<key>(k % range);
    return keys;
  }
};

/// Reads the input's options: --keys (keys per process, with a default per
/// size class) and --key-range.
inline input input_options(app& a, uint64_t test, uint64_t small, uint64_t large) {
  input in;
  in.n = radix::keys_option(a, test, small, large);
  in.range = a.number("--key-range", "keys are below this (0: any 32-bit key; small ranges make many equal keys)",
                      0, 0, 0);
  in.seed = a.seed();
  if (in.range) a.note("key range", static_cast<double>(in.range));
  return in;
}

/// Gas bytes check_sorted needs on each process: rank 0 gathers every key
/// (up to 4 Mi keys in all) through the segment.
inline size_t check_bytes(const input& in, int p) {
  const size_t total = in.n * static_cast<size_t>(p);
  return total <= (4u << 20) ? total * sizeof(key) : 0;
}

/// Collective: checks that `mine`, every rank's keys in rank order, is the
/// input sorted; records what fails with a.check.
inline void check_sorted(app& a, const input& in, std::span<const key> mine) {
  const int me = a.rank(), p = a.size();
  const size_t n = in.n;
  const size_t total = n * static_cast<size_t>(p);
  const auto bad = std::is_sorted_until(mine.begin(), mine.end());
  a.check(bad == mine.end(), "keys out of order at local index %zu", static_cast<size_t>(bad - mine.begin()));

  // Every rank's count, first and last key: each checks its boundary with the next rank that has keys.
  const uint64_t edge[3] = {mine.size(), mine.empty() ? 0 : mine.front(), mine.empty() ? 0 : mine.back()};
  std::vector<uint64_t> edges(3 * static_cast<size_t>(p));
  gas::all_gather(edge, edges.data(), 3);
  size_t held = 0;
  for (int r = 0; r < p; ++r) held += edges[3 * static_cast<size_t>(r)];
  if (me == 0) a.check(held == total, "%zu keys in all after the sort, %zu before", held, total);
  for (int r = me + 1; r < p && !mine.empty(); ++r) {
    const uint64_t* e = &edges[3 * static_cast<size_t>(r)];
    if (e[0] == 0) continue;
    a.check(mine.back() <= e[1], "rank %d's last key %u is above rank %d's first %u", me, mine.back(), r,
            static_cast<key>(e[1]));
    break;
  }

  const radix::fingerprint before = radix::all_fingerprint(in.of(me)), after = radix::all_fingerprint(mine);
  a.check(after.sum == before.sum && after.squares == before.squares && after.bits == before.bits,
          "the sorted keys are not the input's (fingerprints differ)");

  if (total > (4u << 20)) return;
  std::vector<size_t> counts(static_cast<size_t>(p), 0);
  counts[0] = mine.size();
  const std::vector<key> everything = gas::all_to_all_v(mine, std::span<const size_t>(counts));
  if (me != 0) return;
  std::vector<key> reference;
  reference.reserve(total);
  for (int r = 0; r < p; ++r) {
    const std::vector<key> keys = in.of(r);
    reference.insert(reference.end(), keys.begin(), keys.end());
  }
  std::sort(reference.begin(), reference.end());
  if (everything.size() != reference.size()) return;  // reported above
  const auto diff = std::mismatch(reference.begin(), reference.end(), everything.begin());
  a.check(diff.first == reference.end(), "global index %zu holds %u, the sequential sort has %u",
          static_cast<size_t>(diff.first - reference.begin()), diff.second == everything.end() ? 0 : *diff.second,
          diff.first == reference.end() ? 0 : *diff.first);
}

}  // namespace apps::sorting
