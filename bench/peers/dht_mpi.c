/* dht_mpi: the distributed hash table of bench/async --dht, written with MPI
 * one-sided operations as a user would write it, for bench/async-bench.
 *
 *   mpirun -np 4 ./dht_mpi [--keys K] [--reps R] [--json FILE]
 *
 * Every rank holds an open-addressing table (uint64 keys, 0 empty, and
 * values) in an MPI window; every rank inserts K keys (the same keys as
 * bench/async: splitmix64 of a salt, the rank and i, odd), each at its
 * owner (splitmix64 of the key, modulo P): MPI_Compare_and_swap of the key
 * into its slot, flushed (the answer says whether the slot was free or
 * held the key; else the next slot), then MPI_Put of the value, flushed
 * with the others at the end of the round. Passive target, lock_all. The
 * figure is the job's inserts a second, barrier to barrier, median of R
 * rounds after a warm-up. Writes {"system": "mpi one-sided", "samples": [...]}. */

#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static int compare(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int me = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  long keys = 100000;
  int reps = 7;
  const char* json = "bench-dht-mpi.json";
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--keys") && i + 1 < argc) {
      keys = atol(argv[++i]);
    } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--json") && i + 1 < argc) {
      json = argv[++i];
    } else {
      if (me == 0) fprintf(stderr, "usage: mpirun -np P dht_mpi [--keys K] [--reps R] [--json FILE]\n");
      MPI_Finalize();
      return 2;
    }
  }
  if (keys < 1 || reps < 1 || reps > 1000) {
    if (me == 0) fprintf(stderr, "dht_mpi: --keys and --reps must be positive (reps at most 1000)\n");
    MPI_Finalize();
    return 2;
  }
  uint64_t slots = 1;
  while (slots < (uint64_t)keys * 2) slots <<= 1;
  const uint64_t mask = slots - 1;
  uint64_t* table = NULL; /* slots keys, then slots values */
  MPI_Win win;
  MPI_Win_allocate((MPI_Aint)(2 * slots * sizeof(uint64_t)), sizeof(uint64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &table,
                   &win);
  double samples[1000];
  int failed = 0;
  for (int round = 0; round <= reps; ++round) {
    MPI_Win_lock_all(0, win);
    memset(table, 0, 2 * slots * sizeof(uint64_t));
    MPI_Win_sync(win);
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    long fresh = 0;
    const uint64_t salt = (uint64_t)round + 1, zero = 0;
    for (long i = 0; i < keys; ++i) {
      const uint64_t key = mix(salt << 40 ^ (uint64_t)me << 32 ^ (uint64_t)i) | 1, value = key * 3;
      const int owner = (int)(mix(key) % (uint64_t)n);
      for (uint64_t slot = key & mask, probes = 0; probes <= mask; slot = (slot + 1) & mask, ++probes) {
        uint64_t old = 0;
        MPI_Compare_and_swap(&key, &zero, &old, MPI_UINT64_T, owner, (MPI_Aint)slot, win);
        MPI_Win_flush(owner, win);
        if (old == 0 || old == key) {
          fresh += old == 0;
          MPI_Put(&value, 1, MPI_UINT64_T, owner, (MPI_Aint)(slots + slot), 1, MPI_UINT64_T, win);
          MPI_Win_flush_local(owner, win);  /* `value` is reused by the next key */
          break;
        }
      }
    }
    MPI_Win_flush_all(win);
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    const double secs = MPI_Wtime() - t0;
    if (fresh != keys) failed = 1;
    if (round > 0) samples[round - 1] = (double)keys * n / secs / 1e6;
  }
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (me == 0) {
    if (any) fprintf(stderr, "dht_mpi: some keys were not new\n");
    double sorted[1000];
    memcpy(sorted, samples, (size_t)reps * sizeof(double));
    qsort(sorted, (size_t)reps, sizeof(double), compare);
    const double median = reps % 2 ? sorted[reps / 2] : (sorted[reps / 2 - 1] + sorted[reps / 2]) / 2;
    printf("dht_mpi: %d ranks, %ld keys each: %.4f M inserts/s (median of %d)\n", n, keys, median, reps);
    FILE* f = fopen(json, "w");
    if (f) {
      fprintf(f, "{\"system\": \"mpi one-sided\", \"ranks\": %d, \"keys_per_rank\": %ld, \"unit\": \"M inserts/s\", \"samples\": [", n,
              keys);
      for (int r = 0; r < reps; ++r) fprintf(f, "%s%.6f", r ? ", " : "", samples[r]);
      fprintf(f, "]}\n");
      fclose(f);
    }
  }
  MPI_Win_free(&win);
  MPI_Finalize();
  return any ? 1 : 0;
}
