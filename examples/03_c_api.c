/* 03_c_api: the AM-2 C API (clump/am.h), as a program written for Berkeley
 * AM-2 and its AMX SPMD extension uses it. Every rank talks to the next one
 * (rank 0 to itself when alone):
 *   1. short ping-pong: a request handler replies with its argument + 1;
 *   2. medium echo: the payload comes back in a medium reply, byte for byte;
 *   3. long put: AM_RequestXfer writes into the next rank's segment, whose
 *      handler checks the bytes and acknowledges.
 * Waiting uses the AM-2 idiom: poll, and when nothing is left to run, sleep
 * in AM_WaitSema until a message arrives. Handlers are registered without
 * casts (AM_SetHandler casts, as Berkeley's does); the segment is malloc'd
 * memory, as AM-2 programs have.
 *
 *   clumprun -n 3 ./03_c_api
 */

#include <clump/am.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Handler indices: the same on every rank. */
enum { PING = 1, PONG, ECHO, ECHO_BACK, PUT, PUT_ACK };

#define ROUNDS 1000
#define ECHO_BYTES 4000
#define SEG_BYTES (1 << 20)
#define PUT_OFFSET 4096
#define PUT_BYTES 300000 /* more than AM_MaxLong() (65000): a clump extension, up to AMX_LargestLong() */

/* Handlers run inside AM_Poll on this thread: plain variables are enough. */
static int pongs, last_pong = -1;
static int echoes;
static unsigned char echo_data[ECHO_BYTES];
static int echo_ok = 1;
static int acks, put_ok = 1;

static unsigned char pattern(size_t i, int rank) { return (unsigned char)(i * 7 + (size_t)rank * 13 + 1); }

static void ping(void *token, int32_t v) { AM_Reply1(token, PONG, v + 1); }

static void pong(void *token, int32_t v) {
  (void)token;
  last_pong = v;
  ++pongs;
}

static void echo(void *token, void *buf, size_t nbytes) { AM_ReplyI0(token, ECHO_BACK, buf, nbytes); }

static void echo_back(void *token, void *buf, size_t nbytes) {
  (void)token;
  if (nbytes != ECHO_BYTES || memcmp(buf, echo_data, nbytes) != 0) echo_ok = 0;
  ++echoes;
}

/* Runs on the receiving rank once the payload is in its segment. */
static void put(void *token, void *buf, size_t nbytes, int32_t from) {
  const unsigned char *p = (const unsigned char *)buf;
  int good = nbytes == PUT_BYTES;
  for (size_t i = 0; good && i < nbytes; ++i) good = p[i] == pattern(i, from);
  AM_Reply1(token, PUT_ACK, good);
}

static void put_ack(void *token, int32_t good) {
  (void)token;
  if (!good) put_ok = 0;
  ++acks;
}

/* Runs handlers until *count reaches target, sleeping while nothing arrives. */
static void wait_for(eb_t eb, const int *count, int target) {
  for (;;) {
    AM_Poll(eb);
    if (*count >= target) return;
    AM_SetEventMask(eb, AM_NOTEMPTY);
    AM_WaitSema(eb);
  }
}

static void fail(int rank, const char *what) {
  fprintf(stderr, "rank %d: %s\n", rank, what);
  AMX_SPMDExit(1); /* ends the whole job: the others would wait forever */
}

int main(int argc, char **argv) {
  eb_t eb;
  ep_t ep;
  uint64_t job;
  if (AMX_SPMDStartup(&argc, &argv, 0, &job, &eb, &ep) != AM_OK) {
    fprintf(stderr, "03_c_api: cannot join the job\n");
    return 1;
  }
  const int me = AMX_SPMDMyProc();
  const int next = (me + 1) % AMX_SPMDNumProcs();

  /* The segment: ordinary memory of ours that long messages write into. */
  void *seg = malloc(SEG_BYTES);
  if (!seg || AM_SetSeg(ep, seg, SEG_BYTES) != AM_OK) fail(me, "cannot set the segment");
  if (AM_SetHandler(ep, PING, ping) != AM_OK ||
      AM_SetHandler(ep, PONG, pong) != AM_OK ||
      AM_SetHandler(ep, ECHO, echo) != AM_OK ||
      AM_SetHandler(ep, ECHO_BACK, echo_back) != AM_OK ||
      AM_SetHandler(ep, PUT, put) != AM_OK ||
      AM_SetHandler(ep, PUT_ACK, put_ack) != AM_OK)
    fail(me, "cannot set the handlers");
  AMX_SPMDBarrier(); /* every rank's handlers and segment are in place */

  /* 1. Short ping-pong, one round trip at a time. */
  for (int i = 0; i < ROUNDS; ++i) {
    if (AM_Request1(ep, next, PING, i) != AM_OK) fail(me, "ping not sent");
    wait_for(eb, &pongs, i + 1);
    if (last_pong != i + 1) fail(me, "pong carried the wrong value");
  }

  /* 2. Medium echo. */
  for (size_t i = 0; i < ECHO_BYTES; ++i) echo_data[i] = pattern(i, me);
  if (AM_RequestI0(ep, next, ECHO, echo_data, ECHO_BYTES) != AM_OK) fail(me, "echo not sent");
  wait_for(eb, &echoes, 1);
  if (!echo_ok) fail(me, "the echo came back different");

  /* 3. Long put into the next rank's segment. */
  unsigned char *data = malloc(PUT_BYTES);
  if (!data) fail(me, "out of memory");
  for (size_t i = 0; i < PUT_BYTES; ++i) data[i] = pattern(i, me);
  if (AM_RequestXfer1(ep, next, PUT_OFFSET, PUT, data, PUT_BYTES, me) != AM_OK) fail(me, "put not sent");
  wait_for(eb, &acks, 1);
  if (!put_ok) fail(me, "the put arrived damaged");
  free(data);

  /* No rank frees its endpoint while another may still send to it. */
  AMX_SPMDBarrier();
  printf("rank %d of %d: ok\n", me, AMX_SPMDNumProcs());
  fflush(stdout);
  return 0;
}
