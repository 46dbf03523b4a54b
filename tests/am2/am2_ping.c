/* am2_ping: ping-pong between pairs of ranks through the AM-2 C API, every
 * payload and argument checked.
 *
 *   clumprun -n 4 ./am2_ping
 *
 * Ranks pair up as 0<->1, 2<->3, ...; with an odd number of ranks the last
 * rank pings itself (its own endpoint, entry `me`). In phase 0 the even ranks
 * ping their partners, in phase 1 the odd ones do, one round trip at a time:
 *   - short requests with 0, 1, 2, 4, 8 and 16 arguments, answered by short
 *     replies carrying the arguments complemented;
 *   - medium requests of 0, 1, 512 and AM_MaxMedium() bytes, answered by
 *     medium replies of the same length with another pattern;
 *   - long requests (AM_RequestXferN) into the partner's segment at several
 *     offsets, one of them ending exactly at the segment's end, up to
 *     AM_MaxLong() bytes, answered by long replies (AM_ReplyXferN) into the
 *     pinger's segment at the same offset.
 * Handlers check the sender (AMX_GetSourceId), the lengths, the buffer
 * address of long messages (segment + offset) and every byte. Then each
 * pinger times round trips of each kind and prints them (information only).
 */
#include "am2_util.h"

enum {
  H_SREQ0 = 1, H_SREQ1, H_SREQ2, H_SREQ4, H_SREQ8, H_SREQ16,
  H_SREP0, H_SREP1, H_SREP2, H_SREP4, H_SREP8, H_SREP16,
  H_MREQ, H_MREP, H_LREQ, H_LREP
};

#define SEG_BYTES (256u * 1024u)
#define SHORT_ROUNDS 20
#define MEDIUM_ROUNDS 8
#define LONG_ROUNDS 4
#define LAT_ROUNDS 200

static uint8_t *seg;      /* our segment (malloc'd) */
static uint8_t *outbuf;   /* what requests send */
static uint8_t *replybuf; /* what replies send */
static int partner;       /* translation index (= rank) of the partner */

/* What the handlers saw; one round trip is outstanding at a time. */
static volatile int replies;
static int req_seen[17];  /* short requests received, by argument count: the next one's sequence number */
static int rep_seq;       /* the sequence number of the request outstanding */
static int med_seen, long_seen;

static const int short_counts[] = {0, 1, 2, 4, 8, 16};
#define NSHORT ((int)(sizeof short_counts / sizeof short_counts[0]))

/* Argument i of the request with n arguments and sequence number seq from rank r:
 * distinct, spread over the whole int32 range, negative ones included. */
static int32_t arg_value(int n, int i, int seq, int r) {
  return (int32_t)(0x9E3779B1u * (uint32_t)(n * 17 + i + 1) + 0x01000193u * (uint32_t)seq + 0x7F4A7C15u * (uint32_t)r);
}

static uint32_t seed_of(int kind, int from, int seq, size_t len) {
  return (uint32_t)kind * 1000003u + (uint32_t)from * 7919u + (uint32_t)seq * 104729u + (uint32_t)len;
}

/* The rank whose request this token carries (AMX_GetSourceId: entry i is rank i). */
static int source_of(void *token) {
  int src = -1;
  CHECK_OK(AMX_GetSourceId(token, &src));
  CHECK(src >= 0 && src < am2.np, "AMX_GetSourceId gave %d", src);
  return src;
}

/* ---- short ------------------------------------------------------------------------- */

static void short_request(void *token, int n, const int32_t *a) {
  const int src = source_of(token);
  CHECK(src == partner, "short request with %d arguments from rank %d, expected %d", n, src, partner);
  const int seq = req_seen[n]++;
  for (int i = 0; i < n; ++i)
    CHECK(a[i] == arg_value(n, i, seq, src), "short request %d with %d arguments: argument %d is %d, expected %d", seq,
          n, i, (int)a[i], (int)arg_value(n, i, seq, src));
  int32_t b[16];
  for (int i = 0; i < n; ++i) b[i] = ~a[i];
  int rc = -1;
  switch (n) {
    case 0: rc = AM_Reply0(token, H_SREP0); break;
    case 1: rc = AM_Reply1(token, H_SREP1, b[0]); break;
    case 2: rc = AM_Reply2(token, H_SREP2, b[0], b[1]); break;
    case 4: rc = AM_Reply4(token, H_SREP4, b[0], b[1], b[2], b[3]); break;
    case 8: rc = AM_Reply8(token, H_SREP8, b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]); break;
    case 16:
      rc = AM_Reply16(token, H_SREP16, b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
                      b[13], b[14], b[15]);
      break;
    default: CHECK(0, "no reply for %d arguments", n);
  }
  CHECK(rc == AM_OK, "AM_Reply%d returned %d", n, rc);
}

static void short_reply(void *token, int n, const int32_t *a) {
  const int src = source_of(token);
  CHECK(src == partner, "short reply with %d arguments from rank %d, expected %d", n, src, partner);
  for (int i = 0; i < n; ++i)
    CHECK(a[i] == ~arg_value(n, i, rep_seq, am2.me), "short reply %d with %d arguments: argument %d is %d, expected %d",
          rep_seq, n, i, (int)a[i], (int)~arg_value(n, i, rep_seq, am2.me));
  ++replies;
}

static void sreq0(void *token) { short_request(token, 0, NULL); }
static void sreq1(void *token, int32_t a0) {
  int32_t a[] = {a0};
  short_request(token, 1, a);
}
static void sreq2(void *token, int32_t a0, int32_t a1) {
  int32_t a[] = {a0, a1};
  short_request(token, 2, a);
}
static void sreq4(void *token, int32_t a0, int32_t a1, int32_t a2, int32_t a3) {
  int32_t a[] = {a0, a1, a2, a3};
  short_request(token, 4, a);
}
static void sreq8(void *token, int32_t a0, int32_t a1, int32_t a2, int32_t a3, int32_t a4, int32_t a5, int32_t a6,
                  int32_t a7) {
  int32_t a[] = {a0, a1, a2, a3, a4, a5, a6, a7};
  short_request(token, 8, a);
}
static void sreq16(void *token, int32_t a0, int32_t a1, int32_t a2, int32_t a3, int32_t a4, int32_t a5, int32_t a6,
                   int32_t a7, int32_t a8, int32_t a9, int32_t a10, int32_t a11, int32_t a12, int32_t a13,
                   int32_t a14, int32_t a15) {
  int32_t a[] = {a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15};
  short_request(token, 16, a);
}

static void srep0(void *token) { short_reply(token, 0, NULL); }
static void srep1(void *token, int32_t a0) {
  int32_t a[] = {a0};
  short_reply(token, 1, a);
}
static void srep2(void *token, int32_t a0, int32_t a1) {
  int32_t a[] = {a0, a1};
  short_reply(token, 2, a);
}
static void srep4(void *token, int32_t a0, int32_t a1, int32_t a2, int32_t a3) {
  int32_t a[] = {a0, a1, a2, a3};
  short_reply(token, 4, a);
}
static void srep8(void *token, int32_t a0, int32_t a1, int32_t a2, int32_t a3, int32_t a4, int32_t a5, int32_t a6,
                  int32_t a7) {
  int32_t a[] = {a0, a1, a2, a3, a4, a5, a6, a7};
  short_reply(token, 8, a);
}
static void srep16(void *token, int32_t a0, int32_t a1, int32_t a2, int32_t a3, int32_t a4, int32_t a5, int32_t a6,
                   int32_t a7, int32_t a8, int32_t a9, int32_t a10, int32_t a11, int32_t a12, int32_t a13,
                   int32_t a14, int32_t a15) {
  int32_t a[] = {a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15};
  short_reply(token, 16, a);
}

/* Sends short request `seq` with n arguments to the partner. */
static int send_short(int n, int seq) {
  int32_t a[16];
  for (int i = 0; i < n; ++i) a[i] = arg_value(n, i, seq, am2.me);
  switch (n) {
    case 0: return AM_Request0(am2.ep, partner, H_SREQ0);
    case 1: return AM_Request1(am2.ep, partner, H_SREQ1, a[0]);
    case 2: return AM_Request2(am2.ep, partner, H_SREQ2, a[0], a[1]);
    case 4: return AM_Request4(am2.ep, partner, H_SREQ4, a[0], a[1], a[2], a[3]);
    case 8: return AM_Request8(am2.ep, partner, H_SREQ8, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
    case 16:
      return AM_Request16(am2.ep, partner, H_SREQ16, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10],
                          a[11], a[12], a[13], a[14], a[15]);
  }
  return -1;
}

/* ---- medium ------------------------------------------------------------------------ */

static void med_request(void *token, void *buf, size_t nbytes, int32_t seq, int32_t len) {
  const int src = source_of(token);
  CHECK(src == partner, "medium request from rank %d, expected %d", src, partner);
  CHECK(seq == med_seen, "medium request number %d, expected %d", (int)seq, med_seen);
  ++med_seen;
  CHECK(nbytes == (size_t)len, "medium request of %zu bytes, expected %d", nbytes, (int)len);
  CHECK(nbytes == 0 || buf != NULL, "medium request of %zu bytes at NULL", nbytes);
  size_t bad = am2_verify(buf, nbytes, seed_of(1, src, seq, nbytes));
  CHECK(bad == AM2_GOOD, "medium request %d of %zu bytes: byte %zu differs", (int)seq, nbytes, bad);
  am2_fill(replybuf, nbytes, seed_of(2, am2.me, seq, nbytes));
  CHECK_OK(AM_ReplyI2(token, H_MREP, replybuf, nbytes, seq, len));
}

static void med_reply(void *token, void *buf, size_t nbytes, int32_t seq, int32_t len) {
  const int src = source_of(token);
  CHECK(src == partner, "medium reply from rank %d, expected %d", src, partner);
  CHECK(seq == rep_seq, "medium reply number %d, expected %d", (int)seq, rep_seq);
  CHECK(nbytes == (size_t)len, "medium reply of %zu bytes, expected %d", nbytes, (int)len);
  size_t bad = am2_verify(buf, nbytes, seed_of(2, src, seq, nbytes));
  CHECK(bad == AM2_GOOD, "medium reply %d of %zu bytes: byte %zu differs", (int)seq, nbytes, bad);
  ++replies;
}

/* ---- long ------------------------------------------------------------------------ */

static void long_request(void *token, void *buf, size_t nbytes, int32_t seq, int32_t off) {
  const int src = source_of(token);
  CHECK(src == partner, "long request from rank %d, expected %d", src, partner);
  CHECK(seq == long_seen, "long request number %d, expected %d", (int)seq, long_seen);
  ++long_seen;
  CHECK(nbytes <= AM_MaxLong() && (size_t)off + nbytes <= SEG_BYTES, "long request of %zu bytes at %d", nbytes,
        (int)off);
  CHECK(nbytes == 0 || buf == seg + off, "long request at offset %d: the handler got %p, the segment holds it at %p",
        (int)off, buf, (void *)(seg + off));
  size_t bad = am2_verify(seg + off, nbytes, seed_of(3, src, seq, nbytes));
  CHECK(bad == AM2_GOOD, "long request %d of %zu bytes at offset %d: byte %zu differs", (int)seq, nbytes, (int)off,
        bad);
  am2_fill(replybuf, nbytes, seed_of(4, am2.me, seq, nbytes));
  CHECK_OK(AM_ReplyXfer2(token, (uintptr_t)off, H_LREP, replybuf, nbytes, seq, off));
}

static void long_reply(void *token, void *buf, size_t nbytes, int32_t seq, int32_t off) {
  const int src = source_of(token);
  CHECK(src == partner, "long reply from rank %d, expected %d", src, partner);
  CHECK(seq == rep_seq, "long reply number %d, expected %d", (int)seq, rep_seq);
  CHECK(nbytes == 0 || buf == seg + off, "long reply at offset %d: the handler got %p, the segment holds it at %p",
        (int)off, buf, (void *)(seg + off));
  size_t bad = am2_verify(seg + off, nbytes, seed_of(4, src, seq, nbytes));
  CHECK(bad == AM2_GOOD, "long reply %d of %zu bytes at offset %d: byte %zu differs", (int)seq, nbytes, (int)off, bad);
  ++replies;
}

/* ---- the pinger ------------------------------------------------------------------- */

static void round_trip_short(int n, int seq) {
  rep_seq = seq;
  const int before = replies;
  CHECK_OK(send_short(n, seq));
  WAIT_UNTIL(replies == before + 1);
}

static int med_sent, long_sent;

static void round_trip_medium(size_t len) {
  const int seq = rep_seq = med_sent++;
  const int before = replies;
  am2_fill(outbuf, len, seed_of(1, am2.me, seq, len));
  CHECK_OK(AM_RequestI2(am2.ep, partner, H_MREQ, outbuf, len, seq, (int32_t)len));
  WAIT_UNTIL(replies == before + 1);
}

static void round_trip_long(size_t off, size_t len) {
  const int seq = rep_seq = long_sent++;
  const int before = replies;
  am2_fill(outbuf, len, seed_of(3, am2.me, seq, len));
  CHECK_OK(AM_RequestXfer2(am2.ep, partner, (uintptr_t)off, H_LREQ, outbuf, len, seq, (int32_t)off));
  WAIT_UNTIL(replies == before + 1);
}

static void ping(void) {
  for (int k = 0; k < NSHORT; ++k)
    for (int i = 0; i < SHORT_ROUNDS; ++i) round_trip_short(short_counts[k], i);

  const size_t med_sizes[] = {0, 1, 512, AM_MaxMedium()};
  for (int i = 0; i < MEDIUM_ROUNDS; ++i)
    for (size_t k = 0; k < sizeof med_sizes / sizeof med_sizes[0]; ++k) round_trip_medium(med_sizes[k]);

  /* (offset, length): small and large, unaligned, and two that end exactly at the segment's end. */
  const size_t cases[][2] = {{0, 1},           {64, 0},
                             {1, 7},           {4096, 512},
                             {777, 4096},      {1000, AM_MaxLong()},
                             {SEG_BYTES - AM_MaxLong(), AM_MaxLong()},
                             {SEG_BYTES - 1, 1}, {SEG_BYTES - 4099, 4099}};
  for (int i = 0; i < LONG_ROUNDS; ++i)
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) round_trip_long(cases[k][0], cases[k][1]);

  /* Latency, for information. */
  double t0 = am2_now_us();
  for (int i = 0; i < LAT_ROUNDS; ++i) round_trip_short(1, SHORT_ROUNDS + i);
  double t1 = am2_now_us();
  for (int i = 0; i < LAT_ROUNDS; ++i) round_trip_medium(512);
  double t2 = am2_now_us();
  for (int i = 0; i < LAT_ROUNDS; ++i) round_trip_long(8192, 512);
  double t3 = am2_now_us();
  printf("am2_ping: rank %d -> %d: round trip short(1 arg) %.2f us, medium(512 B) %.2f us, long(512 B) %.2f us\n",
         am2.me, partner, (t1 - t0) / LAT_ROUNDS, (t2 - t1) / LAT_ROUNDS, (t3 - t2) / LAT_ROUNDS);
  fflush(stdout);
}

int main(int argc, char **argv) {
  am2_startup(&argc, &argv, "am2_ping");
  partner = (am2.me ^ 1) < am2.np ? (am2.me ^ 1) : am2.me; /* odd count: the last rank pings itself */

  seg = (uint8_t *)am2_malloc(SEG_BYTES);
  outbuf = (uint8_t *)am2_malloc(AM_MaxLong());
  replybuf = (uint8_t *)am2_malloc(AM_MaxLong());
  memset(seg, 0, SEG_BYTES);
  CHECK_OK(AM_SetSeg(am2.ep, seg, SEG_BYTES));
  CHECK_OK(AM_SetHandler(am2.ep, H_SREQ0, sreq0));
  CHECK_OK(AM_SetHandler(am2.ep, H_SREQ1, sreq1));
  CHECK_OK(AM_SetHandler(am2.ep, H_SREQ2, sreq2));
  CHECK_OK(AM_SetHandler(am2.ep, H_SREQ4, sreq4));
  CHECK_OK(AM_SetHandler(am2.ep, H_SREQ8, sreq8));
  CHECK_OK(AM_SetHandler(am2.ep, H_SREQ16, sreq16));
  CHECK_OK(AM_SetHandler(am2.ep, H_SREP0, srep0));
  CHECK_OK(AM_SetHandler(am2.ep, H_SREP1, srep1));
  CHECK_OK(AM_SetHandler(am2.ep, H_SREP2, srep2));
  CHECK_OK(AM_SetHandler(am2.ep, H_SREP4, srep4));
  CHECK_OK(AM_SetHandler(am2.ep, H_SREP8, srep8));
  CHECK_OK(AM_SetHandler(am2.ep, H_SREP16, srep16));
  CHECK_OK(AM_SetHandler(am2.ep, H_MREQ, med_request));
  CHECK_OK(AM_SetHandler(am2.ep, H_MREP, med_reply));
  CHECK_OK(AM_SetHandler(am2.ep, H_LREQ, long_request));
  CHECK_OK(AM_SetHandler(am2.ep, H_LREP, long_reply));
  CHECK_OK(AMX_SPMDBarrier()); /* every rank's handlers and segment are in place */

  int total_replies = 0;
  for (int phase = 0; phase < 2; ++phase) {
    if (am2.me % 2 == phase && (phase == 0 || partner != am2.me)) {
      ping();
      total_replies = replies;
    }
    CHECK_OK(AMX_SPMDBarrier());
  }
  /* Every pinger got one reply per request; every partner served them all. */
  const int per_pinger = NSHORT * SHORT_ROUNDS + 4 * MEDIUM_ROUNDS + 9 * LONG_ROUNDS + 3 * LAT_ROUNDS;
  CHECK(replies == total_replies && replies == per_pinger, "%d replies, expected %d", (int)replies, per_pinger);
  int served = 0;
  for (int n = 0; n <= 16; ++n) served += req_seen[n];
  served += med_seen + long_seen;
  CHECK(served == per_pinger, "served %d requests, expected %d", served, per_pinger);
  am2_finish();
}
