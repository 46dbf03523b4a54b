/* am2_bulk: bulk transfer of every kind between every pair of ranks
 * (all-to-all) through the AM-2 C API, every byte and every count checked.
 *
 *   clumprun -n 4 ./am2_bulk
 *
 * Five kinds, one after the other with a barrier between them; in each, every
 * rank streams messages of 1, 100, 4096 and 65000 bytes to every other rank,
 * at most WINDOW outstanding per destination:
 *   - medium requests (AM_RequestIN), acknowledged by short replies;
 *   - long requests (AM_RequestXferN) into the destination's segment,
 *     acknowledged by short replies;
 *   - asynchronous long requests (AM_RequestXferAsyncN): AM_ERR_IN_USE means
 *     poll and try again;
 *   - medium replies: a short request answered by AM_ReplyIN;
 *   - long replies: a short request answered by AM_ReplyXferN into the
 *     requester's segment.
 * Long payloads land in slot (sender, sequence % WINDOW) of the receiver's
 * segment, a slot being reused only once the message before in it was
 * acknowledged. Receivers check the sender, the length, the buffer address
 * and every byte; at the end of each kind every rank checks it received (or
 * served) exactly the expected number of messages from each other rank.
 */
#include "am2_util.h"

enum { H_MED = 1, H_LONG, H_ASK, H_ACK, H_MED_REPLY, H_LONG_REPLY };
enum { K_MED_REQ, K_LONG_REQ, K_ASYNC_REQ, K_MED_REP, K_LONG_REP, NKINDS };
static const char *const kind_name[NKINDS] = {"medium requests", "long requests", "async long requests",
                                              "medium replies", "long replies"};

#define WINDOW 4
#define COUNT 6 /* messages per size and destination */
#define NSIZES 4
#define PER_PEER (NSIZES * COUNT)
#define SLOT_BYTES ((size_t)AM_MaxLong())
static const size_t sizes[NSIZES] = {1, 100, 4096, 65000};

static uint8_t *seg;
static size_t seg_bytes;
static uint8_t *outbuf, *replybuf;

static volatile int outstanding[64]; /* by destination: requests not yet answered */
static int received[NKINDS][64];     /* by kind and sender: messages received (requests or replies) */
static int served[NKINDS][64];       /* by kind and requester: reply requests served */
static long in_use_retries;

/* Sequence number g of a stream: its size and the slot its long payload uses. */
static size_t size_of(int g) { return sizes[g / COUNT]; }
static size_t slot_offset(int owner_area, int g) { return ((size_t)owner_area * WINDOW + (size_t)(g % WINDOW)) * SLOT_BYTES; }

static uint32_t seed_of(int kind, int from, int to, int g) {
  return (uint32_t)kind * 0x01000193u + (uint32_t)from * 7919u + (uint32_t)to * 104729u + (uint32_t)g * 31u;
}

static int source_of(void *token) {
  int src = -1;
  CHECK_OK(AMX_GetSourceId(token, &src));
  CHECK(src >= 0 && src < am2.np && src != am2.me, "AMX_GetSourceId gave %d", src);
  return src;
}

static void check_args(int kind, int g) {
  CHECK(kind >= 0 && kind < NKINDS && g >= 0 && g < PER_PEER, "kind %d, sequence %d", kind, g);
}

/* Medium request: check it, count it, acknowledge it. */
static void med_handler(void *token, void *buf, size_t nbytes, int32_t kind, int32_t g) {
  const int src = source_of(token);
  check_args(kind, g);
  CHECK(kind == K_MED_REQ, "medium request of kind %d", (int)kind);
  CHECK(nbytes == size_of(g), "medium request %d from %d: %zu bytes, expected %zu", (int)g, src, nbytes, size_of(g));
  size_t bad = am2_verify(buf, nbytes, seed_of(kind, src, am2.me, g));
  CHECK(bad == AM2_GOOD, "medium request %d from %d (%zu bytes): byte %zu differs", (int)g, src, nbytes, bad);
  ++received[kind][src];
  CHECK_OK(AM_Reply1(token, H_ACK, kind));
}

/* Long request (blocking or asynchronous): the payload is in our segment. */
static void long_handler(void *token, void *buf, size_t nbytes, int32_t kind, int32_t g) {
  const int src = source_of(token);
  check_args(kind, g);
  CHECK(kind == K_LONG_REQ || kind == K_ASYNC_REQ, "long request of kind %d", (int)kind);
  const size_t off = slot_offset(src, g);
  CHECK(nbytes == size_of(g), "long request %d from %d: %zu bytes, expected %zu", (int)g, src, nbytes, size_of(g));
  CHECK(buf == seg + off, "long request %d from %d: the handler got %p, expected segment + %zu = %p", (int)g, src, buf,
        off, (void *)(seg + off));
  size_t bad = am2_verify(seg + off, nbytes, seed_of(kind, src, am2.me, g));
  CHECK(bad == AM2_GOOD, "%s %d from %d (%zu bytes): byte %zu differs", kind_name[kind], (int)g, src, nbytes, bad);
  ++received[kind][src];
  CHECK_OK(AM_Reply1(token, H_ACK, kind));
}

/* A short request asking for a medium or long reply. */
static void ask_handler(void *token, int32_t kind, int32_t g) {
  const int src = source_of(token);
  check_args(kind, g);
  const size_t n = size_of(g);
  am2_fill(replybuf, n, seed_of(kind, am2.me, src, g));
  ++served[kind][src];
  if (kind == K_MED_REP) {
    CHECK_OK(AM_ReplyI2(token, H_MED_REPLY, replybuf, n, kind, g));
  } else {
    CHECK(kind == K_LONG_REP, "reply asked for with kind %d", (int)kind);
    /* Into the requester's segment, in its area for us. */
    CHECK_OK(AM_ReplyXfer2(token, slot_offset(am2.me, g), H_LONG_REPLY, replybuf, n, kind, g));
  }
}

static void ack_handler(void *token, int32_t kind) {
  const int src = source_of(token);
  CHECK(kind == K_MED_REQ || kind == K_LONG_REQ || kind == K_ASYNC_REQ, "acknowledgement of kind %d", (int)kind);
  CHECK(outstanding[src] > 0, "acknowledgement from %d with nothing outstanding", src);
  --outstanding[src];
}

static void med_reply_handler(void *token, void *buf, size_t nbytes, int32_t kind, int32_t g) {
  const int src = source_of(token);
  check_args(kind, g);
  CHECK(kind == K_MED_REP, "medium reply of kind %d", (int)kind);
  CHECK(nbytes == size_of(g), "medium reply %d from %d: %zu bytes, expected %zu", (int)g, src, nbytes, size_of(g));
  size_t bad = am2_verify(buf, nbytes, seed_of(kind, src, am2.me, g));
  CHECK(bad == AM2_GOOD, "medium reply %d from %d (%zu bytes): byte %zu differs", (int)g, src, nbytes, bad);
  ++received[kind][src];
  CHECK(outstanding[src] > 0, "medium reply from %d with nothing outstanding", src);
  --outstanding[src];
}

static void long_reply_handler(void *token, void *buf, size_t nbytes, int32_t kind, int32_t g) {
  const int src = source_of(token);
  check_args(kind, g);
  CHECK(kind == K_LONG_REP, "long reply of kind %d", (int)kind);
  const size_t off = slot_offset(src, g);
  CHECK(nbytes == size_of(g), "long reply %d from %d: %zu bytes, expected %zu", (int)g, src, nbytes, size_of(g));
  CHECK(buf == seg + off, "long reply %d from %d: the handler got %p, expected segment + %zu = %p", (int)g, src, buf,
        off, (void *)(seg + off));
  size_t bad = am2_verify(seg + off, nbytes, seed_of(kind, src, am2.me, g));
  CHECK(bad == AM2_GOOD, "long reply %d from %d (%zu bytes): byte %zu differs", (int)g, src, nbytes, bad);
  ++received[kind][src];
  CHECK(outstanding[src] > 0, "long reply from %d with nothing outstanding", src);
  --outstanding[src];
}

static void send_one(int kind, int dest, int g) {
  const size_t n = size_of(g);
  const uintptr_t off = slot_offset(am2.me, g); /* our area in the destination's segment */
  int rc;
  switch (kind) {
    case K_MED_REQ:
      am2_fill(outbuf, n, seed_of(kind, am2.me, dest, g));
      CHECK_OK(AM_RequestI2(am2.ep, dest, H_MED, outbuf, n, kind, g));
      break;
    case K_LONG_REQ:
      am2_fill(outbuf, n, seed_of(kind, am2.me, dest, g));
      CHECK_OK(AM_RequestXfer2(am2.ep, dest, off, H_LONG, outbuf, n, kind, g));
      break;
    case K_ASYNC_REQ:
      am2_fill(outbuf, n, seed_of(kind, am2.me, dest, g));
      while ((rc = AM_RequestXferAsync2(am2.ep, dest, off, H_LONG, outbuf, n, kind, g)) == AM_ERR_IN_USE) {
        ++in_use_retries;
        AM_Poll(am2.eb);
        sched_yield();
      }
      CHECK(rc == AM_OK, "AM_RequestXferAsync2 returned %d", rc);
      break;
    default: CHECK_OK(AM_Request2(am2.ep, dest, H_ASK, kind, g)); break;
  }
}

static int all_answered(void) {
  for (int p = 0; p < am2.np; ++p)
    if (outstanding[p] != 0) return 0;
  return 1;
}

int main(int argc, char **argv) {
  am2_startup(&argc, &argv, "am2_bulk");
  CHECK(am2.np <= 64, "at most 64 ranks, not %d", am2.np);
  seg_bytes = (size_t)am2.np * WINDOW * SLOT_BYTES;
  seg = (uint8_t *)am2_malloc(seg_bytes);
  memset(seg, 0, seg_bytes);
  outbuf = (uint8_t *)am2_malloc(AM_MaxLong());
  replybuf = (uint8_t *)am2_malloc(AM_MaxLong());
  CHECK_OK(AM_SetSeg(am2.ep, seg, seg_bytes));
  CHECK_OK(AM_SetHandler(am2.ep, H_MED, med_handler));
  CHECK_OK(AM_SetHandler(am2.ep, H_LONG, long_handler));
  CHECK_OK(AM_SetHandler(am2.ep, H_ASK, ask_handler));
  CHECK_OK(AM_SetHandler(am2.ep, H_ACK, ack_handler));
  CHECK_OK(AM_SetHandler(am2.ep, H_MED_REPLY, med_reply_handler));
  CHECK_OK(AM_SetHandler(am2.ep, H_LONG_REPLY, long_reply_handler));
  CHECK_OK(AMX_SPMDBarrier());

  for (int kind = 0; kind < NKINDS; ++kind) {
    const double t0 = am2_now_us();
    for (int g = 0; g < PER_PEER; ++g)
      for (int i = 1; i < am2.np; ++i) {
        const int dest = (am2.me + i) % am2.np; /* everyone starts with a different destination */
        WAIT_UNTIL(outstanding[dest] < WINDOW);
        ++outstanding[dest];
        send_one(kind, dest, g);
      }
    WAIT_UNTIL(all_answered());
    const double t1 = am2_now_us();
    CHECK_OK(AMX_SPMDBarrier()); /* everything sent to us has been handled too */
    for (int p = 0; p < am2.np; ++p) {
      if (p == am2.me) continue;
      const int want = PER_PEER;
      if (kind == K_MED_REP || kind == K_LONG_REP) {
        CHECK(served[kind][p] == want, "%s: served %d for rank %d, expected %d", kind_name[kind], served[kind][p], p,
              want);
        CHECK(received[kind][p] == want, "%s: received %d from rank %d, expected %d", kind_name[kind],
              received[kind][p], p, want);
      } else {
        CHECK(received[kind][p] == want, "%s: received %d from rank %d, expected %d", kind_name[kind],
              received[kind][p], p, want);
      }
    }
    double bytes = 0;
    for (int s = 0; s < NSIZES; ++s) bytes += (double)sizes[s] * COUNT * (am2.np - 1);
    if (am2.me == 0) {
      printf("am2_bulk: rank 0: %-19s %4d messages, %.1f MB in %.1f ms (%.0f MB/s)\n", kind_name[kind],
             PER_PEER * (am2.np - 1), bytes / 1e6, (t1 - t0) / 1e3, bytes / (t1 - t0));
      fflush(stdout);
    }
  }
  if (in_use_retries) printf("am2_bulk: rank %d: AM_ERR_IN_USE %ld times\n", am2.me, in_use_retries);
  am2_finish();
}
