// 09_coroutine_graph: breadth-first search of a distributed graph with
// coroutines. Vertex v belongs to rank v % P. Level by level, each rank runs
// one coroutine per vertex of its frontier; the coroutine visits the
// vertex's neighbours one after another with `co_await rpc(...)` to their
// owners, which set the distance and add the vertex to their next frontier.
// Thousands of coroutines are suspended at once while their calls are in
// flight. Every rank checks the distances against a search of its own.
//
//   clumprun -n 4 ./09_coroutine_graph [vertices]

#include <clump/clump.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <queue>
#include <vector>

namespace {

int64_t vertices = 0;
int ranks = 1;
std::vector<int32_t> distance;  // of this rank's vertices (v / P), -1: not reached
std::vector<int64_t> next_frontier;

// Three neighbours per vertex, the same on every rank.
std::vector<int64_t> neighbours(int64_t v) {
  return {(v * 3 + 1) % vertices, (v * 7 + 2) % vertices, (v + vertices / 2) % vertices};
}

const auto visit = clump::rpc_function("bfs.visit", [](int64_t v, int32_t level) {
  int32_t& d = distance[static_cast<size_t>(v / ranks)];
  if (d >= 0) return false;
  d = level;
  next_frontier.push_back(v);
  return true;
});

// One frontier vertex: its neighbours, one call at a time.
clump::future<int> expand(int64_t v, int32_t level) {
  int reached = 0;
  for (int64_t w : neighbours(v)) reached += co_await clump::rpc(static_cast<int>(w % ranks), visit, w, level);
  co_return reached;
}

}  // namespace

int main(int argc, char** argv) try {
  clump::runtime rt{argc, argv};
  clump::async_engine engine{rt};
  const int me = rt.rank();
  ranks = rt.size();
  vertices = argc > 1 ? std::atoll(argv[1]) : 200000;
  distance.assign(static_cast<size_t>((vertices + ranks - 1) / ranks), -1);
  if (me == 0) {
    distance[0] = 0;
    next_frontier.push_back(0);
  }
  rt.barrier();
  int32_t level = 0;
  size_t most_in_flight = 0;
  for (;;) {
    std::vector<int64_t> frontier;
    frontier.swap(next_frontier);
    int64_t size = static_cast<int64_t>(frontier.size()), total = 0;
    std::vector<int64_t> sizes(static_cast<size_t>(ranks));
    rt.allgather(&size, sizes.data(), sizeof size);
    for (int64_t s : sizes) total += s;
    if (total == 0) break;
    ++level;
    std::vector<clump::future<int>> running;
    for (int64_t v : frontier) running.push_back(expand(v, level));
    most_in_flight = std::max(most_in_flight, running.size());
    (void)clump::when_all(std::move(running)).wait();
    rt.barrier();  // every visit of this level has landed
  }

  // The same search here, alone.
  std::vector<int32_t> want(static_cast<size_t>(vertices), -1);
  std::queue<int64_t> q;
  want[0] = 0;
  q.push(0);
  while (!q.empty()) {
    const int64_t v = q.front();
    q.pop();
    for (int64_t w : neighbours(v))
      if (want[static_cast<size_t>(w)] < 0) want[static_cast<size_t>(w)] = want[static_cast<size_t>(v)] + 1, q.push(w);
  }
  int64_t wrong = 0, reached = 0;
  for (int64_t v = me; v < vertices; v += ranks) {
    const int32_t d = distance[static_cast<size_t>(v / ranks)];
    wrong += d != want[static_cast<size_t>(v)];
    reached += d >= 0;
  }
  rt.barrier();
  std::printf("bfs: rank %d reached %lld of its vertices in %d levels (up to %zu coroutines at once), %s\n", me,
              static_cast<long long>(reached), level - 1, most_in_flight, wrong ? "WRONG distances" : "every distance right");
  return wrong ? 1 : 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "09_coroutine_graph: %s\n", e.what());
  return 1;
}
