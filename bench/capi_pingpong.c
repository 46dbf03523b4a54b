/* The AM-2 C API side of bench/pingpong (see capi_pingpong.h). Written as an
 * AM-2 program would be: handlers registered without casts, Berkeley's macros. */

#include "capi_pingpong.h"

#include <clump/am.h>

#include <stdlib.h>
#include <string.h>

enum { H_PING = 1, H_PONG, H_STOP, H_SINK, H_FLUSH, H_COUNT };

static eb_t eb;
static ep_t ep;
static int serving;
static int done;
static int32_t got[2];
static uint64_t sunk;        /* long messages counted since the last flush */
static int counted;          /* the flush's answer arrived */
static int32_t count_got;
static void *segment;        /* this rank's private segment (malloc) */
static const void *payload;  /* rank 0's source buffer */

static void ping(void *token, int32_t a, int32_t b) { AM_Reply2(token, H_PONG, a, b); }

static void pong(void *token, int32_t a, int32_t b) {
  (void)token;
  got[0] = a;
  got[1] = b;
  done = 1;
}

static void stop(void *token) {
  (void)token;
  serving = 0;
}

static void sink(void *token, void *buf, size_t nbytes) {
  (void)token;
  (void)buf;
  (void)nbytes;
  ++sunk;
}

static void flush(void *token) {
  const int32_t n = (int32_t)sunk;
  sunk = 0;
  AM_Reply1(token, H_COUNT, n);
}

static void count(void *token, int32_t n) {
  (void)token;
  count_got = n;
  counted = 1;
}

int capi_start(int *argc, char ***argv) {
  uint64_t job = 0;
  int rc = AMX_SPMDStartup(argc, argv, 0, &job, &eb, &ep);
  if (rc == AM_OK) rc = AM_SetHandler(ep, H_PING, ping);
  if (rc == AM_OK) rc = AM_SetHandler(ep, H_PONG, pong);
  if (rc == AM_OK) rc = AM_SetHandler(ep, H_STOP, stop);
  if (rc == AM_OK) rc = AM_SetHandler(ep, H_SINK, sink);
  if (rc == AM_OK) rc = AM_SetHandler(ep, H_FLUSH, flush);
  if (rc == AM_OK) rc = AM_SetHandler(ep, H_COUNT, count);
  if (rc == AM_OK) rc = AMX_SPMDBarrier(); /* every rank's handlers are in place */
  return rc;
}

void capi_serve(void) {
  serving = 1;
  while (serving) AM_Poll(eb);
}

int capi_stop(int peer) { return AM_Request0(ep, peer, H_STOP); }

int capi_pingpong(int peer, uint64_t first, uint64_t n) {
  for (uint64_t i = first; i < first + n; ++i) {
    const int32_t w = (int32_t)(uint32_t)i;
    done = 0;
    int rc = AM_Request2(ep, peer, H_PING, w, ~w);
    if (rc != AM_OK) return rc;
    while (!done) AM_Poll(eb);
    if (got[0] != w || got[1] != ~w) return -1;
  }
  return 0;
}

int capi_private_segment(uint64_t bytes) {
  void *s = malloc(bytes);
  void *p = malloc(bytes);
  if (!s || !p) return AM_ERR_RESOURCE;
  memset(s, 0, bytes);
  memset(p, 7, bytes);
  int rc = AM_SetSeg(ep, s, bytes);
  if (rc != AM_OK) return rc;
  free(segment);
  free((void *)payload);
  segment = s;
  payload = p;
  return AMX_SPMDBarrier(); /* every rank's segment is set before anyone sends */
}

int capi_long_stream(int peer, uint64_t bytes, int slots, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) {
    int rc = AM_RequestXfer0(ep, peer, (i % (uint64_t)slots) * bytes, H_SINK, payload, bytes);
    if (rc != AM_OK) return rc;
  }
  counted = 0;
  int rc = AM_Request0(ep, peer, H_FLUSH);
  if (rc != AM_OK) return rc;
  while (!counted) AM_Poll(eb);
  return count_got == (int32_t)n ? 0 : -1;
}
