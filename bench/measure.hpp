#pragma once
// Timing for the benchmarks. A figure is the median of R samples; a sample is
// one timed loop long enough (the target, ~30 ms by default) that clock reads
// stay small against it. Timing is std::chrono's steady_clock (no rdtsc),
// read once before and once after each loop.
//
// Samples are taken round-robin: repetition 1 of every figure, then
// repetition 2 of every figure, and so on. On a shared machine, noise comes in
// bursts of seconds (other builds, the host); round-robin spreads a burst over
// many figures, one sample each, where the median discards it, instead of
// spoiling every sample of the few figures measured during it. A figure and
// the physical limit it is compared with are thus sampled under the same
// conditions.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

namespace bench {

using steady = std::chrono::steady_clock;

/// How each figure is sampled.
struct sampling {
  int reps = 7;                  ///< samples per figure (the median is reported)
  double target_seconds = 0.03;  ///< length of one timed loop
};

/// The samples of one figure, in the figure's unit.
struct series {
  std::vector<double> samples;  ///< one value per repetition, in order
  std::vector<double> seconds;  ///< how long each timed loop ran
  uint64_t iterations = 0;      ///< iterations planned in each timed loop
  int cut_short = 0;            ///< loops that hit their deadline before doing them all

  double median() const {
    if (samples.empty()) return 0;
    std::vector<double> s = samples;
    std::sort(s.begin(), s.end());
    const size_t n = s.size();
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  }
  double min() const { return samples.empty() ? 0 : *std::min_element(samples.begin(), samples.end()); }
  double max() const { return samples.empty() ? 0 : *std::max_element(samples.begin(), samples.end()); }
};

/// What is measured, as the sampler sees it.
struct workload {
  /// Runs up to n iterations; stops early (see past()) once `deadline` has
  /// passed; returns the iterations it did.
  std::function<uint64_t(uint64_t n, steady::time_point deadline)> run;
  /// One loop's time and iterations as the figure (us one way, GB/s, ...).
  std::function<double(double seconds, uint64_t n)> value;
  /// Called before and after every loop (e.g. to put the peer in the right mode).
  std::function<void()> begin, end;
};

/// True every `Mask + 1` iterations once the deadline has passed. The deadline
/// keeps a loop sized on a quiet machine from taking minutes when other
/// processes take the cores away (a spinning ping-pong then waits a scheduler
/// slice per round trip).
template <uint64_t Mask>
inline bool past(uint64_t i, steady::time_point deadline) noexcept {
  return (i & Mask) == Mask && steady::now() > deadline;
}

/// One timed loop: how long it took and how many iterations it did.
struct loop_time {
  double seconds;
  uint64_t iterations;
};

/// Times `w.run(n)` (without begin/end), stopping at `limit_seconds`.
inline loop_time time_loop(workload& w, uint64_t n, double limit_seconds) {
  const auto t0 = steady::now();
  const auto deadline = t0 + std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(limit_seconds));
  const uint64_t done = w.run(n, deadline);
  return {std::chrono::duration<double>(steady::now() - t0).count(), std::max<uint64_t>(done, 1)};
}

/// The iterations that make one loop last the target. Grows n until a loop
/// takes a tenth of the target, which also warms caches, pages and branch
/// predictors, then scales it. A loop that reaches the tenth is timed again
/// and the faster of the two counts: one stall (the peer descheduled for a
/// few milliseconds by another process, a retransmission timeout) in a loop
/// of a few iterations would otherwise fix n at a few iterations, and every
/// sample would then be that short and as noisy.
inline uint64_t calibrate(const sampling& how, workload& w) {
  const double limit = 4 * how.target_seconds;
  uint64_t n = 1;
  loop_time t{};
  if (w.begin) w.begin();
  for (;;) {
    t = time_loop(w, n, limit);
    if (t.seconds >= how.target_seconds / 10) {
      const loop_time again = time_loop(w, n, limit);
      if (again.seconds / static_cast<double>(again.iterations) < t.seconds / static_cast<double>(t.iterations))
        t = again;
      if (t.seconds >= how.target_seconds / 10) break;
    }
    const double want = how.target_seconds / 10 * 1.5;
    const uint64_t grown = t.seconds > 0 ? static_cast<uint64_t>(static_cast<double>(n) * want / t.seconds) : n * 16;
    n = std::clamp<uint64_t>(grown, n * 2, n * 100);
  }
  if (w.end) w.end();
  return std::max<uint64_t>(
      1, static_cast<uint64_t>(std::ceil(static_cast<double>(t.iterations) * how.target_seconds / t.seconds)));
}

/// One sample of n iterations, after an untimed warm-up of n/16 (the figure
/// sampled just before may have left other data in the caches).
inline void take_sample(const sampling& how, workload& w, uint64_t n, series& s) {
  const double limit = 4 * how.target_seconds;
  if (w.begin) w.begin();
  time_loop(w, std::max<uint64_t>(1, n / 16), limit);
  const loop_time l = time_loop(w, n, limit);
  if (w.end) w.end();
  s.iterations = n;
  s.seconds.push_back(l.seconds);
  s.cut_short += l.iterations < n;
  s.samples.push_back(w.value(l.seconds, l.iterations));
}

}  // namespace bench
