#pragma once
// EM3D's graph and its arithmetic, without clump: shared by apps/em3d (on
// the gas layer) and apps/mpi/em3d_mpi (its MPI peer), so both make the very
// same graph from the same options and seed, update a node with the very
// same operations in the same order, and check against the same sequential
// run. See em3d.cpp for what the graph models.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "process_grid.hpp"
#include "random64.hpp"

namespace apps::em3d {

/// An edge from a node to a node of the other kind.
struct edge {
  uint32_t cell;  // the neighbour's cell
  uint32_t node;  // its index there
  double weight;
};

/// A cell's nodes of one kind: their values and, for node i, its edges at
/// [i * degree, (i + 1) * degree).
struct cell_nodes {
  std::vector<double> value;
  std::vector<edge> edges;
};

struct cell_graph {
  cell_nodes e, h;
};

/// The options that decide the graph (with the process grid).
struct graph_shape {
  size_t nodes, degree;
  double remote;
  uint64_t seed;
};

/// The options em3d and its MPI peer share, with their defaults for each
/// size class (large: about 50 s with 4 processes on one node).
struct run_options {
  graph_shape shape;
  uint64_t steps;
};

/// Reads them; A is apps::app or apps::mpi_app.
template <class A>
run_options read_options(A& a) {
  run_options o{};
  o.shape.nodes = a.number("--nodes", "E nodes (and as many H nodes) per process", 100, 1000, 100000);
  o.shape.degree = a.number("--degree", "edges per node", 8, 20, 20);
  o.shape.remote = a.real("--remote", "fraction of edges into a neighbouring cell", 0.4, 0.4, 0.4);
  o.steps = a.number("--steps", "steps (an E and an H half-step each)", 3, 2, 150);
  o.shape.seed = a.seed();
  return o;
}

/// The cells around `cell` (up to 26), in a fixed order.
inline std::vector<uint32_t> cells_around(const process_grid& g, int cell) {
  const auto [x, y, z] = g.coords(cell);
  std::vector<uint32_t> around;
  for (int dz = -1; dz <= 1; ++dz)
    for (int dy = -1; dy <= 1; ++dy)
      for (int dx = -1; dx <= 1; ++dx)
        if ((dx || dy || dz) && g.inside(x + dx, y + dy, z + dz))
          around.push_back(static_cast<uint32_t>(g.index(x + dx, y + dy, z + dz)));
  return around;
}

/// Cell `cell`'s part of the graph: a function of the seed and the cell.
/// Weights are uniform in +-1/degree, so values stay of order one.
inline cell_graph make_cell(const process_grid& g, int cell, const graph_shape& s) {
  const std::vector<uint32_t> around = cells_around(g, cell);
  random64 rng(s.seed * 0x100000001b3ull + static_cast<uint64_t>(cell));
  cell_graph c;
  for (cell_nodes* k : {&c.e, &c.h}) {
    k->value.resize(s.nodes);
    k->edges.resize(s.nodes * s.degree);
    for (size_t i = 0; i < s.nodes; ++i) {
      k->value[i] = 2 * rng.uniform() - 1;
      for (size_t j = 0; j < s.degree; ++j) {
        edge& e = k->edges[i * s.degree + j];
        const bool out = !around.empty() && rng.uniform() < s.remote;
        e.cell = out ? around[rng.next() % around.size()] : static_cast<uint32_t>(cell);
        e.node = static_cast<uint32_t>(rng.next() % s.nodes);
        e.weight = (2 * rng.uniform() - 1) / static_cast<double>(s.degree);
      }
    }
  }
  return c;
}

/// A node's new value: its value minus weight x neighbour value, edge by
/// edge in order. The parallel runs and the check all use it, so their
/// results agree bit for bit.
inline double updated(double v, const edge* e, const double* x, size_t degree) {
  for (size_t k = 0; k < degree; ++k) v -= e[k].weight * x[k];
  return v;
}

/// The whole run, sequentially over every cell: `steps` times every E node
/// from the H values, then every H node from the new E values. `e` and `h`
/// hold [cell][node] and start as the cells' initial values.
inline void simulate_sequentially(const std::vector<cell_graph>& cells, std::vector<std::vector<double>>& e,
                                  std::vector<std::vector<double>>& h, size_t degree, size_t steps) {
  std::vector<double> x(degree);
  auto half = [&](std::vector<std::vector<double>>& mine, const std::vector<std::vector<double>>& other,
                  cell_nodes cell_graph::*kind) {
    for (size_t c = 0; c < cells.size(); ++c) {
      const cell_nodes& k = cells[c].*kind;
      for (size_t i = 0; i < k.value.size(); ++i) {
        const edge* es = &k.edges[i * degree];
        for (size_t j = 0; j < degree; ++j) x[j] = other[es[j].cell][es[j].node];
        mine[c][i] = updated(mine[c][i], es, x.data(), degree);
      }
    }
  };
  for (size_t step = 0; step < steps; ++step) {
    half(e, h, &cell_graph::e);
    half(h, e, &cell_graph::h);
  }
}

/// Every cell's E and H values, [cell][node].
struct grid_values {
  std::vector<std::vector<double>> e, h;
};

/// The reference for a check: every cell of `g` made again and the steps
/// run sequentially. Costs the whole graph's memory and one process's time
/// for all of it.
inline grid_values sequential_run(const process_grid& g, const graph_shape& s, size_t steps) {
  const auto n = static_cast<size_t>(g.cells());
  std::vector<cell_graph> cells;
  cells.reserve(n);
  grid_values v{std::vector<std::vector<double>>(n), std::vector<std::vector<double>>(n)};
  for (size_t c = 0; c < n; ++c) {
    cells.push_back(make_cell(g, static_cast<int>(c), s));
    v.e[c] = cells.back().e.value;
    v.h[c] = cells.back().h.value;
  }
  simulate_sequentially(cells, v.e, v.h, s.degree, steps);
  return v;
}

}  // namespace apps::em3d
