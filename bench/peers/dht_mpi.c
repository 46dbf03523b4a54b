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
 * rounds after a warm-up. Writes {"system": "mpi one-sided", "samples": [...]}.
 *
 * With --messages, the same table with MPI messages, as bench/async's rpc
 * table works: an insert is a message to the key's owner (MPI_Send of the
 * key and value; eager at this size), which inserts it and answers whether
 * it was new; up to --window inserts in flight per rank. Every rank serves
 * (MPI_Irecv of any source, tested in the loop) until it has its own answers
 * and every rank has said it is done. Writes "system": "mpi messages". */

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

enum { tag_insert = 1, tag_answer = 2, tag_done = 3 };

/* One round of the message version: returns the keys that were new. */
static long by_messages(int me, int n, long keys, long window, uint64_t salt, uint64_t* table, uint64_t mask) {
  uint64_t in[2], out[2];
  MPI_Request req;
  MPI_Status st;
  MPI_Irecv(in, 2, MPI_UINT64_T, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &req);
  long next = 0, answers = 0, fresh = 0, pending = 0;
  int dones = 0, said_done = 0, receiving = 1;
  uint64_t* values = table + mask + 1;
  while (answers < keys || dones < n) {
    while (next < keys && pending < window) {
      const uint64_t key = mix(salt << 40 ^ (uint64_t)me << 32 ^ (uint64_t)next) | 1;
      const int owner = (int)(mix(key) % (uint64_t)n);
      ++next;
      if (owner == me) {
        for (uint64_t slot = key & mask, probes = 0; probes <= mask; slot = (slot + 1) & mask, ++probes)
          if (table[slot] == 0 || table[slot] == key) {
            fresh += table[slot] == 0;
            table[slot] = key;
            values[slot] = key * 3;
            break;
          }
        ++answers;
      } else {
        out[0] = key;
        out[1] = key * 3;
        MPI_Send(out, 2, MPI_UINT64_T, owner, tag_insert, MPI_COMM_WORLD);
        ++pending;
      }
    }
    if (answers == keys && !said_done) {
      said_done = 1;
      ++dones;
      for (int r = 0; r < n; ++r)
        if (r != me) MPI_Send(out, 0, MPI_UINT64_T, r, tag_done, MPI_COMM_WORLD);
    }
    if (answers == keys && dones == n) break;  /* done: the receive posted last is cancelled below */
    int flag = 0;
    MPI_Test(&req, &flag, &st);
    if (!flag) continue;
    receiving = 0;
    if (st.MPI_TAG == tag_insert) {
      uint64_t was_new = 0;
      for (uint64_t slot = in[0] & mask, probes = 0; probes <= mask; slot = (slot + 1) & mask, ++probes)
        if (table[slot] == 0 || table[slot] == in[0]) {
          was_new = table[slot] == 0;
          table[slot] = in[0];
          values[slot] = in[1];
          break;
        }
      MPI_Send(&was_new, 1, MPI_UINT64_T, st.MPI_SOURCE, tag_answer, MPI_COMM_WORLD);
    } else if (st.MPI_TAG == tag_answer) {
      fresh += in[0] != 0;
      --pending;
      ++answers;
    } else {
      ++dones;
    }
    if (answers < keys || dones < n) {
      MPI_Irecv(in, 2, MPI_UINT64_T, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &req);
      receiving = 1;
    }
  }
  /* Nothing more is coming (every rank has its answers, so every insert to
   * this one was answered): a receive still posted would take the next
   * round's first message into this round's buffer. */
  if (receiving) {
    MPI_Cancel(&req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
  }
  return fresh;
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
  long keys = 100000, window = 1000;
  int reps = 7, messages = 0;
  const char* json = "bench-dht-mpi.json";
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--keys") && i + 1 < argc) {
      keys = atol(argv[++i]);
    } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--window") && i + 1 < argc) {
      window = atol(argv[++i]);
    } else if (!strcmp(argv[i], "--messages")) {
      messages = 1;
    } else if (!strcmp(argv[i], "--json") && i + 1 < argc) {
      json = argv[++i];
    } else {
      if (me == 0) fprintf(stderr, "usage: mpirun -np P dht_mpi [--messages] [--keys K] [--window W] [--reps R] [--json FILE]\n");
      MPI_Finalize();
      return 2;
    }
  }
  if (keys < 1 || window < 1 || reps < 1 || reps > 1000) {
    if (me == 0) fprintf(stderr, "dht_mpi: --keys, --window and --reps must be positive (reps at most 1000)\n");
    MPI_Finalize();
    return 2;
  }
  uint64_t slots = 1;
  while (slots < (uint64_t)keys * 2) slots <<= 1;
  const uint64_t mask = slots - 1;
  uint64_t* table = NULL; /* slots keys, then slots values */
  MPI_Win win = MPI_WIN_NULL;
  if (messages) {
    table = calloc(2 * slots, sizeof(uint64_t));
  } else {
    MPI_Win_allocate((MPI_Aint)(2 * slots * sizeof(uint64_t)), sizeof(uint64_t), MPI_INFO_NULL, MPI_COMM_WORLD,
                     &table, &win);
  }
  double samples[1000];
  int failed = 0;
  for (int round = 0; messages && round <= reps; ++round) {
    memset(table, 0, 2 * slots * sizeof(uint64_t));
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    const long fresh = by_messages(me, n, keys, window, (uint64_t)round + 1, table, mask);
    MPI_Barrier(MPI_COMM_WORLD);
    const double secs = MPI_Wtime() - t0;
    if (fresh != keys) failed = 1;
    if (round > 0) samples[round - 1] = (double)keys * n / secs / 1e6;
  }
  for (int round = 0; !messages && round <= reps; ++round) {
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
    printf("dht_mpi%s: %d ranks, %ld keys each: %.4f M inserts/s (median of %d)\n", messages ? " --messages" : "", n,
           keys, median, reps);
    FILE* f = fopen(json, "w");
    if (f) {
      fprintf(f, "{\"system\": \"%s\", \"ranks\": %d, \"keys_per_rank\": %ld, \"unit\": \"M inserts/s\", \"samples\": [",
              messages ? "mpi messages" : "mpi one-sided", n, keys);
      for (int r = 0; r < reps; ++r) fprintf(f, "%s%.6f", r ? ", " : "", samples[r]);
      fprintf(f, "]}\n");
      fclose(f);
    }
  }
  if (messages)
    free(table);
  else
    MPI_Win_free(&win);
  MPI_Finalize();
  return any ? 1 : 0;
}
