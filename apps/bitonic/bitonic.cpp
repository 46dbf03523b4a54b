// bitonic: bitonic sort of 32-bit keys across the processes (the Split-C
// paper's bitonic), on blocks of n keys per process.
//
// Every process sorts its block; then the blocks go through Batcher's
// bitonic sorting network on the processes, each comparator a compare-split
// of two blocks: the lower process keeps the lower n keys of the two, the
// upper one the upper n (a sorting network on sorted blocks with
// compare-split comparators sorts the blocks). The network is the form
// whose comparators all put the smaller keys on the lower process: merging
// blocks of 2k processes, process i first meets its mirror i ^ (2k - 1),
// then i ^ (k/2), ..., i ^ 1. For a process count P that is not a power of
// two the network runs on the next power of two Q, the processes P..Q-1
// being virtual ones that hold +infinity keys: a comparator with a virtual
// process leaves the real one's block as it is (its keys are all below
// +infinity), so virtual processes need no memory and no messages, and the
// network sorts the P real blocks. log2 Q (log2 Q + 1) / 2 steps.
//
// Communication: in a step, each process reads one boundary key of its
// partner's block (gas::read) and, when the blocks overlap, gets the whole
// block with one split-phase get and sync; it writes its half into the
// second of two blocked spread arrays, and a barrier ends the step (the
// arrays swap roles, so nobody overwrites a block its partner still reads).
//
// The check: sort_common.hpp's (sorted everywhere, the input's keys; a
// sequential std::sort reference on rank 0 up to 4 Mi keys).
//
//   clumprun -n 4 ./bitonic [--keys N] [--key-range R] [--size test|small|large]
#include <algorithm>
#include <bit>
#include <vector>

#include "../sample/sort_common.hpp"

namespace gas = clump::gas;
using apps::sorting::key;

namespace {

/// The lowest (keep_low) or the highest out.size() keys of two sorted blocks,
/// sorted, into `out` (which is neither of them): a comparator of the
/// network on blocks.
void merge_split(std::span<const key> a, std::span<const key> b, bool keep_low, std::span<key> out) {
  size_t i = 0, j = 0;
  if (keep_low) {
    for (key& o : out) o = (j == b.size() || (i < a.size() && a[i] <= b[j])) ? a[i++] : b[j++];
    return;
  }
  i = a.size();
  j = b.size();
  for (auto o = out.rbegin(); o != out.rend(); ++o) *o = (j == 0 || (i > 0 && a[i - 1] > b[j - 1])) ? a[--i] : b[--j];
}

/// One compare-split of blocked spread arrays of n keys per process: this
/// rank's sorted block of `from` and `partner`'s (another rank, or -1 for a
/// virtual one, all +infinity) become, in `to`, the lower n keys of the two
/// on the lower rank and the upper n on the upper rank. One read of the
/// partner's boundary key first; only when the blocks overlap does the whole
/// block come over, with one split-phase get and sync. `other` is a buffer
/// of n keys. Returns whether this rank's keys changed. The partner must not
/// write `from` until this returns: a step writes only `to`, and a barrier
/// ends it.
bool compare_split(const gas::spread_array<key>& from, const gas::spread_array<key>& to, int partner, size_t n,
                   std::vector<key>& other) {
  const std::span<const key> mine = from.local();
  const std::span<key> out = to.local();
  const int me = gas::space::current().rank();
  const bool low = me < partner;
  bool overlap = false;
  if (partner >= 0 && n) {
    const size_t first = static_cast<size_t>(partner) * n;
    const key edge = gas::read(from[low ? first : first + n - 1]);
    overlap = low ? mine.back() > edge : mine.front() < edge;
  }
  if (!overlap) {
    std::copy(mine.begin(), mine.end(), out.begin());
    return false;
  }
  gas::get(other.data(), from[static_cast<size_t>(partner) * n], n);
  gas::sync();
  merge_split(mine, other, low, out);
  return true;
}

}  // namespace

int main(int argc, char** argv) try {
  clump::runtime rt{argc, argv};
  apps::app a(rt, argc, argv, "bitonic", "bitonic sort of 32-bit keys; blocks of keys compare-split with bulk gets");
  const apps::sorting::input in = apps::sorting::input_options(a, 1u << 12, 1u << 20, 1u << 26);
  const uint64_t reps = a.repeats(4);
  // The two arrays of n keys a process, and the check's gather.
  a.parsed(2 * in.n * sizeof(key) + apps::sorting::check_bytes(in, a.size()));
  const size_t n = in.n;
  const int me = a.rank(), p = a.size();
  const int q = static_cast<int>(std::bit_ceil(static_cast<unsigned>(p)));
  a.note("keys per process", static_cast<double>(n));
  a.note("network processes", static_cast<double>(q));
  const size_t total = n * static_cast<size_t>(p);

  gas::spread_array<key> from(total, gas::layout::blocked), to(total, gas::layout::blocked);
  std::vector<key> other(n);
  if (reps > 1) a.note("inputs", static_cast<double>(reps));
  int steps = 0, exchanges = 0;

  for (uint64_t rep = 0; rep < reps; ++rep) {
    apps::sorting::input this_input = in;
    this_input.seed = in.seed + rep;
    const std::vector<key> input = this_input.of(me);
    std::copy(input.begin(), input.end(), from.local().begin());
    a.phase("local sort");
    std::sort(from.local().begin(), from.local().end());

    a.phase("merge network");
    steps = 0;
    for (int k = 2; k <= q; k <<= 1) {
      for (int j = k / 2; j >= 1; j >>= 1) {
        const int partner = j == k / 2 ? me ^ (k - 1) : me ^ j;
        exchanges += compare_split(from, to, partner < p ? partner : -1, n, other) ? 1 : 0;
        gas::barrier();
        std::swap(from, to);
        ++steps;
      }
    }
    a.done_timing();
    apps::sorting::check_sorted(a, this_input, from.local());
    gas::barrier();  // nobody writes its next input while another still reads its keys
  }
  a.note("steps", steps);
  gas::all_reduce(&exchanges, 1);
  a.note("block exchanges", exchanges);
  return a.finish();
} catch (const std::exception& e) {
  return apps::failed(e);
}
