// 07_gas_store_pipeline: one-way stores in a pipeline. Rank 0 produces
// blocks; each rank waits for a block with store_sync (it counts the bytes
// that arrived), adds its rank to every element and stores the block on to
// the next rank. Nobody waits for acknowledgements: stores are one-way.
//
//   clumprun -n 4 ./07_gas_store_pipeline [blocks]

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
  const int me = gs.rank(), n = gs.size();
  const int blocks = argc > 1 ? std::atoi(argv[1]) : 100;
  constexpr size_t words = 1024;
  // A ring of landing slots on every rank, one per block.
  auto slots = gas::all_alloc<int64_t>(words * static_cast<size_t>(blocks));
  std::vector<int64_t> block(words);
  int64_t added = 0;
  for (int r = 1; r < n; ++r) added += r;

  int wrong = 0;
  for (int b = 0; b < blocks; ++b) {
    const auto slot = slots + static_cast<std::ptrdiff_t>(words * static_cast<size_t>(b));
    if (me == 0) {
      for (size_t i = 0; i < words; ++i) block[i] = b * 10000 + static_cast<int64_t>(i);
    } else {
      gas::store_sync(words * sizeof(int64_t));  // this block has arrived
      const int64_t* in = slot.local();
      for (size_t i = 0; i < words; ++i) block[i] = in[i] + me;
    }
    if (me + 1 < n) {
      gas::store(slot.on(me + 1), block.data(), words);
    } else {
      for (size_t i = 0; i < words; ++i) wrong += block[i] != b * 10000 + static_cast<int64_t>(i) + added;
    }
  }
  gas::all_store_sync();
  if (me == n - 1)
    std::printf("pipeline: %d blocks of %zu words through %d ranks, %s\n", blocks, words, n,
                wrong ? "WRONG values" : "every value right");
  return wrong ? 1 : 0;
} catch (const clump::error& e) {  // setup failed: say why (the message has the fix), exit 1
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
