/*
 * osu_mpi: the MPI peer of clump's pingpong benchmark, in the style of the OSU
 * micro-benchmarks (osu_latency, osu_bw, osu_mbw_mr with one pair), sampled
 * the way bench/measure.hpp samples clump so that the two sets of figures can
 * be set side by side. Two ranks; rank 0 prints a table and writes JSON. The
 * options, the sampling, the table and the JSON are peer_common.h's, shared
 * with ucx_am.c; this file is the MPI part.
 *
 *   latency       ping-pong of n bytes, MPI_Send/MPI_Recv both ways; one way = round trip / 2 (us)
 *   bandwidth     windows of 64 MPI_Isend (rank 0) / MPI_Irecv (rank 1) of n bytes, MPI_Waitall,
 *                 then a 4-byte ack from rank 1; GB/s = 1e9 bytes/s
 *   message_rate  the same with 8-byte messages, in million messages per second
 *
 * As in OSU, all sends of a window read one buffer and all receives of a
 * window write one buffer.
 *
 * Build (bench/peers/CMakeLists.txt does this):
 *   mpicc.openmpi -std=c11 -O2 -Wall -Wextra -Werror -o osu_mpi_openmpi osu_mpi.c
 *   mpicc.mpich   -std=c11 -O2 -Wall -Wextra -Werror -o osu_mpi_mpich   osu_mpi.c
 *
 * Run, pinned to cores 0 and 1 (tested as root on Debian 12: OpenMPI 4.1.4, MPICH 4.0.2 ch4:ucx):
 *   OpenMPI over shared memory: pml ob1 with the vader btl (Debian's /etc/openmpi/openmpi-mca-params.conf
 *   already says pml = ^ucx; naming ob1 keeps the command's meaning on other installations):
 *     mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 --bind-to core --map-by core \
 *       --mca pml ob1 --mca btl self,vader ./osu_mpi_openmpi --system openmpi --transport shm
 *   OpenMPI over TCP loopback: vader is left out of the btl list, so rank 1 is reached only by tcp
 *   (--mca btl_base_verbose 30 prints "Using tcp btl for send to [[...],1]"):
 *     mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 --bind-to core --map-by core \
 *       --mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include lo \
 *       ./osu_mpi_openmpi --system openmpi --transport tcp
 *   MPICH 4.0.2 in Debian is ch4:ucx, and its messages between two ranks on one host go through UCX
 *   (UCX_TLS=tcp,self alone moves the 8-byte latency from ~0.15 us to ~5 us), so UCX_TLS chooses:
 *     UCX_TLS=sm,self mpiexec.mpich -n 2 -bind-to core ./osu_mpi_mpich --system mpich --transport shm
 *     UCX_TLS=tcp,self UCX_NET_DEVICES=lo MPIR_CVAR_NOLOCAL=1 mpiexec.mpich -n 2 -bind-to core \
 *       ./osu_mpi_mpich --system mpich --transport tcp
 *   (MPIR_CVAR_NOLOCAL=1 makes MPICH treat the ranks as on different nodes: a build with MPICH's own
 *   shared memory would otherwise bypass UCX_TLS; here it changes nothing measurable.)
 * Options: --quick, --reps R, --sample-ms MS, --json FILE, --system NAME, --transport NAME (see usage).
 */

#define _GNU_SOURCE

#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer_common.h"

enum { tag_data = 1, tag_ack = 2 };

static const char* const usage =
    "usage: mpirun -np 2 [binding] osu_mpi [--quick] [--reps R] [--sample-ms MS] [--json FILE]\n"
    "                                      [--system NAME] [--transport NAME]\n"
    COMMON_USAGE
    "  --system NAME     recorded in the JSON (default: openmpi or mpich, from the library)\n"
    "  --transport NAME  recorded in the JSON, e.g. shm or tcp (default unspecified)\n";

static char* send_buffer;
static char* recv_buffer;

/// n iterations of `f` on this rank (both ranks run it with the same n).
static void run_loop(const struct figure* f, uint64_t n, int rank) {
  const int bytes = (int)f->bytes;
  if (f->m == latency) {
    for (uint64_t i = 0; i < n; ++i) {
      if (rank == 0) {
        MPI_Send(send_buffer, bytes, MPI_CHAR, 1, tag_data, MPI_COMM_WORLD);
        MPI_Recv(recv_buffer, bytes, MPI_CHAR, 1, tag_data, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(recv_buffer, bytes, MPI_CHAR, 0, tag_data, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(send_buffer, bytes, MPI_CHAR, 0, tag_data, MPI_COMM_WORLD);
      }
    }
    return;
  }
  // A real status array, as OSU passes (GCC 12 also mistakes MPICH's
  // MPI_STATUSES_IGNORE for an empty array under -Werror).
  MPI_Request req[window];
  MPI_Status status[window];
  for (uint64_t i = 0; i < n; ++i) {
    if (rank == 0) {
      for (int j = 0; j < window; ++j) MPI_Isend(send_buffer, bytes, MPI_CHAR, 1, tag_data, MPI_COMM_WORLD, &req[j]);
      MPI_Waitall(window, req, status);
      MPI_Recv(recv_buffer, ack_bytes, MPI_CHAR, 1, tag_ack, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      for (int j = 0; j < window; ++j) MPI_Irecv(recv_buffer, bytes, MPI_CHAR, 0, tag_data, MPI_COMM_WORLD, &req[j]);
      MPI_Waitall(window, req, status);
      MPI_Send(send_buffer, ack_bytes, MPI_CHAR, 0, tag_ack, MPI_COMM_WORLD);
    }
  }
}

/// Rank 0: tells rank 1 which loop comes next (figure index, iterations), runs
/// it and returns its time (a timed_loop_fn). Index -1 tells rank 1 to stop.
static double timed_loop(void* unused, const struct figure* f, int index, uint64_t n) {
  (void)unused;
  int64_t cmd[2] = {index, (int64_t)n};
  MPI_Bcast(cmd, 2, MPI_INT64_T, 0, MPI_COMM_WORLD);
  const double t0 = now_seconds();
  run_loop(f, n, 0);
  return now_seconds() - t0;
}

/// The first line of MPI_Get_library_version.
static void library_version(char* out) {
  int len = 0;
  MPI_Get_library_version(out, &len);
  out[len < MPI_MAX_LIBRARY_VERSION_STRING ? len : MPI_MAX_LIBRARY_VERSION_STRING - 1] = '\0';
  out[strcspn(out, "\r\n")] = '\0';
  for (size_t k = strlen(out); k > 0 && (out[k - 1] == ' ' || out[k - 1] == '\t'); --k) out[k - 1] = '\0';
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  // Every rank reads the same command line, so every rank takes the same way
  // out: no rank waits for one that has left.
  struct options o;
  char err[256];
  if (!parse(argc, argv, false, &o, err, sizeof err)) {
    if (rank == 0) fprintf(stderr, "osu_mpi: %s\n%s", err, usage);
    MPI_Finalize();
    return 2;
  }
  if (o.help) {
    if (rank == 0) fputs(usage, stdout);
    MPI_Finalize();
    return 0;
  }
  if (size != 2) {
    if (rank == 0) fprintf(stderr, "osu_mpi: needs exactly 2 ranks, got %d (run it with -np 2)\n", size);
    MPI_Finalize();
    return 2;
  }

  char library[MPI_MAX_LIBRARY_VERSION_STRING];
  library_version(library);
  if (!o.system) o.system = strstr(library, "Open MPI") ? "openmpi" : strstr(library, "MPICH") ? "mpich" : "mpi";
  if (!o.transport) o.transport = "unspecified";
  int cores[2] = {-1, -1};
  const int my_core = sched_getcpu();
  MPI_Gather(&my_core, 1, MPI_INT, cores, 1, MPI_INT, 0, MPI_COMM_WORLD);

  send_buffer = page_buffer(max_bytes);
  recv_buffer = page_buffer(max_bytes);
  if (!send_buffer || !recv_buffer) {
    fprintf(stderr, "osu_mpi: cannot allocate %zu bytes\n", max_bytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  int count = 0;
  struct figure* figs = make_figures(&o, &count);

  if (rank == 1) {
    for (;;) {
      int64_t cmd[2];
      MPI_Bcast(cmd, 2, MPI_INT64_T, 0, MPI_COMM_WORLD);
      if (cmd[0] < 0) break;
      run_loop(&figs[cmd[0]], (uint64_t)cmd[1], 1);
    }
  } else {
    take_samples(timed_loop, NULL, figs, count, &o);
    int64_t stop[2] = {-1, 0};
    MPI_Bcast(stop, 2, MPI_INT64_T, 0, MPI_COMM_WORLD);
  }

  int rc = 0;
  if (rank == 0) {
    const struct report r = {
        .program = "osu_mpi", .library = library, .cores = {cores[0], cores[1]}, .window_sends = "sends",
        .window_ack = "ack"};
    print_table(figs, count, &o, &r);
    if (write_json(figs, count, &o, &r)) printf("wrote %s\n", o.json);
    else rc = 1;
  }
  free_figures(figs, count);
  free(send_buffer);
  free(recv_buffer);
  MPI_Finalize();
  return rc;
}
