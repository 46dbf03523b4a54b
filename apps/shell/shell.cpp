// shell: a parallel Shell sort of 32-bit keys over a blocked spread array
// (the Split-C paper's shell), n keys per process, N = nP in all.
//
// Shell's sort h-sorts the array for a decreasing sequence of gaps h ending
// with 1 (here Tokuda's: 1, 4, 9, 20, 46, 103, ..., about x2.25 each,
// those below N): after the h-sort, every chain i, i + h, i + 2h, ...
// is sorted, and the 1-sort leaves the array sorted. The parallel version
// h-sorts all chains at once by odd-even transposition along them: in round
// t every element i with floor(i / h) of t's parity is compare-exchanged
// with element i + h. No element is in two pairs of a round, and the owner
// of i handles the pair, so a round needs no locks. The round ends with an
// all_reduce of the number of swaps (which also serves as its barrier); the
// h-sort ends at the first round after the first that swaps nothing (the
// round before left the other pairs in order). Because the larger gaps have
// sorted the array roughly, each h-sort takes a few rounds, not the chains'
// length; the gap-1 passes are odd-even transposition between neighbouring
// elements, most of them inside a block.
//
// Communication: pairs inside a block are plain loads and stores. For a
// pair whose element i + h is on another process (every pair when h >= n;
// the last h elements of a block, against the next block, when h < n), the
// owner of i gets the partner with a one-word split-phase get (the Split-C
// `x := a[i + h]`), all of a round's at once, then one sync; it puts the
// larger key back, one word, for every pair that swaps, and syncs.
//
// The check: sort_common.hpp's (sorted everywhere, the input's keys; a
// sequential std::sort reference on rank 0 up to 4 Mi keys).
//
//   clumprun -n 4 ./shell [--keys N] [--key-range R] [--size test|small|large]
#include <algorithm>
#include <cstdint>
#include <vector>

#include "../sample/sort_common.hpp"

namespace gas = clump::gas;
using apps::sorting::key;

namespace {

/// Tokuda's gaps below `limit`, largest first: h_k = ceil((9^k - 4^k) / (5 * 4^(k-1))).
std::vector<size_t> gaps_below(size_t limit) {
  std::vector<size_t> gaps;
  for (double nine = 9, four = 4;; nine *= 9, four *= 4) {
    const auto h = static_cast<size_t>((nine - four) / (5 * four / 4) + 0.999999);
    if (h >= limit) break;
    gaps.push_back(h);
  }
  std::reverse(gaps.begin(), gaps.end());
  return gaps;
}

/// Runs [lo, hi) of this process's elements of a round's parity: the pairs
/// of [lo, local_end) are inside the block, those of [local_end, hi) not.
struct run {
  size_t lo, local_end, hi;
};

/// One round of an h-sort: every element i of this process with floor(i / h)
/// of `parity`, and i + h < N, is compare-exchanged with element i + h.
/// `remote` is a buffer of n keys; `runs` a buffer kept from round to round
/// (with h = 1 it holds n / 2 runs: made anew each round, its pages would be
/// faulted in again every round). Returns how many pairs swapped here.
uint64_t gap_round(const gas::spread_array<key>& a, size_t h, size_t parity, std::vector<key>& remote,
                   std::vector<run>& runs) {
  const std::span<key> mine = a.local();
  const size_t first = a.index_of(0), end = first + mine.size(), total = a.size();
  runs.clear();
  for (size_t m = first / h; m * h < end && m * h + h < total; ++m) {
    if (m % 2 != parity) continue;
    const size_t lo = std::max(first, m * h), hi = std::min({end, m * h + h, total - h});
    if (lo >= hi) continue;
    runs.push_back({lo, std::clamp(end - std::min(end, h), lo, hi), hi});
  }
  size_t k = 0;
  for (const run& r : runs)
    for (size_t i = r.local_end; i < r.hi; ++i) gas::get(&remote[k++], a[i + h]);
  if (k) gas::sync();

  uint64_t swaps = 0;
  k = 0;
  for (const run& r : runs) {
    for (size_t i = r.lo; i < r.local_end; ++i) {
      key& x = mine[i - first];
      key& y = mine[i + h - first];
      if (x > y) {
        std::swap(x, y);
        ++swaps;
      }
    }
    for (size_t i = r.local_end; i < r.hi; ++i, ++k) {
      key& x = mine[i - first];
      if (x <= remote[k]) continue;
      std::swap(x, remote[k]);
      gas::put(a[i + h], &remote[k]);
      ++swaps;
    }
  }
  if (k) gas::sync();
  return swaps;
}

}  // namespace

int main(int argc, char** argv) try {
  clump::runtime rt{argc, argv};
  apps::app a(rt, argc, argv, "shell",
              "parallel Shell sort of 32-bit keys over a spread array; remote compare-exchanges with one-word "
              "get and put");
  const apps::sorting::input in = apps::sorting::input_options(a, 1u << 11, 1u << 15, 1u << 25);
  a.parsed(in.n * sizeof(key) + apps::sorting::check_bytes(in, a.size()));  // the array and the check's gather
  const size_t n = in.n;
  const int me = a.rank(), p = a.size();
  const size_t total = n * static_cast<size_t>(p);
  a.note("keys per process", static_cast<double>(n));

  gas::spread_array<key> keys(total, gas::layout::blocked);
  const std::vector<key> input = in.of(me);
  std::copy(input.begin(), input.end(), keys.local().begin());
  std::vector<key> remote(n);
  std::vector<run> runs;
  const std::vector<size_t> gaps = gaps_below(std::max<size_t>(total, 2));

  uint64_t rounds = 0, swaps_in_all = 0, most_rounds = 0;
  // One phase for the gaps of at least a block (every pair between processes), one for the smaller, one for gap 1.
  const char* const phases[] = {"gaps >= block", "gaps < block", "gap 1"};
  int phase = -1;
  for (const size_t h : gaps) {
    const int kind = h >= n ? 0 : h > 1 ? 1 : 2;
    if (kind != phase) a.phase(phases[phase = kind]);
    const size_t chain = (total + h - 1) / h;  // the longest chain: the rounds that surely sort it
    size_t t = 0;
    while (t < chain) {
      uint64_t swaps = gap_round(keys, h, t % 2, remote, runs);
      gas::all_reduce(&swaps, 1);
      swaps_in_all += swaps;
      ++t;
      if (!swaps && t > 1) break;  // round t - 2 ordered the other pairs, and nothing moved since
    }
    rounds += t;
    most_rounds = std::max<uint64_t>(most_rounds, t);
  }
  a.done_timing();
  a.note("gaps", static_cast<double>(gaps.size()));
  a.note("rounds", static_cast<double>(rounds));
  a.note("most rounds for a gap", static_cast<double>(most_rounds));
  a.note("swaps", static_cast<double>(swaps_in_all));

  apps::sorting::check_sorted(a, in, keys.local());
  return a.finish();
} catch (const std::exception& e) {
  return apps::failed(e);
}
