/* am2_misc: the AM-2 setup, token, returned-message, statistics and SPMD
 * calls, checked against what AMX_SPMDStartup set up.
 *
 *   AM2_A=A AM2_ABC=ABC clumprun -n 4 ./am2_misc
 *
 * Sections, in order:
 *  1. SPMD: AMX_ProcessLabel is set; AMX_SPMDgetenvMaster finds AM2_A and
 *     AM2_ABC in clumprun's environment and not AM2_AB; AMX_SPMDSetExitCallback.
 *  2. Setup: the translation table (entry i is rank i: in use, its tag is
 *     rank i's tag, every rank's table holds the same names, free entries
 *     beyond); AM_SetSeg/AM_GetSeg.
 *  3. Tokens: short, medium and long requests from every rank to every rank
 *     (entry i reaches rank i) and their replies; each handler checks
 *     AMX_GetTokenInfo (handler index, category, request or reply),
 *     AM_GetSourceEndpoint (the sender's name), AMX_GetSourceId (its rank),
 *     AM_GetMsgTag and AM_GetDestEndpoint.
 *  4. Statistics: AMX_GetEndpointStatistics counts exactly the messages of
 *     section 3 by category; summed over the ranks (AMX_SPMDAllGather +
 *     AMX_AggregateStatistics) requests and replies sent equal those
 *     received; AMX_DumpStatistics on rank 0.
 *  5. A second bundle and endpoint: AM_AllocateBundle/AM_AllocateEndpoint,
 *     AM_SetTag/AM_GetTag, AM_SetSeg/AM_GetSeg, names exchanged with
 *     AMX_SPMDAllGather, AM_Map/AM_MapAny on the first endpoint, short and
 *     long requests to the next rank's second endpoint and replies from it,
 *     AM_UnMap, then AM_FreeEndpoint/AM_FreeBundle after a barrier.
 *  6. Returned messages (handler 0): a wrong tag (AMX_SetTranslationTag)
 *     gives EBADTAG for short, medium and long requests (opcodes
 *     AM_REQUEST_M, AM_REQUEST_IM, AM_REQUEST_XFER_M) and no byte lands; an
 *     unregistered handler gives EBADHANDLER, for requests and for replies
 *     (AM_REPLY_M, AM_REPLY_IM, AM_REPLY_XFER_M, back at the replier); a long
 *     request outside the segment gives EBADSEGOFF; AMX_GetTokenInfo and
 *     AM_GetSourceEndpoint inside handler 0; the tag restored, a message gets
 *     through; ReturnedMessages counts them.
 */
#include "am2_util.h"

enum {
  H_INFO_S = 1, H_INFO_M, H_INFO_L, H_INFO_SR, H_INFO_MR, H_INFO_LR,
  H_TARGET_S, H_TARGET_M, H_TARGET_L, /* only ever sent with a wrong tag: never run */
  H_BADREPLY, H_PING, H_PONG, H_EP2_ACK,
  H2_S = 20, H2_L,                    /* on the second endpoint */
  H_UNSET = 200, H_UNSET_REPLY = 201  /* never registered */
};

#define MB 1000u  /* medium payloads of section 3 */
#define LB 3000u  /* long payloads of section 3 */
#define SEG2_BYTES 8192u
#define TARGET_BYTES 256u

static uint8_t *seg, *seg2;
static size_t seg_bytes, lrep_base, target_off, bad_handler_off;
static uint8_t *buf, *rbuf;
static en_t *names; /* names[i]: entry i of our table (rank i's endpoint) */
static tag_t my_tag;

static const char *cat_name(int c) {
  return c == amx_Short ? "short" : c == amx_Medium ? "medium" : c == amx_Long ? "long" : "?";
}

/* Checks what a handler of ours on the SPMD endpoint learns from its token. */
static void check_token(void *token, handler_t want_h, amx_category_t want_cat, int want_req, int from) {
  handler_t h = 0;
  amx_category_t cat = amx_NumCategories;
  int is_req = -1;
  CHECK_OK(AMX_GetTokenInfo(token, &h, &cat, &is_req));
  CHECK(h == want_h && cat == want_cat && is_req == want_req,
        "AMX_GetTokenInfo: handler %d, %s, is_req %d; expected handler %d, %s, is_req %d", h, cat_name(cat), is_req,
        want_h, cat_name(want_cat), want_req);
  en_t src;
  CHECK_OK(AM_GetSourceEndpoint(token, &src));
  CHECK(AMX_enEqual(src, names[from]), "handler %d: AM_GetSourceEndpoint is not rank %d's name", want_h, from);
  int id = -1;
  CHECK_OK(AMX_GetSourceId(token, &id));
  CHECK(id == from, "handler %d: AMX_GetSourceId %d, expected %d", want_h, id, from);
  tag_t tag = 0;
  CHECK_OK(AM_GetMsgTag(token, &tag));
  CHECK(tag == my_tag, "handler %d: AM_GetMsgTag %#llx, expected our tag %#llx", want_h, (unsigned long long)tag,
        (unsigned long long)my_tag);
  ep_t dest = NULL;
  CHECK_OK(AM_GetDestEndpoint(token, &dest));
  CHECK(dest == am2.ep, "handler %d: AM_GetDestEndpoint is not our endpoint", want_h);
}

/* ---- section 3: tokens ------------------------------------------------------------ */

static volatile int info_replies;

static uint32_t seed_of(int kind, int from, int to) { return (uint32_t)kind * 1000u + (uint32_t)from * 37u + (uint32_t)to; }

static void info_s(void *token, int32_t from, int32_t idx) {
  check_token(token, H_INFO_S, amx_Short, 1, from);
  CHECK(idx == am2.me, "rank %d reached rank %d through entry %d", (int)from, am2.me, (int)idx);
  CHECK_OK(AM_Reply2(token, H_INFO_SR, am2.me, idx));
}

static void info_sr(void *token, int32_t who, int32_t idx) {
  check_token(token, H_INFO_SR, amx_Short, 0, who);
  CHECK(who == idx, "entry %d answered as rank %d", (int)idx, (int)who);
  ++info_replies;
}

static void info_m(void *token, void *data, size_t nbytes, int32_t from, int32_t idx) {
  check_token(token, H_INFO_M, amx_Medium, 1, from);
  CHECK(idx == am2.me, "rank %d reached rank %d through entry %d", (int)from, am2.me, (int)idx);
  CHECK(nbytes == MB && am2_verify(data, nbytes, seed_of(1, from, am2.me)) == AM2_GOOD,
        "medium request from %d: %zu bytes or their contents wrong", (int)from, nbytes);
  am2_fill(rbuf, MB, seed_of(2, am2.me, from));
  CHECK_OK(AM_ReplyI2(token, H_INFO_MR, rbuf, MB, am2.me, idx));
}

static void info_mr(void *token, void *data, size_t nbytes, int32_t who, int32_t idx) {
  check_token(token, H_INFO_MR, amx_Medium, 0, who);
  CHECK(who == idx, "entry %d answered as rank %d", (int)idx, (int)who);
  CHECK(nbytes == MB && am2_verify(data, nbytes, seed_of(2, who, am2.me)) == AM2_GOOD,
        "medium reply from %d: %zu bytes or their contents wrong", (int)who, nbytes);
  ++info_replies;
}

static void info_l(void *token, void *data, size_t nbytes, int32_t from, int32_t idx) {
  check_token(token, H_INFO_L, amx_Long, 1, from);
  CHECK(idx == am2.me, "rank %d reached rank %d through entry %d", (int)from, am2.me, (int)idx);
  uint8_t *where = seg + (size_t)from * LB;
  CHECK(data == where, "long request from %d: the handler got %p, expected %p", (int)from, data, (void *)where);
  CHECK(nbytes == LB && am2_verify(where, nbytes, seed_of(3, from, am2.me)) == AM2_GOOD,
        "long request from %d: %zu bytes or their contents wrong", (int)from, nbytes);
  am2_fill(rbuf, LB, seed_of(4, am2.me, from));
  CHECK_OK(AM_ReplyXfer2(token, lrep_base + (size_t)am2.me * LB, H_INFO_LR, rbuf, LB, am2.me, idx));
}

static void info_lr(void *token, void *data, size_t nbytes, int32_t who, int32_t idx) {
  check_token(token, H_INFO_LR, amx_Long, 0, who);
  CHECK(who == idx, "entry %d answered as rank %d", (int)idx, (int)who);
  uint8_t *where = seg + lrep_base + (size_t)who * LB;
  CHECK(data == where, "long reply from %d: the handler got %p, expected %p", (int)who, data, (void *)where);
  CHECK(nbytes == LB && am2_verify(where, nbytes, seed_of(4, who, am2.me)) == AM2_GOOD,
        "long reply from %d: %zu bytes or their contents wrong", (int)who, nbytes);
  ++info_replies;
}

/* ---- section 5: the second endpoint -------------------------------------------------- */

static eb_t eb2;
static ep_t ep2;
static tag_t tag2;
static en_t *names2;  /* every rank's second endpoint */
static int *idx2;     /* where our SPMD endpoint maps them */
static volatile int ep2_requests, ep2_acks;

static void check_ep2_token(void *token, handler_t want_h, amx_category_t want_cat, int from) {
  handler_t h = 0;
  amx_category_t cat = amx_NumCategories;
  int is_req = -1;
  CHECK_OK(AMX_GetTokenInfo(token, &h, &cat, &is_req));
  CHECK(h == want_h && cat == want_cat && is_req == 1, "second endpoint: AMX_GetTokenInfo: handler %d, %s, is_req %d",
        h, cat_name(cat), is_req);
  ep_t dest = NULL;
  CHECK_OK(AM_GetDestEndpoint(token, &dest));
  CHECK(dest == ep2, "second endpoint: AM_GetDestEndpoint is not the second endpoint");
  tag_t tag = 0;
  CHECK_OK(AM_GetMsgTag(token, &tag));
  CHECK(tag == tag2, "second endpoint: AM_GetMsgTag %#llx, expected %#llx", (unsigned long long)tag,
        (unsigned long long)tag2);
  en_t src;
  CHECK_OK(AM_GetSourceEndpoint(token, &src));
  CHECK(AMX_enEqual(src, names[from]), "second endpoint: AM_GetSourceEndpoint is not rank %d's name", from);
  /* The second endpoint has no translations: nothing names the sender. */
  int id = 7;
  CHECK_RC(AMX_GetSourceId(token, &id), AM_ERR_RESOURCE);
  CHECK(id == -1, "second endpoint: AMX_GetSourceId gave %d, expected -1", id);
}

static void h2_s(void *token, int32_t from, int32_t x) {
  check_ep2_token(token, H2_S, amx_Short, from);
  CHECK(x == 1000 + from, "second endpoint: short request from %d carried %d", (int)from, (int)x);
  ++ep2_requests;
  CHECK_OK(AM_Reply1(token, H_EP2_ACK, x));
}

static void h2_l(void *token, void *data, size_t nbytes, int32_t from, int32_t x) {
  check_ep2_token(token, H2_L, amx_Long, from);
  CHECK(data == seg2 + 100, "second endpoint: long request landed at %p, expected %p", data, (void *)(seg2 + 100));
  CHECK(nbytes == 5000 && am2_verify(data, nbytes, seed_of(5, from, am2.me)) == AM2_GOOD,
        "second endpoint: long request from %d: %zu bytes or their contents wrong", (int)from, nbytes);
  ++ep2_requests;
  CHECK_OK(AM_Reply1(token, H_EP2_ACK, x));
}

static void ep2_ack(void *token, int32_t x) {
  const int next = (am2.me + 1) % am2.np;
  en_t src;
  CHECK_OK(AM_GetSourceEndpoint(token, &src));
  CHECK(AMX_enEqual(src, names2[next]), "the reply did not come from rank %d's second endpoint", next);
  int id = -1;
  CHECK_OK(AMX_GetSourceId(token, &id));
  CHECK(id == idx2[next], "AMX_GetSourceId gave %d for rank %d's second endpoint, mapped at %d", id, next, idx2[next]);
  CHECK(x == 1000 + am2.me, "the second endpoint answered %d", (int)x);
  ++ep2_acks;
}

/* Polls both bundles until `cond` holds. */
#define WAIT_BOTH(cond)                                                          \
  do {                                                                           \
    double t0_ = am2_now_us();                                                   \
    while (!(cond)) {                                                            \
      AM_Poll(am2.eb);                                                           \
      AM_Poll(eb2);                                                              \
      sched_yield();                                                             \
      CHECK(am2_now_us() - t0_ < AM2_WAIT_LIMIT_US, "timed out waiting until %s", #cond); \
    }                                                                            \
  } while (0)

/* ---- section 6: returned messages ------------------------------------------------- */

typedef struct {
  int status, opcode, is_req, src_id;
  handler_t handler;
  amx_category_t cat;
  en_t src;
  ep_t dest;
} returned_t;

#define MAX_RET 32
static returned_t rets[MAX_RET];
static volatile int nret;
static volatile int target_ran, pongs;

static void handler0(int status, op_t opcode, void *token) {
  CHECK(nret < MAX_RET, "too many returned messages");
  returned_t *r = &rets[nret];
  r->status = status;
  r->opcode = opcode;
  CHECK_OK(AMX_GetTokenInfo(token, &r->handler, &r->cat, &r->is_req));
  CHECK_OK(AM_GetSourceEndpoint(token, &r->src));
  CHECK_OK(AM_GetDestEndpoint(token, &r->dest));
  r->src_id = -1;
  CHECK_OK(AMX_GetSourceId(token, &r->src_id));
  ++nret;
}

static void target_s(void *token, int32_t a) {
  (void)token;
  (void)a;
  ++target_ran;
}
static void target_ml(void *token, void *data, size_t nbytes, int32_t a) {
  (void)token;
  (void)data;
  (void)nbytes;
  (void)a;
  ++target_ran;
}

/* Answers with a reply to a handler the requester never registered. */
static void bad_reply(void *token, int32_t kind) {
  int rc = -1;
  if (kind == 0) rc = AM_Reply1(token, H_UNSET_REPLY, 5);
  if (kind == 1) rc = AM_ReplyI1(token, H_UNSET_REPLY, rbuf, 10, 5);
  if (kind == 2) rc = AM_ReplyXfer1(token, bad_handler_off, H_UNSET_REPLY, rbuf, 10, 5);
  CHECK(rc == AM_OK, "reply of kind %d returned %d", (int)kind, rc);
}

static void ping_h(void *token, int32_t v) { CHECK_OK(AM_Reply1(token, H_PONG, v + 1)); }
static void pong_h(void *token, int32_t v) {
  (void)token;
  CHECK(v == 78, "pong carried %d", (int)v);
  ++pongs;
}

static const char *op_name(int op) {
  switch (op) {
    case AM_REQUEST_M: return "AM_REQUEST_M";
    case AM_REQUEST_IM: return "AM_REQUEST_IM";
    case AM_REQUEST_XFER_M: return "AM_REQUEST_XFER_M";
    case AM_REPLY_M: return "AM_REPLY_M";
    case AM_REPLY_IM: return "AM_REPLY_IM";
    case AM_REPLY_XFER_M: return "AM_REPLY_XFER_M";
  }
  return "?";
}

/* Checks a returned message: why, what, and whom it was for. */
static void check_returned(const returned_t *r, const char *what, int status, int opcode, handler_t h, int to) {
  const amx_category_t cat = (opcode == AM_REQUEST_M || opcode == AM_REPLY_M)     ? amx_Short
                             : (opcode == AM_REQUEST_IM || opcode == AM_REPLY_IM) ? amx_Medium
                                                                                  : amx_Long;
  const int is_req = opcode <= AM_REQUEST_XFER_M;
  CHECK(r->status == status, "%s: status %d, expected %d", what, r->status, status);
  CHECK(r->opcode == opcode, "%s: opcode %d (%s), expected %s", what, r->opcode, op_name(r->opcode), op_name(opcode));
  CHECK(r->handler == h && r->cat == cat && r->is_req == is_req,
        "%s: AMX_GetTokenInfo in handler 0: handler %d, %s, is_req %d; expected handler %d, %s, is_req %d", what,
        r->handler, cat_name(r->cat), r->is_req, h, cat_name(cat), is_req);
  CHECK(AMX_enEqual(r->src, names[to]), "%s: AM_GetSourceEndpoint in handler 0 is not rank %d's name", what, to);
  CHECK(r->src_id == to, "%s: AMX_GetSourceId in handler 0 gave %d, expected %d", what, r->src_id, to);
  CHECK(r->dest == am2.ep, "%s: AM_GetDestEndpoint in handler 0 is not our endpoint", what);
}

/* Sends one request that must come back, and checks why. */
#define EXPECT_RETURN(send, what, status, opcode, h)                  \
  do {                                                                \
    const int n_ = nret;                                              \
    CHECK_OK(send);                                                   \
    WAIT_UNTIL(nret == n_ + 1);                                       \
    check_returned(&rets[n_], what, status, opcode, h, peer);         \
  } while (0)

static void exit_callback(int code) {
  printf("am2_misc: rank %d: exit callback ran with code %d\n", am2.me, code);
  fflush(stdout);
}

int main(int argc, char **argv) {
  am2_startup(&argc, &argv, "am2_misc");
  const int np = am2.np, me = am2.me, peer = (me + 1) % np, prev = (me + np - 1) % np;
  ep_t ep = am2.ep;

  /* ---- 1. SPMD ---- */
  CHECK(AMX_ProcessLabel != NULL && AMX_ProcessLabel[0] != '\0', "AMX_ProcessLabel is not set after startup");
  const char *a = AMX_SPMDgetenvMaster("AM2_A");
  const char *abc = AMX_SPMDgetenvMaster("AM2_ABC");
  const char *ab = AMX_SPMDgetenvMaster("AM2_AB");
  CHECK(a != NULL && strcmp(a, "A") == 0, "AMX_SPMDgetenvMaster(\"AM2_A\") is %s, expected A", a ? a : "NULL");
  CHECK(abc != NULL && strcmp(abc, "ABC") == 0, "AMX_SPMDgetenvMaster(\"AM2_ABC\") is %s, expected ABC",
        abc ? abc : "NULL");
  CHECK(ab == NULL, "AMX_SPMDgetenvMaster(\"AM2_AB\") is %s, expected NULL", ab);
  CHECK_OK(AMX_SPMDSetExitCallback(exit_callback));

  /* ---- 2. setup ---- */
  lrep_base = (size_t)np * LB;
  target_off = 2 * lrep_base;
  bad_handler_off = target_off + TARGET_BYTES;
  seg_bytes = bad_handler_off + 1024;
  seg = (uint8_t *)am2_malloc(seg_bytes);
  memset(seg, 0, seg_bytes);
  buf = (uint8_t *)am2_malloc(8192);
  rbuf = (uint8_t *)am2_malloc(8192);
  memset(rbuf, 0, 8192);
  CHECK_OK(AM_SetSeg(ep, seg, seg_bytes));
  void *got_seg = NULL;
  uintptr_t got_len = 0;
  CHECK_OK(AM_GetSeg(ep, &got_seg, &got_len));
  CHECK(got_seg == seg && got_len == seg_bytes, "AM_GetSeg gave %p, %lu; AM_SetSeg set %p, %zu", got_seg,
        (unsigned long)got_len, (void *)seg, seg_bytes);

  CHECK_OK(AM_GetTag(ep, &my_tag));
  tag_t *tags = (tag_t *)am2_malloc(sizeof(tag_t) * (size_t)np);
  CHECK_OK(AMX_SPMDAllGather(&my_tag, tags, sizeof my_tag));
  int ntrans = 0;
  CHECK_OK(AM_GetNumTranslations(ep, &ntrans));
  CHECK(ntrans >= np, "AM_GetNumTranslations gave %d for %d ranks", ntrans, np);
  names = (en_t *)am2_malloc(sizeof(en_t) * (size_t)np);
  for (int i = 0; i < np; ++i) {
    CHECK_RC(AM_GetTranslationInuse(ep, i), AM_OK);
    CHECK_OK(AM_GetTranslationName(ep, i, &names[i]));
    tag_t t = 0;
    CHECK_OK(AM_GetTranslationTag(ep, i, &t));
    CHECK(t == tags[i], "entry %d sends with tag %#llx; rank %d's tag is %#llx", i, (unsigned long long)t, i,
          (unsigned long long)tags[i]);
  }
  for (int i = np; i < ntrans && i < np + 8; ++i) CHECK_RC(AM_GetTranslationInuse(ep, i), AM_ERR_RESOURCE);
  /* Every rank's table names the same endpoints. */
  en_t *all_names = (en_t *)am2_malloc(sizeof(en_t) * (size_t)np * (size_t)np);
  CHECK_OK(AMX_SPMDAllGather(names, all_names, sizeof(en_t) * (size_t)np));
  for (int r = 0; r < np; ++r)
    for (int i = 0; i < np; ++i)
      CHECK(AMX_enEqual(all_names[r * np + i], names[i]), "rank %d's entry %d names another endpoint than ours", r, i);
  for (int i = 0; i < np; ++i)
    for (int j = i + 1; j < np; ++j) CHECK(!AMX_enEqual(names[i], names[j]), "entries %d and %d name the same endpoint", i, j);
  free(all_names);

  CHECK_OK(AM_SetHandler(ep, 0, handler0));
  CHECK_OK(AM_SetHandler(ep, H_INFO_S, info_s));
  CHECK_OK(AM_SetHandler(ep, H_INFO_M, info_m));
  CHECK_OK(AM_SetHandler(ep, H_INFO_L, info_l));
  CHECK_OK(AM_SetHandler(ep, H_INFO_SR, info_sr));
  CHECK_OK(AM_SetHandler(ep, H_INFO_MR, info_mr));
  CHECK_OK(AM_SetHandler(ep, H_INFO_LR, info_lr));
  CHECK_OK(AM_SetHandler(ep, H_TARGET_S, target_s));
  CHECK_OK(AM_SetHandler(ep, H_TARGET_M, target_ml));
  CHECK_OK(AM_SetHandler(ep, H_TARGET_L, target_ml));
  CHECK_OK(AM_SetHandler(ep, H_BADREPLY, bad_reply));
  CHECK_OK(AM_SetHandler(ep, H_PING, ping_h));
  CHECK_OK(AM_SetHandler(ep, H_PONG, pong_h));
  CHECK_OK(AM_SetHandler(ep, H_EP2_ACK, ep2_ack));
  /* The counters before section 3, read before the barrier: the barrier runs
   * handlers, and ranks that leave it first send to us at once. */
  amx_stats_t s0, s1;
  CHECK_OK(AMX_GetEndpointStatistics(ep, &s0));
  CHECK_OK(AMX_SPMDBarrier());

  /* ---- 3. tokens ---- */
  for (int d = 0; d < np; ++d) {
    const int i = (me + d) % np;
    CHECK_OK(AM_Request2(ep, i, H_INFO_S, me, i));
    am2_fill(buf, MB, seed_of(1, me, i));
    CHECK_OK(AM_RequestI2(ep, i, H_INFO_M, buf, MB, me, i));
    am2_fill(buf, LB, seed_of(3, me, i));
    CHECK_OK(AM_RequestXfer2(ep, i, (uintptr_t)me * LB, H_INFO_L, buf, LB, me, i));
  }
  WAIT_UNTIL(info_replies == 3 * np);
  CHECK_OK(AMX_SPMDBarrier()); /* everyone's requests to us have been answered */

  /* ---- 4. statistics ---- */
  CHECK_OK(AMX_GetEndpointStatistics(ep, &s1));
  const uint64_t unp = (uint64_t)np;
  for (int k = 0; k < amx_NumCategories; ++k) {
    CHECK(s1.RequestsSent[k] - s0.RequestsSent[k] == unp, "%s requests sent: %llu, expected %llu", cat_name(k),
          (unsigned long long)(s1.RequestsSent[k] - s0.RequestsSent[k]), (unsigned long long)unp);
    CHECK(s1.RequestsReceived[k] - s0.RequestsReceived[k] == unp, "%s requests received: %llu, expected %llu",
          cat_name(k), (unsigned long long)(s1.RequestsReceived[k] - s0.RequestsReceived[k]), (unsigned long long)unp);
    CHECK(s1.RepliesSent[k] - s0.RepliesSent[k] == unp, "%s replies sent: %llu, expected %llu", cat_name(k),
          (unsigned long long)(s1.RepliesSent[k] - s0.RepliesSent[k]), (unsigned long long)unp);
    CHECK(s1.RepliesReceived[k] - s0.RepliesReceived[k] == unp, "%s replies received: %llu, expected %llu",
          cat_name(k), (unsigned long long)(s1.RepliesReceived[k] - s0.RepliesReceived[k]), (unsigned long long)unp);
  }
  CHECK(s1.RequestDataBytesSent[amx_Medium] - s0.RequestDataBytesSent[amx_Medium] == unp * MB &&
            s1.RequestDataBytesSent[amx_Long] - s0.RequestDataBytesSent[amx_Long] == unp * LB &&
            s1.ReplyDataBytesSent[amx_Medium] - s0.ReplyDataBytesSent[amx_Medium] == unp * MB &&
            s1.ReplyDataBytesSent[amx_Long] - s0.ReplyDataBytesSent[amx_Long] == unp * LB,
        "payload bytes sent: requests %llu medium, %llu long; replies %llu medium, %llu long; expected %llu and %llu",
        (unsigned long long)(s1.RequestDataBytesSent[amx_Medium] - s0.RequestDataBytesSent[amx_Medium]),
        (unsigned long long)(s1.RequestDataBytesSent[amx_Long] - s0.RequestDataBytesSent[amx_Long]),
        (unsigned long long)(s1.ReplyDataBytesSent[amx_Medium] - s0.ReplyDataBytesSent[amx_Medium]),
        (unsigned long long)(s1.ReplyDataBytesSent[amx_Long] - s0.ReplyDataBytesSent[amx_Long]),
        (unsigned long long)(unp * MB), (unsigned long long)(unp * LB));
  CHECK(s1.ReturnedMessages == s0.ReturnedMessages, "%llu messages returned",
        (unsigned long long)(s1.ReturnedMessages - s0.ReturnedMessages));
  amx_stats_t *all_stats = (amx_stats_t *)am2_malloc(sizeof(amx_stats_t) * (size_t)np);
  CHECK_OK(AMX_SPMDAllGather(&s1, all_stats, sizeof s1));
  amx_stats_t sum = AMX_initial_stats;
  for (int r = 0; r < np; ++r) CHECK_OK(AMX_AggregateStatistics(&sum, &all_stats[r]));
  uint64_t total_req = 0;
  for (int k = 0; k < amx_NumCategories; ++k) {
    CHECK(sum.RequestsSent[k] == sum.RequestsReceived[k], "over the job: %llu %s requests sent, %llu received",
          (unsigned long long)sum.RequestsSent[k], cat_name(k), (unsigned long long)sum.RequestsReceived[k]);
    CHECK(sum.RepliesSent[k] == sum.RepliesReceived[k], "over the job: %llu %s replies sent, %llu received",
          (unsigned long long)sum.RepliesSent[k], cat_name(k), (unsigned long long)sum.RepliesReceived[k]);
    total_req += sum.RequestsSent[k];
  }
  CHECK(total_req >= 3 * unp * unp, "over the job: %llu requests sent, at least %llu expected",
        (unsigned long long)total_req, (unsigned long long)(3 * unp * unp));
  if (me == 0) {
    const char *dump = AMX_DumpStatistics(stdout, &sum, 1);
    CHECK(dump != NULL && dump[0] != '\0', "AMX_DumpStatistics returned %s", dump ? "an empty string" : "NULL");
    fflush(stdout);
  }
  free(all_stats);

  /* ---- 5. a second bundle and endpoint ---- */
  en_t name2;
  CHECK_OK(AM_AllocateBundle(AM_SEQ, &eb2));
  CHECK_OK(AM_AllocateEndpoint(eb2, &ep2, &name2));
  tag_t t2 = 99;
  CHECK_OK(AM_GetTag(ep2, &t2));
  CHECK(t2 == AM_NONE, "a new endpoint's tag is %#llx, expected AM_NONE", (unsigned long long)t2);
  tag2 = 0xA2A2000000000000ull + (tag_t)me * 0x100 + 0x17;
  CHECK_OK(AM_SetTag(ep2, tag2));
  CHECK_OK(AM_GetTag(ep2, &t2));
  CHECK(t2 == tag2, "AM_GetTag gave %#llx after AM_SetTag %#llx", (unsigned long long)t2, (unsigned long long)tag2);
  seg2 = (uint8_t *)am2_malloc(SEG2_BYTES);
  CHECK_OK(AM_SetSeg(ep2, seg2, SEG2_BYTES));
  CHECK_OK(AM_GetSeg(ep2, &got_seg, &got_len));
  CHECK(got_seg == seg2 && got_len == SEG2_BYTES, "AM_GetSeg on the second endpoint gave %p, %lu", got_seg,
        (unsigned long)got_len);
  CHECK_OK(AM_SetHandler(ep2, H2_S, h2_s));
  CHECK_OK(AM_SetHandler(ep2, H2_L, h2_l));
  names2 = (en_t *)am2_malloc(sizeof(en_t) * (size_t)np);
  tag_t *tags2 = (tag_t *)am2_malloc(sizeof(tag_t) * (size_t)np);
  idx2 = (int *)am2_malloc(sizeof(int) * (size_t)np);
  CHECK_OK(AMX_SPMDAllGather(&name2, names2, sizeof name2));
  CHECK_OK(AMX_SPMDAllGather(&tag2, tags2, sizeof tag2));
  CHECK(AMX_enEqual(names2[me], name2), "AMX_SPMDAllGather lost our name");
  for (int r = 0; r < np; ++r)
    CHECK(!AMX_enEqual(names2[r], names[r]), "rank %d's second endpoint has the name of its first", r);
  if (ntrans < 2 * np + 1) {
    CHECK_OK(AM_SetNumTranslations(ep, 2 * np + 1));
    ntrans = 2 * np + 1;
  }
  /* Entries np.. by AM_Map for even ranks, AM_MapAny for odd ones. */
  for (int r = 0; r < np; ++r) {
    if (r % 2 == 0) {
      idx2[r] = np + r;
      CHECK_OK(AM_Map(ep, idx2[r], names2[r], tags2[r]));
    } else {
      idx2[r] = -1;
      CHECK_OK(AM_MapAny(ep, &idx2[r], names2[r], tags2[r]));
      CHECK(idx2[r] >= np && idx2[r] < ntrans, "AM_MapAny chose entry %d", idx2[r]);
      for (int q = 0; q < r; ++q) CHECK(idx2[q] != idx2[r], "AM_MapAny chose entry %d, in use", idx2[r]);
    }
    CHECK_RC(AM_GetTranslationInuse(ep, idx2[r]), AM_OK);
    en_t n;
    tag_t t;
    CHECK_OK(AM_GetTranslationName(ep, idx2[r], &n));
    CHECK_OK(AM_GetTranslationTag(ep, idx2[r], &t));
    CHECK(AMX_enEqual(n, names2[r]) && t == tags2[r], "entry %d does not hold what AM_Map put there", idx2[r]);
  }
  AMX_VerboseErrors = 0; /* the next call fails on purpose */
  CHECK(AM_Map(ep, idx2[0], names2[0], tags2[0]) != AM_OK, "AM_Map on an entry in use succeeded");
  AMX_VerboseErrors = 1;
  CHECK_OK(AMX_SPMDBarrier()); /* every second endpoint is ready */
  CHECK_OK(AM_Request2(ep, idx2[peer], H2_S, me, 1000 + me));
  am2_fill(buf, 5000, seed_of(5, me, peer));
  CHECK_OK(AM_RequestXfer2(ep, idx2[peer], 100, H2_L, buf, 5000, me, 1000 + me));
  WAIT_BOTH(ep2_acks == 2 && ep2_requests == 2);
  for (int r = 0; r < np; ++r) {
    CHECK_OK(AM_UnMap(ep, idx2[r]));
    CHECK_RC(AM_GetTranslationInuse(ep, idx2[r]), AM_ERR_RESOURCE);
  }
  CHECK_OK(AMX_SPMDBarrier()); /* nobody sends to the second endpoints any more */
  CHECK_OK(AM_FreeEndpoint(ep2));
  CHECK_OK(AM_FreeBundle(eb2));
  free(tags2);

  /* ---- 6. returned messages ---- */
  amx_stats_t r0, r1;
  CHECK_OK(AMX_GetEndpointStatistics(ep, &r0));
  tag_t saved = 0;
  CHECK_OK(AM_GetTranslationTag(ep, peer, &saved));
  CHECK(saved != AM_ALL && saved != AM_NONE, "rank %d's tag is %#llx", peer, (unsigned long long)saved);
  tag_t wrong = saved ^ 0x5A5A5A5A5A5A5A5Aull;
  if (wrong == AM_ALL || wrong == AM_NONE) wrong = saved + 2;
  CHECK_OK(AMX_SetTranslationTag(ep, peer, wrong));
  tag_t t = 0;
  CHECK_OK(AM_GetTranslationTag(ep, peer, &t));
  CHECK(t == wrong, "AMX_SetTranslationTag did not change the entry's tag");
  am2_fill(buf, TARGET_BYTES, 77);
  EXPECT_RETURN(AM_Request1(ep, peer, H_TARGET_S, 1), "short request with a wrong tag", EBADTAG, AM_REQUEST_M,
                H_TARGET_S);
  EXPECT_RETURN(AM_RequestI1(ep, peer, H_TARGET_M, buf, 100, 2), "medium request with a wrong tag", EBADTAG,
                AM_REQUEST_IM, H_TARGET_M);
  EXPECT_RETURN(AM_RequestXfer1(ep, peer, target_off, H_TARGET_L, buf, TARGET_BYTES, 3),
                "long request with a wrong tag", EBADTAG, AM_REQUEST_XFER_M, H_TARGET_L);
  CHECK_OK(AMX_SetTranslationTag(ep, peer, saved));
  CHECK_OK(AM_Request1(ep, peer, H_PING, 77));
  WAIT_UNTIL(pongs == 1);

  EXPECT_RETURN(AM_Request2(ep, peer, H_UNSET, 1, 2), "short request to an unregistered handler", EBADHANDLER,
                AM_REQUEST_M, H_UNSET);
  EXPECT_RETURN(AM_RequestI0(ep, peer, H_UNSET, buf, 100), "medium request to an unregistered handler", EBADHANDLER,
                AM_REQUEST_IM, H_UNSET);
  EXPECT_RETURN(AM_RequestXfer1(ep, peer, bad_handler_off, H_UNSET, buf, 100, 3),
                "long request to an unregistered handler", EBADHANDLER, AM_REQUEST_XFER_M, H_UNSET);
  EXPECT_RETURN(AM_RequestXfer1(ep, peer, seg_bytes - 10, H_TARGET_L, buf, 100, 4),
                "long request across the end of the segment", EBADSEGOFF, AM_REQUEST_XFER_M, H_TARGET_L);
  EXPECT_RETURN(AM_RequestXfer1(ep, peer, seg_bytes + 1000, H_TARGET_L, buf, 10, 5),
                "long request beyond the segment", EBADSEGOFF, AM_REQUEST_XFER_M, H_TARGET_L);
  CHECK_OK(AMX_SPMDBarrier());

  CHECK_OK(AMX_GetEndpointStatistics(ep, &r1));
  CHECK(r1.ReturnedMessages - r0.ReturnedMessages == (uint64_t)nret,
        "ReturnedMessages went up by %llu; handler 0 ran %d times", (unsigned long long)(r1.ReturnedMessages - r0.ReturnedMessages),
        (int)nret);
  CHECK(nret == 8, "handler 0 ran %d times, expected 8", (int)nret);
  CHECK(target_ran == 0, "a handler that only messages with a wrong tag or bad offset name ran %d times",
        (int)target_ran);
  for (size_t i = 0; i < TARGET_BYTES; ++i)
    CHECK(seg[target_off + i] == 0, "byte %zu of a long request with a wrong tag landed in our segment", i);
  /* Read before the barrier: it runs handlers, and a rank that leaves it
   * first asks us for bad replies at once, whose returns may reach us while
   * we are still in it. */
  const int before = nret;
  CHECK_OK(AMX_SPMDBarrier());

  /* Replies to an unregistered handler come back to the replier: we get
   * those of our replies to `prev`. */
  for (int kind = 0; kind < 3; ++kind) CHECK_OK(AM_Request1(ep, peer, H_BADREPLY, kind));
  /* (Last, so that everything above is checked whatever happens here.) */
  const double t_wait = am2_now_us();
  while (nret < before + 3 && am2_now_us() - t_wait < 3e6) {
    AM_Poll(am2.eb);
    sched_yield();
  }
  CHECK(nret == before + 3,
        "%d of the 3 replies (short, medium, long) to an unregistered handler came back to our handler 0 in 3 s",
        (int)nret - before);
  int seen[3] = {0, 0, 0};
  for (int i = before; i < before + 3; ++i) {
    const int op = rets[i].opcode;
    CHECK(op == AM_REPLY_M || op == AM_REPLY_IM || op == AM_REPLY_XFER_M, "a reply came back with opcode %d (%s)", op,
          op_name(op));
    ++seen[op - AM_REPLY_M];
    char what[64];
    snprintf(what, sizeof what, "%s to an unregistered handler", op_name(op));
    const returned_t r = rets[i];
    CHECK(r.status == EBADHANDLER, "%s: status %d, expected EBADHANDLER", what, r.status);
    CHECK(r.handler == H_UNSET_REPLY && r.is_req == 0 &&
              r.cat == (op == AM_REPLY_M ? amx_Short : op == AM_REPLY_IM ? amx_Medium : amx_Long),
          "%s: AMX_GetTokenInfo in handler 0: handler %d, %s, is_req %d", what, r.handler, cat_name(r.cat), r.is_req);
    CHECK(AMX_enEqual(r.src, names[prev]), "%s: AM_GetSourceEndpoint in handler 0 is not rank %d's name", what, prev);
    CHECK(r.src_id == prev, "%s: AMX_GetSourceId in handler 0 gave %d, expected %d", what, r.src_id, prev);
  }
  CHECK(seen[0] == 1 && seen[1] == 1 && seen[2] == 1, "returned replies: %d short, %d medium, %d long", seen[0],
        seen[1], seen[2]);
  CHECK_OK(AMX_SPMDBarrier()); /* every message of this section has been handled */
  CHECK_OK(AMX_GetEndpointStatistics(ep, &r1));
  CHECK(r1.ReturnedMessages - r0.ReturnedMessages == (uint64_t)nret,
        "ReturnedMessages went up by %llu; handler 0 ran %d times",
        (unsigned long long)(r1.ReturnedMessages - r0.ReturnedMessages), (int)nret);

  am2_finish();
}
