/* am2_getput: get and put built from long messages, as AMUDP's testgetput
 * builds them, with many random offsets and lengths between all ranks.
 *
 *   clumprun -n 4 ./am2_getput
 *
 * put: AM_RequestXferN writes into the remote segment; its handler checks
 *      the bytes where they landed and answers with a short acknowledgement.
 * get: a short request whose handler answers with AM_ReplyXferN from its own
 *      segment into the requester's segment at the offset the request names.
 * Each rank's segment has three areas:
 *   [0, GET_AREA)              a fixed pattern of its owner's, only ever read;
 *   put area, PUT_SUB per rank where rank w (and only w) puts;
 *   landing area               where the replies to our gets land.
 * Every rank runs OPS operations one at a time, chosen by a deterministic
 * PRNG: puts into its sub-area of a random rank (itself included), gets of a
 * random range of a rank's fixed area, and gets of what it put earlier
 * (compared with its own copy of what it wrote there). At the end every rank
 * gets back all of its sub-areas and checks them, and checks that its fixed
 * area is unchanged.
 */
#include "am2_util.h"

enum { H_PUT = 1, H_PUT_ACK, H_GET, H_GOT };

#define GET_AREA (128u * 1024u)
#define PUT_SUB (128u * 1024u)
#define LAND_AREA (128u * 1024u)
#define OPS 400

static uint8_t *seg;
static size_t put_base, land_base, seg_bytes;
static uint8_t *outbuf;
static uint8_t **shadow; /* shadow[d]: what we have put into our sub-area at rank d */

static volatile int acks, gots;
static int32_t expect_tag;        /* the tag of the operation outstanding */
static size_t expect_len, expect_land;

static int source_of(void *token) {
  int src = -1;
  CHECK_OK(AMX_GetSourceId(token, &src));
  CHECK(src >= 0 && src < am2.np, "AMX_GetSourceId gave %d", src);
  return src;
}

static uint32_t fixed_seed(int rank) { return 0xC0FFEEu + (uint32_t)rank; }

/* put: the payload is at put_base + src * PUT_SUB + off in our segment. */
static void put_handler(void *token, void *buf, size_t nbytes, int32_t seed, int32_t off) {
  const int src = source_of(token);
  CHECK(off >= 0 && (size_t)off + nbytes <= PUT_SUB, "put from %d of %zu bytes at %d", src, nbytes, (int)off);
  uint8_t *where = seg + put_base + (size_t)src * PUT_SUB + (size_t)off;
  CHECK(buf == where, "put from %d: the handler got %p, expected %p", src, buf, (void *)where);
  size_t bad = am2_verify(where, nbytes, (uint32_t)seed);
  CHECK(bad == AM2_GOOD, "put from %d of %zu bytes at %d: byte %zu differs", src, nbytes, (int)off, bad);
  CHECK_OK(AM_Reply1(token, H_PUT_ACK, seed));
}

static void put_ack_handler(void *token, int32_t seed) {
  (void)source_of(token);
  CHECK(seed == expect_tag, "put acknowledged with %d, expected %d", (int)seed, (int)expect_tag);
  ++acks;
}

/* get: reply with [src_off, src_off + len) of our segment into the requester's at land. */
static void get_handler(void *token, int32_t src_off, int32_t len, int32_t land, int32_t tag) {
  const int src = source_of(token);
  CHECK(src_off >= 0 && len >= 0 && len <= AM_MaxLong() && (size_t)src_off + (size_t)len <= seg_bytes,
        "get from %d of %d bytes at %d", src, (int)len, (int)src_off);
  CHECK_OK(AM_ReplyXfer1(token, (uintptr_t)land, H_GOT, seg + src_off, (size_t)len, tag));
}

static void got_handler(void *token, void *buf, size_t nbytes, int32_t tag) {
  (void)source_of(token);
  CHECK(tag == expect_tag, "get answered with tag %d, expected %d", (int)tag, (int)expect_tag);
  CHECK(nbytes == expect_len, "get answered with %zu bytes, expected %zu", nbytes, expect_len);
  CHECK(buf == seg + expect_land, "get answered at %p, expected %p", buf, (void *)(seg + expect_land));
  ++gots;
}

static void put(int dest, size_t off, size_t len, int32_t tag) {
  const uint32_t seed = (uint32_t)tag;
  am2_fill(outbuf, len, seed);
  expect_tag = tag;
  const int before = acks;
  CHECK_OK(AM_RequestXfer2(am2.ep, dest, put_base + (size_t)am2.me * PUT_SUB + off, H_PUT, outbuf, len, tag,
                           (int32_t)off));
  WAIT_UNTIL(acks == before + 1);
  memcpy(shadow[dest] + off, outbuf, len);
}

/* Gets [src_off, src_off + len) of dest's segment into our landing area at land_off. */
static void get(int dest, size_t src_off, size_t len, size_t land_off, int32_t tag) {
  expect_tag = tag;
  expect_len = len;
  expect_land = land_base + land_off;
  const int before = gots;
  CHECK_OK(AM_Request4(am2.ep, dest, H_GET, (int32_t)src_off, (int32_t)len, (int32_t)expect_land, tag));
  WAIT_UNTIL(gots == before + 1);
}

int main(int argc, char **argv) {
  am2_startup(&argc, &argv, "am2_getput");
  put_base = GET_AREA;
  land_base = put_base + (size_t)am2.np * PUT_SUB;
  seg_bytes = land_base + LAND_AREA;
  seg = (uint8_t *)am2_malloc(seg_bytes);
  memset(seg, 0, seg_bytes);
  am2_fill(seg, GET_AREA, fixed_seed(am2.me));
  outbuf = (uint8_t *)am2_malloc(AM_MaxLong());
  shadow = (uint8_t **)am2_malloc((size_t)am2.np * sizeof *shadow);
  for (int d = 0; d < am2.np; ++d) {
    shadow[d] = (uint8_t *)am2_malloc(PUT_SUB);
    memset(shadow[d], 0, PUT_SUB);
  }
  CHECK_OK(AM_SetSeg(am2.ep, seg, seg_bytes));
  CHECK_OK(AM_SetHandler(am2.ep, H_PUT, put_handler));
  CHECK_OK(AM_SetHandler(am2.ep, H_PUT_ACK, put_ack_handler));
  CHECK_OK(AM_SetHandler(am2.ep, H_GET, get_handler));
  CHECK_OK(AM_SetHandler(am2.ep, H_GOT, got_handler));
  CHECK_OK(AMX_SPMDBarrier());

  am2_rng_t rng = {0x5EED0000ull + (uint64_t)am2.me};
  int puts = 0, fixed_gets = 0, back_gets = 0;
  size_t bytes = 0;
  const double t0 = am2_now_us();
  for (int i = 0; i < OPS; ++i) {
    const int dest = (int)am2_rand_range(&rng, 0, (size_t)am2.np - 1);
    /* Mostly small transfers, one in four up to AM_MaxLong(). */
    const size_t maxlen = am2_rand_range(&rng, 0, 3) == 0 ? AM_MaxLong() : 2048;
    const size_t len = am2_rand_range(&rng, 1, maxlen);
    const int32_t tag = (int32_t)(am2.me * 1000000 + i);
    const int op = (int)am2_rand_range(&rng, 0, 2);
    const size_t land = am2_rand_range(&rng, 0, LAND_AREA - len);
    if (op == 0) { /* put */
      const size_t off = am2_rand_range(&rng, 0, PUT_SUB - len);
      put(dest, off, len, tag);
      ++puts;
    } else if (op == 1) { /* get from dest's fixed area */
      const size_t off = am2_rand_range(&rng, 0, GET_AREA - len);
      get(dest, off, len, land, tag);
      size_t bad = am2_verify_at(seg + land_base + land, len, fixed_seed(dest), off);
      CHECK(bad == AM2_GOOD, "get of %zu bytes at %zu from rank %d: byte %zu differs", len, off, dest, bad);
      ++fixed_gets;
    } else { /* get back what we put at dest */
      const size_t off = am2_rand_range(&rng, 0, PUT_SUB - len);
      get(dest, put_base + (size_t)am2.me * PUT_SUB + off, len, land, tag);
      CHECK(memcmp(seg + land_base + land, shadow[dest] + off, len) == 0,
            "get back of %zu bytes at %zu of our sub-area at rank %d differs from what we put", len, off, dest);
      ++back_gets;
    }
    bytes += len;
  }
  const double t1 = am2_now_us();
  CHECK(puts + fixed_gets + back_gets == OPS && acks == puts && gots == fixed_gets + back_gets,
        "%d puts (%d acks), %d gets (%d answered)", puts, (int)acks, fixed_gets + back_gets, (int)gots);

  /* Everyone's puts are done: get back every sub-area of ours and compare. */
  CHECK_OK(AMX_SPMDBarrier());
  for (int d = 0; d < am2.np; ++d)
    for (size_t off = 0; off < PUT_SUB; off += 32768) {
      get(d, put_base + (size_t)am2.me * PUT_SUB + off, 32768, 0, -1 - d);
      CHECK(memcmp(seg + land_base, shadow[d] + off, 32768) == 0,
            "our sub-area at rank %d, bytes %zu..%zu, differs from what we put", d, off, off + 32768);
    }
  size_t bad = am2_verify(seg, GET_AREA, fixed_seed(am2.me));
  CHECK(bad == AM2_GOOD, "our fixed area changed at byte %zu", bad);
  printf("am2_getput: rank %d: %d puts, %d gets, %d gets back, %.1f MB in %.1f ms\n", am2.me, puts, fixed_gets,
         back_gets, (double)bytes / 1e6, (t1 - t0) / 1e3);
  CHECK_OK(AMX_SPMDBarrier()); /* nobody gets from us any more */
  am2_finish();
}
