/* A PMIx program without clump that makes OpenMPI 4.1.4's mpirun (Debian 12,
 * PMIx 4.2.2) crash or hang in its own PMIx_server_finalize after the job
 * has ended: ranks 1..N-1 enter a fence, rank 0 does not, and rank VICTIM
 * exits with CODE. mpirun ends the job with CODE, then (on a loaded machine,
 * in 6 of 30 runs) segfaults in PMIx_server_finalize or waits there for
 * ever. clump's ranks wait for each other in PMIx fences under a PMIx
 * launcher, so a rank that dies in a barrier can meet this; tests/launchers/run
 * runs such a job again when mpirun ends this way.
 *
 *   cc -o mpirun_fence_bug mpirun_fence_bug.c $(pkg-config --cflags --libs pmix)
 *   mpirun -n 4 ./mpirun_fence_bug 3 9      (load the machine: 2 busy loops)
 */
#include <pmix.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void fenced(pmix_status_t status, void* arg) {
  (void)status;
  (void)arg;
}

int main(int argc, char** argv) {
  pmix_proc_t me, all;
  if (argc < 3) {
    fprintf(stderr, "usage: mpirun_fence_bug VICTIM CODE\n");
    return 2;
  }
  if (PMIx_Init(&me, NULL, 0) != PMIX_SUCCESS) return 50;
  PMIX_LOAD_PROCID(&all, me.nspace, PMIX_RANK_WILDCARD);
  pmix_info_t info;
  PMIX_INFO_CONSTRUCT(&info);
  int collect = 1;
  PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
  PMIx_Fence(&all, 1, &info, 1);
  if (me.rank != 0) PMIx_Fence_nb(&all, 1, &info, 1, fenced, NULL);
  usleep(100000);
  if ((int)me.rank == atoi(argv[1])) {
    fflush(NULL);
    _exit(atoi(argv[2]));
  }
  sleep(30);
  return 0;
}
