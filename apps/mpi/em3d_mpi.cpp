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
// Prints the same report as the clump programs (phases, total, check) and
// writes the same JSON fields (app, processes, size, seconds, phases, check).
// The check: rank 0 gathers every value (MPI_Gather: every rank has
// --nodes of each kind), makes the graph again, runs the steps sequentially
// (graph.hpp's sequential_run, em3d's check) and compares bit for bit.

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "graph.hpp"

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

[[noreturn]] void usage(int rank, const char* why) {
  if (rank == 0) {
    if (why) std::fprintf(stderr, "em3d_mpi: %s\n", why);
    std::fputs("usage: mpirun -np P em3d_mpi [--nodes N] [--degree D] [--remote F] [--steps S]\n"
               "                [--size test|small|large] [--seed S] [--json FILE]\n"
               "  defaults per size test / small / large: --nodes 100 / 1000 / 2500, --degree 8 / 20 / 20,\n"
               "  --remote 0.4, --steps 3 / 2 / 10, --seed 1 (as apps/em3d)\n",
               why ? stderr : stdout);
  }
  MPI_Finalize();
  std::exit(why ? 2 : 0);
}

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

/// `v` as a whole number, or a real; false when it is not one.
bool parse(const std::string& v, uint64_t& n) {
  char* end = nullptr;
  n = std::strtoull(v.c_str(), &end, 0);
  return !v.empty() && v[0] != '-' && *end == 0;
}
bool parse(const std::string& v, double& x) {
  char* end = nullptr;
  x = std::strtod(v.c_str(), &end);
  return !v.empty() && *end == 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int me = 0, p = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  uint64_t nodes = 0, degree = 0, steps = 0, seed = 1;
  double remote = 0.4;
  bool nodes_set = false, degree_set = false, steps_set = false;
  std::string size = "small", json;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") usage(me, nullptr);
    if (i + 1 >= argc) usage(me, (a + " needs a value, or is not an option").c_str());
    const std::string v = argv[++i];
    bool ok = true;
    if (a == "--nodes") ok = nodes_set = parse(v, nodes);
    else if (a == "--degree") ok = degree_set = parse(v, degree);
    else if (a == "--steps") ok = steps_set = parse(v, steps);
    else if (a == "--remote") ok = parse(v, remote);
    else if (a == "--seed") ok = parse(v, seed);
    else if (a == "--json") json = v;
    else if (a == "--size" && (v == "test" || v == "small" || v == "large")) size = v;
    else ok = false;
    if (!ok) usage(me, ("bad option " + a + " " + v).c_str());
  }
  // em3d's defaults for each size class.
  const int cls = size == "test" ? 0 : size == "small" ? 1 : 2;
  if (!nodes_set) nodes = cls == 0 ? 100 : cls == 1 ? 1000 : 2500;
  if (!degree_set) degree = cls == 0 ? 8 : 20;
  if (!steps_set) steps = cls == 0 ? 3 : cls == 1 ? 2 : 10;
  const char* bad = nodes == 0 || nodes > max_nodes   ? "--nodes must be between 1 and 82595524"
                    : degree == 0                      ? "--degree must be at least 1"
                    : !(remote >= 0 && remote <= 1)    ? "--remote must be between 0 and 1"
                                                       : nullptr;
  if (bad) usage(me, bad);
  const process_grid g = apps::balanced_grid(p, 3);
  const graph_shape shape{nodes, degree, remote, seed};

  double phase_seconds[3] = {0, 0, 0};  // build graph, E half-steps, H half-steps
  const char* const phase_names[3] = {"build graph", "E half-steps", "H half-steps"};
  MPI_Barrier(MPI_COMM_WORLD);
  const auto start = clock_type::now();

  // Build: this rank's cell (rank r, cell r), and who needs which values.
  const cell_graph mine = apps::em3d::make_cell(g, me, shape);
  std::vector<double> e = mine.e.value, h = mine.h.value;
  exchange_plan e_step = plan(mine.e, me, p, nodes);  // E nodes read H values
  exchange_plan h_step = plan(mine.h, me, p, nodes);  // H nodes read E values
  MPI_Barrier(MPI_COMM_WORLD);
  phase_seconds[0] = seconds_since(start);

  double exchange_seconds = 0;
  std::vector<double> x(degree);
  auto half = [&](exchange_plan& s, std::vector<double>& values, const cell_nodes& k, const std::vector<double>& other,
                  double& phase) {
    const auto t = clock_type::now();
    exchange(s, other);
    exchange_seconds += seconds_since(t);
    update(values, k, s, other, degree, x);
    MPI_Barrier(MPI_COMM_WORLD);
    phase += seconds_since(t);
  };
  for (uint64_t step = 0; step < steps; ++step) {
    half(e_step, e, mine.e, h, phase_seconds[1]);
    half(h_step, h, mine.h, e, phase_seconds[2]);
  }
  const double my_total = seconds_since(start);

  double total = 0, max_phase[3] = {0, 0, 0};
  MPI_Reduce(&my_total, &total, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Reduce(phase_seconds, max_phase, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  const std::string exchanged = spread(static_cast<double>(e_step.received.size() + h_step.received.size()), p, "%.0f");
  const std::string exchange_spread = spread(exchange_seconds, p, "%.4g");

  // The check (not timed): every value on rank 0, against the sequential run.
  const auto n = static_cast<size_t>(nodes), np = static_cast<size_t>(p);
  std::vector<double> all_e(me == 0 ? n * np : 0), all_h(me == 0 ? n * np : 0);
  MPI_Gather(e.data(), static_cast<int>(n), MPI_DOUBLE, all_e.data(), static_cast<int>(n), MPI_DOUBLE, 0,
             MPI_COMM_WORLD);
  MPI_Gather(h.data(), static_cast<int>(n), MPI_DOUBLE, all_h.data(), static_cast<int>(n), MPI_DOUBLE, 0,
             MPI_COMM_WORLD);
  int failed = 0;
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
    failed = wrong != 0;
    if (failed)
      std::fprintf(stderr, "em3d_mpi: CHECK FAILED: %zu of %zu values differ from the sequential run (largest "
                   "difference %g)\n", wrong, 2 * n * np, worst);
  }
  MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);

  if (me == 0) {
    char grid[64], remote_text[32];
    std::snprintf(grid, sizeof grid, "%dx%dx%d", g.x, g.y, g.z);
    std::snprintf(remote_text, sizeof remote_text, "%g", remote);
    const std::vector<std::pair<std::string, std::string>> notes = {
        {"nodes per process", std::to_string(nodes)},
        {"degree", std::to_string(degree)},
        {"remote", remote_text},
        {"steps", std::to_string(steps)},
        {"grid", grid},
        {"layout", "identity (rank r on cell r)"},
        {"values received per step min/median/max", exchanged},
        {"exchange seconds min/median/max", exchange_spread}};
    std::printf("em3d_mpi: %d processes, %s input", p, size.c_str());
    for (const auto& [k, v] : notes) std::printf(", %s %s", k.c_str(), v.c_str());
    std::printf("\n");
    for (int i = 0; i < 3; ++i) std::printf("%-22s %10.4f\n", phase_names[i], max_phase[i]);
    std::printf("%-22s %10.4f\nem3d_mpi: check %s\n", "total", total, failed ? "FAILED" : "passed");
    std::fflush(stdout);
    if (!json.empty()) {
      std::ofstream o(json);
      o << "{\"app\": \"em3d_mpi\", \"processes\": " << p << ", \"size\": \"" << size << "\", \"seed\": " << seed
        << ", \"seconds\": " << total << ", \"phases\": [";
      for (int i = 0; i < 3; ++i)
        o << (i ? ", " : "") << "{\"name\": \"" << phase_names[i] << "\", \"seconds\": " << max_phase[i] << "}";
      o << "], \"check\": \"" << (failed ? "failed" : "passed") << "\", \"notes\": {";
      for (size_t i = 0; i < notes.size(); ++i)
        o << (i ? ", " : "") << "\"" << notes[i].first << "\": \"" << notes[i].second << "\"";
      o << "}}\n";
      if (!o) {
        std::fprintf(stderr, "em3d_mpi: could not write %s\n", json.c_str());
        failed = 1;
      }
    }
  }
  MPI_Finalize();
  return failed ? 1 : 0;
}
