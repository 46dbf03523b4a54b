/* am2_bounce: messages of the largest size bounced around the ring of ranks,
 * checked at every hop.
 *
 *   clumprun -n 4 ./am2_bounce
 *
 * Every rank starts a token of exactly AM_MaxLong() bytes that travels
 * LONG_LAPS times around the ring 0 -> 1 -> ... -> n-1 -> 0. Each hop is a
 * long request (AM_RequestXferN) into the next rank's segment, in the slot of
 * the token's origin. The handler there checks the buffer address, the
 * checksum the sender computed (an argument) and every byte (the token's
 * bytes go up by one at each hop, so stale data does not match), and notes
 * the token; the main loop forwards it after the handler has returned
 * (handlers may not send requests). Then the same with a token of exactly
 * AM_MaxMedium() bytes per rank sent as medium requests (MEDIUM_LAPS laps),
 * the handler keeping a copy of the payload for the main loop to forward.
 */
#include "am2_util.h"

enum { H_LONG_HOP = 1, H_MED_HOP };

#define LONG_LAPS 16
#define MEDIUM_LAPS 8
#define MAXN 64

static uint8_t *seg;      /* np slots of AM_MaxLong() bytes: slot o holds origin o's token */
static uint8_t *hold;     /* np slots of AM_MaxMedium() bytes: medium tokens waiting to be forwarded */
static uint8_t *sendbuf;

static volatile int arrivals, npending;
static int pending_hop[MAXN]; /* by origin: the hop that arrived and waits to be forwarded, 0 for none */

static uint32_t seed_of(int origin) { return 0xB0B0u + (uint32_t)origin * 977u; }

/* The token of origin o as it travels on hop h: its bytes go up by h. */
static size_t verify_token(const uint8_t *p, size_t n, int origin, int hop) {
  for (size_t j = 0; j < n; ++j)
    if (p[j] != (uint8_t)(am2_byte(seed_of(origin), j) + (uint8_t)hop)) return j;
  return AM2_GOOD;
}

static void arrived(void *token, void *buf, size_t nbytes, int origin, int hop, uint32_t cksum, size_t want_bytes,
                    const char *what) {
  int src = -1;
  CHECK_OK(AMX_GetSourceId(token, &src));
  CHECK(src == (am2.me + am2.np - 1) % am2.np, "%s hop from rank %d, expected the previous rank", what, src);
  CHECK(origin >= 0 && origin < am2.np && hop >= 1, "%s token of origin %d, hop %d", what, origin, hop);
  CHECK((origin + hop) % am2.np == am2.me, "%s token of origin %d on hop %d arrived at rank %d", what, origin, hop,
        am2.me);
  CHECK(nbytes == want_bytes, "%s token of origin %d on hop %d: %zu bytes, expected %zu", what, origin, hop, nbytes,
        want_bytes);
  CHECK(pending_hop[origin] == 0, "%s token of origin %d arrived again before it was forwarded", what, origin);
  const uint32_t sum = am2_checksum(buf, nbytes);
  CHECK(sum == cksum, "%s token of origin %d on hop %d: checksum %08x, the sender's %08x", what, origin, hop,
        (unsigned)sum, (unsigned)cksum);
  size_t bad = verify_token((const uint8_t *)buf, nbytes, origin, hop);
  CHECK(bad == AM2_GOOD, "%s token of origin %d on hop %d: byte %zu differs", what, origin, hop, bad);
  pending_hop[origin] = hop;
  ++npending;
  ++arrivals;
}

static void long_hop(void *token, void *buf, size_t nbytes, int32_t origin, int32_t hop, int32_t cksum) {
  CHECK(origin >= 0 && origin < am2.np, "long token of origin %d", (int)origin);
  uint8_t *slot = seg + (size_t)origin * AM_MaxLong();
  CHECK(buf == slot, "long token of origin %d: the handler got %p, expected %p", (int)origin, buf, (void *)slot);
  arrived(token, buf, nbytes, origin, hop, (uint32_t)cksum, AM_MaxLong(), "long");
}

static void med_hop(void *token, void *buf, size_t nbytes, int32_t origin, int32_t hop, int32_t cksum) {
  arrived(token, buf, nbytes, origin, hop, (uint32_t)cksum, AM_MaxMedium(), "medium");
  memcpy(hold + (size_t)origin * AM_MaxMedium(), buf, nbytes); /* the buffer is ours only until we return */
}

/* Sends origin's token on hop `hop` from `from` (its bytes on hop - 1) to the next rank. */
static void send_hop(int medium, int origin, int hop, const uint8_t *from) {
  const size_t n = medium ? AM_MaxMedium() : AM_MaxLong();
  const int next = (am2.me + 1) % am2.np;
  for (size_t j = 0; j < n; ++j) sendbuf[j] = (uint8_t)(from[j] + 1);
  const int32_t cksum = (int32_t)am2_checksum(sendbuf, n);
  if (medium)
    CHECK_OK(AM_RequestI3(am2.ep, next, H_MED_HOP, sendbuf, n, origin, hop, cksum));
  else
    CHECK_OK(AM_RequestXfer3(am2.ep, next, (uintptr_t)origin * AM_MaxLong(), H_LONG_HOP, sendbuf, n, origin, hop,
                             cksum));
}

static void bounce(int medium, int laps) {
  const size_t n = medium ? AM_MaxMedium() : AM_MaxLong();
  const int hops = laps * am2.np; /* the last one brings the token home */
  const int expected = laps * am2.np; /* every token passes here `laps` times */
  /* (arrivals was cleared before the barrier before this phase: the barrier
   * runs handlers, and the tokens of ranks that left it first may be here.) */
  int forwarded = 0, home = 0;
  const double t0 = am2_now_us();
  /* Start our token: hop 1 carries the pattern + 1. */
  uint8_t *start = (uint8_t *)am2_malloc(n);
  am2_fill(start, n, seed_of(am2.me));
  send_hop(medium, am2.me, 1, start);
  free(start);
  while (arrivals < expected || npending > 0) {
    WAIT_UNTIL(npending > 0);
    for (int o = 0; o < am2.np; ++o) {
      const int h = pending_hop[o];
      if (h == 0) continue;
      const uint8_t *data = medium ? hold + (size_t)o * n : seg + (size_t)o * n;
      /* Cleared first: a request may poll while it waits for room, and
       * with two ranks the token can come back in that poll (send_hop has
       * copied the data out by then). */
      pending_hop[o] = 0;
      --npending;
      if (h == hops) {
        CHECK(o == am2.me, "token of origin %d finished at rank %d", o, am2.me);
        ++home;
      } else {
        send_hop(medium, o, h + 1, data);
        ++forwarded;
      }
    }
  }
  const double t1 = am2_now_us();
  CHECK(arrivals == expected && home == 1 && forwarded == expected - 1,
        "%d arrivals (expected %d), %d forwarded, %d tokens home", (int)arrivals, expected, forwarded, home);
  printf("am2_bounce: rank %d: %s token of %zu bytes: %d hops around %d ranks in %.1f ms (%.1f us per hop)\n", am2.me,
         medium ? "medium" : "long", n, hops, am2.np, (t1 - t0) / 1e3, (t1 - t0) / hops);
  fflush(stdout);
}

int main(int argc, char **argv) {
  am2_startup(&argc, &argv, "am2_bounce");
  CHECK(am2.np <= MAXN, "at most %d ranks, not %d", MAXN, am2.np);
  const size_t seg_bytes = (size_t)am2.np * AM_MaxLong();
  seg = (uint8_t *)am2_malloc(seg_bytes);
  memset(seg, 0, seg_bytes);
  hold = (uint8_t *)am2_malloc((size_t)am2.np * AM_MaxMedium());
  sendbuf = (uint8_t *)am2_malloc(AM_MaxLong() > AM_MaxMedium() ? AM_MaxLong() : AM_MaxMedium());
  CHECK_OK(AM_SetSeg(am2.ep, seg, seg_bytes));
  CHECK_OK(AM_SetHandler(am2.ep, H_LONG_HOP, long_hop));
  CHECK_OK(AM_SetHandler(am2.ep, H_MED_HOP, med_hop));
  arrivals = 0;
  CHECK_OK(AMX_SPMDBarrier());

  bounce(0, LONG_LAPS);
  arrivals = 0;
  CHECK_OK(AMX_SPMDBarrier());
  bounce(1, MEDIUM_LAPS);
  am2_finish();
}
