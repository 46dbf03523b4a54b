// radix_mpi: the radix sort of apps/radix written with MPI the way a user
// would: the same keys (apps/radix/keys.hpp), 8 bits per pass, a histogram
// per process, MPI_Allgather of the histograms to place every key, then the
// keys packed by destination process and moved with one MPI_Alltoallv per
// pass. It is the peer of apps/radixb (bulk) and apps/radix (one store per
// key) in apps/run-experiments.
//
//   mpirun -np 4 ./radix_mpi_openmpi [--keys N] [--size test|small|large] [--seed S] [--json FILE]
//
// Prints the same report as the clump programs (phases, total, check) and
// writes the same JSON fields (app, processes, size, seconds, phases, check).
// The check: every process's keys sorted, boundaries between neighbours in
// order, and the fingerprint of all keys equal to the input's.

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "keys.hpp"

namespace {

using apps::radix::fingerprint;
using clock_type = std::chrono::steady_clock;

constexpr unsigned digit_bits = 8;
constexpr unsigned digits = 1u << digit_bits;

struct phase {
  std::string name;
  double seconds = 0;
};

[[noreturn]] void usage(int rank, const char* why) {
  if (rank == 0) {
    if (why) std::fprintf(stderr, "radix_mpi: %s\n", why);
    std::fputs("usage: mpirun -np P radix_mpi [--keys N] [--size test|small|large] [--seed S] [--json FILE]\n",
               why ? stderr : stdout);
  }
  MPI_Finalize();
  std::exit(why ? 2 : 0);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int me = 0, p = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  size_t n = 0;
  uint64_t seed = 1;
  std::string size = "small", json;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") usage(me, nullptr);
    if (i + 1 >= argc) usage(me, (a + " needs a value, or is not an option").c_str());
    const std::string v = argv[++i];
    if (a == "--keys") n = std::strtoull(v.c_str(), nullptr, 0);
    else if (a == "--seed") seed = std::strtoull(v.c_str(), nullptr, 0);
    else if (a == "--json") json = v;
    else if (a == "--size" && (v == "test" || v == "small" || v == "large")) size = v;
    else usage(me, ("bad option " + a + " " + v).c_str());
  }
  if (n == 0) n = size == "test" ? 1u << 12 : size == "small" ? 1u << 18 : 1u << 22;

  std::vector<uint32_t> keys = apps::radix::input_of(seed, me, n), out(n);
  fingerprint before;
  for (uint32_t k : keys) before.add(k);

  std::vector<phase> phases;
  auto t = clock_type::now();
  auto begin = [&](const char* name) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (!phases.empty()) phases.back().seconds += std::chrono::duration<double>(clock_type::now() - t).count();
    phases.push_back({name, 0});
    t = clock_type::now();
  };
  MPI_Barrier(MPI_COMM_WORLD);
  const auto start = clock_type::now();

  std::vector<uint64_t> hist(digits), all_hist(digits * static_cast<size_t>(p)), place(digits);
  std::vector<int> send_counts(static_cast<size_t>(p)), recv_counts(static_cast<size_t>(p)),
      send_at(static_cast<size_t>(p)), recv_at(static_cast<size_t>(p));
  std::vector<uint32_t> packed(n);
  for (unsigned shift = 0; shift < 32; shift += digit_bits) {
    begin("histogram");
    std::fill(hist.begin(), hist.end(), 0);
    for (uint32_t k : keys) ++hist[(k >> shift) & (digits - 1)];
    MPI_Allgather(hist.data(), digits, MPI_UINT64_T, all_hist.data(), digits, MPI_UINT64_T, MPI_COMM_WORLD);
    uint64_t at = 0;
    for (unsigned d = 0; d < digits; ++d)
      for (int r = 0; r < p; ++r) {
        if (r == me) place[d] = at;
        at += all_hist[static_cast<size_t>(r) * digits + d];
      }

    begin("permute");
    // A stable counting sort by digit puts this process's keys in the order
    // of their global places; digit d's keys go to [place[d], place[d] + hist[d]),
    // which process g / n holds.
    std::vector<uint64_t> offset(digits);
    for (unsigned d = 1; d < digits; ++d) offset[d] = offset[d - 1] + hist[d - 1];
    for (uint32_t k : keys) packed[offset[(k >> shift) & (digits - 1)]++] = k;
    std::fill(send_counts.begin(), send_counts.end(), 0);
    for (unsigned d = 0; d < digits; ++d)
      for (uint64_t g = place[d], left = hist[d]; left;) {
        const uint64_t run = std::min<uint64_t>(left, (g / n + 1) * n - g);
        send_counts[g / n] += static_cast<int>(run);
        g += run;
        left -= run;
      }
    for (int r = 1; r < p; ++r) send_at[r] = send_at[r - 1] + send_counts[r - 1];
    MPI_Alltoall(send_counts.data(), 1, MPI_INT, recv_counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
    for (int r = 1; r < p; ++r) recv_at[r] = recv_at[r - 1] + recv_counts[r - 1];
    MPI_Alltoallv(packed.data(), send_counts.data(), send_at.data(), MPI_UINT32_T, out.data(), recv_counts.data(),
                  recv_at.data(), MPI_UINT32_T, MPI_COMM_WORLD);
    // Sender s's piece holds, digit by digit, its keys that land in our places.
    const uint64_t lo = static_cast<uint64_t>(me) * n, hi = lo + n;
    uint64_t base = 0;
    std::vector<uint64_t> cursor(recv_at.begin(), recv_at.end());
    for (unsigned d = 0; d < digits; ++d)
      for (int s = 0; s < p; ++s) {
        const uint64_t len = all_hist[static_cast<size_t>(s) * digits + d];
        const uint64_t a = std::max(base, lo), b = std::min(base + len, hi);
        if (a < b) {
          std::memcpy(keys.data() + (a - lo), out.data() + cursor[static_cast<size_t>(s)], (b - a) * sizeof(uint32_t));
          cursor[static_cast<size_t>(s)] += b - a;
        }
        base += len;
      }
  }
  begin("end");
  phases.pop_back();
  const double mine = std::chrono::duration<double>(clock_type::now() - start).count();
  double total = 0;
  MPI_Reduce(&mine, &total, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

  // The check.
  int failed = !std::is_sorted(keys.begin(), keys.end());
  uint32_t first = keys.empty() ? 0 : keys.front(), prev_last = 0;
  uint32_t last = keys.empty() ? 0 : keys.back();
  if (me + 1 < p) MPI_Send(&last, 1, MPI_UINT32_T, me + 1, 0, MPI_COMM_WORLD);
  if (me > 0) {
    MPI_Recv(&prev_last, 1, MPI_UINT32_T, me - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    failed |= prev_last > first;
  }
  fingerprint after;
  for (uint32_t k : keys) after.add(k);
  uint64_t f[6] = {before.sum, before.squares, before.bits, after.sum, after.squares, after.bits}, g[6];
  MPI_Allreduce(f, g, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(f + 3, g + 3, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(f + 2, g + 2, 1, MPI_UINT64_T, MPI_BXOR, MPI_COMM_WORLD);
  MPI_Allreduce(f + 5, g + 5, 1, MPI_UINT64_T, MPI_BXOR, MPI_COMM_WORLD);
  failed |= g[0] != g[3] || g[1] != g[4] || g[2] != g[5];
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);

  std::vector<double> secs(phases.size());
  for (size_t i = 0; i < phases.size(); ++i) secs[i] = phases[i].seconds;
  std::vector<double> max_secs(phases.size());
  if (!phases.empty())
    MPI_Reduce(secs.data(), max_secs.data(), static_cast<int>(secs.size()), MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (me == 0) {
    std::printf("radix_mpi: %d processes, %s input, keys per process %zu\n", p, size.c_str(), n);
    for (size_t i = 0; i < phases.size(); ++i) std::printf("%-22s %10.4f\n", phases[i].name.c_str(), max_secs[i]);
    std::printf("%-22s %10.4f\nradix_mpi: check %s\n", "total", total, any ? "FAILED" : "passed");
    if (!json.empty()) {
      std::ofstream o(json);
      o << "{\"app\": \"radix_mpi\", \"processes\": " << p << ", \"size\": \"" << size << "\", \"seconds\": " << total
        << ", \"phases\": [";
      for (size_t i = 0; i < phases.size(); ++i)
        o << (i ? ", " : "") << "{\"name\": \"" << phases[i].name << "\", \"seconds\": " << max_secs[i] << "}";
      o << "], \"check\": \"" << (any ? "failed" : "passed") << "\"}\n";
    }
  }
  MPI_Finalize();
  return any ? 1 : 0;
}
