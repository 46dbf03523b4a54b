// cannon: Cannon's matrix multiply C = A B (the Split-C paper's Table 2).
//
// The n x n matrices are cut into a q x q grid of b x b blocks, b = ceil(n /
// q) (zero padded past n), and block (i, j) of A, B and C belongs to the
// virtual processor (i, j) of a q x q grid. The virtual processors are dealt
// round-robin over the P processes (block_matrix: number i q + j on process
// (i q + j) % P), and q is the smallest q >= sqrt(P) with P dividing q^2, so
// every process gets as many: P = 1, 2, 3, 4 give q = 1, 2, 3, 2.
//   skew           virtual processor (i, j) fetches A(i, i+j) and B(i+j, j)
//                  (indices mod q) with one bulk get each;
//   q steps        C(i, j) += A B of the blocks in hand, while the bulk gets
//                  of the next step's blocks (A from (i, j+1), shifting left;
//                  B from (i+1, j), shifting up) are in flight into the
//                  second pair of buffers; sync, barrier, swap.
// The barrier ends a step: every fetch of the blocks in use has landed, so
// the next step may overwrite them. Gets of blocks on this node are memcpy,
// of blocks on other nodes long replies; any P works.
//
// The check (apps/cannon/matrix.hpp): for n <= 512 every entry against a
// sequential multiply on rank 0; beyond, u^T C v = (A^T u) . (B v) and 64
// random entries against their dot products.
//
//   clumprun -n 4 ./cannon [--n N] [--grid Q] [--size test|small|large]

#include <cmath>
#include <cstdio>

#include "matrix.hpp"

namespace gas = clump::gas;
using apps::matrix::block_matrix;

int main(int argc, char** argv) try {
  clump::runtime rt{argc, argv};
  apps::app a(rt, argc, argv, "cannon",
              "Cannon's matrix multiply; blocks shift with bulk gets, overlapped with the multiply");
  const size_t n = a.number("--n", "rows and columns of the matrices", 96, 1024, 8192);
  size_t q = a.number("--grid",
                      "blocks per side of the virtual processor grid (0: the smallest q >= sqrt(P) with "
                      "q^2 a multiple of P)",
                      0, 0, 0);
  const size_t p = static_cast<size_t>(a.size());
  if (q == 0) {
    q = static_cast<size_t>(std::ceil(std::sqrt(static_cast<double>(p))));
    while (q * q % p) ++q;
  }
  const bool usable = n > 0 && q <= n;
  // Five matrices: two buffers each of A and B, and C.
  a.parsed(usable ? 5 * block_matrix::points_on_each(q, (n + q - 1) / q, p) * sizeof(double) : 0);
  if (!usable) {
    if (a.rank() == 0) std::fprintf(stderr, "cannon: --n %zu --grid %zu: expected 0 < grid <= n\n", n, q);
    return 2;
  }
  const size_t b = (n + q - 1) / q;
  a.note("n", static_cast<double>(n));
  a.note("grid", static_cast<double>(q));
  a.note("block", static_cast<double>(b));

  // Two buffers of A and B per virtual processor: the blocks in use and the next ones.
  block_matrix am[2] = {{q, b}, {q, b}}, bm[2] = {{q, b}, {q, b}};
  const block_matrix c(q, b);
  c.clear();
  apps::matrix::fill(am[0], a.seed(), 0, n);
  apps::matrix::fill(bm[0], a.seed(), 1, n);
  const auto mine = c.mine();
  const size_t bb = c.block_points();

  a.phase("skew (gets)");
  for (auto [i, j] : mine) {
    gas::get(am[1].local_block(i, j), am[0].block(i, (i + j) % q), bb);
    gas::get(bm[1].local_block(i, j), bm[0].block((i + j) % q, j), bb);
  }
  gas::sync();
  gas::barrier();

  a.phase("multiply and shift");
  int in_use = 1;
  for (size_t step = 0; step < q; ++step) {
    const block_matrix &ac = am[in_use], &bc = bm[in_use], &an = am[1 - in_use], &bn = bm[1 - in_use];
    if (step + 1 < q)
      for (auto [i, j] : mine) {
        gas::get(an.local_block(i, j), ac.block(i, (j + 1) % q), bb);
        gas::get(bn.local_block(i, j), bc.block((i + 1) % q, j), bb);
      }
    for (auto [i, j] : mine)
      apps::matrix::multiply_add(c.local_block(i, j), ac.local_block(i, j), bc.local_block(i, j), b);
    gas::sync();
    gas::barrier();
    in_use = 1 - in_use;
  }
  a.done_timing();

  apps::matrix::check_product(a, c, n);
  return a.finish();
} catch (const std::exception& e) {
  return apps::failed(e);
}
