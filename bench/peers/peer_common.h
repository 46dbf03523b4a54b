/*
 * peer_common.h: what the peers (osu_mpi.c, ucx_am.c) share so that their
 * figures mean the same: the options, the figures, the sampling of
 * bench/measure.hpp, the printed table and the JSON. A program supplies only
 * how one timed loop runs (timed_loop_fn) and what it adds to the report
 * (struct report).
 *
 * Static functions, included by each peer: each program stays one file for its
 * own compiler (mpicc.openmpi, mpicc.mpich, cc) and needs no library.
 * Include it after defining _GNU_SOURCE (CPU_SETSIZE).
 */

#pragma once

#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { window = 64, ack_bytes = 4 };

enum measure { latency, bandwidth, message_rate };
static const char* const measure_id[] = {"latency", "bandwidth", "message_rate"};
static const char* const measure_unit[] = {"us", "GB/s", "M msg/s"};

static const size_t full_sizes[] = {8, 64, 512, 4 << 10, 32 << 10, 256 << 10, 1 << 20, 4 << 20};
static const size_t quick_sizes[] = {8, 4 << 10, 1 << 20};
static const size_t max_bytes = 4 << 20;

/// The usage lines of the options that parse() reads for every peer.
#define COMMON_USAGE                                                                          \
  "  --quick           sizes 8 B, 4 KiB, 1 MiB and 3 repetitions\n"                             \
  "  --reps R          samples per figure; the median is reported (default 7, --quick 3)\n"   \
  "  --sample-ms MS    length of one timed loop (default 30)\n"                                 \
  "  --json FILE       where to write every sample (default bench-peer.json)\n"

struct options {
  bool quick, help;
  int reps;  // 0: 7, or 3 with --quick
  double sample_ms;
  const char* json;
  const char* system;     // NULL until the program puts its default
  const char* transport;  // NULL until the program puts its default
  int cores[2];           // --cores A,B, where the program takes it
};

/// One figure: a measure at one size, with its samples.
struct figure {
  enum measure m;
  size_t bytes;
  uint64_t n;       // iterations (round trips or windows) per timed loop, from calibration
  double* samples;  // in the figure's unit, one per repetition
  int count;
};

/// Reads the command line; false with `err` filled on a mistake. --cores A,B
/// is an option only `with_cores`. Leaves system and transport NULL unless
/// given, for the program's own defaults.
static bool parse(int argc, char** argv, bool with_cores, struct options* o, char* err, size_t err_size) {
  *o = (struct options){.sample_ms = 30, .json = "bench-peer.json", .cores = {0, 1}};
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--quick") == 0) {
      o->quick = true;
    } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      o->help = true;
    } else if (strcmp(a, "--reps") == 0 || strcmp(a, "--sample-ms") == 0) {
      char* end = NULL;
      const double x = v ? strtod(v, &end) : 0;
      const bool reps = a[2] == 'r';
      const double hi = reps ? 1000 : 10000;
      if (!v || end == v || *end || x < 1 || x > hi || (reps && x != (int)x)) {
        snprintf(err, err_size, "%s %s: expected %s from 1 to %g", a, v ? v : "(missing)",
                 reps ? "a whole count" : "milliseconds", hi);
        return false;
      }
      if (reps) o->reps = (int)x;
      else o->sample_ms = x;
      ++i;
    } else if (with_cores && strcmp(a, "--cores") == 0) {
      int used = 0;
      if (!v || sscanf(v, "%d,%d%n", &o->cores[0], &o->cores[1], &used) != 2 || v[used] || o->cores[0] < 0 ||
          o->cores[1] < 0 || o->cores[0] >= CPU_SETSIZE || o->cores[1] >= CPU_SETSIZE) {
        snprintf(err, err_size, "--cores %s: expected two CPU numbers, e.g. 0,1", v ? v : "(missing)");
        return false;
      }
      ++i;
    } else if (strcmp(a, "--json") == 0 || strcmp(a, "--system") == 0 || strcmp(a, "--transport") == 0) {
      if (!v || !*v) {
        snprintf(err, err_size, "%s needs a value", a);
        return false;
      }
      if (a[2] == 'j') o->json = v;
      else if (a[2] == 's') o->system = v;
      else o->transport = v;
      ++i;
    } else {
      snprintf(err, err_size, "unknown option %s", a);
      return false;
    }
  }
  if (o->reps == 0) o->reps = o->quick ? 3 : 7;
  return true;
}

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/// A page-aligned buffer with its pages faulted in (before any timing); NULL
/// if it cannot be had.
static void* page_buffer(size_t bytes) {
  void* p = NULL;
  if (posix_memalign(&p, 4096, bytes) != 0) return NULL;
  memset(p, 1, bytes);
  return p;
}

/// The figures the options ask for, in order: latency at every size,
/// bandwidth at every size, message rate at 8 bytes; *count of them. Each
/// has room for o->reps samples. Both ranks make the same list.
static struct figure* make_figures(const struct options* o, int* count) {
  const size_t* sizes = o->quick ? quick_sizes : full_sizes;
  const int nsizes = o->quick ? (int)(sizeof quick_sizes / sizeof *sizes) : (int)(sizeof full_sizes / sizeof *sizes);
  *count = 2 * nsizes + 1;
  struct figure* figs = calloc((size_t)*count, sizeof *figs);
  if (!figs) abort();
  for (int i = 0; i < *count; ++i) {
    figs[i].m = i < nsizes ? latency : i < 2 * nsizes ? bandwidth : message_rate;
    figs[i].bytes = i < 2 * nsizes ? sizes[i % nsizes] : 8;
    figs[i].samples = calloc((size_t)o->reps, sizeof(double));
    if (!figs[i].samples) abort();
  }
  return figs;
}

static void free_figures(struct figure* figs, int count) {
  for (int i = 0; i < count; ++i) free(figs[i].samples);
  free(figs);
}

/// Rank 0: tells rank 1 to run n iterations of figure `index` (which is `f`),
/// runs them too and returns the seconds they took on rank 0.
typedef double timed_loop_fn(void* context, const struct figure* f, int index, uint64_t n);

/// A loop's time and iterations as the figure's value.
static double value(const struct figure* f, double seconds, uint64_t n) {
  const double iterations = (double)n;
  switch (f->m) {
    case latency: return seconds / iterations / 2 * 1e6;
    case bandwidth: return iterations * window * (double)f->bytes / seconds / 1e9;
    case message_rate: return iterations * window / seconds / 1e6;
  }
  return 0;
}

/// The iterations that make one loop last `target` seconds, as bench/measure.hpp
/// finds them: grow n until a loop lasts a tenth of the target (which also
/// warms up caches, pages and the connection), time that n again, keep the
/// faster, then scale.
static uint64_t calibrate(timed_loop_fn* timed_loop, void* context, const struct figure* figs, int index,
                          double target) {
  uint64_t n = 1;
  double t = 0;
  for (;;) {
    t = timed_loop(context, &figs[index], index, n);
    if (t >= target / 10) {
      const double again = timed_loop(context, &figs[index], index, n);
      if (again < t) t = again;
      if (t >= target / 10) break;
    }
    uint64_t grown = t > 0 ? (uint64_t)((double)n * (target / 10 * 1.5) / t) : n * 16;
    if (grown < n * 2) grown = n * 2;
    if (grown > n * 100) grown = n * 100;
    n = grown;
  }
  const double scaled = (double)n * target / t;
  return scaled < 1 ? 1 : (uint64_t)(scaled + 0.5);
}

/// Rank 0: calibrates every figure, then takes the samples round-robin:
/// repetition r of every figure before repetition r + 1 of any, so a burst of
/// noise from other work costs many figures one sample each (the median drops
/// it) rather than one figure all of its samples. Telling rank 1 to stop is
/// left to the caller.
static void take_samples(timed_loop_fn* timed_loop, void* context, struct figure* figs, int count,
                         const struct options* o) {
  const double target = o->sample_ms / 1000;
  for (int i = 0; i < count; ++i) figs[i].n = calibrate(timed_loop, context, figs, i, target);
  for (int r = 0; r < o->reps; ++r) {
    for (int i = 0; i < count; ++i) {
      struct figure* f = &figs[i];
      // Warm-up: the figure sampled before may have left other data in the caches.
      timed_loop(context, f, i, f->n / 16 ? f->n / 16 : 1);
      f->samples[f->count++] = value(f, timed_loop(context, f, i, f->n), f->n);
    }
  }
}

// --- the report -----------------------------------------------------------------

/// A string a program adds to the JSON.
struct label {
  const char* key;
  const char* value;
};

/// What a program adds to the shared table and JSON.
struct report {
  const char* program;  // starts the table's first line and error messages; the JSON's "program"
  const char* library;  // the library's version
  int cores[2];         // the CPU each rank ran on
  const char* transport_variable;  // NULL, or the environment variable that chooses the transport,
                                   // shown with its value in the table's first line
  const char* window_sends;        // what a bandwidth window is, for the table's last line:
  const char* window_ack;          //   "windows of 64 <sends> and a 4-byte <ack>"
  const struct label* labels;      // written after "library_version"
  int label_count;
};

/// "8 B", "4 KiB", "1 MiB".
static void size_text(size_t bytes, char* out, size_t out_size) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) snprintf(out, out_size, "%zu MiB", bytes >> 20);
  else if (bytes >= 1024 && bytes % 1024 == 0) snprintf(out, out_size, "%zu KiB", bytes >> 10);
  else snprintf(out, out_size, "%zu B", bytes);
}

static int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/// Median, min and max of a figure's samples.
static void summary(const struct figure* f, double* median, double* min, double* max) {
  double* s = malloc(sizeof(double) * (size_t)f->count);
  if (!s) abort();
  memcpy(s, f->samples, sizeof(double) * (size_t)f->count);
  qsort(s, (size_t)f->count, sizeof(double), by_value);
  const int k = f->count;
  *median = k % 2 ? s[k / 2] : (s[k / 2 - 1] + s[k / 2]) / 2;
  *min = s[0];
  *max = s[k - 1];
  free(s);
}

/// `text` as the inside of a JSON string.
static void json_string(FILE* out, const char* text) {
  for (const unsigned char* c = (const unsigned char*)text; *c; ++c) {
    if (*c == '"' || *c == '\\') fprintf(out, "\\%c", *c);
    else if (*c < 0x20) fprintf(out, "\\u%04x", *c);
    else fputc(*c, out);
  }
}

static void print_table(const struct figure* figs, int count, const struct options* o, const struct report* r) {
  printf("%s: %s over %s", r->program, o->system, o->transport);
  if (r->transport_variable) {
    const char* chosen = getenv(r->transport_variable);
    printf(" (%s=%s)", r->transport_variable, chosen ? chosen : "(unset)");
  }
  printf("; %s; ranks on cpus %d and %d; %d samples of ~%g ms per figure%s\n", r->library, r->cores[0], r->cores[1],
         o->reps, o->sample_ms, o->quick ? " (--quick)" : "");
  printf("%-13s %8s %10s %10s %10s  %s\n", "measure", "size", "median", "min", "max", "unit");
  for (int i = 0; i < count; ++i) {
    double median, min, max;
    char size[32];
    summary(&figs[i], &median, &min, &max);
    size_text(figs[i].bytes, size, sizeof size);
    printf("%-13s %8s %10.3f %10.3f %10.3f  %s\n", measure_id[figs[i].m], size, median, min, max,
           measure_unit[figs[i].m]);
  }
  printf("latency: one way = round trip / 2; bandwidth: windows of %d %s and a %d-byte %s, GB/s = 1e9 B/s\n", window,
         r->window_sends, ack_bytes, r->window_ack);
}

/// Writes every sample to o->json; false, having said why, if it cannot.
static bool write_json(const struct figure* figs, int count, const struct options* o, const struct report* r) {
  FILE* out = fopen(o->json, "w");
  if (!out) {
    fprintf(stderr, "%s: cannot write %s: %s\n", r->program, o->json, strerror(errno));
    return false;
  }
  fprintf(out, "{\"benchmark\":\"peer\",\"format_version\":1,\"program\":\"");
  json_string(out, r->program);
  fprintf(out, "\",\"system\":\"");
  json_string(out, o->system);
  fprintf(out, "\",\"transport\":\"");
  json_string(out, o->transport);
  fprintf(out, "\",\"library_version\":\"");
  json_string(out, r->library);
  for (int i = 0; i < r->label_count; ++i) {
    fprintf(out, "\",\"");
    json_string(out, r->labels[i].key);
    fprintf(out, "\":\"");
    json_string(out, r->labels[i].value);
  }
  fprintf(out, "\",\"cores\":[%d,%d],\"reps\":%d,\"sample_ms\":%g,\"quick\":%s,\"window\":%d,\"measurements\":[",
          r->cores[0], r->cores[1], o->reps, o->sample_ms, o->quick ? "true" : "false", window);
  for (int i = 0; i < count; ++i) {
    const struct figure* f = &figs[i];
    double median, min, max;
    char size[32];
    summary(f, &median, &min, &max);
    size_text(f->bytes, size, sizeof size);
    fprintf(out,
            "%s\n {\"id\":\"%s\",\"size\":\"%s\",\"bytes\":%zu,\"unit\":\"%s\",\"median\":%.9g,\"min\":%.9g,"
            "\"max\":%.9g,\"iterations\":%llu,\"samples\":[",
            i ? "," : "", measure_id[f->m], size, f->bytes, measure_unit[f->m], median, min, max,
            (unsigned long long)f->n);
    for (int k = 0; k < f->count; ++k) fprintf(out, "%s%.9g", k ? "," : "", f->samples[k]);
    fprintf(out, "]}");
  }
  fprintf(out, "\n]}\n");
  if (fclose(out) != 0) {
    fprintf(stderr, "%s: cannot write %s: %s\n", r->program, o->json, strerror(errno));
    return false;
  }
  return true;
}
