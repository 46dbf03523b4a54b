// mm: blocked matrix multiply C = A B (the Split-C paper's Table 2).
//
// A, B and C are spread arrays of b x b blocks (apps/cannon/matrix.hpp:
// block (i, j) of the nb x nb grid, nb = ceil(n / b), on process
// (i nb + j) % P; zero padded past n). Each process computes the C blocks it
// owns, C(i, j) = sum over k of A(i, k) B(k, j), fetching every A and B block
// it needs with a bulk get into one of two pairs of buffers: the gets of the
// next product are issued before the multiply of the current one and
// complete at the sync after it (split phase: the fetch overlaps the
// multiply). The k of block (i, j) start at (i + j) mod nb, so the processes
// do not all fetch the same block at once. A and B are only read and each C
// block has one writer: no barrier until the end. Gets of blocks on this
// node are memcpy, of blocks on other nodes long replies; any P works.
//
// The check (apps/cannon/matrix.hpp): for n <= 512 every entry against a
// sequential multiply on rank 0; beyond, u^T C v = (A^T u) . (B v) and 64
// random entries against their dot products.
//
//   clumprun -n 4 ./mm [--n N] [--block B] [--size test|small|large]

#include <cstdio>
#include <vector>

#include "../cannon/matrix.hpp"

namespace gas = clump::gas;
using apps::matrix::block_matrix;

int main(int argc, char** argv) try {
  clump::runtime rt{argc, argv};
  apps::app a(rt, argc, argv, "mm",
              "blocked matrix multiply; every block fetched with a bulk get overlapped with a multiply");
  const size_t n = a.number("--n", "rows and columns of the matrices", 96, 1024, 8192);
  const size_t b = a.number("--block", "rows and columns of a block", 16, 64, 128);
  const bool usable = n > 0 && b > 0;
  a.parsed(usable ? 3 * block_matrix::points_on_each((n + b - 1) / b, b, static_cast<size_t>(a.size())) * sizeof(double)
                  : 0);  // A, B and C
  if (!usable) {
    if (a.rank() == 0) std::fprintf(stderr, "mm: --n %zu --block %zu: expected positive sizes\n", n, b);
    return 2;
  }
  const size_t nb = (n + b - 1) / b;
  a.note("n", static_cast<double>(n));
  a.note("block", static_cast<double>(b));

  const block_matrix am(nb, b), bm(nb, b), c(nb, b);
  apps::matrix::fill(am, a.seed(), 0, n);
  apps::matrix::fill(bm, a.seed(), 1, n);
  c.clear();
  const size_t bb = c.block_points();

  a.phase("multiply (bulk gets)");
  // Every product this process does, in order: C(i, j) += A(i, k) B(k, j).
  struct product {
    size_t i, j, k;
  };
  std::vector<product> work;
  for (auto [i, j] : c.mine())
    for (size_t t = 0; t < nb; ++t) work.push_back({i, j, (i + j + t) % nb});
  std::vector<double> abuf[2] = {std::vector<double>(bb), std::vector<double>(bb)};
  std::vector<double> bbuf[2] = {std::vector<double>(bb), std::vector<double>(bb)};
  auto fetch = [&](const product& w, int into) {
    gas::get(abuf[into].data(), am.block(w.i, w.k), bb);
    gas::get(bbuf[into].data(), bm.block(w.k, w.j), bb);
  };
  if (!work.empty()) fetch(work[0], 0);
  gas::sync();
  for (size_t t = 0; t < work.size(); ++t) {
    const int cur = static_cast<int>(t % 2);
    if (t + 1 < work.size()) fetch(work[t + 1], 1 - cur);
    apps::matrix::multiply_add(c.local_block(work[t].i, work[t].j), abuf[cur].data(), bbuf[cur].data(), b);
    gas::sync();
  }
  a.done_timing();

  apps::matrix::check_product(a, c, n);
  return a.finish();
} catch (const std::exception& e) {
  return apps::failed(e);
}
