#pragma once
// Radix sort of 32-bit keys spread over the processes (the Split-C paper's
// radix and radixb), shared by apps/radix and apps/radixb.
//
// The keys live in a blocked spread array of n keys per process. Each pass
// sorts on 8 bits: every process counts its keys per digit, the counts are
// gathered everywhere (all_gather), and every process works out where each
// of its keys goes in the global order (all keys of smaller digits first,
// then, within a digit, the keys of lower ranks first, each process's in
// their current order: the sort is stable). Then the keys move:
//   radix   one one-way store per key (Split-C's `:-`), then all_store_sync;
//   radixb  the keys are first laid out by destination locally, then one
//           bulk store per run of consecutive global places on one process.
// Four passes sort 32 bits.
//
// The check: every process's keys are sorted, each process's last key is at
// most the next one's first, and the keys are the input's, as a multiset.
// For inputs of up to 4 Mi keys in all, rank 0 makes every rank's input
// again (each is a function of the seed and the rank), sorts it with
// std::sort and compares key by key; beyond that the multiset check is a
// sum, a sum of squares and an xor over all keys.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "app.hpp"
#include "keys.hpp"
#include "all_fingerprint.hpp"

namespace apps::radix {

namespace gas = clump::gas;

inline constexpr unsigned digit_bits = 8;
inline constexpr unsigned digits = 1u << digit_bits;

inline int run(int argc, char** argv, bool bulk) {
  clump::runtime rt{argc, argv};
  app a(rt, argc, argv, bulk ? "radixb" : "radix",
        bulk ? "radix sort of 32-bit keys; keys move in bulk stores, one per run of places on one process"
             : "radix sort of 32-bit keys; every key moves with a one-way store");
  // Large: radixb's 2^27 keys a process take 4 s, so 12 inputs; radix's
  // stores take longer, and a second input of 2^27 keys ran 2.3x slower than
  // the first here, so radix sorts 3 inputs of 2^26 keys.
  const size_t n = keys_option(a, 1u << 12, 1u << 18, bulk ? 1u << 27 : 1u << 26);
  const uint64_t reps = a.repeats(bulk ? 12 : 3);
  const size_t total = n * static_cast<size_t>(a.size());
  // The two arrays, and the check's gather of every key (up to 4 Mi of them).
  a.parsed(2 * n * sizeof(uint32_t) + (total <= (4u << 20) ? total * sizeof(uint32_t) : 0));
  a.note("keys per process", static_cast<double>(n));
  if (reps > 1) a.note("inputs", static_cast<double>(reps));
  const int me = a.rank(), p = a.size();

  // Two blocked spread arrays of n keys per process: the pass reads one and writes the other.
  gas::spread_array<uint32_t> from(total, gas::layout::blocked), to(total, gas::layout::blocked);
  std::vector<uint64_t> hist(digits), all_hist(digits * static_cast<size_t>(p)), place(digits);
  std::vector<uint32_t> staged(bulk ? n : 0);
  for (uint64_t rep = 0; rep < reps; ++rep) {
    const uint64_t seed = a.seed() + rep;
    const std::vector<uint32_t> input = input_of(seed, me, n);
    std::copy(input.begin(), input.end(), from.local().begin());
    // The other array's pages are touched here, before the timing, as MPI's
    // receive vector is when radix_mpi makes it: first touches of shared
    // memory pages are page faults that would otherwise land in pass 1.
    std::fill(to.local().begin(), to.local().end(), 0u);
    const fingerprint before = all_fingerprint(from.local());

    for (unsigned shift = 0; shift < 32; shift += digit_bits) {
      a.phase("histogram");
      std::span<uint32_t> mine = from.local();
      std::fill(hist.begin(), hist.end(), 0);
      for (uint32_t k : mine) ++hist[(k >> shift) & (digits - 1)];
      gas::all_gather(hist.data(), all_hist.data(), digits);
      places_of(all_hist, me, p, digits, place);

      a.phase("permute");
      if (!bulk) {
        for (uint32_t k : mine) gas::store(to[place[(k >> shift) & (digits - 1)]++], &k, 1);
      } else {
        // Lay the keys out in their global order here, then send each run of
        // consecutive places that one process holds with one store.
        std::vector<uint64_t> first(place);
        std::vector<uint64_t> local_at(digits);
        uint64_t off = 0;
        for (unsigned d = 0; d < digits; ++d) {
          local_at[d] = off;
          off += hist[d];
        }
        for (uint32_t k : mine) staged[local_at[(k >> shift) & (digits - 1)]++] = k;
        uint64_t src = 0;
        for (unsigned d = 0; d < digits; ++d) {
          uint64_t g = first[d], left = hist[d];
          while (left) {
            const size_t owner_end = (g / n + 1) * n;  // blocked: rank g / n holds up to here
            const uint64_t run = std::min<uint64_t>(left, owner_end - g);
            gas::store(to[g], staged.data() + src, run);
            g += run;
            src += run;
            left -= run;
          }
        }
      }
      gas::all_store_sync();
      std::swap(from, to);
    }
    a.done_timing();

    // The check (not timed).
    std::span<const uint32_t> sorted = from.local();
    const auto bad = std::is_sorted_until(sorted.begin(), sorted.end());
    a.check(bad == sorted.end(), "keys out of order at local index %zu", static_cast<size_t>(bad - sorted.begin()));
    if (me + 1 < p && n) {
      const uint32_t next_first = gas::read(from[static_cast<size_t>(me + 1) * n]);
      a.check(sorted.back() <= next_first, "rank %d's last key %u is above rank %d's first %u", me, sorted.back(),
              me + 1, next_first);
    }
    const fingerprint after = all_fingerprint(sorted);
    a.check(after.sum == before.sum && after.squares == before.squares && after.bits == before.bits,
            "the sorted keys are not the input's (fingerprints differ)");
    if (total <= (4u << 20)) {
      std::vector<uint32_t> everything(total);
      gas::all_gather(sorted.data(), everything.data(), n);
      if (me == 0) {
        std::vector<uint32_t> reference;
        reference.reserve(total);
        for (int r = 0; r < p; ++r) {
          const std::vector<uint32_t> in = input_of(seed, r, n);
          reference.insert(reference.end(), in.begin(), in.end());
        }
        std::sort(reference.begin(), reference.end());
        const auto diff = std::mismatch(reference.begin(), reference.end(), everything.begin());
        a.check(diff.first == reference.end(), "global index %zu holds %u, the sequential sort has %u",
                static_cast<size_t>(diff.first - reference.begin()), diff.second == everything.end() ? 0 : *diff.second,
                diff.first == reference.end() ? 0 : *diff.first);
      }
    }
    gas::barrier();  // nobody makes its next input while another still reads its keys
  }
  return a.finish();
}

}  // namespace apps::radix
