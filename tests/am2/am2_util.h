/* am2_util.h: helpers shared by the am2_* test programs, in the style of
 * Berkeley's apputils: joining the job, failing loudly, waiting on AM_Poll,
 * and deterministic byte patterns, checksums and random numbers.
 *
 * Only Berkeley AM-2 names and the AMX SPMD names of AMUDP's headers are
 * used, so that the programs read as AMUDP programs would. Each program
 * calls am2_startup() first and am2_finish() last:
 *
 *   am2_startup(&argc, &argv, "am2_ping");   joins the job: am2.eb, am2.ep, am2.me, am2.np
 *   CHECK(cond, "fmt", ...);                 on failure prints
 *                                            "<program> rank R: line L: FAILED: ..." and ends
 *                                            the job with AMX_SPMDExit(1) (also from a handler)
 *   CHECK_OK(call);                          CHECK that an AM call returned AM_OK
 *   WAIT_UNTIL(cond);                        AM_Poll(am2.eb) until cond holds
 *   am2_finish();                            "<program>: rank R: ok", barrier, AMX_SPMDExit(0)
 */
#ifndef AM2_UTIL_H
#define AM2_UTIL_H

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* clock_gettime, sched_yield under -std=c11 too */
#endif

#include <clump/am.h>

#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The job as this process sees it. */
typedef struct {
  const char *prog; /* the program's name, for messages */
  int me, np;       /* AMX_SPMDMyProc(), AMX_SPMDNumProcs() */
  eb_t eb;          /* the bundle and endpoint AMX_SPMDStartup returned */
  ep_t ep;
} am2_job_t;

static am2_job_t am2 = {"am2", -1, 0, NULL, NULL};

/* ---- failing ---------------------------------------------------------------- */

#if defined(__GNUC__)
#define AM2_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define AM2_PRINTF(f, a)
#endif

static inline _Noreturn void am2_failed(int line, const char *fmt, ...) AM2_PRINTF(2, 3);
static inline _Noreturn void am2_failed(int line, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fflush(stdout);
  fprintf(stderr, "%s rank %d: line %d: FAILED: %s\n", am2.prog, am2.me, line, msg);
  fflush(stderr);
  AMX_SPMDExit(1); /* ends the whole job: the other ranks would wait for us forever */
}

#define CHECK(cond, ...)                          \
  do {                                            \
    if (!(cond)) am2_failed(__LINE__, __VA_ARGS__); \
  } while (0)

#define CHECK_RC(call, want)                                                                  \
  do {                                                                                        \
    int am2_rc_ = (call);                                                                     \
    if (am2_rc_ != (want)) am2_failed(__LINE__, "%s returned %d, expected %d", #call, am2_rc_, (int)(want)); \
  } while (0)

#define CHECK_OK(call) CHECK_RC(call, AM_OK)

/* ---- time and waiting ----------------------------------------------------------- */

static inline double am2_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* How long a wait may take before the program gives up with a message
 * (well inside clumprun's --timeout, so the failure says what it waited for). */
#define AM2_WAIT_LIMIT_US 10e6

/* Polls the bundle until `cond` holds. Every 16 empty rounds it yields the
 * core, so that ranks oversubscribing the machine (4 ranks on 2 cores) let
 * their peers run; it never waits without polling. */
#define WAIT_UNTIL_EB(eb_, cond)                                                  \
  do {                                                                            \
    unsigned am2_spins_ = 0;                                                      \
    double am2_start_ = am2_now_us();                                             \
    while (!(cond)) {                                                             \
      AM_Poll(eb_);                                                               \
      if ((++am2_spins_ & 15u) == 0) sched_yield();                               \
      if ((am2_spins_ & 4095u) == 0 && am2_now_us() - am2_start_ > AM2_WAIT_LIMIT_US) \
        am2_failed(__LINE__, "timed out waiting until %s", #cond);                \
    }                                                                             \
  } while (0)

#define WAIT_UNTIL(cond) WAIT_UNTIL_EB(am2.eb, cond)

/* ---- starting and ending ---------------------------------------------------------- */

static inline void am2_exit_callback(int code) {
  if (code != 0) fprintf(stderr, "%s rank %d: exiting with code %d\n", am2.prog, am2.me, code);
}

/* Joins the job: AMX_SPMDStartup(&argc, &argv, 0, NULL, &eb, &ep). */
static inline void am2_startup(int *argc, char ***argv, const char *prog) {
  am2.prog = prog;
  AMX_VerboseErrors = 1; /* a call that fails says why on stderr */
  if (AMX_SPMDStartup(argc, argv, 0, NULL, &am2.eb, &am2.ep) != AM_OK)
    AMX_FatalErr("%s: AMX_SPMDStartup failed", prog);
  am2.me = AMX_SPMDMyProc();
  am2.np = AMX_SPMDNumProcs();
  CHECK(am2.np >= 1 && am2.me >= 0 && am2.me < am2.np, "AMX_SPMDMyProc %d, AMX_SPMDNumProcs %d", am2.me, am2.np);
  CHECK(am2.eb != NULL && am2.ep != NULL, "AMX_SPMDStartup gave a NULL bundle or endpoint");
  CHECK_OK(AMX_SPMDSetExitCallback(am2_exit_callback));
}

/* Allocates memory or ends the job. */
static inline void *am2_malloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) AMX_FatalErr("%s: out of memory (%zu bytes)", am2.prog, n);
  return p;
}

/* Prints "<program>: rank R: ok", meets the others and ends the job with 0, as AMUDP programs do. */
static inline void am2_finish(void) {
  printf("%s: rank %d: ok\n", am2.prog, am2.me);
  fflush(stdout);
  CHECK_OK(AMX_SPMDBarrier());
  AMX_SPMDExit(0);
}

/* ---- data ---------------------------------------------------------------------- */

/* Byte `i` of the pattern `seed`: every byte depends on both, so a payload
 * that is shifted, truncated, stale or from another message does not match. */
static inline uint8_t am2_byte(uint32_t seed, size_t i) {
  uint32_t x = (uint32_t)i * 0x9E3779B1u ^ (seed * 0x85EBCA77u + 0x165667B1u);
  x ^= x >> 15;
  x *= 0x2C1B3C6Du;
  x ^= x >> 12;
  x *= 0x297A2D39u;
  x ^= x >> 15;
  return (uint8_t)x;
}

/* Fills p[0..n) with bytes first..first+n of pattern `seed`. */
static inline void am2_fill_at(void *p, size_t n, uint32_t seed, size_t first) {
  uint8_t *b = (uint8_t *)p;
  for (size_t i = 0; i < n; ++i) b[i] = am2_byte(seed, first + i);
}

static inline void am2_fill(void *p, size_t n, uint32_t seed) { am2_fill_at(p, n, seed, 0); }

#define AM2_GOOD ((size_t)-1)

/* AM2_GOOD when p[0..n) holds bytes first..first+n of pattern `seed`, else
 * the index of the first byte that differs. */
static inline size_t am2_verify_at(const void *p, size_t n, uint32_t seed, size_t first) {
  const uint8_t *b = (const uint8_t *)p;
  for (size_t i = 0; i < n; ++i)
    if (b[i] != am2_byte(seed, first + i)) return i;
  return AM2_GOOD;
}

static inline size_t am2_verify(const void *p, size_t n, uint32_t seed) { return am2_verify_at(p, n, seed, 0); }

/* FNV-1a checksum of p[0..n). */
static inline uint32_t am2_checksum(const void *p, size_t n) {
  const uint8_t *b = (const uint8_t *)p;
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 16777619u;
  return h;
}

/* A deterministic random number generator (splitmix64). */
typedef struct {
  uint64_t s;
} am2_rng_t;

static inline uint64_t am2_rand(am2_rng_t *r) {
  uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* A number in [lo, hi]. */
static inline size_t am2_rand_range(am2_rng_t *r, size_t lo, size_t hi) {
  return lo + (size_t)(am2_rand(r) % (uint64_t)(hi - lo + 1));
}

#endif /* AM2_UTIL_H */
