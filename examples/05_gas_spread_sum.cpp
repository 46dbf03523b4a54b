// 05_gas_spread_sum: a spread array (Split-C's "spread" arrays) summed in
// parallel: each rank adds its own share with plain loads, then one
// all_reduce combines the partial sums; rank 0 also sums the whole array
// element by element through global indices, to check.
//
//   clumprun -n 3 ./05_gas_spread_sum [n]

#include <clump/clump.hpp>
#include <clump/gas.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace gas = clump::gas;

int main(int argc, char** argv) try {
  clump::runtime rt{argc, argv};
  gas::space gs{rt};
  const size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 100000;
  gas::spread_array<int64_t> a(n, gas::layout::cyclic);
  // Every rank initialises its own elements: a[i] = i.
  auto mine = a.local();
  for (size_t k = 0; k < mine.size(); ++k) mine[k] = static_cast<int64_t>(a.index_of(k));
  gas::barrier();

  int64_t sum = 0;
  for (int64_t v : mine) sum += v;
  gas::all_reduce(&sum, 1);

  const int64_t expected = static_cast<int64_t>(n) * static_cast<int64_t>(n - 1) / 2;
  int64_t walked = expected;
  if (gs.rank() == 0) {
    walked = 0;
    for (size_t i = 0; i < n; i += 97) walked += gas::read(a[i]);  // every 97th, through the network if need be
    int64_t want = 0;
    for (size_t i = 0; i < n; i += 97) want += static_cast<int64_t>(i);
    walked = walked == want ? expected : -1;
    std::printf("spread sum of %zu elements on %d ranks: %lld (expected %lld)\n", n, gs.size(),
                static_cast<long long>(sum), static_cast<long long>(expected));
  }
  gas::barrier();
  return sum == expected && walked == expected ? 0 : 1;
} catch (const clump::error& e) {  // setup failed: say why (the message has the fix), exit 1
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
