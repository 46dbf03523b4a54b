// radix_mpi: the radix sort of apps/radix written with MPI the way a user
// would: the same keys (apps/radix/keys.hpp), 8 bits per pass, a histogram
// per process, MPI_Allgather of the histograms to place every key, then the
// keys packed by destination process and moved with one MPI_Alltoallv per
// pass. It is the peer of apps/radixb (bulk) and apps/radix (one store per
// key) in apps/run-experiments.
//
//   mpirun -np 4 ./radix_mpi_openmpi [--keys N] [--size test|small|large] [--seed S] [--json FILE]
//
// Takes the same options and prints the same report (phases, total, check,
// --json) as the clump programs, through apps/mpi/mpi_app.hpp.
// The check: every process's keys sorted, boundaries between neighbours in
// order, and the fingerprint of all keys equal to the input's.

#include <algorithm>
#include <cstring>
#include <vector>

#include "keys.hpp"
#include "mpi_app.hpp"

namespace {

constexpr unsigned digit_bits = 8;
constexpr unsigned digits = 1u << digit_bits;

}  // namespace

int main(int argc, char** argv) {
  apps::mpi_app a(argc, argv, "radix_mpi", "radix sort of 32-bit keys with MPI: one MPI_Alltoallv per pass");
  const size_t n = apps::radix::keys_option(a);
  const uint64_t reps = a.repeats(12);  // radixb's, its peer's
  a.parsed();
  a.note("keys per process", static_cast<double>(n));
  if (reps > 1) a.note("inputs", static_cast<double>(reps));
  const int me = a.rank(), p = a.size();

  std::vector<uint32_t> out(n), packed(n);
  std::vector<uint64_t> hist(digits), all_hist(digits * static_cast<size_t>(p)), place(digits);
  std::vector<int> send_counts(static_cast<size_t>(p)), recv_counts(static_cast<size_t>(p)),
      send_at(static_cast<size_t>(p)), recv_at(static_cast<size_t>(p));
  for (uint64_t rep = 0; rep < reps; ++rep) {
    std::vector<uint32_t> keys = apps::radix::input_of(a.seed() + rep, me, n);
    apps::radix::fingerprint before;
    for (uint32_t k : keys) before.add(k);

    for (unsigned shift = 0; shift < 32; shift += digit_bits) {
      a.phase("histogram");
      std::fill(hist.begin(), hist.end(), 0);
      for (uint32_t k : keys) ++hist[(k >> shift) & (digits - 1)];
      MPI_Allgather(hist.data(), digits, MPI_UINT64_T, all_hist.data(), digits, MPI_UINT64_T, MPI_COMM_WORLD);
      apps::radix::places_of(all_hist, me, p, digits, place);

      a.phase("permute");
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
          const uint64_t from = std::max(base, lo), to = std::min(base + len, hi);
          if (from < to) {
            std::memcpy(keys.data() + (from - lo), out.data() + cursor[static_cast<size_t>(s)],
                        (to - from) * sizeof(uint32_t));
            cursor[static_cast<size_t>(s)] += to - from;
          }
          base += len;
        }
    }
    a.done_timing();

    // The check.
    a.check(std::is_sorted(keys.begin(), keys.end()), "keys out of order");
    uint32_t first = keys.empty() ? 0 : keys.front(), prev_last = 0;
    uint32_t last = keys.empty() ? 0 : keys.back();
    if (me + 1 < p) MPI_Send(&last, 1, MPI_UINT32_T, me + 1, 0, MPI_COMM_WORLD);
    if (me > 0) {
      MPI_Recv(&prev_last, 1, MPI_UINT32_T, me - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      a.check(prev_last <= first, "rank %d's last key %u is above rank %d's first %u", me - 1, prev_last, me, first);
    }
    apps::radix::fingerprint after;
    for (uint32_t k : keys) after.add(k);
    uint64_t f[6] = {before.sum, before.squares, before.bits, after.sum, after.squares, after.bits}, g[6];
    MPI_Allreduce(f, g, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(f + 3, g + 3, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(f + 2, g + 2, 1, MPI_UINT64_T, MPI_BXOR, MPI_COMM_WORLD);
    MPI_Allreduce(f + 5, g + 5, 1, MPI_UINT64_T, MPI_BXOR, MPI_COMM_WORLD);
    if (me == 0)
      a.check(g[0] == g[3] && g[1] == g[4] && g[2] == g[5],
              "the sorted keys are not the input's (fingerprints differ)");
  }
  return a.finish();
}
