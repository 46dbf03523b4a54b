/* c_api_conformance: the AM-2 C API (clump/am.h) against AM2-API.md, as a
 * plain C SPMD program. Run it under clumprun with 2 and 3 ranks (it also
 * runs alone, talking to itself). Every rank sends to the next one ("peer")
 * and serves the previous one; each check that fails prints the rank, the
 * line and what was expected, and ends the job with exit code 1.
 *
 *   clumprun -n 3 ./c_api_conformance
 *
 * Sections: before AM_Init; startup and the setup calls; short messages with
 * 0..16 arguments; medium messages; long messages (put, exact end of the
 * segment, asynchronous, long reply, get) over a malloc'd and a shared
 * segment; returned messages (EBADTAG, EBADHANDLER, EBADSEGOFF, EBADENTRY,
 * EBADENDPOINT); bad arguments at the call site; AM_WaitSema; the SPMD
 * collectives; statistics; an AM_PAR bundle used by two threads. */

#include <clump/am.h>

#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- failing ------------------------------------------------------------------- */

static int me = -1, nprocs = 0, peer = 0;

static void failed(int line, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "c_api_conformance rank %d: line %d: FAILED: %s\n", me, line, msg);
  fflush(stderr);
  AMX_SPMDExit(1); /* ends the job: the other ranks would wait for us forever */
}

#define CHECK(cond, ...) \
  do {                   \
    if (!(cond)) failed(__LINE__, __VA_ARGS__); \
  } while (0)
#define CHECK_RC(call, want)                                                            \
  do {                                                                                  \
    int rc_ = (call);                                                                   \
    if (rc_ != (want)) failed(__LINE__, "%s returned %d, expected %d", #call, rc_, want); \
  } while (0)

/* ---- state ------------------------------------------------------------------------ */

enum {
  H_REQ0 = 10,   /* H_REQ0 + n: short request with n arguments (10..26) */
  H_REP0 = 30,   /* H_REP0 + n: short reply with n arguments (30..46) */
  H_MED_REQ = 50,
  H_MED_REP,
  H_PUT,         /* long request: checks the bytes, acknowledges */
  H_PUT_ACK,
  H_ASK_LONG,    /* short request answered by a long reply */
  H_LONG_REP,
  H_GOT,         /* runs here when AM_GetXferM's data has arrived */
  H_SELF,        /* asynchronous long requests to our own endpoint */
  H_TARGET,      /* only ever sent with a wrong tag: must never run */
  H_WAKE_REQ,
  H_WAKE_REP,
  H_MISUSE_REQ,  /* tries what a request handler may not do */
  H_MISUSE_REP,  /* tries what a reply handler may not do */
  H_PAR_REQ,
  H_PAR_REP,
  H_UNSET = 200  /* never registered */
};

#define SEG_BYTES (1u << 20)
#define PUT_LEN 100003u         /* > AM_MaxMedium(): a private segment gets it in pieces */
#define END_LEN 70001u          /* put that ends exactly at the end of the segment */
#define ASYNC_OFF 200000u
#define ASYNC_LEN 50000u
#define LREP_OFF 300000u        /* where the peer's long reply lands here */
#define LREP_LEN 90001u
#define GET_SRC 400000u         /* what the peer pulls from us */
#define GET_DST 500000u         /* where what we pull lands */
#define GET_LEN 80001u
#define SELF_OFF 600000u
#define SELF_LEN 64u

static eb_t eb;
static ep_t ep;
static unsigned char *seg; /* the current segment */

/* Handlers run on the polling thread; these are plain variables. */
static int short_req_seen[17], short_rep_seen[17], short_bad;
static int med_req_seen, med_rep_seen, med_bad;
static int acks, ack_bad;
static int long_reps, long_rep_bad;
static int gots, got_bad;
static int selfs;
static int target_ran;
static int wakes;
static int misuse_done;

/* What handler 0 saw last. */
static struct {
  int count, status, op, nargs, src_id, dest_ok;
  handler_t handler;
  int32_t args[AM_MaxShort()];
  tag_t tag;
  en_t src;
} ret;

/* ---- values ------------------------------------------------------------------------- */

/* Argument i of the n-argument message from rank r: distinct within a message
 * (an odd multiplier is a bijection mod 2^32), negative ones included. */
static int32_t arg_value(int n, int i, int r) {
  return (int32_t)(0x9E3779B1u * (uint32_t)(n * 64 + i + 1) + (uint32_t)r * 0x01000193u);
}

static unsigned char byte_at(size_t i, int seed) {
  return (unsigned char)((i * 131u + (size_t)seed * 31u + (i >> 9)) ^ 0x5au);
}
static void fill(unsigned char *p, size_t n, int seed) {
  for (size_t i = 0; i < n; ++i) p[i] = byte_at(i, seed);
}
static int same(const unsigned char *p, size_t n, int seed) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != byte_at(i, seed)) return 0;
  return 1;
}

/* ---- waiting ------------------------------------------------------------------------- */

/* Runs handlers until *count reaches target; sleeps in AM_WaitSema while
 * nothing is pending (the AM-2 idiom: no spinning while idle). */
static void wait_for(const int *count, int target) {
  for (;;) {
    CHECK_RC(AM_Poll(eb), AM_OK);
    if (*count >= target) return;
    CHECK_RC(AM_SetEventMask(eb, AM_NOTEMPTY), AM_OK);
    CHECK_RC(AM_WaitSema(eb), AM_OK);
  }
}

/* ---- short messages with 0..16 arguments ------------------------------------------------ */

/* V<n> lists the first n elements of v; EXPAND lets a macro take such a list. */
#define EXPAND(m, ...) m(__VA_ARGS__)
#define V1 v[0]
#define V2 V1, v[1]
#define V3 V2, v[2]
#define V4 V3, v[3]
#define V5 V4, v[4]
#define V6 V5, v[5]
#define V7 V6, v[6]
#define V8 V7, v[7]
#define V9 V8, v[8]
#define V10 V9, v[9]
#define V11 V10, v[10]
#define V12 V11, v[11]
#define V13 V12, v[12]
#define V14 V13, v[13]
#define V15 V14, v[14]
#define V16 V15, v[15]

static int request_n(int dest, int n, handler_t h, const int32_t *v) {
  switch (n) {
    case 0: return AM_Request0(ep, dest, h);
    case 1: return EXPAND(AM_Request1, ep, dest, h, V1);
    case 2: return EXPAND(AM_Request2, ep, dest, h, V2);
    case 3: return EXPAND(AM_Request3, ep, dest, h, V3);
    case 4: return EXPAND(AM_Request4, ep, dest, h, V4);
    case 5: return EXPAND(AM_Request5, ep, dest, h, V5);
    case 6: return EXPAND(AM_Request6, ep, dest, h, V6);
    case 7: return EXPAND(AM_Request7, ep, dest, h, V7);
    case 8: return EXPAND(AM_Request8, ep, dest, h, V8);
    case 9: return EXPAND(AM_Request9, ep, dest, h, V9);
    case 10: return EXPAND(AM_Request10, ep, dest, h, V10);
    case 11: return EXPAND(AM_Request11, ep, dest, h, V11);
    case 12: return EXPAND(AM_Request12, ep, dest, h, V12);
    case 13: return EXPAND(AM_Request13, ep, dest, h, V13);
    case 14: return EXPAND(AM_Request14, ep, dest, h, V14);
    case 15: return EXPAND(AM_Request15, ep, dest, h, V15);
    case 16: return EXPAND(AM_Request16, ep, dest, h, V16);
  }
  return -1;
}

static int reply_n(void *token, int n, handler_t h, const int32_t *v) {
  switch (n) {
    case 0: return AM_Reply0(token, h);
    case 1: return EXPAND(AM_Reply1, token, h, V1);
    case 2: return EXPAND(AM_Reply2, token, h, V2);
    case 3: return EXPAND(AM_Reply3, token, h, V3);
    case 4: return EXPAND(AM_Reply4, token, h, V4);
    case 5: return EXPAND(AM_Reply5, token, h, V5);
    case 6: return EXPAND(AM_Reply6, token, h, V6);
    case 7: return EXPAND(AM_Reply7, token, h, V7);
    case 8: return EXPAND(AM_Reply8, token, h, V8);
    case 9: return EXPAND(AM_Reply9, token, h, V9);
    case 10: return EXPAND(AM_Reply10, token, h, V10);
    case 11: return EXPAND(AM_Reply11, token, h, V11);
    case 12: return EXPAND(AM_Reply12, token, h, V12);
    case 13: return EXPAND(AM_Reply13, token, h, V13);
    case 14: return EXPAND(AM_Reply14, token, h, V14);
    case 15: return EXPAND(AM_Reply15, token, h, V15);
    case 16: return EXPAND(AM_Reply16, token, h, V16);
  }
  return -1;
}

/* Checks the arguments and what the token says, then replies with their complements. */
static void on_short_request(void *token, int n, const int32_t *a) {
  int src = -1;
  CHECK_RC(AMX_GetSourceId(token, &src), AM_OK);
  for (int i = 0; i < n; ++i)
    if (a[i] != arg_value(n, i, src)) ++short_bad;
  ep_t dest = NULL;
  CHECK_RC(AM_GetDestEndpoint(token, &dest), AM_OK);
  CHECK(dest == ep, "AM_GetDestEndpoint gave another endpoint");
  tag_t sent = 0, mine = 0;
  CHECK_RC(AM_GetMsgTag(token, &sent), AM_OK);
  CHECK_RC(AM_GetTag(ep, &mine), AM_OK);
  CHECK(sent == mine, "AM_GetMsgTag: %llx, our tag is %llx", (unsigned long long)sent, (unsigned long long)mine);
  en_t from, mapped;
  CHECK_RC(AM_GetSourceEndpoint(token, &from), AM_OK);
  CHECK_RC(AM_GetTranslationName(ep, src, &mapped), AM_OK);
  CHECK(AMX_enEqual(from, mapped), "AM_GetSourceEndpoint differs from translation %d", src);
  handler_t h;
  int k;
  int32_t w[AM_MaxShort()];
  CHECK_RC(AMX_GetReturnedArgs(token, &h, &k, w), AM_ERR_BAD_ARG); /* not handler 0 */
  int32_t r[AM_MaxShort()];
  for (int i = 0; i < n; ++i) r[i] = ~a[i];
  ++short_req_seen[n];
  CHECK_RC(reply_n(token, n, (handler_t)(H_REP0 + n), r), AM_OK);
}

static void on_short_reply(void *token, int n, const int32_t *a) {
  (void)token;
  for (int i = 0; i < n; ++i)
    if (a[i] != ~arg_value(n, i, me)) ++short_bad;
  ++short_rep_seen[n];
}

/* One request and one reply handler per argument count, each of the exact
 * C shape: void h(void *token, int32_t a0, ..., int32_t a<n-1>). */
#define P1 int32_t a0
#define P2 P1, int32_t a1
#define P3 P2, int32_t a2
#define P4 P3, int32_t a3
#define P5 P4, int32_t a4
#define P6 P5, int32_t a5
#define P7 P6, int32_t a6
#define P8 P7, int32_t a7
#define P9 P8, int32_t a8
#define P10 P9, int32_t a9
#define P11 P10, int32_t a10
#define P12 P11, int32_t a11
#define P13 P12, int32_t a12
#define P14 P13, int32_t a13
#define P15 P14, int32_t a14
#define P16 P15, int32_t a15
#define A1 a0
#define A2 A1, a1
#define A3 A2, a2
#define A4 A3, a3
#define A5 A4, a4
#define A6 A5, a5
#define A7 A6, a6
#define A8 A7, a7
#define A9 A8, a8
#define A10 A9, a9
#define A11 A10, a10
#define A12 A11, a11
#define A13 A12, a12
#define A14 A13, a13
#define A15 A14, a14
#define A16 A15, a15
#define SHORT_HANDLERS(n)                                                          \
  static void req##n(void *token, P##n) {                                          \
    const int32_t a[] = {A##n};                                                    \
    on_short_request(token, n, a);                                                 \
  }                                                                                \
  static void rep##n(void *token, P##n) {                                          \
    const int32_t a[] = {A##n};                                                    \
    on_short_reply(token, n, a);                                                   \
  }
static void req0(void *token) { on_short_request(token, 0, NULL); }
static void rep0(void *token) { on_short_reply(token, 0, NULL); }
SHORT_HANDLERS(1) SHORT_HANDLERS(2) SHORT_HANDLERS(3) SHORT_HANDLERS(4) SHORT_HANDLERS(5) SHORT_HANDLERS(6)
SHORT_HANDLERS(7) SHORT_HANDLERS(8) SHORT_HANDLERS(9) SHORT_HANDLERS(10) SHORT_HANDLERS(11) SHORT_HANDLERS(12)
SHORT_HANDLERS(13) SHORT_HANDLERS(14) SHORT_HANDLERS(15) SHORT_HANDLERS(16)

#define FN(f) ((amx_handler_fn_t)(f))
static const amx_handler_fn_t short_requests[17] = {
    FN(req0),  FN(req1),  FN(req2),  FN(req3),  FN(req4),  FN(req5),  FN(req6),  FN(req7), FN(req8),
    FN(req9), FN(req10), FN(req11), FN(req12), FN(req13), FN(req14), FN(req15), FN(req16)};
static const amx_handler_fn_t short_replies[17] = {
    FN(rep0),  FN(rep1),  FN(rep2),  FN(rep3),  FN(rep4),  FN(rep5),  FN(rep6),  FN(rep7), FN(rep8),
    FN(rep9), FN(rep10), FN(rep11), FN(rep12), FN(rep13), FN(rep14), FN(rep15), FN(rep16)};

static void test_short(void) {
  for (int n = 0; n <= AM_MaxShort(); ++n) {
    int32_t v[AM_MaxShort()];
    for (int i = 0; i < n; ++i) v[i] = arg_value(n, i, me);
    CHECK_RC(request_n(peer, n, (handler_t)(H_REQ0 + n), v), AM_OK);
    wait_for(&short_rep_seen[n], 1);
  }
  CHECK_RC(AMX_SPMDBarrier(), AM_OK); /* the previous rank's requests have all been served */
  for (int n = 0; n <= AM_MaxShort(); ++n)
    CHECK(short_req_seen[n] == 1 && short_rep_seen[n] == 1, "%d arguments: %d requests, %d replies", n,
          short_req_seen[n], short_rep_seen[n]);
  CHECK(short_bad == 0, "%d short arguments arrived wrong", short_bad);
}

/* ---- medium messages ---------------------------------------------------------------------- */

/* The request carries (length, seed); the handler checks the bytes and sends them back. */
static void med_req(void *token, void *buf, size_t nbytes, int32_t len, int32_t seed) {
  if (nbytes != (size_t)len || (nbytes && !same(buf, nbytes, seed))) ++med_bad;
  ++med_req_seen;
  CHECK_RC(AM_ReplyI2(token, H_MED_REP, buf, nbytes, len, seed), AM_OK);
}

static void med_rep(void *token, void *buf, size_t nbytes, int32_t len, int32_t seed) {
  (void)token;
  if (nbytes != (size_t)len || (nbytes && !same(buf, nbytes, seed))) ++med_bad;
  ++med_rep_seen;
}

static void test_medium(void) {
  const size_t sizes[] = {0, 1, 8192, AM_MaxMedium()};
  unsigned char *buf = malloc(AM_MaxMedium());
  CHECK(buf != NULL, "out of memory");
  for (int i = 0; i < 4; ++i) {
    const int seed = me * 10 + i;
    fill(buf, sizes[i], seed);
    CHECK_RC(AM_RequestI2(ep, peer, H_MED_REQ, buf, sizes[i], (int32_t)sizes[i], seed), AM_OK);
    memset(buf, 0, sizes[i]); /* the payload was copied: the buffer is ours again */
    wait_for(&med_rep_seen, i + 1);
  }
  free(buf);
  CHECK_RC(AMX_SPMDBarrier(), AM_OK);
  CHECK(med_req_seen == 4 && med_rep_seen == 4, "medium: %d requests, %d replies", med_req_seen, med_rep_seen);
  CHECK(med_bad == 0, "%d medium payloads arrived wrong", med_bad);
}

/* ---- long messages ----------------------------------------------------------------------------- */

/* Checks that the payload is where it was sent, byte for byte, and acknowledges. */
static void put_handler(void *token, void *buf, size_t nbytes, int32_t offset, int32_t len, int32_t seed) {
  int good = (unsigned char *)buf == seg + offset && nbytes == (size_t)len && same(buf, nbytes, seed);
  CHECK_RC(AM_Reply1(token, H_PUT_ACK, good), AM_OK);
}

static void put_ack(void *token, int32_t good) {
  (void)token;
  if (!good) ++ack_bad;
  ++acks;
}

static unsigned char reply_src[LREP_LEN];

static void ask_long(void *token, int32_t offset, int32_t len, int32_t seed) {
  fill(reply_src, (size_t)len, seed);
  CHECK_RC(AM_ReplyXfer3(token, (uintptr_t)offset, H_LONG_REP, reply_src, (size_t)len, offset, len, seed), AM_OK);
}

static void long_rep(void *token, void *buf, size_t nbytes, int32_t offset, int32_t len, int32_t seed) {
  (void)token;
  if ((unsigned char *)buf != seg + offset || nbytes != (size_t)len || !same(buf, nbytes, seed)) ++long_rep_bad;
  ++long_reps;
}

static void got(void *token, void *buf, size_t nbytes, int32_t seed) {
  (void)token;
  if ((unsigned char *)buf != seg + GET_DST || nbytes != GET_LEN || !same(buf, nbytes, seed)) ++got_bad;
  ++gots;
}

static void self_handler(void *token, void *buf, size_t nbytes, int32_t i) {
  (void)token;
  (void)buf;
  (void)nbytes;
  (void)i;
  ++selfs;
}

/* Every long path into the segment `s` (already set on every rank). */
static void test_long(int round) {
  unsigned char *data = malloc(PUT_LEN);
  CHECK(data != NULL, "out of memory");
  const int base = acks;

  /* A put at offset 0 and one that ends exactly at the end of the segment. */
  int seed = 1000 + me + 100 * round;
  fill(data, PUT_LEN, seed);
  CHECK_RC(AM_RequestXfer3(ep, peer, 0, H_PUT, data, PUT_LEN, 0, PUT_LEN, seed), AM_OK);
  seed += 10;
  fill(data, END_LEN, seed);
  CHECK_RC(AM_RequestXfer3(ep, peer, SEG_BYTES - END_LEN, H_PUT, data, END_LEN, SEG_BYTES - END_LEN, END_LEN, seed),
           AM_OK);
  wait_for(&acks, base + 2);

  /* Asynchronous: AM_ERR_IN_USE only means "poll and try again". */
  seed += 10;
  fill(data, ASYNC_LEN, seed);
  int rc;
  while ((rc = AM_RequestXferAsync3(ep, peer, ASYNC_OFF, H_PUT, data, ASYNC_LEN, ASYNC_OFF, ASYNC_LEN, seed)) ==
         AM_ERR_IN_USE)
    CHECK_RC(AM_Poll(eb), AM_OK);
  CHECK_RC(rc, AM_OK);
  wait_for(&acks, base + 3);
  CHECK(ack_bad == 0, "%d long payloads arrived wrong (round %d)", ack_bad, round);

  /* A long reply into our segment. */
  CHECK_RC(AM_Request3(ep, peer, H_ASK_LONG, LREP_OFF, LREP_LEN, seed + 1), AM_OK);
  wait_for(&long_reps, round + 1);
  CHECK(long_rep_bad == 0, "the long reply arrived wrong (round %d)", round);

  /* A get from the peer's segment (it filled GET_SRC with its own seed). */
  fill(seg + GET_SRC, GET_LEN, 5000 + me + 100 * round);
  CHECK_RC(AMX_SPMDBarrier(), AM_OK); /* every rank's source bytes are in place */
  CHECK_RC(AM_GetXfer1(ep, peer, GET_SRC, H_GOT, GET_DST, GET_LEN, 5000 + peer + 100 * round), AM_OK);
  wait_for(&gots, round + 1);
  CHECK(got_bad == 0, "AM_GetXferM brought wrong bytes (round %d)", round);

  /* Asynchronous requests to ourselves without polling: the queue fills, and
   * then the call says AM_ERR_IN_USE instead of blocking. */
  int sent = 0;
  const int start = selfs;
  for (;;) {
    rc = AM_RequestXferAsync1(ep, me, SELF_OFF, H_SELF, data, SELF_LEN, sent);
    if (rc != AM_OK) break;
    ++sent;
    CHECK(sent < 1000000, "AM_RequestXferAsync never reported a full queue");
  }
  CHECK_RC(rc, AM_ERR_IN_USE);
  CHECK(sent > 0, "no asynchronous request fitted into an empty queue");
  wait_for(&selfs, start + sent);

  CHECK_RC(AMX_SPMDBarrier(), AM_OK); /* the peer's puts into our segment are done */
  free(data);
}

/* ---- returned messages ------------------------------------------------------------------------------ */

static void returned(int status, op_t opcode, void *token) {
  ret.status = status;
  ret.op = opcode;
  CHECK_RC(AMX_GetReturnedArgs(token, &ret.handler, &ret.nargs, ret.args), AM_OK);
  CHECK_RC(AM_GetMsgTag(token, &ret.tag), AM_OK);
  CHECK_RC(AM_GetSourceEndpoint(token, &ret.src), AM_OK);
  ret.src_id = -2;
  AMX_GetSourceId(token, &ret.src_id);
  ep_t dest = NULL;
  CHECK_RC(AM_GetDestEndpoint(token, &dest), AM_OK);
  ret.dest_ok = dest == ep;
  /* Handler 0 may not reply (checked once: the core logs each attempt). */
  if (ret.count == 0) CHECK_RC(AM_Reply0(token, H_WAKE_REP), AM_ERR_BAD_ARG);
  ++ret.count;
}

static void target(void *token, int32_t a, int32_t b, int32_t c) {
  (void)token;
  (void)a;
  (void)b;
  (void)c;
  ++target_ran;
}

/* Waits for the next returned message and checks its reason, opcode and handler. */
static void expect_return(int line, int status, int op, handler_t h) {
  const int before = ret.count;
  wait_for(&ret.count, before + 1);
  if (ret.status != status || ret.op != op || ret.handler != h)
    failed(line, "handler 0 got status %d opcode %d handler %d; expected %d, %d, %d", ret.status, ret.op,
           ret.handler, status, op, h);
  CHECK(ret.dest_ok, "AM_GetDestEndpoint in handler 0 gave another endpoint");
}

static void test_returns(void) {
  int ntrans = 0;
  CHECK_RC(AM_GetNumTranslations(ep, &ntrans), AM_OK);
  CHECK(ntrans > nprocs + 3, "the translation table has only %d entries", ntrans);
  const int bad_tag_entry = nprocs, unmapped = nprocs + 1, gone_entry = nprocs + 2;

  /* A wrong tag: the destination refuses it, its handler never runs. */
  en_t peer_name;
  tag_t peer_tag;
  CHECK_RC(AM_GetTranslationName(ep, peer, &peer_name), AM_OK);
  CHECK_RC(AM_GetTranslationTag(ep, peer, &peer_tag), AM_OK);
  tag_t wrong = peer_tag ^ 0x100u;
  if (wrong == AM_NONE || wrong == AM_ALL) wrong = peer_tag + 2;
  CHECK_RC(AM_Map(ep, bad_tag_entry, peer_name, wrong), AM_OK);
  CHECK_RC(AM_Request3(ep, bad_tag_entry, H_TARGET, 11, -22, 33), AM_OK);
  expect_return(__LINE__, EBADTAG, AM_REQUEST_M, H_TARGET);
  CHECK(ret.nargs == 3 && ret.args[0] == 11 && ret.args[1] == -22 && ret.args[2] == 33,
        "EBADTAG: returned %d arguments (%d, %d, %d)", ret.nargs, ret.args[0], ret.args[1], ret.args[2]);
  CHECK(ret.tag == wrong, "EBADTAG: AM_GetMsgTag gave %llx, the message was sent with %llx",
        (unsigned long long)ret.tag, (unsigned long long)wrong);
  CHECK(AMX_enEqual(ret.src, peer_name), "EBADTAG: AM_GetSourceEndpoint does not name the destination");
  CHECK(ret.src_id == peer, "EBADTAG: AMX_GetSourceId gave %d, expected %d", ret.src_id, peer);

  /* A long request with a wrong tag comes back with its opcode. */
  unsigned char small[16] = {0};
  CHECK_RC(AM_RequestXfer3(ep, bad_tag_entry, 0, H_TARGET, small, sizeof small, 1, 2, 3), AM_OK);
  expect_return(__LINE__, EBADTAG, AM_REQUEST_XFER_M, H_TARGET);
  CHECK_RC(AM_UnMap(ep, bad_tag_entry), AM_OK);

  /* No handler at that index on the destination. */
  CHECK_RC(AM_Request2(ep, peer, H_UNSET, 7, 8), AM_OK);
  expect_return(__LINE__, EBADHANDLER, AM_REQUEST_M, H_UNSET);
  CHECK(ret.nargs == 2 && ret.args[0] == 7 && ret.args[1] == 8, "EBADHANDLER: wrong returned arguments");
  CHECK_RC(AM_RequestI1(ep, peer, H_UNSET, small, sizeof small, 9), AM_OK);
  expect_return(__LINE__, EBADHANDLER, AM_REQUEST_IM, H_UNSET);

  /* A long put that runs past the end of the destination's segment. */
  CHECK_RC(AM_RequestXfer3(ep, peer, SEG_BYTES - 10, H_PUT, small, 11, 0, 11, 0), AM_OK);
  expect_return(__LINE__, EBADSEGOFF, AM_REQUEST_XFER_M, H_PUT);
  /* ... and a get from past the end of the peer's segment. */
  CHECK_RC(AM_GetXfer1(ep, peer, SEG_BYTES - 10, H_GOT, GET_DST, 11, 0), AM_OK);
  expect_return(__LINE__, EBADSEGOFF, AM_REQUEST_XFER_M, H_GOT);

  /* An entry that is not mapped. */
  CHECK_RC(AM_GetTranslationInuse(ep, unmapped), AM_ERR_RESOURCE);
  CHECK_RC(AM_Request1(ep, unmapped, H_TARGET, 5), AM_OK);
  expect_return(__LINE__, EBADENTRY, AM_REQUEST_M, H_TARGET);
  CHECK(ret.nargs == 1 && ret.args[0] == 5, "EBADENTRY: wrong returned arguments");

  /* An endpoint that has been freed. */
  ep_t gone;
  en_t gone_name;
  CHECK_RC(AM_AllocateEndpoint(eb, &gone, &gone_name), AM_OK);
  CHECK_RC(AM_Map(ep, gone_entry, gone_name, 77), AM_OK);
  CHECK_RC(AM_FreeEndpoint(gone), AM_OK);
  CHECK_RC(AM_Request0(ep, gone_entry, H_TARGET), AM_OK);
  expect_return(__LINE__, EBADENDPOINT, AM_REQUEST_M, H_TARGET);
  CHECK_RC(AM_UnMap(ep, gone_entry), AM_OK);

  CHECK_RC(AMX_SPMDBarrier(), AM_OK);
  CHECK(target_ran == 0, "a handler ran for a message it must not have received (%d times)", target_ran);
}

/* ---- what handlers may not do ----------------------------------------------------------------------- */

static void misuse_req(void *token) {
  CHECK_RC(AM_Request0(ep, peer, H_WAKE_REQ), AM_ERR_BAD_ARG); /* no requests from handlers */
  CHECK_RC(AM_Reply0(token, H_MISUSE_REP), AM_OK);
  CHECK_RC(AM_Reply0(token, H_MISUSE_REP), AM_ERR_BAD_ARG); /* one reply per request */
}

static void misuse_rep(void *token) {
  CHECK_RC(AM_Reply0(token, H_MISUSE_REP), AM_ERR_BAD_ARG); /* a reply handler may not send */
  ++misuse_done;
}

static void test_bad_arguments(void) {
  unsigned char *big = calloc(1, AMX_LargestMedium() + 1);
  CHECK(big != NULL, "out of memory");
  int32_t words[AM_MaxShort() + 1] = {0};
  int ntrans = 0;
  CHECK_RC(AM_GetNumTranslations(ep, &ntrans), AM_OK);

  CHECK_RC(AM_RequestI0(ep, peer, H_MED_REQ, big, AMX_LargestMedium() + 1), AM_ERR_BAD_ARG);
  CHECK_RC(AM_Request0(NULL, peer, H_WAKE_REQ), AM_ERR_BAD_ARG);
  CHECK_RC(AM_RequestI0(NULL, peer, H_MED_REQ, big, 1), AM_ERR_BAD_ARG);
  CHECK_RC(AM_RequestXfer0(NULL, peer, 0, H_PUT, big, 1), AM_ERR_BAD_ARG);
  CHECK_RC(AM_GetXfer0(NULL, peer, 0, H_GOT, 0, 1), AM_ERR_BAD_ARG);
  CHECK_RC(AM_Request0(ep, -1, H_WAKE_REQ), AM_ERR_BAD_ARG);
  CHECK_RC(AM_Request0(ep, ntrans, H_WAKE_REQ), AM_ERR_BAD_ARG);
  CHECK_RC(AMX_RequestShort(ep, peer, H_WAKE_REQ, AM_MaxShort() + 1, words), AM_ERR_BAD_ARG);
  CHECK_RC(AMX_RequestShort(ep, peer, H_WAKE_REQ, -1, words), AM_ERR_BAD_ARG);
  CHECK_RC(AM_RequestXfer0(ep, peer, 0, H_PUT, NULL, 10), AM_ERR_BAD_ARG);
  CHECK_RC(AM_GetXfer0(ep, peer, 0, H_GOT, SEG_BYTES - 5, 10), AM_ERR_BAD_ARG); /* outside our segment */
  /* Sizes of -1 (2^64 - 1 as size_t), refused at the call site, nothing sent. */
  CHECK_RC(AM_RequestI0(ep, peer, H_MED_REQ, big, (size_t)-1), AM_ERR_BAD_ARG);
  CHECK_RC(AM_RequestXfer0(ep, peer, 0, H_PUT, big, (size_t)-1), AM_ERR_BAD_ARG);
  CHECK_RC(AM_RequestXferAsync0(ep, peer, 0, H_PUT, big, (size_t)-1), AM_ERR_BAD_ARG);
  CHECK_RC(AM_GetXfer0(ep, peer, 0, H_GOT, 0, (size_t)-1), AM_ERR_BAD_ARG);
  CHECK_RC(AM_GetXfer0(ep, peer, 0, H_GOT, UINTPTR_MAX, 1), AM_ERR_BAD_ARG);
  CHECK_RC(AM_Reply0(NULL, H_WAKE_REP), AM_ERR_BAD_ARG);
  CHECK_RC(AM_Poll(NULL), AM_ERR_BAD_ARG);
  CHECK_RC(AM_SetSeg(NULL, big, 1), AM_ERR_BAD_ARG);
  CHECK_RC(AM_SetSeg(ep, NULL, 10), AM_ERR_BAD_ARG);
  CHECK_RC(AM_SetHandler(ep, 99, NULL), AM_ERR_BAD_ARG);
  CHECK_RC(AM_SetHandler(NULL, 99, FN(target)), AM_ERR_BAD_ARG);
  CHECK_RC(AM_SetEventMask(eb, 7), AM_ERR_BAD_ARG);
  CHECK_RC(AM_SetEventMask(eb, AM_NOEVENTS), AM_OK);
  CHECK_RC(AM_WaitSema(eb), AM_ERR_BAD_ARG); /* nothing to wait for: it would never return */
  eb_t b;
  CHECK_RC(AM_AllocateBundle(7, &b), AM_ERR_BAD_ARG);
  CHECK_RC(AM_AllocateBundle(AM_SEQ, NULL), AM_ERR_BAD_ARG);
  CHECK_RC(AM_Map(ep, -1, (en_t){0, 0, 0, 0}, 5), AM_ERR_BAD_ARG);
  CHECK_RC(AM_SetNumTranslations(ep, 0), AM_ERR_BAD_ARG);
  CHECK_RC(AM_SetExpectedResources(ep, 0, 1), AM_ERR_BAD_ARG);
  CHECK_RC(AM_SetExpectedResources(ep, nprocs, 16), AM_OK);
  CHECK_RC(AM_GetSourceEndpoint(NULL, NULL), AM_ERR_BAD_ARG);
  CHECK_RC(AMX_SPMDBroadcast(words, 4, nprocs), AM_ERR_BAD_ARG);
  CHECK_RC(AMX_SPMDAllGather(NULL, NULL, 4), AM_ERR_BAD_ARG);
  free(big);

  /* Inside handlers: no request, one reply, no reply from a reply handler. */
  CHECK_RC(AM_Request0(ep, peer, H_MISUSE_REQ), AM_OK);
  wait_for(&misuse_done, 1);
  CHECK_RC(AMX_SPMDBarrier(), AM_OK);
}

/* ---- AM_WaitSema ------------------------------------------------------------------------------------ */

static void wake_req(void *token) { CHECK_RC(AM_Reply0(token, H_WAKE_REP), AM_OK); }
static void wake_rep(void *token) {
  (void)token;
  ++wakes;
}

/* Each rank asks its peer for a reply and sleeps until messages arrive: its
 * own reply, or the request of the rank before it, which it then serves. */
static void test_wait_sema(void) {
  CHECK_RC(AM_Request0(ep, peer, H_WAKE_REQ), AM_OK);
  while (wakes == 0) {
    CHECK_RC(AM_SetEventMask(eb, AM_NOTEMPTY), AM_OK);
    int mask = -1;
    CHECK_RC(AM_GetEventMask(eb, &mask), AM_OK);
    CHECK(mask == AM_NOTEMPTY, "AM_GetEventMask gave %d", mask);
    CHECK_RC(AM_WaitSema(eb), AM_OK);
    CHECK_RC(AM_GetEventMask(eb, &mask), AM_OK);
    CHECK(mask == AM_NOEVENTS, "the mask did not fall back to AM_NOEVENTS after the event");
    CHECK_RC(AM_Poll(eb), AM_OK);
  }
  CHECK_RC(AMX_SPMDBarrier(), AM_OK);
}

/* ---- SPMD collectives ----------------------------------------------------------------------------------- */

static void test_collectives(void) {
  struct item {
    int32_t rank;
    uint32_t square;
    uint64_t job;
  } mine = {me, (uint32_t)(me * me), 0}, *all = calloc((size_t)nprocs, sizeof *all);
  CHECK(all != NULL, "out of memory");
  CHECK_RC(AMX_SPMDAllGather(&mine, all, sizeof mine), AM_OK);
  for (int r = 0; r < nprocs; ++r)
    CHECK(all[r].rank == r && all[r].square == (uint32_t)(r * r), "AllGather: slot %d holds rank %d", r,
          all[r].rank);
  free(all);

  for (int root = 0; root < nprocs; ++root) {
    unsigned char buf[300];
    if (me == root)
      fill(buf, sizeof buf, 77 + root);
    else
      memset(buf, 0, sizeof buf);
    CHECK_RC(AMX_SPMDBroadcast(buf, sizeof buf, root), AM_OK);
    CHECK(same(buf, sizeof buf, 77 + root), "Broadcast from %d arrived wrong", root);
  }
  CHECK_RC(AMX_SPMDBarrier(), AM_OK);
}

/* ---- statistics ------------------------------------------------------------------------------------------ */

static void test_statistics(void) {
  amx_stats_t s;
  CHECK_RC(AMX_GetEndpointStatistics(ep, &s), AM_OK);
  CHECK(s.RequestsSent[amx_Short] > 0 && s.RequestsSent[amx_Medium] > 0 && s.RequestsSent[amx_Long] > 0,
        "requests sent: %llu short, %llu medium, %llu long", (unsigned long long)s.RequestsSent[0],
        (unsigned long long)s.RequestsSent[1], (unsigned long long)s.RequestsSent[2]);
  CHECK(s.RequestsReceived[AMX_STAT_SHORT] > 0 && s.RequestsReceived[AMX_STAT_MEDIUM] > 0 &&
            s.RequestsReceived[AMX_STAT_LONG] > 0,
        "requests received are missing");
  CHECK(s.RepliesSent[amx_Short] > 0 && s.RepliesSent[amx_Medium] > 0 && s.RepliesSent[amx_Long] > 0,
        "replies sent are missing");
  CHECK(s.RepliesReceived[amx_Short] > 0 && s.RepliesReceived[amx_Medium] > 0 && s.RepliesReceived[amx_Long] > 0,
        "replies received are missing");
  CHECK(s.ReturnedMessages >= 8, "returned: %llu", (unsigned long long)s.ReturnedMessages);
  /* Payload bytes by role and category: shorts carry none; the puts went out as long requests. */
  CHECK(s.RequestDataBytesSent[amx_Short] == 0 && s.ReplyDataBytesSent[amx_Short] == 0,
        "short messages counted payload bytes");
  CHECK(s.RequestDataBytesSent[amx_Long] > PUT_LEN && s.RequestDataBytesSent[amx_Medium] > 0 &&
            s.ReplyDataBytesSent[amx_Medium] > 0 && s.ReplyDataBytesSent[amx_Long] > 0,
        "payload bytes by category are missing");
  CHECK(s.TotalBytesSent == s.RequestTotalBytesSent[0] + s.RequestTotalBytesSent[1] + s.RequestTotalBytesSent[2] +
                                s.ReplyTotalBytesSent[0] + s.ReplyTotalBytesSent[1] + s.ReplyTotalBytesSent[2],
        "TotalBytesSent is not the sum of its parts");
  CHECK(s.DataBytesReceived > PUT_LEN, "payload bytes received are missing");
  CHECK(s.Endpoints == 1, "endpoints: %llu", (unsigned long long)s.Endpoints);

  amx_stats_t sum = AMX_initial_stats;
  CHECK(sum.RequestsSent[0] == 0 && sum.ReturnedMessages == 0 && sum.Endpoints == 0 &&
            sum.RequestMinLatency == (amx_tick_t)-1,
        "AMX_initial_stats is not AMUDP's (zero, with all ones for the minimum latency)");
  CHECK_RC(AMX_AggregateStatistics(&sum, &s), AM_OK);
  CHECK_RC(AMX_AggregateStatistics(&sum, &s), AM_OK);
  CHECK(sum.RequestsSent[1] == 2 * s.RequestsSent[1] && sum.DataBytesReceived == 2 * s.DataBytesReceived &&
            sum.ReplyDataBytesSent[2] == 2 * s.ReplyDataBytesSent[2] && sum.Endpoints == 2,
        "AMX_AggregateStatistics did not add");
  const char *text = AMX_DumpStatistics(NULL, &sum, 1);
  CHECK(text != NULL && strstr(text, "requests sent") != NULL, "AMX_DumpStatistics gave no table");
  if (me == 0) AMX_DumpStatistics(stdout, &s, 0);

  CHECK_RC(AMX_ResetEndpointStatistics(ep), AM_OK);
  CHECK_RC(AMX_GetEndpointStatistics(ep, &s), AM_OK);
  CHECK(s.RequestsSent[0] == 0 && s.TotalBytesSent == 0 && s.RequestDataBytesSent[amx_Long] == 0,
        "AMX_ResetEndpointStatistics did not reset");
}

/* ---- AM_PAR: two threads send and poll one bundle -------------------------------------------------------- */

#define PAR_THREADS 2
#define PAR_PER_THREAD 3000
#define PAR_TAG 0x5eed0000u

static eb_t par_eb;
static ep_t par_ep;
static atomic_int par_served, par_replies, par_bad;
static atomic_llong par_sum;
static int par_expected_served;
static long long par_expected_sum;

static int par_dest(int from, int thread, int k) { return (from + 1 + thread + k) % nprocs; }
static long long par_key(int from, int thread, int k) { return (long long)from * 1000003 + thread * 7919 + k; }

/* Handlers of the AM_PAR endpoint may run on either thread at once: atomics. */
static void par_req(void *token, int32_t from, int32_t thread, int32_t k) {
  int src = -1;
  if (AMX_GetSourceId(token, &src) != AM_OK || src != from) atomic_fetch_add(&par_bad, 1);
  atomic_fetch_add(&par_sum, par_key(from, thread, k));
  atomic_fetch_add(&par_served, 1);
  if (AM_Reply1(token, H_PAR_REP, k) != AM_OK) atomic_fetch_add(&par_bad, 1);
}

static void par_rep(void *token, int32_t k) {
  (void)token;
  (void)k;
  atomic_fetch_add(&par_replies, 1);
}

static void *par_thread(void *arg) {
  const int t = (int)(intptr_t)arg;
  for (int k = 0; k < PAR_PER_THREAD; ++k)
    if (AM_Request3(par_ep, par_dest(me, t, k), H_PAR_REQ, me, t, k) != AM_OK) atomic_fetch_add(&par_bad, 1);
  /* Both threads keep polling until this rank has everything it expects. */
  while (atomic_load(&par_replies) < PAR_THREADS * PAR_PER_THREAD ||
         atomic_load(&par_served) < par_expected_served) {
    if (AM_Poll(par_eb) != AM_OK) atomic_fetch_add(&par_bad, 1);
    sched_yield(); /* 2 cores shared by up to 3 ranks x 2 threads: let the senders run */
  }
  return NULL;
}

static void test_parallel(void) {
  en_t name;
  CHECK_RC(AM_AllocateBundle(AM_PAR, &par_eb), AM_OK);
  CHECK_RC(AM_AllocateEndpoint(par_eb, &par_ep, &name), AM_OK);
  CHECK_RC(AM_SetTag(par_ep, PAR_TAG + (tag_t)me), AM_OK);
  CHECK_RC(AM_SetHandler(par_ep, H_PAR_REQ, FN(par_req)), AM_OK);
  CHECK_RC(AM_SetHandler(par_ep, H_PAR_REP, FN(par_rep)), AM_OK);
  CHECK_RC(AM_SetSeg(par_ep, NULL, 0), AM_OK);
  en_t *names = calloc((size_t)nprocs, sizeof *names);
  CHECK(names != NULL, "out of memory");
  CHECK_RC(AMX_SPMDAllGather(&name, names, sizeof name), AM_OK);
  for (int r = 0; r < nprocs; ++r) CHECK_RC(AM_Map(par_ep, r, names[r], PAR_TAG + (tag_t)r), AM_OK);
  free(names);
  /* A sequential bundle cannot take an endpoint of a parallel one. */
  CHECK_RC(AM_MoveEndpoint(par_ep, par_eb, eb), AM_ERR_BAD_ARG);

  for (int from = 0; from < nprocs; ++from)
    for (int t = 0; t < PAR_THREADS; ++t)
      for (int k = 0; k < PAR_PER_THREAD; ++k)
        if (par_dest(from, t, k) == me) {
          ++par_expected_served;
          par_expected_sum += par_key(from, t, k);
        }
  CHECK_RC(AMX_SPMDBarrier(), AM_OK); /* every rank's parallel endpoint is ready */

  pthread_t threads[PAR_THREADS];
  for (int t = 0; t < PAR_THREADS; ++t)
    CHECK(pthread_create(&threads[t], NULL, par_thread, (void *)(intptr_t)t) == 0, "pthread_create failed");
  for (int t = 0; t < PAR_THREADS; ++t) pthread_join(threads[t], NULL);

  CHECK(atomic_load(&par_bad) == 0, "%d parallel sends, replies or sources failed", atomic_load(&par_bad));
  CHECK(atomic_load(&par_served) == par_expected_served && atomic_load(&par_sum) == par_expected_sum,
        "parallel: served %d requests (expected %d), key sum %lld (expected %lld)", atomic_load(&par_served),
        par_expected_served, (long long)atomic_load(&par_sum), par_expected_sum);
  CHECK(atomic_load(&par_replies) == PAR_THREADS * PAR_PER_THREAD, "parallel: %d replies",
        atomic_load(&par_replies));
  CHECK_RC(AMX_SPMDBarrier(), AM_OK); /* nobody sends to the parallel endpoints any more */
  CHECK_RC(AM_FreeBundle(par_eb), AM_OK);
}

/* ---- setup --------------------------------------------------------------------------------------------------- */

static void test_before_init(void) {
  eb_t b;
  CHECK_RC(AM_AllocateBundle(AM_SEQ, &b), AM_ERR_NOT_INIT);
  CHECK_RC(AM_Terminate(), AM_ERR_NOT_INIT);
  CHECK_RC(AM_Poll(NULL), AM_ERR_NOT_INIT);
  CHECK_RC(AMX_SPMDBarrier(), AM_ERR_NOT_INIT);
  CHECK(AMX_SPMDNumProcs() == -1 && AMX_SPMDMyProc() == -1, "NumProcs/MyProc before startup");
}

static void test_setup_calls(void) {
  int n = 0;
  CHECK_RC(AM_GetNumHandlers(ep, &n), AM_OK);
  CHECK(n == AM_MaxNumHandlers(), "AM_GetNumHandlers: %d", n);
  CHECK_RC(AM_MaxNumTranslations(&n), AM_OK);
  CHECK(n >= nprocs, "AM_MaxNumTranslations: %d", n);
  CHECK(AM_MaxMedium() == 65000 && AM_MaxLong() == 65000 && AM_MaxShort() == 16, "not Berkeley's limits");
  CHECK(AMX_LargestMedium() >= (size_t)AM_MaxMedium() && AMX_LargestLong() >= ((size_t)1 << 32) - 1,
        "the extension's limits are smaller than the standard ones");

  /* Every rank is mapped at its own index, with a real tag. */
  for (int r = 0; r < nprocs; ++r) {
    tag_t t = 0;
    en_t name;
    CHECK_RC(AM_GetTranslationInuse(ep, r), AM_OK);
    CHECK_RC(AM_GetTranslationTag(ep, r, &t), AM_OK);
    CHECK_RC(AM_GetTranslationName(ep, r, &name), AM_OK);
    CHECK(t != AM_NONE && t != AM_ALL && name.rank == (uint32_t)r, "translation %d", r);
  }
  en_t self;
  CHECK_RC(AM_GetTranslationName(ep, me, &self), AM_OK);
  CHECK_RC(AM_Map(ep, me, self, 5), AM_ERR_IN_USE);
  int any = -1;
  CHECK_RC(AM_MapAny(ep, &any, self, 5), AM_OK);
  CHECK(any >= nprocs, "AM_MapAny took entry %d", any);
  CHECK_RC(AM_UnMap(ep, any), AM_OK);
  CHECK_RC(AM_UnMap(ep, any), AM_ERR_BAD_ARG);

  /* A new endpoint starts with AM_NONE; AM_SetTag / AM_GetTag; handler indices. */
  ep_t e2;
  en_t n2;
  tag_t t2 = 99;
  CHECK_RC(AM_AllocateEndpoint(eb, &e2, &n2), AM_OK);
  CHECK_RC(AM_GetTag(e2, &t2), AM_OK);
  CHECK(t2 == AM_NONE, "a new endpoint's tag is %llx", (unsigned long long)t2);
  CHECK_RC(AM_SetTag(e2, 1234), AM_OK);
  CHECK_RC(AM_GetTag(e2, &t2), AM_OK);
  CHECK(t2 == 1234, "AM_SetTag did not stick");
  handler_t h = 0;
  CHECK_RC(AM_SetHandlerAny(e2, &h, FN(target)), AM_OK);
  CHECK(h == 1, "AM_SetHandlerAny took index %d", h);
  CHECK_RC(AM_SetNumHandlers(e2, 1), AM_ERR_IN_USE);
  CHECK_RC(AM_SetNumHandlers(e2, 8), AM_OK);
  CHECK_RC(AM_SetHandler(e2, 9, FN(target)), AM_ERR_BAD_ARG);
  void *a = &h;
  uintptr_t len = 1;
  CHECK_RC(AM_GetSeg(e2, &a, &len), AM_OK);
  CHECK(a == NULL && len == 0, "a new endpoint has a segment");
  eb_t b2;
  CHECK_RC(AM_AllocateBundle(AM_SEQ, &b2), AM_OK);
  CHECK_RC(AM_MoveEndpoint(e2, b2, eb), AM_ERR_BAD_ARG); /* it is not in b2 */
  CHECK_RC(AM_MoveEndpoint(e2, eb, b2), AM_OK);
  CHECK_RC(AM_FreeBundle(b2), AM_OK); /* frees e2 too */

  /* The layer is reference counted. */
  CHECK_RC(AM_Init(), AM_OK);
  CHECK_RC(AM_Terminate(), AM_OK);

  CHECK(AMX_SPMDIsWorker(NULL) != 0, "AMX_SPMDIsWorker");
  CHECK(AMX_SPMDgetenvMaster("PATH") != NULL, "the launcher has no PATH");
  CHECK(AMX_SPMDgetenvMaster("CLUMP_C_API_SURELY_UNSET_VARIABLE") == NULL, "an unset variable has a value");
}

static void set_handlers(void) {
  for (int n = 0; n <= AM_MaxShort(); ++n) {
    CHECK_RC(AM_SetHandler(ep, (handler_t)(H_REQ0 + n), short_requests[n]), AM_OK);
    CHECK_RC(AM_SetHandler(ep, (handler_t)(H_REP0 + n), short_replies[n]), AM_OK);
  }
  const struct {
    handler_t index;
    amx_handler_fn_t fn;
  } table[] = {{0, FN(returned)},          {H_MED_REQ, FN(med_req)},    {H_MED_REP, FN(med_rep)},
               {H_PUT, FN(put_handler)},   {H_PUT_ACK, FN(put_ack)},    {H_ASK_LONG, FN(ask_long)},
               {H_LONG_REP, FN(long_rep)}, {H_GOT, FN(got)},            {H_SELF, FN(self_handler)},
               {H_TARGET, FN(target)},     {H_WAKE_REQ, FN(wake_req)},  {H_WAKE_REP, FN(wake_rep)},
               {H_MISUSE_REQ, FN(misuse_req)}, {H_MISUSE_REP, FN(misuse_rep)}};
  for (size_t i = 0; i < sizeof table / sizeof table[0]; ++i)
    CHECK_RC(AM_SetHandler(ep, table[i].index, table[i].fn), AM_OK);
}

/* ---- ending the job ------------------------------------------------------------------------------------------ */

static void exit_callback(int code) {
  printf("rank %d: exit callback ran with %d\n", me, code);
  fflush(stdout);
}

/* --exit N: the last rank ends the job with N while the others wait in a
 * barrier it never reaches; clumprun must stop them and exit with N.
 * --fatal: the last rank calls AMX_FatalErr. (Run by the c_api_exit and
 * c_api_fatal tests, which check the exit code and the output.) */
static void end_job(const char *how, const char *code) {
  CHECK_RC(AMX_SPMDSetExitCallback(exit_callback), AM_OK);
  CHECK_RC(AMX_SPMDBarrier(), AM_OK);
  if (me == nprocs - 1) {
    if (strcmp(how, "--fatal") == 0) AMX_FatalErr("rank %d gives up (%s)", me, "as asked");
    AMX_SPMDExit(atoi(code));
  }
  AMX_SPMDBarrier(); /* never completes: the job ends first */
  failed(__LINE__, "the barrier completed although rank %d ended the job", nprocs - 1);
}

int main(int argc, char **argv) {
  test_before_init();
  uint64_t job = 0;
  CHECK_RC(AMX_SPMDStartup(&argc, &argv, 0, &job, &eb, &ep), AM_OK);
  CHECK_RC(AMX_SPMDStartup(&argc, &argv, 0, &job, &eb, &ep), AM_ERR_RESOURCE); /* once only */
  me = AMX_SPMDMyProc();
  nprocs = AMX_SPMDNumProcs();
  peer = (me + 1) % nprocs;
  CHECK(me >= 0 && me < nprocs, "rank %d of %d", me, nprocs);
  if (argc > 1) end_job(argv[1], argc > 2 ? argv[2] : "1");

  /* The segment: the program's own memory, as AM-2 programs do it. */
  unsigned char *private_seg = malloc(SEG_BYTES);
  CHECK(private_seg != NULL, "out of memory");
  seg = private_seg;
  CHECK_RC(AM_SetSeg(ep, seg, SEG_BYTES), AM_OK);
  set_handlers();
  test_setup_calls();
  CHECK_RC(AMX_SPMDBarrier(), AM_OK); /* handlers and segments are in place everywhere */

  test_short();
  test_medium();
  test_long(0);
  /* Again into a segment in shared memory: long messages take a single copy. */
  seg = AMX_SegmentAlloc(ep, SEG_BYTES);
  CHECK(seg != NULL, "AMX_SegmentAlloc failed");
  CHECK_RC(AMX_SPMDBarrier(), AM_OK);
  test_long(1);
  test_returns();
  test_bad_arguments();
  test_wait_sema();
  test_collectives();
  test_statistics();
  test_parallel();

  CHECK_RC(AMX_SPMDBarrier(), AM_OK); /* nobody sends to us any more */
  CHECK_RC(AM_Terminate(), AM_OK);
  CHECK_RC(AM_AllocateBundle(AM_SEQ, &eb), AM_ERR_NOT_INIT);
  free(private_seg);
  printf("c_api_conformance rank %d of %d: ok\n", me, nprocs);
  fflush(stdout);
  return 0;
}
