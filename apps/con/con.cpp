// con: connected components of a random lattice graph (the SC97 paper's CON,
// Tables 3-6).
//
// The graph: a 2D or 3D lattice (--dims), each lattice edge present with
// probability --edge-prob, decided by a hash of the seed, the edge's lower
// node and its direction, so every process and the check agree without
// storing edges. The processes form a grid as near a square or a cube as P
// allows; each holds a block of side^dims nodes (--nodes per process, the
// side rounded). Node ids run x fastest over the whole lattice; a
// component's label is its smallest node id. The paper's runs: 3D with 25%
// of the edges, right at the bond percolation threshold (0.2488), so that
// components snake across many blocks (communication-bound), and 2D with
// 40%, below the threshold (0.5): small components, mostly inside a block
// (computation-bound).
//
// Algorithm and communication:
//   1. each process joins the edges inside its block with union-find (the
//      smaller node becomes the root, so a local component's root is its
//      smallest node, whose id is the component's first label);
//   2. rounds over the edges that cross to another block: every process
//      reads the label of the far end of each of its crossing edges, one
//      4-byte split-phase gas::get per edge, all in flight, then one sync
//      (fine-grained: a memcpy through the mapped segment on this node, a
//      short request and a medium reply to another node); lowers each local
//      component's label to the smallest it read; a barrier (everyone has
//      read); writes the new labels of its boundary nodes into its symmetric
//      label array; an all_reduce of "some label fell" ends the rounds.
//      Labels only fall and a round carries a label one block further, so
//      the rounds end with every component labelled by its smallest id.
//
// Check: rank 0 reads every block's labels (bulk gas::read), runs a
// sequential union-find over the whole lattice with the same edges, and
// compares node by node.
//
//   clumprun -n 4 [-N 2] ./con [--dims 3|2] [--nodes N] [--edge-prob P] [--size test|small|large]

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "../em3d/process_grid.hpp"
#include "../em3d/measure.hpp"
#include "app.hpp"

namespace gas = clump::gas;

namespace {

/// The lattice: `dims` axes (z has one node in 2D), cut into blocks of
/// `side` nodes along each axis, one block per process.
struct lattice {
  int dims;
  int64_t side;
  apps::process_grid blocks;
  uint64_t seed;
  double edge_prob;

  int64_t extent(int d) const {
    const int along[3] = {blocks.x, blocks.y, blocks.z};
    return d < dims ? side * along[d] : 1;
  }
  uint64_t id(std::array<int64_t, 3> g) const {
    return static_cast<uint64_t>(g[0] + extent(0) * (g[1] + extent(1) * g[2]));
  }
  /// Whether the edge from the node at `g` one step up along `dir` is there.
  bool edge(std::array<int64_t, 3> g, int dir) const {
    apps::random64 h((seed * 0x9e3779b97f4a7c15ull) ^ (id(g) * 3 + static_cast<uint64_t>(dir)));
    return h.uniform() < edge_prob;
  }
};

/// A box of the lattice: its first node and its size along each axis;
/// its nodes are numbered x fastest.
struct box {
  std::array<int64_t, 3> origin, size;
  size_t nodes() const { return static_cast<size_t>(size[0] * size[1] * size[2]); }
  std::array<int64_t, 3> local(size_t i) const {
    const auto n = static_cast<int64_t>(i);
    return {n % size[0], n / size[0] % size[1], n / (size[0] * size[1])};
  }
  size_t index(std::array<int64_t, 3> l) const { return static_cast<size_t>(l[0] + size[0] * (l[1] + size[1] * l[2])); }
};

/// Union-find over the nodes of a box, with the edges inside it: each
/// node's root, its component's (in the box) smallest node. Within a box
/// the index order is the id order, so that is also its smallest id.
std::vector<uint32_t> components_in(const lattice& l, const box& b) {
  std::vector<uint32_t> parent(b.nodes());
  for (size_t i = 0; i < parent.size(); ++i) parent[i] = static_cast<uint32_t>(i);
  auto find = [&](uint32_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];  // path halving
    return x;
  };
  const size_t stride[3] = {1, static_cast<size_t>(b.size[0]), static_cast<size_t>(b.size[0] * b.size[1])};
  for (size_t i = 0; i < parent.size(); ++i) {
    const std::array<int64_t, 3> at = b.local(i);
    const std::array<int64_t, 3> g = {b.origin[0] + at[0], b.origin[1] + at[1], b.origin[2] + at[2]};
    for (int d = 0; d < l.dims; ++d) {
      if (at[d] + 1 >= b.size[d] || !l.edge(g, d)) continue;
      const uint32_t ra = find(static_cast<uint32_t>(i)), rb = find(static_cast<uint32_t>(i + stride[d]));
      if (ra != rb) parent[std::max(ra, rb)] = std::min(ra, rb);
    }
  }
  for (size_t i = 0; i < parent.size(); ++i) parent[i] = find(static_cast<uint32_t>(i));
  return parent;
}

/// An edge from this block to another: where the far end's label lives, and
/// the root of the near end's local component.
struct crossing {
  gas::global_ptr<uint32_t> far;
  uint32_t root;
};

}  // namespace

int main(int argc, char** argv) try {
  clump::runtime rt{argc, argv};
  apps::app a(rt, argc, argv, "con",
              "CON: connected components of a random 2D or 3D lattice, labels exchanged with fine-grained gets");
  const int dims = a.word("--dims", "the lattice's dimensions", "3,2") == "2" ? 2 : 3;
  const size_t nodes = a.number("--nodes", "nodes per process (a block of side^dims)", 1000, 512000, 64000000);
  double prob = a.real("--edge-prob", "the probability of each lattice edge (0: the paper's, 0.25 in 3D, 0.40 in 2D)",
                       0, 0, 0);
  const uint64_t reps = a.repeats(6);
  const auto side = static_cast<int64_t>(std::llround(std::pow(static_cast<double>(nodes), 1.0 / dims)));
  const auto block_nodes = static_cast<size_t>(std::pow(static_cast<double>(std::max<int64_t>(side, 1)), dims));
  a.parsed(block_nodes * sizeof(uint32_t));  // the labels
  const int me = a.rank(), p = a.size();
  if (prob == 0) prob = dims == 3 ? 0.25 : 0.40;
  const lattice first{dims, std::max<int64_t>(side, 1), apps::balanced_grid(p, dims), a.seed(), prob};
  const double total_nodes = static_cast<double>(first.extent(0) * first.extent(1) * first.extent(2));
  if (!(prob > 0 && prob <= 1) || total_nodes >= 4e9) {
    if (me == 0) std::fprintf(stderr, "con: --edge-prob must be in (0, 1] and the lattice under 2^32 nodes\n");
    gas::barrier();
    rt.exit(2);
  }
  const std::array<int, 3> where = first.blocks.coords(me);
  const box mine{{where[0] * first.side, where[1] * first.side, where[2] * first.side},
                 {first.side, first.side, dims == 3 ? first.side : 1}};
  const size_t n = mine.nodes();
  auto labels = gas::all_alloc<uint32_t>(n);
  if (reps > 1) a.note("inputs", static_cast<double>(reps));

  for (uint64_t rep = 0; rep < reps; ++rep) {
    lattice l = first;  // this input's: the next seed
    l.seed = first.seed + rep;
    a.phase("local union-find");
    const std::vector<uint32_t> root_of = components_in(l, mine);
    auto id_of = [&](size_t i) {
      const std::array<int64_t, 3> at = mine.local(i);
      return static_cast<uint32_t>(l.id({mine.origin[0] + at[0], mine.origin[1] + at[1], mine.origin[2] + at[2]}));
    };
    // comp[root]: the label of a local component, its smallest id so far.
    std::vector<uint32_t> comp(n);
    for (size_t i = 0; i < n; ++i)
      if (root_of[i] == i) comp[i] = id_of(i);
    // The crossing edges, and the boundary nodes that have any.
    std::vector<crossing> crossings;
    std::vector<uint32_t> boundary;
    for (size_t i = 0; i < n; ++i) {
      const std::array<int64_t, 3> at = mine.local(i);
      const std::array<int64_t, 3> g = {mine.origin[0] + at[0], mine.origin[1] + at[1], mine.origin[2] + at[2]};
      const size_t before = crossings.size();
      for (int d = 0; d < dims; ++d)
        for (int step : {-1, 1}) {
          std::array<int64_t, 3> far = g;
          far[d] += step;
          const bool outside = at[d] + step < 0 || at[d] + step >= mine.size[d];
          if (!outside || far[d] < 0 || far[d] >= l.extent(d) || !l.edge(step > 0 ? g : far, d)) continue;
          const int owner = l.blocks.index(static_cast<int>(far[0] / l.side), static_cast<int>(far[1] / l.side),
                                           static_cast<int>(far[2] / l.side));
          const box theirs{{far[0] / l.side * l.side, far[1] / l.side * l.side, far[2] / l.side * l.side}, mine.size};
          const size_t at_far =
              theirs.index({far[0] - theirs.origin[0], far[1] - theirs.origin[1], far[2] - theirs.origin[2]});
          crossings.push_back({labels.on(owner) + static_cast<std::ptrdiff_t>(at_far), root_of[i]});
        }
      if (crossings.size() != before) boundary.push_back(static_cast<uint32_t>(i));
    }
    uint32_t* label = labels.local();
    for (size_t i = 0; i < n; ++i) label[i] = comp[root_of[i]];

    a.phase("boundary rounds");
    const gas::traffic_counts traffic_before = gas::traffic();
    std::vector<uint32_t> fetched(crossings.size());
    double read_seconds = 0;
    uint64_t rounds = 0;
    for (int64_t changed = 1; changed;) {
      ++rounds;
      const auto start = std::chrono::steady_clock::now();
      for (size_t e = 0; e < crossings.size(); ++e) gas::get(&fetched[e], crossings[e].far);
      gas::sync();
      read_seconds += apps::seconds_since(start);
      for (size_t e = 0; e < crossings.size(); ++e)
        comp[crossings[e].root] = std::min(comp[crossings[e].root], fetched[e]);
      gas::barrier();  // everyone has read this round's labels
      changed = 0;
      for (uint32_t i : boundary)
        if (comp[root_of[i]] < label[i]) {
          label[i] = comp[root_of[i]];
          changed = 1;
        }
      gas::all_reduce(&changed, 1, gas::maximum<int64_t>());
    }
    for (size_t i = 0; i < n; ++i) label[i] = comp[root_of[i]];
    const double messages = apps::network_messages_since(traffic_before);
    a.done_timing();

    uint64_t components = 0;
    for (size_t i = 0; i < n; ++i) components += label[i] == id_of(i);
    gas::all_reduce(&components, 1);
    const apps::rank_spread reads(read_seconds), sent(messages), crossing_count(static_cast<double>(crossings.size()));
    char grid_text[64];
    std::snprintf(grid_text, sizeof grid_text, "%dx%dx%d blocks of side %lld", l.blocks.x, l.blocks.y, l.blocks.z,
                  static_cast<long long>(l.side));
    if (rep + 1 == reps) {  // the last input's
      a.note("dims", dims);
      a.note("nodes per process", static_cast<double>(n));
      a.note("edge prob", prob);
      a.note("grid", grid_text);
      a.note("rounds", static_cast<double>(rounds));
      a.note("components", static_cast<double>(components));
      a.note("crossing edges per process min/median/max", crossing_count.text("%.0f"));
      a.note("read seconds min/median/max", reads.text());
      a.note("net msgs per process min/median/max", sent.text("%.0f"));
    }

    // The check (not timed): a sequential union-find over the whole lattice.
    if (me == 0) {
      const box whole{{0, 0, 0}, {l.extent(0), l.extent(1), l.extent(2)}};
      const std::vector<uint32_t> want = components_in(l, whole);
      std::vector<uint32_t> got(n);
      size_t wrong = 0, first_bad = 0;
      for (int r = 0; r < p; ++r) {
        gas::read(got.data(), labels.on(r), n);
        const std::array<int, 3> w = l.blocks.coords(r);
        const box theirs{{w[0] * l.side, w[1] * l.side, w[2] * l.side}, mine.size};
        for (size_t i = 0; i < n; ++i) {
          const std::array<int64_t, 3> at = theirs.local(i);
          const size_t global =
              whole.index({theirs.origin[0] + at[0], theirs.origin[1] + at[1], theirs.origin[2] + at[2]});
          if (got[i] != want[global] && wrong++ == 0) first_bad = global;
        }
      }
      a.check(wrong == 0, "%zu of %.0f labels differ from the sequential union-find (first at node %zu: %u expected)",
              wrong, total_nodes, first_bad, want[first_bad]);
    }
    gas::barrier();  // nobody labels the next input while rank 0 still reads the labels
  }
  return a.finish();
} catch (const std::exception& e) {
  return apps::failed(e);
}
