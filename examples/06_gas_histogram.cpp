// 06_gas_histogram: a histogram kept in a spread array and filled with
// remote atomic fetch-adds from every rank at once; the counts must be exact.
//
//   clumprun -n 4 ./06_gas_histogram [samples per rank]

#include <clump/clump.hpp>
#include <clump/gas.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace gas = clump::gas;

int main(int argc, char** argv) try {
  clump::runtime rt{argc, argv};
  gas::space gs{rt};
  const int samples = argc > 1 ? std::atoi(argv[1]) : 20000;
  constexpr size_t bins = 64;
  gas::spread_array<int64_t> histogram(bins, gas::layout::blocked);
  gas::barrier();

  // A simple generator, different on every rank; the bins are spread over the ranks.
  uint64_t x = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(gs.rank() + 1);
  std::vector<int64_t> mine(bins, 0);
  for (int i = 0; i < samples; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    const size_t bin = x % bins;
    ++mine[bin];
    (void)gas::fetch_add(histogram[bin], int64_t{1});
  }
  gas::barrier();

  // Check against the sum of what every rank counted locally.
  gas::all_reduce(mine.data(), bins);
  int wrong = 0;
  int64_t total = 0;
  for (size_t b = 0; b < bins; ++b) {
    const int64_t v = gas::read(histogram[b]);
    wrong += v != mine[b];
    total += v;
  }
  if (gs.rank() == 0)
    std::printf("histogram: %lld samples in %zu bins, %s\n", static_cast<long long>(total), bins,
                wrong ? "WRONG counts" : "every count exact");
  gas::barrier();
  return wrong ? 1 : 0;
} catch (const clump::error& e) {  // setup failed: say why (the message has the fix), exit 1
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
