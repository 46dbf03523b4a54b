// em3d_mpi: the EM3D of apps/em3d written with MPI the way a user would, on
// the very same graph (apps/em3d/graph.hpp: the same cells from the same
// options and seed, the same update of a node). It is the peer of apps/em3d
// in apps/run-experiments.
//
// Layout: rank r works on cell r of the grid (as near a cube as P allows),
// the identity order. It is what em3d's --layout naive gives on one node
// (and what apps/run-experiments sets it against: em3d SMP).
//
// Communication. At setup each rank lists, per half-step, the distinct
// (cell, index) values of the other kind its edges need from other cells,
// per owner in the order its edges meet them, and tells the owners:
// MPI_Alltoall of the counts, then MPI_Alltoallv of the index lists. Each half-step then packs the values
// others asked of it and swaps them with one MPI_Alltoallv (em3d's --version
// ghost, in bulk), updates its nodes in em3d's order with graph.hpp's
// `updated` (so the values come out bit for bit the same), and ends with an
// MPI_Barrier like em3d's half-steps. (The next exchange alone would order
// the half-steps; the barrier keeps em3d's structure and lets each phase's
// time stand for its half-steps.)
//
//   mpirun -np 4 ./em3d_mpi [--nodes N] [--degree D] [--remote F] [--steps S]
//       [--size test|small|large] [--seed S] [--json FILE]
//
// Takes the same options and prints the same report (phases, total, check,
// --json) as the clump programs, through apps/mpi/mpi_app.hpp.
// The check: rank 0 gathers every value (MPI_Gather: every rank has
// --nodes of each kind), makes the graph again, runs the steps sequentially
// (graph.hpp's sequential_run, em3d's check) and compares bit for bit.

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "graph.hpp"
#include "mpi_app.hpp"

namespace {

using apps::process_grid;
using apps::em3d::cell_graph;
using apps::em3d::cell_nodes;
using apps::em3d::edge;
using apps::em3d::graph_shape;
using clock_type = std::chrono::steady_clock;

constexpr uint32_t remote_bit = 1u << 31;

/// The most nodes per cell: a rank asks an owner for at most --nodes values
/// and all its owners together for at most 26 x --nodes, which MPI's int
/// counts and displacements must hold.
constexpr uint64_t max_nodes = INT_MAX / 26;

double seconds_since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

/// One kind's half-step: where each edge finds its neighbour's value, and
/// which values this rank swaps with which rank.
struct exchange_plan {
  std::vector<uint32_t> from;            // per edge: own index, or remote_bit | slot of `received`
  std::vector<int> recv_counts, recv_at;  // per owner: how many of its values come, and where in `received`
  std::vector<int> send_counts, send_at;  // per asking rank: how many of mine go, and where in `sent`
  std::vector<uint32_t> send_index;       // which of my values go, asking rank by asking rank
  std::vector<double> sent, received;
};

/// Lists the remote values `k`'s edges need (each distinct one once, per
/// owner in the order the edges first meet them) and tells the owners.
/// Collective.
exchange_plan plan(const cell_nodes& k, int me, int p, size_t nodes) {
  const auto np = static_cast<size_t>(p);
  const auto mine = static_cast<uint32_t>(me);
  exchange_plan s;
  std::vector<std::vector<int>> slot_at(np);  // per owner, per index: its place among those asked of it, or -1
  std::vector<std::vector<uint32_t>> wanted(np);
  for (const edge& e : k.edges) {
    if (e.cell == mine) continue;
    std::vector<int>& slots = slot_at[e.cell];
    if (slots.empty()) slots.assign(nodes, -1);
    if (slots[e.node] < 0) {
      slots[e.node] = static_cast<int>(wanted[e.cell].size());
      wanted[e.cell].push_back(e.node);
    }
  }
  s.recv_counts.resize(np);
  s.recv_at.resize(np);
  std::vector<uint32_t> asked;
  for (size_t r = 0; r < np; ++r) {
    s.recv_counts[r] = static_cast<int>(wanted[r].size());
    s.recv_at[r] = static_cast<int>(asked.size());
    asked.insert(asked.end(), wanted[r].begin(), wanted[r].end());
  }
  s.from.reserve(k.edges.size());
  for (const edge& e : k.edges)
    s.from.push_back(e.cell == mine ? e.node
                                    : remote_bit | static_cast<uint32_t>(s.recv_at[e.cell] + slot_at[e.cell][e.node]));
  s.send_counts.resize(np);
  s.send_at.resize(np);
  MPI_Alltoall(s.recv_counts.data(), 1, MPI_INT, s.send_counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  for (size_t r = 1; r < np; ++r) s.send_at[r] = s.send_at[r - 1] + s.send_counts[r - 1];
  s.send_index.resize(static_cast<size_t>(s.send_at[np - 1] + s.send_counts[np - 1]));
  MPI_Alltoallv(asked.data(), s.recv_counts.data(), s.recv_at.data(), MPI_UINT32_T, s.send_index.data(),
                s.send_counts.data(), s.send_at.data(), MPI_UINT32_T, MPI_COMM_WORLD);
  s.sent.resize(s.send_index.size());
  s.received.resize(asked.size());
  return s;
}

/// A half-step's communication: the values of the other kind that others
/// asked of this rank go, the ones it asked for come. Collective.
void exchange(exchange_plan& s, const std::vector<double>& other) {
  for (size_t i = 0; i < s.send_index.size(); ++i) s.sent[i] = other[s.send_index[i]];
  MPI_Alltoallv(s.sent.data(), s.send_counts.data(), s.send_at.data(), MPI_DOUBLE, s.received.data(),
                s.recv_counts.data(), s.recv_at.data(), MPI_DOUBLE, MPI_COMM_WORLD);
}

/// A half-step's update, node by node and edge by edge as em3d's.
void update(std::vector<double>& mine, const cell_nodes& k, const exchange_plan& s, const std::vector<double>& other,
            size_t degree, std::vector<double>& x) {
  for (size_t i = 0; i < mine.size(); ++i) {
    for (size_t j = 0; j < degree; ++j) {
      const uint32_t f = s.from[i * degree + j];
      x[j] = f & remote_bit ? s.received[f & ~remote_bit] : other[f];
    }
    mine[i] = apps::em3d::updated(mine[i], &k.edges[i * degree], x.data(), degree);
  }
}

/// "min / median / max" of every rank's `mine`, on rank 0. Collective.
std::string spread(double mine, int p, const char* f) {
  std::vector<double> all(static_cast<size_t>(p));
  MPI_Gather(&mine, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  std::sort(all.begin(), all.end());
  const size_t n = all.size();
  const double median = n % 2 ? all[n / 2] : (all[n / 2 - 1] + all[n / 2]) / 2;
  const std::string fmt3 = std::string(f) + " / " + f + " / " + f;
  char buf[128];
  std::snprintf(buf, sizeof buf, fmt3.c_str(), all.front(), median, all.back());
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  apps::mpi_app a(argc, argv, "em3d_mpi",
                  "EM3D with MPI: the values others need move in one MPI_Alltoallv per half-step");
  const apps::em3d::run_options run = apps::em3d::read_options(a);
  a.parsed();
  const int me = a.rank(), p = a.size();
  const uint64_t nodes = run.shape.nodes, degree = run.shape.degree, steps = run.steps;
  const double remote = run.shape.remote;
  const char* bad = nodes == 0 || nodes > max_nodes   ? "--nodes must be between 1 and 82595524"
                    : degree == 0                      ? "--degree must be at least 1"
                    : !(remote >= 0 && remote <= 1)    ? "--remote must be between 0 and 1"
                                                       : nullptr;
  if (bad) a.refuse(bad);
  const process_grid g = apps::balanced_grid(p, 3);
  const graph_shape& shape = run.shape;

  a.phase("build graph");
  // Build: this rank's cell (rank r, cell r), and who needs which values.
  const cell_graph mine = apps::em3d::make_cell(g, me, shape);
  std::vector<double> e = mine.e.value, h = mine.h.value;
  exchange_plan e_step = plan(mine.e, me, p, nodes);  // E nodes read H values
  exchange_plan h_step = plan(mine.h, me, p, nodes);  // H nodes read E values

  double exchange_seconds = 0;
  std::vector<double> x(degree);
  auto half = [&](const char* name, exchange_plan& s, std::vector<double>& values, const cell_nodes& k,
                  const std::vector<double>& other) {
    a.phase(name);  // a barrier first, as em3d's half-steps
    const auto t = clock_type::now();
    exchange(s, other);
    exchange_seconds += seconds_since(t);
    update(values, k, s, other, degree, x);
  };
  for (uint64_t step = 0; step < steps; ++step) {
    half("E half-steps", e_step, e, mine.e, h);
    half("H half-steps", h_step, h, mine.h, e);
  }
  a.done_timing();

  const std::string exchanged = spread(static_cast<double>(e_step.received.size() + h_step.received.size()), p, "%.0f");
  const std::string exchange_spread = spread(exchange_seconds, p, "%.4g");

  // The check (not timed): every value on rank 0, against the sequential run.
  const auto n = static_cast<size_t>(nodes), np = static_cast<size_t>(p);
  std::vector<double> all_e(me == 0 ? n * np : 0), all_h(me == 0 ? n * np : 0);
  MPI_Gather(e.data(), static_cast<int>(n), MPI_DOUBLE, all_e.data(), static_cast<int>(n), MPI_DOUBLE, 0,
             MPI_COMM_WORLD);
  MPI_Gather(h.data(), static_cast<int>(n), MPI_DOUBLE, all_h.data(), static_cast<int>(n), MPI_DOUBLE, 0,
             MPI_COMM_WORLD);
  if (me == 0) {
    const apps::em3d::grid_values want = apps::em3d::sequential_run(g, shape, steps);
    size_t wrong = 0;
    double worst = 0;
    for (size_t c = 0; c < np; ++c)  // rank c holds cell c
      for (const auto& [got, ref] : {std::pair{&all_e, &want.e[c]}, std::pair{&all_h, &want.h[c]}})
        for (size_t i = 0; i < n; ++i)
          if ((*got)[c * n + i] != (*ref)[i]) {
            ++wrong;
            worst = std::max(worst, std::abs((*got)[c * n + i] - (*ref)[i]));
          }
    a.check(wrong == 0, "%zu of %zu values differ from the sequential run (largest difference %g)", wrong, 2 * n * np,
            worst);
  }
  a.note("nodes per process", static_cast<double>(nodes));
  a.note("degree", static_cast<double>(degree));
  a.note("remote", remote);
  a.note("steps", static_cast<double>(steps));
  a.note("grid", std::to_string(g.x) + "x" + std::to_string(g.y) + "x" + std::to_string(g.z));
  a.note("layout", "identity (rank r on cell r)");
  a.note("values received per step min/median/max", exchanged);
  a.note("exchange seconds min/median/max", exchange_spread);
  return a.finish();
}
