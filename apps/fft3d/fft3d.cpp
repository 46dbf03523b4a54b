// fft3d: the 3D FFT of an n x n x n complex array, slab-decomposed (the SC97
// paper's 3D FFT, Tables 5-6: bulk all-to-all communication).
//
// The array a[x][y][z] is cut into slabs of whole x-planes: process r holds
// planes [r m, r m + m) with m = ceil(n / P) (the last processes hold fewer,
// or none, when P does not divide n; their storage is padded to m planes so
// that every exchange block has one size). The transform:
//   2D FFTs     each process transforms its planes along z and y (no
//               communication);
//   transpose   gas::all_to_all (bulk puts into every process's staging
//               area, then a barrier) moves the block of x-planes mine and
//               y-rows yours to you; the receiver lays the blocks out as
//               b[y][x][z], slabs of whole y-planes. The exchange goes in
//               rounds of z-ranges when one would not fit in half the gas
//               segment;
//   1D FFTs     each process transforms its y-planes along x, the remaining
//               dimension (rows of n points at once, unit stride).
// The spectrum is X[ky][kx][kz] in y-slabs. Running the same three steps
// again (with the inverse twiddles) transforms along z and x, exchanges back
// to x-slabs and transforms along y: the inverse lands in the original
// layout, which is what the check uses.
//
// The check: spectrum entries against direct sums over the input (every
// process adds its slab's share, all_reduce, the owner compares): all n^3
// entries when n <= 16 (the test size: a direct 3D DFT), 16 random ones
// beyond; the inverse transform (untimed) returns the input within a
// relative 2-norm error of 1e-9. n must be a power of two; any P works.
//
//   clumprun -n 4 ./fft3d [--n N] [--size test|small|large]

#include <algorithm>
#include <utility>
#include <vector>

#include "../fft/fft_kernel.hpp"

namespace gas = clump::gas;
using apps::fft::cplx;

namespace {

/// The slab decomposition: n planes, m = ceil(n / P) per process.
struct slabs {
  size_t n, m;
  int me, p;
  /// Planes rank r really holds (the rest of its m are padding).
  size_t held_by(int r) const {
    const size_t first = static_cast<size_t>(r) * m;
    return first >= n ? 0 : std::min(m, n - first);
  }
  size_t first_of(int r) const { return static_cast<size_t>(r) * m; }
  size_t plane_points() const { return n * n; }
};

/// The three steps on `data` (m planes of n x n, slabs over the first
/// index); returns the result as m planes over the second index (first and
/// second swapped, see the header). Phases go to `a` when it is given.
std::vector<cplx> transform(apps::app* a, const slabs& s, std::vector<cplx> data, apps::fft::direction d) {
  const size_t n = s.n, m = s.m, pp = static_cast<size_t>(s.p), plane = s.plane_points();
  const apps::fft::twiddles w(n, d);
  const size_t mine = s.held_by(s.me);

  if (a) a->phase("2D FFTs (planes)");
  for (size_t xl = 0; xl < mine; ++xl) {
    cplx* pl = data.data() + xl * plane;
    for (size_t y = 0; y < n; ++y) apps::fft::fft_rows(pl + y * n, 1, w);  // along z
    apps::fft::fft_rows(pl, n, w);                                         // along y
  }

  if (a) a->phase("transpose (all_to_all)");
  // Rounds of z-ranges, so that one exchange (P blocks of m x m x zs points,
  // staged in the segment) takes at most half the segment.
  const size_t budget = gas::space::current().segment().size() / 2;
  size_t zs = n;
  while (zs > 1 && pp * m * m * zs * sizeof(cplx) > budget) zs /= 2;
  std::vector<cplx> out(m * plane), send(pp * m * m * zs), recv(send.size());  // padding stays 0
  for (size_t z0 = 0; z0 < n; z0 += zs) {
    const size_t zn = std::min(zs, n - z0);
    const size_t block = m * m * zs;
    for (int t = 0; t < s.p; ++t) {  // block for t: my x-planes, t's y-rows, z in [z0, z0 + zn)
      const size_t ys = s.first_of(t), yn = s.held_by(t);
      cplx* b = send.data() + static_cast<size_t>(t) * block;
      for (size_t xl = 0; xl < mine; ++xl)
        for (size_t yl = 0; yl < yn; ++yl)
          std::copy_n(data.data() + xl * plane + (ys + yl) * n + z0, zn, b + (xl * m + yl) * zs);
    }
    gas::all_to_all(send.data(), recv.data(), block);
    for (int f = 0; f < s.p; ++f) {  // block from f: f's x-planes, my y-rows
      const size_t xs = s.first_of(f), xn = s.held_by(f);
      const cplx* b = recv.data() + static_cast<size_t>(f) * block;
      for (size_t xl = 0; xl < xn; ++xl)
        for (size_t yl = 0; yl < mine; ++yl)
          std::copy_n(b + (xl * m + yl) * zs, zn, out.data() + yl * plane + (xs + xl) * n + z0);
    }
  }

  data = {};  // the memory back before the last step
  if (a) a->phase("1D FFTs (along x)");
  for (size_t yl = 0; yl < mine; ++yl) apps::fft::fft_rows(out.data() + yl * plane, n, w);
  return out;
}

/// Collective: the spectrum entries `chosen` (ky n^2 + kx n + kz) as direct
/// sums over the input, X = sum a[x][y][z] w^(kx x + ky y + kz z): every
/// process adds its slab's part (`x`, its planes of the input), then an
/// all_reduce.
std::vector<cplx> direct_sums(const slabs& s, std::vector<cplx> x, const std::vector<size_t>& chosen) {
  const size_t n = s.n, plane = s.plane_points(), mine = s.held_by(s.me), x0 = s.first_of(s.me);
  const apps::fft::twiddles w(n, apps::fft::direction::forward);
  std::vector<cplx> direct(chosen.size()), along_z(n);
  for (size_t c = 0; c < chosen.size(); ++c) {
    const uint64_t ky = chosen[c] / plane, kx = chosen[c] / n % n, kz = chosen[c] % n;
    for (size_t z = 0; z < n; ++z) along_z[z] = w.power(kz * z);
    cplx sum = 0;
    for (size_t xl = 0; xl < mine; ++xl)
      for (size_t y = 0; y < n; ++y) {
        const cplx* row = x.data() + (xl * n + y) * n;
        cplx part = 0;
        for (size_t z = 0; z < n; ++z) part += row[z] * along_z[z];
        sum += part * w.power(kx * (x0 + xl) + ky * y);
      }
    direct[c] = sum;
  }
  gas::all_reduce(direct.data(), direct.size());
  return direct;
}

}  // namespace

int main(int argc, char** argv) try {
  clump::runtime rt{argc, argv};
  apps::app a(rt, argc, argv, "fft3d", "3D FFT of an n x n x n complex array in slabs; one bulk all-to-all transpose");
  const size_t n = a.number("--n", "points along each dimension (a power of two)", 16, 256, 512);
  const uint64_t reps = a.repeats(8);
  a.parsed();  // the default segment: the transpose goes in rounds that fit half of it
  if (!apps::fft::usable_length(a, "--n", n)) return 2;
  a.note("n", static_cast<double>(n));
  const slabs s{n, (n + static_cast<size_t>(a.size()) - 1) / static_cast<size_t>(a.size()), a.rank(), a.size()};
  const size_t plane = s.plane_points(), mine = s.held_by(s.me), x0 = s.first_of(s.me);

  if (reps > 1) a.note("inputs", static_cast<double>(reps));
  for (uint64_t rep = 0; rep < reps; ++rep) {
    const uint64_t seed = a.seed() + rep;
    // This process's slab of the input.
    auto input = [&] {
      std::vector<cplx> x(s.m * plane);
      for (size_t i = 0; i < mine * plane; ++i) x[i] = apps::fft::input_point(seed, x0 * plane + i);
      return x;
    };
    std::vector<cplx> spectrum = transform(&a, s, input(), apps::fft::direction::forward);
    a.done_timing();

    // Spectrum entries against direct sums over the input (all of them up to
    // n = 16), each compared by its owner (of ky).
    std::vector<size_t> chosen;  // ky * n^2 + kx * n + kz
    if (n <= 16) {
      for (size_t k = 0; k < n * plane; ++k) chosen.push_back(k);
    } else {
      apps::random64 r(seed + 17);
      for (int i = 0; i < 16; ++i) chosen.push_back(r.next() % (n * plane));
    }
    const std::vector<cplx> direct = direct_sums(s, input(), chosen);
    apps::fft::error_sums e;
    for (size_t c = 0; c < chosen.size(); ++c) {
      const size_t ky = chosen[c] / plane;
      if (ky >= x0 && ky < x0 + mine) e.add(spectrum[(ky - x0) * plane + chosen[c] % plane], direct[c]);
    }
    e.sum_over_ranks();
    if (rep + 1 == reps) a.note("spectrum error", e.relative());
    if (a.rank() == 0)
      a.check(e.relative() < apps::fft::tolerance,
              "%zu spectrum entries differ from the direct sums by %.3g (relative 2-norm)", chosen.size(),
              e.relative());

    // The inverse (untimed) returns the input, in the original layout.
    const std::vector<cplx> back = transform(nullptr, s, std::move(spectrum), apps::fft::direction::inverse);
    const double scale = 1.0 / static_cast<double>(n * plane);
    apps::fft::error_sums round;
    for (size_t i = 0; i < mine * plane; ++i)
      round.add(back[i] * scale, apps::fft::input_point(seed, x0 * plane + i));
    round.sum_over_ranks();
    if (rep + 1 == reps) a.note("round-trip error", round.relative());
    if (a.rank() == 0)
      a.check(round.relative() < apps::fft::tolerance,
              "the inverse transform differs from the input by %.3g (relative 2-norm)", round.relative());
  }
  return a.finish();
} catch (const std::exception& e) {
  return apps::failed(e);
}
