// em3d: electromagnetic waves on an irregular bipartite graph (the SC97
// paper's EM3D, Tables 3, 4 and 6).
//
// The graph. Space is a grid of cells, one per process, as near a cube as P
// allows (or --grid-x/y/z). Each cell holds --nodes E nodes and as many H
// nodes; each node has --degree edges, with weights, to nodes of the other
// kind: with probability --remote into a neighbouring cell (one of the up to
// 26 around it, uniformly), else into its own. A cell's part is a function of
// the seed and the cell alone, so the graph in space is the same under every
// layout and any rank can make any cell's part again.
//
// A step is two half-steps, bulk synchronous: every E node's value becomes
// its value minus, edge by edge, weight x its H neighbour's value; a
// barrier; the same for H from E; a barrier.
//
// Communication. The E and H values are symmetric arrays (all_alloc), so a
// neighbour's value is at values.on(owner) + index:
//   --version naive  every edge into another process's cell is a blocking
//                    gas::read of one double, every half-step (the SC97
//                    program's irregular fine-grained traffic);
//   --version ghost  each distinct remote neighbour is fetched once per
//                    half-step with a split-phase gas::get into a ghost copy,
//                    all in flight together, then one sync (the classic
//                    "good" em3d).
// Either way a read on this node is a memcpy through the mapped segment, and
// one to another node a short request and a medium reply.
//
// Layout (--layout): which rank works on which cell. A rank learns which
// ranks share its node from global_ptr::is_local() (true for a place on a
// process of this node) and an all_gather spreads every rank's node (its
// lowest rank). The nodes, in order, take consecutive cells of an order of
// the grid, each node's ranks in rank order:
//   naive  x fastest: a node fills a row, then a plane (the paper's 4x2x1
//          slabs of a 4x4x2 grid of 32 processes on nodes of 8);
//   good   tile by tile, the tile as near a cube as the largest node allows
//          and dividing the grid (the paper's 2x2x2 cubes).
// With nodes of unequal size (3 ranks on 2 nodes) the same orders apply. Few
// small jobs tell the layouts apart: 4 ranks on 2 nodes (grid 2x2x1) only
// have 2x1 tiles; 16 ranks on 2 nodes (grid 4x2x2) give the paper's 4x2x1
// against 2x2x2, and 8 ranks on 2 nodes with --grid-x 4 --grid-y 2
// --grid-z 1 give 4x1x1 against 2x2x1.
//
// Report: besides the phases, the edges to this process, this node and
// other nodes; each process's time in the remote-read part of the
// half-steps (its communication phase, the paper's Table 6 balance:
// min / median / max over processes), its time in the half-steps before the
// barrier, and its network messages (Table 4).
//
// Check: rank 0 makes every cell's graph again, runs the steps sequentially
// with the same operations in the same order, and compares every value
// with the parallel run's, bit for bit.
//
// The graph, a node's update and the check's sequential run are in
// graph.hpp, without clump, so apps/mpi/em3d_mpi (the MPI peer) works on the
// very same graph.
//
//   clumprun -n 4 [-N 2] ./em3d [--nodes N] [--degree D] [--remote F] [--steps S]
//       [--layout naive|good] [--version naive|ghost] [--grid-x X --grid-y Y --grid-z Z]
//       [--size test|small|large]

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "app.hpp"
#include "graph.hpp"
#include "measure.hpp"
#include "process_grid.hpp"

namespace gas = clump::gas;

namespace {

using apps::process_grid;
using apps::em3d::cell_graph;
using apps::em3d::cell_nodes;
using apps::em3d::edge;
using apps::em3d::graph_shape;
using apps::em3d::make_cell;
using apps::em3d::updated;

// ---- layout ------------------------------------------------------------------------

/// The tile of the good layout: dividing the grid, at most `node_size`
/// cells, the most cells, then the smallest surface (the most x extent on
/// ties, like the naive order).
std::array<int, 3> cube_tile(const process_grid& g, int node_size) {
  std::array<int, 3> best{1, 1, 1};
  int best_cells = 1, best_surface = 3;
  for (int tx = g.x; tx >= 1; --tx)
    for (int ty = g.y; ty >= 1; --ty)
      for (int tz = g.z; tz >= 1; --tz) {
        if (g.x % tx || g.y % ty || g.z % tz) continue;
        const int cells = tx * ty * tz, surface = tx * ty + ty * tz + tz * tx;
        if (cells > node_size) continue;
        if (cells > best_cells || (cells == best_cells && surface < best_surface)) {
          best = {tx, ty, tz};
          best_cells = cells;
          best_surface = surface;
        }
      }
  return best;
}

/// The grid's cells tile by tile (tiles x fastest, cells in a tile x
/// fastest); a 1x1x1 tile gives the plain x-fastest order.
std::vector<int> cell_order(const process_grid& g, std::array<int, 3> t) {
  std::vector<int> order;
  for (int z0 = 0; z0 < g.z; z0 += t[2])
    for (int y0 = 0; y0 < g.y; y0 += t[1])
      for (int x0 = 0; x0 < g.x; x0 += t[0])
        for (int z = z0; z < z0 + t[2]; ++z)
          for (int y = y0; y < y0 + t[1]; ++y)
            for (int x = x0; x < x0 + t[0]; ++x) order.push_back(g.index(x, y, z));
  return order;
}

/// Each rank's cell: the nodes (named by their lowest rank, in that order)
/// take consecutive cells of the layout's order, their ranks in rank order.
std::vector<int> place_ranks(const process_grid& g, const std::vector<int>& node_of, bool good) {
  const int p = static_cast<int>(node_of.size());
  std::vector<int> ranks(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r) ranks[static_cast<size_t>(r)] = r;
  std::stable_sort(ranks.begin(), ranks.end(), [&](int a, int b) { return node_of[a] < node_of[b]; });
  int node_size = 0;
  for (int r = 0; r < p; ++r)
    node_size = std::max(node_size, static_cast<int>(std::count(node_of.begin(), node_of.end(), node_of[r])));
  const std::vector<int> order = cell_order(g, good ? cube_tile(g, node_size) : std::array<int, 3>{1, 1, 1});
  std::vector<int> cell_of(static_cast<size_t>(p));
  for (size_t i = 0; i < ranks.size(); ++i) cell_of[static_cast<size_t>(ranks[i])] = order[i];
  return cell_of;
}

/// "AxBxC ..." : the bounding box of each node's cells, node by node.
std::string node_shapes(const process_grid& g, const std::vector<int>& node_of, const std::vector<int>& cell_of) {
  std::string out;
  for (size_t r = 0; r < node_of.size(); ++r) {
    if (node_of[r] != static_cast<int>(r)) continue;  // one entry per node, at its lowest rank
    std::array<int, 3> lo{g.x, g.y, g.z}, hi{-1, -1, -1};
    for (size_t q = 0; q < node_of.size(); ++q) {
      if (node_of[q] != node_of[r]) continue;
      const auto c = g.coords(cell_of[q]);
      for (int d = 0; d < 3; ++d) {
        lo[d] = std::min(lo[d], c[d]);
        hi[d] = std::max(hi[d], c[d]);
      }
    }
    // (fmt, not "x" + std::to_string(...): GCC 12 -O3 -Wrestrict false positive)
    out += fmt::format("{}{}x{}x{}", out.empty() ? "" : " ", hi[0] - lo[0] + 1, hi[1] - lo[1] + 1, hi[2] - lo[2] + 1);
  }
  return out;
}

// ---- the parallel half-step --------------------------------------------------------

constexpr uint32_t remote_bit = 1u << 31;

/// How one kind's half-step finds its neighbours' values: each edge reads
/// this rank's array of the other kind, or a slot fetched from elsewhere.
struct half_step {
  std::vector<uint32_t> from;                     // per edge: own index, or remote_bit | slot
  std::vector<gas::global_ptr<double>> remote;    // per slot: where the value lives
  std::vector<double> fetched;                    // per slot: its value this half-step
};

/// naive: one slot per remote edge; ghost: one per distinct remote neighbour.
half_step plan(const cell_nodes& k, int my_cell, const std::vector<int>& rank_of_cell,
               gas::global_ptr<double> other_values, size_t nodes, bool ghost) {
  half_step s;
  // ghost: per cell, per node, 1 + the slot of its value once an edge has
  // asked for it (0 before), so that each distinct value is fetched once.
  std::vector<std::vector<uint32_t>> slot_at(ghost ? rank_of_cell.size() : 0);
  s.from.reserve(k.edges.size());
  for (const edge& e : k.edges) {
    if (e.cell == static_cast<uint32_t>(my_cell)) {
      s.from.push_back(e.node);
      continue;
    }
    uint32_t* seen = nullptr;
    if (ghost) {
      std::vector<uint32_t>& slots = slot_at[e.cell];
      if (slots.empty()) slots.assign(nodes, 0);
      seen = &slots[e.node];
      if (*seen) {
        s.from.push_back(remote_bit | (*seen - 1));
        continue;
      }
    }
    const auto slot = static_cast<uint32_t>(s.remote.size());
    if (seen) *seen = slot + 1;
    s.remote.push_back(other_values.on(rank_of_cell[e.cell]) + static_cast<std::ptrdiff_t>(e.node));
    s.from.push_back(remote_bit | slot);
  }
  s.fetched.resize(s.remote.size());
  return s;
}

/// The remote reads of a half-step: blocking reads (naive) or split-phase
/// gets and one sync (ghost).
void fetch(half_step& s, bool ghost) {
  if (!ghost) {
    for (size_t i = 0; i < s.remote.size(); ++i) s.fetched[i] = gas::read(s.remote[i]);
    return;
  }
  for (size_t i = 0; i < s.remote.size(); ++i) gas::get(&s.fetched[i], s.remote[i]);
  gas::sync();
}

/// The update of a half-step, from this rank's values of the other kind and the fetched ones.
void update(double* mine, const cell_nodes& k, const half_step& s, const double* other, size_t degree,
            std::vector<double>& x) {
  const size_t nodes = k.value.size();
  for (size_t i = 0; i < nodes; ++i) {
    for (size_t j = 0; j < degree; ++j) {
      const uint32_t f = s.from[i * degree + j];
      x[j] = f & remote_bit ? s.fetched[f & ~remote_bit] : other[f];
    }
    mine[i] = updated(mine[i], &k.edges[i * degree], x.data(), degree);
  }
}

}  // namespace

int main(int argc, char** argv) try {
  clump::runtime rt{argc, argv};
  apps::app a(rt, argc, argv, "em3d",
              "EM3D: E and H values on an irregular bipartite graph, neighbours read with fine-grained gas reads");
  const apps::em3d::run_options run = apps::em3d::read_options(a);
  const size_t nodes = run.shape.nodes, degree = run.shape.degree, steps = run.steps;
  const double remote = run.shape.remote;
  const bool good = a.word("--layout", "which rank takes which cell (see the source)", "naive,good") == "good";
  const bool ghost = a.word("--version", "naive: a blocking read per remote edge; ghost: split-phase gets of each "
                                          "remote neighbour once",
                            "naive,ghost") == "ghost";
  const int gx = static_cast<int>(a.number("--grid-x", "cells along x (0: as near a cube as P allows)", 0, 0, 0));
  const int gy = static_cast<int>(a.number("--grid-y", "cells along y (0: automatic)", 0, 0, 0));
  const int gz = static_cast<int>(a.number("--grid-z", "cells along z (0: automatic)", 0, 0, 0));
  a.parsed(2 * nodes * sizeof(double));  // the E and H values
  const int me = a.rank(), p = a.size();
  process_grid g = apps::balanced_grid(p, 3);
  if (gx || gy || gz) g = {std::max(gx, 1), std::max(gy, 1), std::max(gz, 1)};
  const char* bad = g.cells() != p                         ? "--grid-x * --grid-y * --grid-z must be the process count"
                    : nodes == 0 || nodes >= remote_bit    ? "--nodes must be between 1 and 2^31 - 1"
                    : degree == 0                          ? "--degree must be at least 1"
                    : !(remote >= 0 && remote <= 1)        ? "--remote must be between 0 and 1"
                                                           : nullptr;
  if (bad) {
    if (me == 0) std::fprintf(stderr, "em3d: %s\n", bad);
    gas::barrier();
    rt.exit(2);
  }
  const graph_shape& shape = run.shape;

  a.phase("build graph");
  auto e_values = gas::all_alloc<double>(nodes), h_values = gas::all_alloc<double>(nodes);
  // My node: the lowest rank whose segment is mapped here.
  int my_node = 0;
  while (!e_values.on(my_node).is_local()) ++my_node;
  std::vector<int> node_of(static_cast<size_t>(p));
  gas::all_gather(&my_node, node_of.data(), 1);
  const std::vector<int> cell_of = place_ranks(g, node_of, good);
  std::vector<int> rank_of_cell(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r) rank_of_cell[static_cast<size_t>(cell_of[static_cast<size_t>(r)])] = r;
  const int my_cell = cell_of[static_cast<size_t>(me)];
  const cell_graph mine = make_cell(g, my_cell, shape);
  double* e = e_values.local();
  double* h = h_values.local();
  std::copy(mine.e.value.begin(), mine.e.value.end(), e);
  std::copy(mine.h.value.begin(), mine.h.value.end(), h);
  half_step e_step = plan(mine.e, my_cell, rank_of_cell, h_values, nodes, ghost);
  half_step h_step = plan(mine.h, my_cell, rank_of_cell, e_values, nodes, ghost);
  // Where the edges lead: this process, another of this node, another node.
  uint64_t edges_to[3] = {0, 0, 0};
  for (const cell_nodes* k : {&mine.e, &mine.h})
    for (const edge& ed : k->edges) {
      const int owner = rank_of_cell[ed.cell];
      ++edges_to[owner == me ? 0 : node_of[static_cast<size_t>(owner)] == my_node ? 1 : 2];
    }
  gas::all_reduce(edges_to, 3);

  a.phase("simulate");
  const gas::traffic_counts traffic_before = gas::traffic();
  double read_seconds = 0, work_seconds = 0;
  std::vector<double> x(degree);
  auto half = [&](half_step& s, double* values, const cell_nodes& k, const double* other) {
    const auto start = std::chrono::steady_clock::now();
    fetch(s, ghost);
    read_seconds += apps::seconds_since(start);
    update(values, k, s, other, degree, x);
    work_seconds += apps::seconds_since(start);
    gas::barrier();
  };
  for (size_t step = 0; step < steps; ++step) {
    half(e_step, e, mine.e, h);
    half(h_step, h, mine.h, e);
  }
  const double messages = apps::network_messages_since(traffic_before);
  a.done_timing();

  const apps::rank_spread reads(read_seconds), work(work_seconds), sent(messages);
  const double all_edges = static_cast<double>(edges_to[0] + edges_to[1] + edges_to[2]);
  char grid_text[64];
  std::snprintf(grid_text, sizeof grid_text, "%dx%dx%d", g.x, g.y, g.z);
  a.note("nodes per process", static_cast<double>(nodes));
  a.note("degree", static_cast<double>(degree));
  a.note("remote", remote);
  a.note("steps", static_cast<double>(steps));
  a.note("version", ghost ? "ghost" : "naive");
  a.note("layout", good ? "good" : "naive");
  a.note("grid", grid_text);
  a.note("node shapes", node_shapes(g, node_of, cell_of));
  char edges_text[64];
  std::snprintf(edges_text, sizeof edges_text, "%.1f / %.1f / %.1f", 100 * static_cast<double>(edges_to[0]) / all_edges,
                100 * static_cast<double>(edges_to[1]) / all_edges, 100 * static_cast<double>(edges_to[2]) / all_edges);
  a.note("edges to own/node/net %", edges_text);
  a.note("read seconds min/median/max", reads.text());
  a.note("half-step work seconds min/median/max", work.text());
  a.note("net msgs per process min/median/max", sent.text("%.0f"));

  // The check (not timed): the same steps sequentially, every value compared bit for bit.
  if (me == 0) {
    const apps::em3d::grid_values want_all = apps::em3d::sequential_run(g, shape, steps);
    std::vector<double> got(nodes);
    size_t wrong = 0;
    double worst = 0;
    for (int r = 0; r < p; ++r) {
      const size_t c = static_cast<size_t>(cell_of[static_cast<size_t>(r)]);
      for (int kind = 0; kind < 2; ++kind) {
        gas::read(got.data(), (kind ? h_values : e_values).on(r), nodes);
        const std::vector<double>& want = kind ? want_all.h[c] : want_all.e[c];
        for (size_t i = 0; i < nodes; ++i)
          if (got[i] != want[i]) {
            ++wrong;
            worst = std::max(worst, std::abs(got[i] - want[i]));
          }
      }
    }
    a.check(wrong == 0, "%zu of %zu values differ from the sequential run (largest difference %g)", wrong,
            2 * nodes * static_cast<size_t>(p), worst);
  }
  return a.finish();
} catch (const std::exception& e) {
  return apps::failed(e);
}
