#pragma once
// The sequential pieces of apps/fft and apps/fft3d: complex points, the
// twiddle table, an in-place radix-2 FFT (of single points or of whole rows
// at once), the deterministic input, and the error measure of the checks.

#include <cmath>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <numbers>
#include <utility>
#include <vector>

#include "app.hpp"

namespace apps::fft {

using cplx = std::complex<double>;

/// Forward (e^{-2 pi i jk/n}) or inverse (e^{+2 pi i jk/n}, unscaled) transform.
enum class direction { forward, inverse };

constexpr bool is_power_of_two(uint64_t n) noexcept { return n && (n & (n - 1)) == 0; }

/// True when n is a power of two, at least 2; otherwise rank 0 says why on
/// stderr (the program then ends with exit code 2).
inline bool usable_length(const app& a, const char* option, uint64_t n) {
  if (is_power_of_two(n) && n >= 2) return true;
  if (a.rank() == 0)
    std::fprintf(stderr, "%s %llu: expected a power of two, at least 2\n", option, static_cast<unsigned long long>(n));
  return false;
}

/// log2 of a power of two.
inline unsigned log2_of(uint64_t n) noexcept {
  unsigned b = 0;
  while ((uint64_t{1} << b) < n) ++b;
  return b;
}

/// The low `bits` bits of i in reverse order.
inline uint64_t bit_reverse(uint64_t i, unsigned bits) noexcept {
  uint64_t r = 0;
  for (unsigned b = 0; b < bits; ++b, i >>= 1) r = (r << 1) | (i & 1);
  return r;
}

/// w^t for t < n/2, w = e^{-+2 pi i / n}: every twiddle factor of a length-n
/// transform, each from its own sin and cos (no accumulated rounding).
class twiddles {
 public:
  twiddles(size_t n, direction d) : n_(n), w_(n / 2) {
    const double sign = d == direction::forward ? -1.0 : 1.0;
    for (size_t t = 0; t < w_.size(); ++t)
      w_[t] = std::polar(1.0, sign * 2 * std::numbers::pi * static_cast<double>(t) / static_cast<double>(n));
  }
  size_t length() const noexcept { return n_; }
  /// w^t for t < n/2.
  const cplx& operator[](size_t t) const noexcept { return w_[t]; }
  /// w^t for any t (w^{n/2} = -1).
  cplx power(uint64_t t) const noexcept {
    t %= n_;
    return t < n_ / 2 ? w_[t] : -w_[t - n_ / 2];
  }

 private:
  size_t n_;
  std::vector<cplx> w_;
};

/// In-place radix-2 FFT of length w.length() whose "points" are rows of
/// `row` consecutive values (point j is data[j*row .. j*row+row)): one call
/// transforms `row` interleaved sequences at once. row = 1 is the plain FFT
/// of a contiguous sequence; row = n transforms the columns of an n x n
/// plane along the rows, with unit-stride inner loops.
inline void fft_rows(cplx* data, size_t row, const twiddles& w) {
  const size_t n = w.length();
  const unsigned bits = log2_of(n);
  for (size_t j = 0; j < n; ++j) {
    const size_t r = bit_reverse(j, bits);
    if (j < r)
      for (size_t c = 0; c < row; ++c) std::swap(data[j * row + c], data[r * row + c]);
  }
  for (size_t half = 1; half < n; half *= 2) {
    const size_t stride = n / (2 * half);  // twiddle index step of this stage
    for (size_t group = 0; group < n; group += 2 * half)
      for (size_t p = 0; p < half; ++p) {
        const cplx t = w[p * stride];
        cplx* lo = data + (group + p) * row;
        cplx* hi = lo + half * row;
        for (size_t c = 0; c < row; ++c) {
          const cplx u = lo[c], v = t * hi[c];
          lo[c] = u + v;
          hi[c] = u - v;
        }
      }
  }
}

/// The input point with global index g: real and imaginary parts uniform in
/// [-1, 1), a function of the seed and g alone, so any rank can make any
/// point again.
inline cplx input_point(uint64_t seed, uint64_t g) {
  random64 r(seed * 0x9e3779b97f4a7c15ull ^ (g * 0xd1b54a32d192ed03ull + 0x632be59bd9b4e019ull));
  const double re = 2 * r.uniform() - 1;
  return {re, 2 * r.uniform() - 1};
}

/// Sums of squares for a relative error ||x - ref|| / ||ref|| over pieces
/// (accumulate, then all_reduce the two sums).
struct error_sums {
  double diff = 0, ref = 0;
  void add(const cplx& x, const cplx& reference) {
    diff += std::norm(x - reference);
    ref += std::norm(reference);
  }
  /// Collective: the sums over every rank's pieces, on every rank.
  void sum_over_ranks() {
    double v[2] = {diff, ref};
    clump::gas::all_reduce(v, 2);
    diff = v[0];
    ref = v[1];
  }
  double relative() const { return ref > 0 ? std::sqrt(diff / ref) : std::sqrt(diff); }
};

/// The checks' bound on the relative (2-norm) error: a correct radix-2 FFT
/// in double precision stays near 1e-15 * log2(n); a wrong butterfly, twiddle
/// or transfer gives errors of order 1.
constexpr double tolerance = 1e-9;

}  // namespace apps::fft
