/* am2_reduce: an all-to-all sum reduction through the AM-2 C API, checked
 * against its closed form.
 *
 *   clumprun -n 4 ./am2_reduce
 *
 * In each of ROUNDS rounds every rank sends to every rank (itself included)
 *   - its short vector of SHORT_N int32 values as short requests
 *     (AM_Request16: the round, the first index and 14 values), and
 *   - its long vector of MED_N int32 values (exactly AM_MaxMedium() bytes) as
 *     one medium request (AM_RequestI2).
 * Value i of rank r in round k is (r+1)(i+1)(k+1) - 1000 i + r*r, negative
 * ones included, so every rank knows the sum over all ranks in closed form.
 * Every rank waits for all the contributions, checks how many came from each
 * rank and every sum, clears its sums and meets the others in a barrier
 * before the next round.
 */
#include "am2_util.h"

enum { H_SHORT = 1, H_MED };

#define ROUNDS 6
#define PER_MSG 14
#define SHORT_CHUNKS 8
#define SHORT_N (SHORT_CHUNKS * PER_MSG)
#define MED_N (AM_MaxMedium() / 4)
#define MAXN 64

static int64_t short_sum[SHORT_N];
static int64_t *med_sum;
static int32_t *med_vec;
static volatile int short_msgs, med_msgs;
static int short_from[MAXN], med_from[MAXN];
static volatile int cur_round;

static int32_t value(int r, int i, int round) {
  return (int32_t)((r + 1) * (i + 1) * (round + 1) - 1000 * i + r * r);
}

static int64_t expected_sum(int i, int round, int np) {
  const int64_t p = np;
  return (int64_t)(i + 1) * (round + 1) * (p * (p + 1) / 2) - (int64_t)1000 * i * p + (p - 1) * p * (2 * p - 1) / 6;
}

static int source_of(void *token) {
  int src = -1;
  CHECK_OK(AMX_GetSourceId(token, &src));
  CHECK(src >= 0 && src < am2.np, "AMX_GetSourceId gave %d", src);
  return src;
}

static void short_handler(void *token, int32_t round, int32_t first, int32_t v0, int32_t v1, int32_t v2, int32_t v3,
                          int32_t v4, int32_t v5, int32_t v6, int32_t v7, int32_t v8, int32_t v9, int32_t v10,
                          int32_t v11, int32_t v12, int32_t v13) {
  const int src = source_of(token);
  CHECK(round == cur_round, "short contribution from %d for round %d in round %d", src, (int)round, (int)cur_round);
  CHECK(first >= 0 && first % PER_MSG == 0 && first + PER_MSG <= SHORT_N, "short contribution from %d at index %d", src,
        (int)first);
  const int32_t v[PER_MSG] = {v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12, v13};
  for (int k = 0; k < PER_MSG; ++k) short_sum[first + k] += v[k];
  ++short_from[src];
  ++short_msgs;
}

static void med_handler(void *token, void *buf, size_t nbytes, int32_t round, int32_t from) {
  const int src = source_of(token);
  CHECK(from == src, "medium contribution says it is from %d, AMX_GetSourceId says %d", (int)from, src);
  CHECK(round == cur_round, "medium contribution from %d for round %d in round %d", src, (int)round, (int)cur_round);
  CHECK(nbytes == (size_t)MED_N * 4, "medium contribution from %d of %zu bytes, expected %d", src, nbytes, MED_N * 4);
  const uint8_t *p = (const uint8_t *)buf;
  for (int i = 0; i < MED_N; ++i) {
    int32_t x;
    memcpy(&x, p + (size_t)i * 4, 4); /* the buffer need not be aligned */
    med_sum[i] += x;
  }
  ++med_from[src];
  ++med_msgs;
}

int main(int argc, char **argv) {
  am2_startup(&argc, &argv, "am2_reduce");
  CHECK(am2.np <= MAXN, "at most %d ranks, not %d", MAXN, am2.np);
  med_sum = (int64_t *)am2_malloc(sizeof(int64_t) * MED_N);
  memset(med_sum, 0, sizeof(int64_t) * MED_N);
  med_vec = (int32_t *)am2_malloc(sizeof(int32_t) * MED_N);
  CHECK_OK(AM_SetHandler(am2.ep, H_SHORT, short_handler));
  CHECK_OK(AM_SetHandler(am2.ep, H_MED, med_handler));
  cur_round = 0;
  CHECK_OK(AMX_SPMDBarrier());

  const double t0 = am2_now_us();
  for (int round = 0; round < ROUNDS; ++round) {
    int32_t v[SHORT_N];
    for (int i = 0; i < SHORT_N; ++i) v[i] = value(am2.me, i, round);
    for (int i = 0; i < MED_N; ++i) med_vec[i] = value(am2.me, i, round);
    for (int d = 0; d < am2.np; ++d) {
      const int dest = (am2.me + d) % am2.np;
      for (int c = 0; c < SHORT_CHUNKS; ++c) {
        const int32_t *x = v + c * PER_MSG;
        CHECK_OK(AM_Request16(am2.ep, dest, H_SHORT, round, c * PER_MSG, x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7],
                              x[8], x[9], x[10], x[11], x[12], x[13]));
      }
      CHECK_OK(AM_RequestI2(am2.ep, dest, H_MED, med_vec, (size_t)MED_N * 4, round, am2.me));
    }
    WAIT_UNTIL(short_msgs == am2.np * SHORT_CHUNKS && med_msgs == am2.np);
    for (int r = 0; r < am2.np; ++r) {
      CHECK(short_from[r] == SHORT_CHUNKS, "round %d: %d short contributions from rank %d, expected %d", round,
            short_from[r], r, SHORT_CHUNKS);
      CHECK(med_from[r] == 1, "round %d: %d medium contributions from rank %d, expected 1", round, med_from[r], r);
    }
    for (int i = 0; i < SHORT_N; ++i)
      CHECK(short_sum[i] == expected_sum(i, round, am2.np), "round %d: short sum %d is %lld, expected %lld", round, i,
            (long long)short_sum[i], (long long)expected_sum(i, round, am2.np));
    for (int i = 0; i < MED_N; ++i)
      CHECK(med_sum[i] == expected_sum(i, round, am2.np), "round %d: medium sum %d is %lld, expected %lld", round, i,
            (long long)med_sum[i], (long long)expected_sum(i, round, am2.np));
    /* Ready for the next round before the barrier: the barrier runs
     * handlers, and a rank that leaves it first may already send. */
    memset(short_sum, 0, sizeof short_sum);
    memset(med_sum, 0, sizeof(int64_t) * MED_N);
    memset(short_from, 0, sizeof short_from);
    memset(med_from, 0, sizeof med_from);
    short_msgs = med_msgs = 0;
    cur_round = round + 1;
    CHECK_OK(AMX_SPMDBarrier());
  }
  const double t1 = am2_now_us();
  printf("am2_reduce: rank %d: %d rounds of %d + %d values from %d ranks in %.1f ms\n", am2.me, ROUNDS, SHORT_N, MED_N,
         am2.np, (t1 - t0) / 1e3);
  am2_finish();
}
