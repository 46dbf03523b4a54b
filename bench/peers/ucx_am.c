/*
 * ucx_am: the UCX peer of clump's pingpong benchmark: the measures of osu_mpi
 * (beside this file) made with UCP active messages, the closest thing in UCX
 * to clump's AM layer. Sampled the way bench/measure.hpp samples clump; the
 * same options (and --cores), table and JSON as osu_mpi: peer_common.h has
 * what the two share.
 *
 *   latency       ping-pong of n bytes: rank 0 sends an AM, rank 1 answers each with an AM of the
 *                 same size; one way = round trip / 2 (us)
 *   bandwidth     windows of 64 AMs of n bytes from rank 0, then a 4-byte ack AM from rank 1 once
 *                 all 64 have arrived; GB/s = 1e9 bytes/s
 *   message_rate  the same with 8-byte messages, in million messages per second
 *
 * Receiving: an eager message counts as arrived when its handler runs (the
 * handler reads it where UCX put it, as clump's medium handlers do); a
 * rendezvous one (UCP_AM_RECV_ATTR_FLAG_RNDV) when the ucp_am_recv_data_nbx
 * that the handler starts has brought it into the receive buffer. All
 * receives write one buffer and all sends read one, as in OSU. Rank 1's answer
 * (ping-pong reply, ack) is sent from its polling loop as soon as the handler
 * has counted the message: UCX handlers run inside ucp_worker_progress and a
 * rendezvous message arrives only in a later completion callback.
 *
 * One command starts both processes: it forks rank 1, pins rank 0 and rank 1
 * to CPUs 0 and 1 (--cores A,B to change), and the two exchange worker
 * addresses, and then rank 0's loop orders, over a socketpair. Both busy-poll
 * ucp_worker_progress. UCX_TLS chooses the transport; --transport only
 * records its name.
 *
 * Build (bench/peers/CMakeLists.txt does this):
 *   cc -std=c11 -O2 -Wall -Wextra -Werror -o ucx_am ucx_am.c $(pkg-config --cflags --libs ucx)
 *
 * Run (tested as root on Debian 12, UCX 1.13.1):
 *   shared memory:  UCX_TLS=sm,self ./ucx_am --system ucx --transport shm
 *   TCP loopback:   UCX_TLS=tcp,self UCX_NET_DEVICES=lo ./ucx_am --system ucx --transport tcp
 * Options: --quick, --reps R, --sample-ms MS, --json FILE, --system NAME, --transport NAME,
 * --cores A,B (see usage).
 */

#define _GNU_SOURCE

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ucp/api/ucp.h>

#include "peer_common.h"

enum { am_data = 0, am_ack = 1 };

/// A wait that sees no progress for this long gives up (a lost peer the
/// socketpair did not report, a transport that never connects).
static const double stall_seconds = 60;

static const char* const usage =
    "usage: UCX_TLS=sm,self|tcp,self ucx_am [--quick] [--reps R] [--sample-ms MS] [--json FILE]\n"
    "                                       [--system NAME] [--transport NAME] [--cores A,B]\n"
    COMMON_USAGE
    "  --system NAME     recorded in the JSON (default ucx)\n"
    "  --transport NAME  recorded in the JSON, e.g. shm or tcp (default: UCX_TLS, else unspecified)\n"
    "  --cores A,B       pin rank 0 to CPU A and rank 1 (a forked child) to CPU B (default 0,1)\n"
    "The transport is UCX's choice within UCX_TLS (e.g. UCX_TLS=tcp,self UCX_NET_DEVICES=lo).\n";

/// This process's side of the pair. The counters only grow: the loops wait
/// for running totals, so a message of the next loop that arrives while this
/// rank still finishes the last one is counted, not lost.
struct peer {
  int rank;
  int sock;     // socketpair end to the other process
  pid_t child;  // rank 0: rank 1's pid
  ucp_context_h context;
  ucp_worker_h worker;
  ucp_ep_h ep;
  char* send_buffer;
  char* recv_buffer;
  uint64_t arrived, arrived_used;  // data AMs received (handler or rendezvous completion); used by loops
  uint64_t acks, acks_used;        // ack AMs received; used by loops
  uint64_t sends_posted, sends_done;
  ucs_status_t failed;  // first error a callback saw
};

/// Loop orders from rank 0 to rank 1 over the socketpair.
struct command {
  int32_t figure;  // -1: stop
  int32_t unused;
  uint64_t n;
};

static int my_rank = -1;
static pid_t child_pid = -1;  // rank 0: rank 1

static void die(const char* fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void die(const char* fmt, ...) {
  // One write, so that the two processes' messages do not interleave.
  char text[512];
  int k = snprintf(text, sizeof text, "ucx_am rank %d: ", my_rank);
  va_list ap;
  va_start(ap, fmt);
  k += vsnprintf(text + k, sizeof text - (size_t)k - 1, fmt, ap);
  va_end(ap);
  if (k > (int)sizeof text - 2) k = (int)sizeof text - 2;
  text[k++] = '\n';
  ssize_t ignored = write(STDERR_FILENO, text, (size_t)k);
  (void)ignored;
  exit(1);
}

// --- the socketpair ---------------------------------------------------------

static void peer_gone(struct peer* p, const char* what) __attribute__((noreturn));

/// Writes all of `data`; a peer that has gone is an error (never SIGPIPE).
static void put(struct peer* p, const void* data, size_t size) {
  for (const char* at = data; size > 0;) {
    const ssize_t k = send(p->sock, at, size, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) peer_gone(p, "writing to it");
    at += k;
    size -= (size_t)k;
  }
}

/// Reads exactly `size` bytes; false if the other process closed its end.
static bool get(struct peer* p, void* data, size_t size) {
  for (char* at = data; size > 0;) {
    const ssize_t k = recv(p->sock, at, size, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) die("reading from the other process: %s", strerror(errno));
    if (k == 0) return false;
    at += k;
    size -= (size_t)k;
  }
  return true;
}

/// Dies saying that the other process has gone and, on rank 0, how rank 1 ended.
static void peer_gone(struct peer* p, const char* what) {
  int status = 0;
  if (p->rank == 1 || waitpid(p->child, &status, 0) != p->child) die("rank %d has gone while %s", 1 - p->rank, what);
  if (WIFEXITED(status)) die("rank 1 exited with status %d while %s", WEXITSTATUS(status), what);
  if (WIFSIGNALED(status)) die("rank 1 was killed by signal %d while %s", WTERMSIG(status), what);
  die("rank 1 ended (wait status %d) while %s", status, what);
}

/// Dies after a callback reported an error, saying first whether rank 1 has
/// died (the usual cause: a reset connection, a failed copy).
static void ucx_failed(struct peer* p, const char* what) {
  int status = 0;
  if (p->rank == 0 && waitpid(p->child, &status, WNOHANG) == p->child) {
    if (WIFSIGNALED(status))
      die("rank 1 was killed by signal %d while %s (UCX: %s)", WTERMSIG(status), what, ucs_status_string(p->failed));
    die("rank 1 exited with status %d while %s (UCX: %s)", WEXITSTATUS(status), what, ucs_status_string(p->failed));
  }
  die("UCX reported an error while %s: %s", what, ucs_status_string(p->failed));
}

/// Dies if the other process has gone or a callback reported an error. The
/// socket carries nothing while loops run except rank 0's next order, so
/// end-of-file there means the other process has exited.
static void check_peer(struct peer* p, const char* what) {
  if (p->failed != UCS_OK) ucx_failed(p, what);
  char byte;
  const ssize_t k = recv(p->sock, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (k == 0) peer_gone(p, what);
}

/// Polls until *counter reaches target, watching the other process.
static void wait_for(struct peer* p, const uint64_t* counter, uint64_t target, const char* what) {
  double start = 0;
  for (uint64_t spins = 1; *counter < target; ++spins) {
    ucp_worker_progress(p->worker);
    if ((spins & 0x3fff) == 0) {
      check_peer(p, what);
      const double t = now_seconds();
      if (start == 0) start = t;
      else if (t - start > stall_seconds) die("nothing came for %.0f s while %s", stall_seconds, what);
    }
  }
  if (p->failed != UCS_OK) ucx_failed(p, what);
}

/// Both processes meet here, polling UCX while they wait (a flush or a close
/// on one side may need the other's progress).
static void meet(struct peer* p, const char* what) {
  const char byte = 1;
  put(p, &byte, 1);
  double start = now_seconds();
  for (uint64_t spins = 1;; ++spins) {
    ucp_worker_progress(p->worker);
    char got;
    const ssize_t k = recv(p->sock, &got, 1, MSG_DONTWAIT);
    if (k == 1) return;
    if (k == 0) peer_gone(p, what);
    if ((spins & 0x3fff) == 0 && now_seconds() - start > stall_seconds)
      die("the other process did not answer for %.0f s while %s", stall_seconds, what);
  }
}

// --- UCX ----------------------------------------------------------------------

static void record_failure(struct peer* p, ucs_status_t status) {
  if (status != UCS_OK && p->failed == UCS_OK) p->failed = status;
}

static void send_done(void* request, ucs_status_t status, void* user_data) {
  struct peer* p = user_data;
  record_failure(p, status);
  ++p->sends_done;
  ucp_request_free(request);
}

static void rendezvous_done(void* request, ucs_status_t status, size_t length, void* user_data) {
  (void)length;
  struct peer* p = user_data;
  record_failure(p, status);
  ++p->arrived;
  ucp_request_free(request);
}

static ucs_status_t on_data(void* arg, const void* header, size_t header_length, void* data, size_t length,
                            const ucp_am_recv_param_t* param) {
  (void)header, (void)header_length;
  struct peer* p = arg;
  if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
    ++p->arrived;
    return UCS_OK;
  }
  const ucp_request_param_t rp = {
      .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMORY_TYPE,
      .cb.recv_am = rendezvous_done,
      .user_data = p,
      .memory_type = UCS_MEMORY_TYPE_HOST};
  const ucs_status_ptr_t r = ucp_am_recv_data_nbx(p->worker, data, p->recv_buffer, length, &rp);
  if (r == NULL) ++p->arrived;
  else if (UCS_PTR_IS_ERR(r)) record_failure(p, UCS_PTR_STATUS(r));
  // UCX owns the descriptor once ucp_am_recv_data_nbx has been called.
  return UCS_INPROGRESS;
}

static ucs_status_t on_ack(void* arg, const void* header, size_t header_length, void* data, size_t length,
                           const ucp_am_recv_param_t* param) {
  (void)header, (void)header_length, (void)data, (void)length, (void)param;
  struct peer* p = arg;
  ++p->acks;
  return UCS_OK;
}

static void send_am(struct peer* p, unsigned id, size_t bytes) {
  const ucp_request_param_t sp = {
      .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMORY_TYPE,
      .cb.send = send_done,
      .user_data = p,
      .memory_type = UCS_MEMORY_TYPE_HOST};
  ++p->sends_posted;
  const ucs_status_ptr_t r = ucp_am_send_nbx(p->ep, id, NULL, 0, p->send_buffer, bytes, &sp);
  if (r == NULL) ++p->sends_done;
  else if (UCS_PTR_IS_ERR(r)) die("ucp_am_send_nbx of %zu bytes: %s", bytes, ucs_status_string(UCS_PTR_STATUS(r)));
}

static void check(ucs_status_t status, const char* what) {
  if (status != UCS_OK) die("%s: %s", what, ucs_status_string(status));
}

static void set_handler(struct peer* p, unsigned id, ucp_am_recv_callback_t cb) {
  const ucp_am_handler_param_t hp = {.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                                                   UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG,
                                     .id = id,
                                     .flags = UCP_AM_FLAG_WHOLE_MSG,
                                     .cb = cb,
                                     .arg = p};
  check(ucp_worker_set_am_recv_handler(p->worker, &hp), "ucp_worker_set_am_recv_handler");
}

/// Context, worker, handlers; then the worker addresses cross the socketpair
/// (rank 1 adds the CPU it runs on) and each side opens its endpoint.
static void start_ucx(struct peer* p, int* peer_cpu) {
  ucp_config_t* config = NULL;
  check(ucp_config_read(NULL, NULL, &config), "ucp_config_read (check the UCX_* variables)");
  const ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_AM};
  const ucs_status_t s = ucp_init(&params, config, &p->context);
  ucp_config_release(config);
  check(s, "ucp_init (check UCX_TLS)");
  const ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                                  .thread_mode = UCS_THREAD_MODE_SINGLE};
  check(ucp_worker_create(p->context, &wp, &p->worker), "ucp_worker_create");
  set_handler(p, am_data, on_data);
  set_handler(p, am_ack, on_ack);

  ucp_address_t* address = NULL;
  size_t length = 0;
  check(ucp_worker_get_address(p->worker, &address, &length), "ucp_worker_get_address");
  const int32_t cpu = sched_getcpu();
  const uint64_t len = length;
  put(p, &cpu, sizeof cpu);
  put(p, &len, sizeof len);
  put(p, address, length);
  ucp_worker_release_address(p->worker, address);

  int32_t other_cpu = -1;
  uint64_t other_len = 0;
  if (!get(p, &other_cpu, sizeof other_cpu) || !get(p, &other_len, sizeof other_len))
    peer_gone(p, "exchanging worker addresses");
  if (other_len > (1u << 20))
    die("the other process sent a worker address of %llu bytes", (unsigned long long)other_len);
  void* other = malloc(other_len);
  if (!other) die("cannot allocate %llu bytes", (unsigned long long)other_len);
  if (!get(p, other, other_len)) peer_gone(p, "exchanging worker addresses");
  *peer_cpu = other_cpu;
  const ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS, .address = other};
  check(ucp_ep_create(p->worker, &ep, &p->ep), "ucp_ep_create (is the other process reachable with this UCX_TLS?)");
  free(other);
  meet(p, "connecting");
}

static void stop_ucx(struct peer* p) {
  meet(p, "finishing");
  const ucp_request_param_t cp = {.op_attr_mask = 0};
  const ucs_status_ptr_t r = ucp_ep_close_nbx(p->ep, &cp);
  if (UCS_PTR_IS_ERR(r)) die("ucp_ep_close_nbx: %s", ucs_status_string(UCS_PTR_STATUS(r)));
  if (r != NULL) {
    while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(p->worker);
    ucp_request_free(r);
  }
  meet(p, "closing the endpoint");
  ucp_worker_destroy(p->worker);
  ucp_cleanup(p->context);
}

// --- the measures -------------------------------------------------------------

/// n iterations of `f` on this rank (both ranks run it with the same n).
static void run_loop(struct peer* p, const struct figure* f, uint64_t n) {
  if (f->m == latency) {
    for (uint64_t i = 0; i < n; ++i) {
      if (p->rank == 0) send_am(p, am_data, f->bytes);
      wait_for(p, &p->arrived, ++p->arrived_used, "in a ping-pong");
      if (p->rank == 1) send_am(p, am_data, f->bytes);
    }
  } else {
    for (uint64_t i = 0; i < n; ++i) {
      if (p->rank == 0) {
        for (int j = 0; j < window; ++j) send_am(p, am_data, f->bytes);
        wait_for(p, &p->sends_done, p->sends_posted, "sending a window");
        wait_for(p, &p->acks, ++p->acks_used, "waiting for a window's ack");
      } else {
        p->arrived_used += window;
        wait_for(p, &p->arrived, p->arrived_used, "receiving a window");
        send_am(p, am_ack, ack_bytes);
      }
    }
  }
  wait_for(p, &p->sends_done, p->sends_posted, "completing sends");
}

/// Rank 0: tells rank 1 which loop comes next, runs it and returns its time
/// (a timed_loop_fn; `context` is the struct peer).
static double timed_loop(void* context, const struct figure* f, int index, uint64_t n) {
  struct peer* p = context;
  const struct command c = {.figure = index, .n = n};
  put(p, &c, sizeof c);
  const double t0 = now_seconds();
  run_loop(p, f, n);
  return now_seconds() - t0;
}

// --- the two processes ------------------------------------------------------------

/// UCX ends a process with abort() when a shared-memory copy finds its peer
/// gone (error handling "peer" is not available over sm in UCX 1.13): on
/// rank 0, says why before the process ends, with async-signal-safe calls only.
static void on_abort(int sig) {
  int status = 0;
  if (my_rank == 0 && child_pid > 0 && waitpid(child_pid, &status, WNOHANG) == child_pid) {
    char text[160] = "ucx_am rank 0: rank 1 has died (";
    size_t k = strlen(text);
    const char* how = WIFSIGNALED(status) ? "killed by signal " : "exit status ";
    const int code = WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status);
    for (const char* c = how; *c; ++c) text[k++] = *c;
    if (code >= 100) text[k++] = (char)('0' + code / 100);
    if (code >= 10) text[k++] = (char)('0' + code / 10 % 10);
    text[k++] = (char)('0' + code % 10);
    static const char tail[] = "); UCX stopped rank 0 when it found rank 1 gone (above)\n";
    for (const char* c = tail; *c; ++c) text[k++] = *c;
    ssize_t ignored = write(STDERR_FILENO, text, k);
    (void)ignored;
    _exit(1);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0)
    die("cannot pin to CPU %d: %s (this machine has %ld CPUs online; choose others with --cores A,B)", cpu,
        strerror(errno), sysconf(_SC_NPROCESSORS_ONLN));
}

/// Rank 1: runs the loops rank 0 orders until it says stop.
static void serve(struct peer* p, struct figure* figs, int count) {
  for (;;) {
    struct command c;
    if (!get(p, &c, sizeof c)) peer_gone(p, "waiting for orders");
    if (c.figure < 0) return;
    if (c.figure >= count) die("bad order from rank 0 (figure %d)", (int)c.figure);
    run_loop(p, &figs[c.figure], c.n);
  }
}

/// Rank 0: takes every sample, then tells rank 1 to stop.
static void drive(struct peer* p, struct figure* figs, int count, const struct options* o) {
  take_samples(timed_loop, p, figs, count, o);
  const struct command stop = {.figure = -1};
  put(p, &stop, sizeof stop);
}

int main(int argc, char** argv) {
  struct options o;
  char err[256];
  if (!parse(argc, argv, true, &o, err, sizeof err)) {
    fprintf(stderr, "ucx_am: %s\n%s", err, usage);
    return 2;
  }
  if (o.help) {
    fputs(usage, stdout);
    return 0;
  }
  if (!o.system) o.system = "ucx";
  if (!o.transport) o.transport = getenv("UCX_TLS") ? getenv("UCX_TLS") : "unspecified";

  int count = 0;
  struct figure* figs = make_figures(&o, &count);

  // Refused here, before the fork, so that one process says it once.
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) CPU_ZERO(&allowed);
  for (int r = 0; r < 2; ++r) {
    if (!CPU_ISSET(o.cores[r], &allowed)) {
      fprintf(stderr, "ucx_am: cannot pin rank %d to CPU %d: this process may run on %d CPUs (%ld online); "
              "choose others with --cores A,B\n", r, o.cores[r], CPU_COUNT(&allowed), sysconf(_SC_NPROCESSORS_ONLN));
      return 2;
    }
  }

  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) {
    fprintf(stderr, "ucx_am: socketpair: %s\n", strerror(errno));
    return 1;
  }
  fflush(NULL);
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child < 0) {
    fprintf(stderr, "ucx_am: fork: %s\n", strerror(errno));
    return 1;
  }
  struct peer p = {.rank = child == 0 ? 1 : 0, .sock = fds[child == 0 ? 1 : 0], .child = child};
  my_rank = p.rank;
  if (p.rank == 0) {
    child_pid = child;
    signal(SIGABRT, on_abort);
  }
  close(fds[child == 0 ? 0 : 1]);
  if (p.rank == 1) {
    // Rank 1 must not outlive rank 0, whatever way rank 0 ends.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) die("rank 0 has gone");
  }
  pin(o.cores[p.rank]);
  p.send_buffer = page_buffer(max_bytes);
  p.recv_buffer = page_buffer(max_bytes);
  if (!p.send_buffer || !p.recv_buffer) die("cannot allocate %zu bytes", max_bytes);

  int cores[2] = {-1, -1};
  cores[p.rank] = sched_getcpu();
  start_ucx(&p, &cores[1 - p.rank]);
  if (p.rank == 0) drive(&p, figs, count, &o);
  else serve(&p, figs, count);
  stop_ucx(&p);

  int rc = 0;
  if (p.rank == 0) {
    char library[64];
    snprintf(library, sizeof library, "UCX %s", ucp_get_version_string());
    const char* tls = getenv("UCX_TLS");
    const char* devices = getenv("UCX_NET_DEVICES");
    const struct label labels[] = {{"ucx_tls", tls ? tls : ""}, {"ucx_net_devices", devices ? devices : ""}};
    const struct report r = {.program = "ucx_am",
                             .library = library,
                             .cores = {cores[0], cores[1]},
                             .transport_variable = "UCX_TLS",
                             .window_sends = "AMs",
                             .window_ack = "ack AM",
                             .labels = labels,
                             .label_count = (int)(sizeof labels / sizeof *labels)};
    print_table(figs, count, &o, &r);
    if (write_json(figs, count, &o, &r)) printf("wrote %s\n", o.json);
    else rc = 1;
    int status = 0;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "ucx_am: rank 1 did not end cleanly (wait status %d)\n", status);
      rc = 1;
    }
  }
  free_figures(figs, count);
  free(p.send_buffer);
  free(p.recv_buffer);
  close(p.sock);
  return rc;
}
