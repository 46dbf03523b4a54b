#pragma once
/* The AM-2 C API side of bench/pingpong: a short ping-pong through
 * AM_Request2 / AM_Reply2 / AM_Poll, measured beside the C++ API's in the
 * same run. capi_pingpong.c is C, built with GCC 14's default errors. */

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Joins the job through AMX_SPMDStartup (beside the C++ runtime, which must
 * exist already) and registers the handlers. Every rank calls it. 0 on
 * success, else the AM code of the call that failed. */
int capi_start(int *argc, char ***argv);
/** Rank 1: answers pings until capi_stop(peer) arrives. */
void capi_serve(void);
/** Rank 0: ends rank 1's capi_serve. 0 or an AM code. */
int capi_stop(int peer);
/** Rank 0: `n` round trips to `peer`, each AM_Request2(i, ~i) answered by
 * AM_Reply2 with the same words, spinning on AM_Poll. Returns 0, an AM code,
 * or -1 when a reply carried the wrong words. */
int capi_pingpong(int peer, uint64_t first, uint64_t n);
/** Every rank: gives the C endpoint a segment of `bytes` of memory from
 * malloc (a private segment: AM_SetSeg), as AM-2 programs do. 0 or an AM code. */
int capi_private_segment(uint64_t bytes);
/** Rank 0: `n` long requests of `bytes` back to back into rank `peer`'s
 * private segment (AM_RequestXfer0 to a rotating offset among `slots`
 * slots), then a flush request answered with the count. 0, an AM code, or -1
 * when the count is wrong. */
int capi_long_stream(int peer, uint64_t bytes, int slots, uint64_t n);

#ifdef __cplusplus
}
#endif
