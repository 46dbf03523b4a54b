#pragma once
// Sample sort of 32-bit keys (the Split-C paper's sample and sampleb),
// shared by apps/sample and apps/sampleb.
//
// Every process holds n keys. It sorts them, and picks s regular samples
// (every n/(s+1)-th key); the samples of all processes are gathered
// everywhere (all_gather) and sorted, and every s-th of them is a splitter:
// P - 1 splitters cut the key range into one bucket per process. The keys
// of a sorted block that go to one bucket are consecutive. Then they move:
//   sample   an atomic remote push per key: `fetch_add` on the destination's
//            bucket counter reserves a slot (a round trip to another node,
//            a processor atomic on this one), a one-way `store` puts the key
//            there; all_store_sync ends the phase. Each process then sorts
//            its bucket.
//   sampleb  one bulk exchange (all_to_all_v) of every run; each process
//            then merges the P sorted runs it received.
// The buckets are sized from a sum of every process's per-bucket counts
// (one all_reduce of P words), so that a skewed split (many equal keys)
// cannot overflow one. The check is sort_common.hpp's.

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "sort_common.hpp"

namespace apps::sorting {

namespace {

/// Merges the sorted runs of `keys` (runs[i] keys each, in order) in place:
/// log2(runs) rounds of merging neighbouring runs.
void merge_runs(std::vector<key>& keys, std::vector<size_t> runs) {
  while (runs.size() > 1) {
    std::vector<size_t> merged;
    size_t at = 0;
    for (size_t i = 0; i < runs.size(); i += 2) {
      if (i + 1 == runs.size()) {
        merged.push_back(runs[i]);
        break;
      }
      const auto first = keys.begin() + static_cast<std::ptrdiff_t>(at);
      const auto middle = first + static_cast<std::ptrdiff_t>(runs[i]);
      std::inplace_merge(first, middle, middle + static_cast<std::ptrdiff_t>(runs[i + 1]));
      merged.push_back(runs[i] + runs[i + 1]);
      at += runs[i] + runs[i + 1];
    }
    runs = std::move(merged);
  }
}

}  // namespace

inline int run_sample_sort(int argc, char** argv, bool bulk) {
  clump::runtime rt{argc, argv};
  app a(rt, argc, argv, bulk ? "sampleb" : "sample",
        bulk ? "sample sort of 32-bit keys; the buckets move in one bulk exchange (all_to_all_v)"
             : "sample sort of 32-bit keys; every key moves with an atomic remote push (fetch_add, then store)");
  const input in = input_options(a, 1u << 12, bulk ? 1u << 20 : 1u << 15, bulk ? 1u << 26 : 1u << 27);
  const size_t s = std::max<size_t>(1, a.number("--samples", "samples per process", 32, 64, 128));
  const uint64_t reps = a.repeats(bulk ? 3 : 1);
  // A bucket (sample) or the exchange's staging (sampleb) holds at most every
  // key; then the check's gather.
  a.parsed(in.n * static_cast<size_t>(a.size()) * sizeof(key) + check_bytes(in, a.size()));
  const size_t n = in.n;
  a.note("keys per process", static_cast<double>(n));
  a.note("samples per process", static_cast<double>(s));
  if (reps > 1) a.note("inputs", static_cast<double>(reps));
  const int me = a.rank(), p = a.size();
  const size_t ranks = static_cast<size_t>(p);
  // sample's buckets: room for every key (a bucket may get them all), used only as filled.
  const gas::global_ptr<uint64_t> fill = bulk ? gas::global_ptr<uint64_t>{} : gas::all_alloc<uint64_t>(1);
  const gas::global_ptr<key> bucket =
      bulk ? gas::global_ptr<key>{} : gas::all_alloc<key>(std::max<size_t>(n * ranks, 1));

  for (uint64_t rep = 0; rep < reps; ++rep) {
    input this_input = in;
    this_input.seed = in.seed + rep;
    std::vector<key> mine = this_input.of(me);  // made before the timing, as every program's input
    a.phase("local sort");
    std::sort(mine.begin(), mine.end());

    a.phase("splitters");
    std::vector<key> samples(s), all_samples(s * ranks);
    for (size_t k = 0; k < s; ++k) samples[k] = n ? mine[(k + 1) * n / (s + 1)] : 0;
    gas::all_gather(samples.data(), all_samples.data(), s);
    std::sort(all_samples.begin(), all_samples.end());
    // cut[t]..cut[t+1]: the keys for bucket t (a key equal to a splitter goes above it).
    std::vector<size_t> cut(ranks + 1, 0), counts(ranks);
    for (size_t t = 1; t < ranks; ++t)
      cut[t] = static_cast<size_t>(std::upper_bound(mine.begin(), mine.end(), all_samples[t * s]) - mine.begin());
    cut[ranks] = n;
    for (size_t t = 0; t < ranks; ++t) counts[t] = cut[t + 1] - cut[t];
    std::vector<uint64_t> bucket_sizes(counts.begin(), counts.end());
    gas::all_reduce(bucket_sizes.data(), ranks);
    const size_t capacity = *std::max_element(bucket_sizes.begin(), bucket_sizes.end());
    const size_t mine_after = bucket_sizes[static_cast<size_t>(me)];
    if (rep == 0) a.note("largest bucket / n", n ? static_cast<double>(capacity) / static_cast<double>(n) : 0.0);

    std::vector<key> result;
    std::span<const key> sorted;
    if (!bulk) {
      *fill.local() = 0;
      gas::barrier();

      a.phase("push");
      // Rank r starts with bucket r + 1, so that not everybody pushes to rank 0 first.
      for (int i = 1; i <= p; ++i) {
        const int t = (me + i) % p;
        const gas::global_ptr<uint64_t> counter = fill.on(t);
        const gas::global_ptr<key> slots = bucket.on(t);
        for (size_t k = cut[static_cast<size_t>(t)]; k < cut[static_cast<size_t>(t) + 1]; ++k) {
          const uint64_t slot = gas::fetch_add(counter, uint64_t{1});
          gas::store(slots + static_cast<std::ptrdiff_t>(slot), &mine[k], 1);
        }
      }
      gas::all_store_sync();
      const uint64_t filled = *fill.local();
      a.check(filled == mine_after, "bucket counter %llu, expected %zu keys", static_cast<unsigned long long>(filled),
              mine_after);

      a.phase("bucket sort");
      const std::span<key> keys(bucket.local(), std::min<size_t>(filled, mine_after));
      std::sort(keys.begin(), keys.end());
      sorted = keys;
    } else {
      a.phase("exchange");
      std::vector<size_t> received;
      result = gas::all_to_all_v(std::span<const key>(mine), std::span<const size_t>(counts), &received);

      a.phase("merge");
      merge_runs(result, received);
      sorted = result;
    }
    a.done_timing();

    check_sorted(a, this_input, sorted);
    gas::barrier();  // nobody refills its bucket while another still reads it
  }
  return a.finish();
}

}  // namespace apps::sorting
