// fft: the 1D FFT of N complex points with small transfers (the Split-C
// paper's "FFT using small transfers", Table 2).
//
// The points live in a spread array (cyclic: point i on process i % P, or
// blocked: consecutive runs), as Split-C's `complex x[N]::`. The transform is
// a radix-2 decimation in time:
//   bit reversal   every process stores each of its points to its
//                  bit-reversed place in a second spread array with a
//                  one-way store of one point (Split-C's `:-`), then
//                  all_store_sync;
//   stages         log2 N butterfly stages. A stage whose butterflies all
//                  pair points of one process (cyclic: span a multiple of P;
//                  blocked: span within a block) runs in place with no
//                  communication. A stage that crosses processes: after a
//                  barrier, each process fetches the partner of every point
//                  it holds with a split-phase get of that one point (a
//                  memcpy on this node, a request and reply to another),
//                  one sync, and computes its points' new values into the
//                  other spread array (each side of a butterfly computes its
//                  own half, so the work is even and nothing is written
//                  remotely). The barrier makes the input of the stage
//                  complete and the array written free: no one still reads
//                  it from the stage before.
// Any P works (P = 3: every stage crosses processes for the cyclic layout,
// some for the blocked one); N must be a power of two. Gas memory: two spread
// arrays, 32 N / P bytes per process.
//
// The check: rank 0 reads every process's share in bulk and compares the
// spectrum with a direct O(N^2) DFT of the same input (N <= 4096) or a
// sequential FFT (larger N), relative 2-norm error below 1e-9; Parseval's
// identity (sum |X|^2 = N sum |x|^2) over all processes.
//
//   clumprun -n 4 ./fft [--points N] [--layout cyclic|blocked] [--size test|small|large]

#include <algorithm>
#include <span>
#include <utility>
#include <vector>

#include "fft_kernel.hpp"

namespace gas = clump::gas;
using apps::fft::cplx;

namespace {

/// True when every butterfly of span `half` pairs two points of one process.
bool stage_is_local(const gas::spread_array<cplx>& a, size_t half, int p) {
  if (a.arrangement() == gas::layout::cyclic) return half % static_cast<size_t>(p) == 0;
  const size_t block = a.count_on(0);  // ceil(N / P): rank 0's share is a whole block
  return block >= a.size() || block % (2 * half) == 0;
}

/// The global index of rank r's k-th point.
size_t index_on(const gas::spread_array<cplx>& a, int r, size_t k, int p) {
  return a.arrangement() == gas::layout::cyclic ? k * static_cast<size_t>(p) + static_cast<size_t>(r)
                                                : static_cast<size_t>(r) * a.count_on(0) + k;
}

/// The distributed forward FFT of `cur`, in natural order in and out; `other`
/// is the second array the transfers write into. Returns with the spectrum
/// in `cur` (the two may have been swapped).
void transform(apps::app& a, gas::spread_array<cplx>& cur, gas::spread_array<cplx>& other) {
  const int me = a.rank(), p = a.size();
  const size_t n = cur.size();
  const unsigned bits = apps::fft::log2_of(n);
  const apps::fft::twiddles w(n, apps::fft::direction::forward);

  a.phase("bit reversal (stores)");
  {
    std::span<const cplx> mine = cur.local();
    for (size_t k = 0; k < mine.size(); ++k) gas::store(other[apps::fft::bit_reverse(cur.index_of(k), bits)], &mine[k]);
    gas::all_store_sync();
    std::swap(cur, other);
  }

  std::vector<cplx> partner(cur.local().size());
  int kind = -1;  // of the stage before: 1 local, 0 across processes
  for (size_t half = 1; half < n; half *= 2) {
    const size_t stride = n / (2 * half);
    const bool local = stage_is_local(cur, half, p);
    if (static_cast<int>(local) != kind) a.phase(local ? "local stages" : "stages across (gets)");
    kind = local;
    std::span<cplx> x = cur.local();
    if (local) {
      for (size_t k = 0; k < x.size(); ++k) {
        const size_t i = cur.index_of(k);
        if (i & half) continue;
        cplx& lo = x[k];
        cplx& hi = x[cur.slot(i | half)];
        const cplx u = lo, v = w[(i & (half - 1)) * stride] * hi;
        lo = u + v;
        hi = u - v;
      }
      continue;
    }
    gas::barrier();
    for (size_t k = 0; k < x.size(); ++k) {
      const size_t j = cur.index_of(k) ^ half;
      if (cur.owner(j) == me)
        partner[k] = x[cur.slot(j)];
      else
        gas::get(&partner[k], cur[j]);
    }
    gas::sync();
    std::span<cplx> y = other.local();
    for (size_t k = 0; k < x.size(); ++k) {
      const size_t i = cur.index_of(k);
      const cplx t = w[(i & (half - 1)) * stride];
      y[k] = (i & half) ? partner[k] - t * x[k] : x[k] + t * partner[k];
    }
    std::swap(cur, other);
  }
}

/// The whole array in natural order on rank 0 (bulk reads of every share); empty elsewhere.
std::vector<cplx> gather_on_root(const gas::spread_array<cplx>& a, int me, int p) {
  if (me != 0) return {};
  std::vector<cplx> all(a.size()), share;
  for (int r = 0; r < p; ++r) {
    const size_t count = a.count_on(r);
    if (!count) continue;
    share.resize(count);
    gas::read(share.data(), a[index_on(a, r, 0, p)], count);
    for (size_t k = 0; k < count; ++k) all[index_on(a, r, k, p)] = share[k];
  }
  return all;
}

}  // namespace

int main(int argc, char** argv) try {
  clump::runtime rt{argc, argv};
  apps::app a(rt, argc, argv, "fft",
              "1D FFT of N complex points; butterflies across processes get one point at a time");
  const size_t n = a.number("--points", "points in all (a power of two)", 1u << 10, 1u << 20, 1u << 26);
  const std::string arrangement = a.word("--layout", "how the points are spread", "cyclic,blocked");
  const uint64_t reps = a.repeats(4);
  const size_t share = (n + static_cast<size_t>(a.size()) - 1) / static_cast<size_t>(a.size());
  a.parsed(2 * share * sizeof(cplx));  // two spread arrays
  if (!apps::fft::usable_length(a, "--points", n)) return 2;
  a.note("points", static_cast<double>(n));
  a.note("layout", arrangement);
  const int me = a.rank(), p = a.size();
  const gas::layout l = arrangement == "cyclic" ? gas::layout::cyclic : gas::layout::blocked;

  gas::spread_array<cplx> cur(n, l), other(n, l);
  if (reps > 1) a.note("inputs", static_cast<double>(reps));
  for (uint64_t rep = 0; rep < reps; ++rep) {
    const uint64_t seed = a.seed() + rep;
    double energy[2] = {0, 0};  // sum |x|^2 of the input, sum |X|^2 of the spectrum
    {
      std::span<cplx> x = cur.local();
      for (size_t k = 0; k < x.size(); ++k) {
        x[k] = apps::fft::input_point(seed, cur.index_of(k));
        energy[0] += std::norm(x[k]);
      }
    }

    transform(a, cur, other);
    a.done_timing();

    for (const cplx& v : cur.local()) energy[1] += std::norm(v);
    gas::all_reduce(energy, 2);
    const double parseval = std::abs(energy[1] - static_cast<double>(n) * energy[0]) / energy[1];
    if (me == 0)
      a.check(parseval < apps::fft::tolerance,
              "Parseval: sum |X|^2 = %.17g, N sum |x|^2 = %.17g (relative difference %.3g)", energy[1],
              static_cast<double>(n) * energy[0], parseval);

    const std::vector<cplx> spectrum = gather_on_root(cur, me, p);
    if (me == 0) {
      std::vector<cplx> x(n), reference(n);
      for (size_t i = 0; i < n; ++i) x[i] = apps::fft::input_point(seed, i);
      const apps::fft::twiddles w(n, apps::fft::direction::forward);
      const bool direct = n <= 4096;
      if (direct) {
        for (size_t k = 0; k < n; ++k)
          for (size_t i = 0; i < n; ++i) reference[k] += x[i] * w.power(static_cast<uint64_t>(i) * k);
      } else {
        reference = x;
        apps::fft::fft_rows(reference.data(), 1, w);
      }
      apps::fft::error_sums e;
      for (size_t k = 0; k < n; ++k) e.add(spectrum[k], reference[k]);
      if (rep + 1 == reps) a.note("relative error", e.relative());
      a.check(e.relative() < apps::fft::tolerance, "the spectrum differs from the %s by %.3g (relative 2-norm)",
              direct ? "direct DFT" : "sequential FFT", e.relative());
    }
    gas::barrier();  // nobody writes its next input while rank 0 still reads the spectrum
  }
  return a.finish();
} catch (const std::exception& e) {
  return apps::failed(e);
}
