// wator: an N-body simulation of fish (the Split-C paper's wator, Table 2,
// and its section 5.3 on how promptly a busy process answers remote reads).
//
// Each process owns --fish fish (position, velocity, mass) in a symmetric
// array. A step: every process adds up the pull (softened gravity) on each of
// its fish from every other fish, owner by owner starting with itself (then
// rank + 1, ...), each owner's fish in order; a barrier; every process moves
// its fish (velocity, then position); a barrier. Nobody moves a fish during
// the force phase, so the fish read then are the step's.
//
// Communication (--fetch):
//   fish   each fish of another process is read with a blocking gas::read of
//          one 40-byte fish, and its pull on all own fish is added before the
//          next read: the Split-C program's "loop that reads a data point and
//          then computes on that data". On this node the read is a memcpy;
//          to another node it is a short request answered by the owner's
//          handler, which runs only when the owner polls (or waits).
//   block  each other owner's fish come in one split-phase gas::get of its
//          whole array, then sync. A get of more than 4 x max_medium() bytes
//          (256 KiB by default: more than 6553 fish; CLUMP_MAX_MEDIUM=8K
//          lowers it to 32 KiB, 820 fish) is an AM-level get that pulls the
//          bytes with one long reply; a smaller one is answered, like a
//          read, by the owner's handler in medium pieces. The report says
//          which path the blocks took.
//
// Responsiveness (--poll): none, the force loop never polls, so a process
// answers others only while it waits for its own reads to another node and
// in barriers (the paper's "Proc" version); every, it calls gas::poll()
// after every --poll-every source fish (each is one pass over the own fish).
// The paper's network-processor variant is CLUMP_PROGRESS=thread: the
// progress thread keeps the network protocol going (acknowledgements,
// retransmissions, taking messages in) and answers AM-level gets from the
// segment at once, but runs no handlers. So it answers block gets above the
// threshold while the owner computes, and cannot answer fish reads or
// smaller blocks: those still wait for the owner's poll. Only readers on
// another node ever wait: on this node a read is a memcpy. The report gives
// each process's time waiting for its remote reads (min / median / max).
//
// Check: rank 0 makes every rank's fish again, runs the steps sequentially
// with the same operations in the same order, and compares every position
// and velocity bit for bit.
//
//   clumprun -n 4 [-N 2] ./wator [--fish N] [--steps S] [--fetch fish|block]
//       [--poll none|every] [--poll-every K] [--dt T] [--size test|small|large]

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include <fmt/core.h>

#include "../em3d/measure.hpp"
#include "app.hpp"

namespace gas = clump::gas;

namespace {

struct fish {
  double x, y, vx, vy, mass;
};

/// Softening: the square of the distance below which the pull stops growing.
constexpr double softening2 = 1e-4;

/// Adds the pull of `src` on each of the `n` fish at `own` to (ax, ay),
/// except on own[skip] (`src` itself, when it is one of them). The parallel
/// run and the check both use it, so they agree bit for bit.
inline void add_pull(const fish& src, const fish* own, size_t n, double* ax, double* ay, size_t skip) {
  for (size_t i = 0; i < n; ++i) {
    if (i == skip) continue;
    const double dx = src.x - own[i].x, dy = src.y - own[i].y;
    const double r2 = dx * dx + dy * dy + softening2;
    const double s = src.mass / (r2 * std::sqrt(r2));
    ax[i] += s * dx;
    ay[i] += s * dy;
  }
}

/// Moves the fish by one step of `dt` under accelerations (ax, ay).
void move(fish* own, size_t n, const double* ax, const double* ay, double dt) {
  for (size_t i = 0; i < n; ++i) {
    own[i].vx += ax[i] * dt;
    own[i].vy += ay[i] * dt;
    own[i].x += own[i].vx * dt;
    own[i].y += own[i].vy * dt;
  }
}

/// Rank r's fish at the start: a function of the seed and the rank. The
/// masses add up to about one over the whole school.
std::vector<fish> school_of(uint64_t seed, int r, size_t n, int ranks) {
  apps::random64 g(seed * 1000003 + static_cast<uint64_t>(r));
  std::vector<fish> s(n);
  for (fish& f : s) {
    f.x = g.uniform();
    f.y = g.uniform();
    f.vx = 0.1 * (g.uniform() - 0.5);
    f.vy = 0.1 * (g.uniform() - 0.5);
    f.mass = (0.5 + g.uniform()) / static_cast<double>(n * static_cast<size_t>(ranks));
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) try {
  clump::runtime rt{argc, argv};
  apps::app a(rt, argc, argv, "wator",
              "wator: N-body fish; remote fish read while their owners compute (polling or not)");
  const size_t n = a.number("--fish", "fish per process", 64, 2048, 8192);
  const size_t steps = a.number("--steps", "time steps", 3, 4, 20);
  const bool block = a.word("--fetch", "fish: a blocking read per remote fish; block: one get per owner",
                            "fish,block") == "block";
  const bool polling = a.word("--poll", "poll inside the force loop", "none,every") == "every";
  const size_t poll_every = a.number("--poll-every", "source fish between polls (with --poll every)", 1, 1, 1);
  const double dt = a.real("--dt", "the time step", 1e-3, 1e-3, 1e-3);
  // The school, and what serving every other process's get of it at once may stage.
  a.parsed(n * sizeof(fish) * static_cast<size_t>(a.size()));
  const int me = a.rank(), p = a.size();
  if (n == 0 || poll_every == 0) {
    if (me == 0) std::fprintf(stderr, "wator: --fish and --poll-every must be at least 1\n");
    gas::barrier();
    rt.exit(2);
  }
  auto school = gas::all_alloc<fish>(n);
  fish* own = school.local();
  const std::vector<fish> start = school_of(a.seed(), me, n, p);
  std::copy(start.begin(), start.end(), own);
  std::vector<double> ax(n), ay(n);
  std::vector<fish> buffer(block ? n : 0);
  const size_t block_bytes = n * sizeof(fish);
  const bool pulled = block_bytes > 4 * clump::max_medium();

  a.phase("simulate");
  const gas::traffic_counts traffic_before = gas::traffic();
  double read_seconds = 0;
  size_t since_poll = 0;
  for (size_t step = 0; step < steps; ++step) {
    std::fill(ax.begin(), ax.end(), 0.0);
    std::fill(ay.begin(), ay.end(), 0.0);
    for (int k = 0; k < p; ++k) {
      const int owner = (me + k) % p;
      const gas::global_ptr<fish> theirs = school.on(owner);
      if (block && owner != me) {
        const auto t = std::chrono::steady_clock::now();
        gas::get(buffer.data(), theirs, n);
        gas::sync();
        read_seconds += apps::seconds_since(t);
      }
      for (size_t j = 0; j < n; ++j) {
        fish src;
        if (owner == me) {
          src = own[j];
        } else if (block) {
          src = buffer[j];
        } else {
          const auto t = std::chrono::steady_clock::now();
          src = gas::read(theirs + static_cast<std::ptrdiff_t>(j));
          read_seconds += apps::seconds_since(t);
        }
        add_pull(src, own, n, ax.data(), ay.data(), owner == me ? j : n);
        if (polling && ++since_poll == poll_every) {
          gas::poll();
          since_poll = 0;
        }
      }
    }
    gas::barrier();  // everyone has read this step's fish
    move(own, n, ax.data(), ay.data(), dt);
    gas::barrier();
  }
  const double messages = apps::network_messages_since(traffic_before);
  a.done_timing();

  const apps::rank_spread reads(read_seconds), sent(messages);
  a.note("fish per process", static_cast<double>(n));
  a.note("steps", static_cast<double>(steps));
  a.note("fetch", block ? "block" : "fish");
  a.note("poll", polling ? fmt::format("every {} fish", poll_every) : std::string("none"));
  if (block)
    a.note("block gets", std::to_string(block_bytes) + " B: " +
                             (pulled ? "AM get, a long reply (the progress thread can answer)"
                                     : "medium replies by the owner's handler (only when it polls)"));
  a.note("read wait seconds min/median/max", reads.text());
  a.note("net msgs per process min/median/max", sent.text("%.0f"));

  // The check (not timed): the same steps sequentially, bit for bit.
  if (me == 0) {
    std::vector<std::vector<fish>> all(static_cast<size_t>(p));
    for (int r = 0; r < p; ++r) all[static_cast<size_t>(r)] = school_of(a.seed(), r, n, p);
    std::vector<std::vector<double>> sx(static_cast<size_t>(p), std::vector<double>(n)), sy = sx;
    for (size_t step = 0; step < steps; ++step) {
      for (int r = 0; r < p; ++r) {
        const auto ru = static_cast<size_t>(r);
        std::fill(sx[ru].begin(), sx[ru].end(), 0.0);
        std::fill(sy[ru].begin(), sy[ru].end(), 0.0);
        for (int k = 0; k < p; ++k) {
          const int owner = (r + k) % p;
          for (size_t j = 0; j < n; ++j)
            add_pull(all[static_cast<size_t>(owner)][j], all[ru].data(), n, sx[ru].data(), sy[ru].data(),
                     owner == r ? j : n);
        }
      }
      for (int r = 0; r < p; ++r) {
        const auto ru = static_cast<size_t>(r);
        move(all[ru].data(), n, sx[ru].data(), sy[ru].data(), dt);
      }
    }
    std::vector<fish> got(n);
    size_t wrong = 0;
    for (int r = 0; r < p; ++r) {
      gas::read(got.data(), school.on(r), n);
      for (size_t i = 0; i < n; ++i) wrong += std::memcmp(&got[i], &all[static_cast<size_t>(r)][i], sizeof(fish)) != 0;
    }
    a.check(wrong == 0, "%zu of %zu fish differ from the sequential run", wrong, n * static_cast<size_t>(p));
  }
  return a.finish();
} catch (const std::exception& e) {
  return apps::failed(e);
}
