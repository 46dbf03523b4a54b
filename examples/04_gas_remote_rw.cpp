// 04_gas_remote_rw: global pointers, blocking read and write, and the
// split-phase get and put of Split-C. Each rank owns a row of a table in the
// global address space; every rank fills its right neighbour's row, then
// fetches its left neighbour's row with gets that overlap, and checks it.
//
//   clumprun -n 4 ./04_gas_remote_rw          (one node: plain memory)
//   clumprun -n 4 -N 2 ./04_gas_remote_rw     (two nodes: messages between them)

#include <clump/clump.hpp>
#include <clump/gas.hpp>

#include <cstdint>
#include <cstdio>

namespace gas = clump::gas;

int main(int argc, char** argv) try {
  clump::runtime rt{argc, argv};
  gas::space gs{rt};
  const int me = gs.rank(), n = gs.size();
  constexpr int row = 16;
  // The same offset on every rank: table.on(r) is rank r's row.
  gas::global_ptr<int64_t> table = gas::all_alloc<int64_t>(row);
  const int right = (me + 1) % n, left = (me + n - 1) % n;

  // Blocking writes into the right neighbour's row.
  for (int i = 0; i < row; ++i) gas::write(table.on(right) + i, int64_t{me} * 100 + i);
  gas::barrier();

  // Split phase: issue every get, compute meanwhile, then sync.
  int64_t copy[row];
  for (int i = 0; i < row; ++i) gas::get(&copy[i], table.on(left) + i);
  gas::sync();
  const int writer = (left + n - 1) % n;
  int wrong = 0;
  for (int i = 0; i < row; ++i) wrong += copy[i] != int64_t{writer} * 100 + i;
  // A single value, read where it lives (no copy when the rank shares the node).
  const int64_t first = gas::read(table.on(left));
  std::printf("rank %d: row of rank %d holds rank %d's values (%s); first %lld; %s\n", me, left, writer,
              wrong ? "WRONG" : "ok", static_cast<long long>(first),
              table.on(left).is_local() ? "same node" : "other node");
  gas::barrier();
  return wrong ? 1 : 0;
} catch (const clump::error& e) {  // setup failed: say why (the message has the fix), exit 1
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
