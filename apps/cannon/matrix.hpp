#pragma once
// What apps/cannon and apps/mm share: a matrix as a spread array of b x b
// blocks, the deterministic inputs, the block multiply, and the check of
// C = A B against a sequential reference.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "app.hpp"

namespace apps::matrix {

namespace gas = clump::gas;

/// A q x q grid of b x b row-major blocks of doubles spread over the
/// processes (Split-C's spread array of blocks, cyclic): block (i, j), number
/// v = i q + j, lives on process v % P, in slot v / P of that process's
/// share. Constructing one is collective (an all_alloc).
class block_matrix {
 public:
  block_matrix(size_t q, size_t b)
      : q_(q),
        b_(b),
        p_(static_cast<size_t>(gas::space::current().size())),
        me_(gas::space::current().rank()),
        base_(gas::all_alloc<double>(points_on_each(q, b, p_))) {}

  /// The doubles each of p processes holds of a q x q grid of b x b blocks.
  static size_t points_on_each(size_t q, size_t b, size_t p) noexcept {
    return std::max<size_t>((q * q + p - 1) / p, 1) * b * b;
  }

  size_t blocks_per_side() const noexcept { return q_; }
  size_t block_size() const noexcept { return b_; }
  /// Doubles in one block.
  size_t block_points() const noexcept { return b_ * b_; }
  int owner(size_t i, size_t j) const noexcept { return static_cast<int>((i * q_ + j) % p_); }
  /// Block (i, j)'s place (get, put and read take it).
  gas::global_ptr<double> block(size_t i, size_t j) const noexcept {
    const size_t v = i * q_ + j;
    return base_.on(static_cast<int>(v % p_)) + static_cast<std::ptrdiff_t>(v / p_ * block_points());
  }
  /// Block (i, j) of this process, for plain loads and stores.
  double* local_block(size_t i, size_t j) const { return block(i, j).local(); }
  /// Zeroes this process's blocks.
  void clear() const {
    for (auto [i, j] : mine()) std::fill_n(local_block(i, j), block_points(), 0.0);
  }
  /// This process's blocks (i, j), in slot order.
  std::vector<std::pair<size_t, size_t>> mine() const {
    std::vector<std::pair<size_t, size_t>> v;
    for (size_t b = static_cast<size_t>(me_); b < q_ * q_; b += p_) v.emplace_back(b / q_, b % q_);
    return v;
  }

 private:
  size_t q_, b_, p_;
  int me_;
  gas::global_ptr<double> base_;
};

/// Entry (i, j) of input matrix `which` (0: A, 1: B): uniform in [-1, 1), a
/// function of the seed and the place alone, so any process can make any
/// entry again.
inline double input_entry(uint64_t seed, int which, size_t i, size_t j) {
  random64 r(seed * 0x9e3779b97f4a7c15ull ^ ((static_cast<uint64_t>(i) << 32 | j) * 0xd1b54a32d192ed03ull) ^
             (static_cast<uint64_t>(which) + 1) * 0x632be59bd9b4e019ull);
  return 2 * r.uniform() - 1;
}

/// Fills this process's blocks of `m` with input matrix `which`, n x n
/// (zero where the blocks reach past n).
inline void fill(const block_matrix& m, uint64_t seed, int which, size_t n) {
  const size_t b = m.block_size();
  for (auto [bi, bj] : m.mine()) {
    double* blk = m.local_block(bi, bj);
    for (size_t r = 0; r < b; ++r)
      for (size_t c = 0; c < b; ++c) {
        const size_t i = bi * b + r, j = bj * b + c;
        blk[r * b + c] = i < n && j < n ? input_entry(seed, which, i, j) : 0.0;
      }
  }
}

/// c += a b for s x s row-major matrices, in tiles that keep the rows of b
/// in use in cache.
inline void multiply_add(double* __restrict c, const double* __restrict a, const double* __restrict b, size_t s) {
  constexpr size_t tile_k = 64, tile_j = 256;
  for (size_t k0 = 0; k0 < s; k0 += tile_k)
    for (size_t j0 = 0; j0 < s; j0 += tile_j) {
      const size_t k1 = std::min(s, k0 + tile_k), j1 = std::min(s, j0 + tile_j);
      for (size_t i = 0; i < s; ++i) {
        double* ci = c + i * s;
        for (size_t k = k0; k < k1; ++k) {
          const double aik = a[i * s + k];
          const double* bk = b + k * s;
          for (size_t j = j0; j < j1; ++j) ci[j] += aik * bk[j];
        }
      }
    }
}

/// Largest full comparison: rank 0 multiplies n x n matrices itself (2 n^3 flops).
constexpr size_t full_check_limit = 512;

/// Collective: checks that `c` holds A B for the n x n inputs (the blocks
/// past n are zero padding).
///   n <= 512: rank 0 reads every block of C in bulk and compares each entry
///             with its own multiply, within 1e-12 n (entries are at most n
///             in size; the roundoff of a dot product of n terms is near n eps);
///   larger:   u^T C v summed over the processes against (A^T u) . (B v) on
///             rank 0 (u, v random), within 1e-10 of sum |u_i C_ij v_j|; and
///             64 random entries read from their owners against dot products.
inline void check_product(app& a, const block_matrix& c, size_t n) {
  const size_t b = c.block_size(), q = c.blocks_per_side();
  const double entry_tolerance = 1e-12 * static_cast<double>(n);
  const uint64_t seed = a.seed();
  if (n <= full_check_limit) {
    if (a.rank() != 0) return;
    std::vector<double> got(n * n), ref(n * n, 0.0), x(n * n), y(n * n), blk(c.block_points());
    for (size_t bi = 0; bi < q; ++bi)
      for (size_t bj = 0; bj < q; ++bj) {
        gas::read(blk.data(), c.block(bi, bj), blk.size());
        for (size_t r = 0; r < b && bi * b + r < n; ++r)
          for (size_t s = 0; s < b && bj * b + s < n; ++s) got[(bi * b + r) * n + bj * b + s] = blk[r * b + s];
      }
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < n; ++j) {
        x[i * n + j] = input_entry(seed, 0, i, j);
        y[i * n + j] = input_entry(seed, 1, i, j);
      }
    multiply_add(ref.data(), x.data(), y.data(), n);
    size_t worst = 0;
    for (size_t e = 0; e < n * n; ++e)
      if (std::abs(got[e] - ref[e]) > std::abs(got[worst] - ref[worst])) worst = e;
    a.note("max error", std::abs(got[worst] - ref[worst]));
    a.check(std::abs(got[worst] - ref[worst]) <= entry_tolerance,
            "C[%zu][%zu] = %.17g, the sequential multiply has %.17g", worst / n, worst % n, got[worst], ref[worst]);
    return;
  }

  // u^T C v, over the processes.
  std::vector<double> u(n), v(n);
  random64 r(seed + 99);
  for (double& x : u) x = r.uniform();
  for (double& x : v) x = r.uniform();
  double sums[2] = {0, 0};  // u^T C v, sum |u_i C_ij v_j|
  for (auto [bi, bj] : c.mine()) {
    const double* blk = c.local_block(bi, bj);
    for (size_t rr = 0; rr < b && bi * b + rr < n; ++rr)
      for (size_t s = 0; s < b && bj * b + s < n; ++s) {
        const double t = u[bi * b + rr] * blk[rr * b + s] * v[bj * b + s];
        sums[0] += t;
        sums[1] += std::abs(t);
      }
  }
  gas::all_reduce(sums, 2);
  if (a.rank() != 0) return;
  std::vector<double> ua(n, 0.0), bv(n, 0.0);  // (A^T u)_k, (B v)_k
  for (size_t i = 0; i < n; ++i)
    for (size_t k = 0; k < n; ++k) {
      ua[k] += u[i] * input_entry(seed, 0, i, k);
      bv[i] += input_entry(seed, 1, i, k) * v[k];
    }
  double expected = 0;
  for (size_t k = 0; k < n; ++k) expected += ua[k] * bv[k];
  a.note("checksum error", std::abs(sums[0] - expected) / sums[1]);
  a.check(std::abs(sums[0] - expected) <= 1e-10 * sums[1], "u^T C v = %.17g, (A^T u) . (B v) = %.17g", sums[0],
          expected);
  int wrong = 0;
  for (int t = 0; t < 64; ++t) {
    const size_t i = r.next() % n, j = r.next() % n;
    const double got = gas::read(c.block(i / b, j / b) + static_cast<std::ptrdiff_t>(i % b * b + j % b));
    double want = 0;
    for (size_t k = 0; k < n; ++k) want += input_entry(seed, 0, i, k) * input_entry(seed, 1, k, j);
    if (std::abs(got - want) > entry_tolerance && wrong++ == 0)
      a.check(false, "C[%zu][%zu] = %.17g, its dot product is %.17g", i, j, got, want);
  }
  a.check(wrong == 0, "%d of 64 random entries differ from their dot products", wrong);
}

}  // namespace apps::matrix
