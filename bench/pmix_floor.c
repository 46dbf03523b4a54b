/* pmix_floor: the least a PMIx job can do to start: PMIx_Init, then one fence
 * of every rank that collects data (what clump's first barrier is under a
 * PMIx launcher). Rank 0 prints the wall-clock time (CLOCK_REALTIME) at
 * which it left the fence, as {"first_barrier":T}. bench/scaling runs it
 * under mpirun beside scaling_probe: the start-up that the launcher and its
 * PMIx server alone take, without clump. */
#include <pmix.h>
#include <stdio.h>
#include <time.h>

int main(void) {
  pmix_proc_t me, all;
  if (PMIx_Init(&me, NULL, 0) != PMIX_SUCCESS) {
    fprintf(stderr, "pmix_floor: PMIx_Init failed (not started by a PMIx launcher?)\n");
    return 1;
  }
  PMIX_LOAD_PROCID(&all, me.nspace, PMIX_RANK_WILDCARD);
  pmix_info_t info;
  PMIX_INFO_CONSTRUCT(&info);
  int collect = 1;
  PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
  const pmix_status_t rc = PMIx_Fence(&all, 1, &info, 1);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  if (rc == PMIX_SUCCESS && me.rank == 0)
    printf("{\"first_barrier\":%.6f}\n", (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9);
  PMIx_Finalize(NULL, 0);
  return rc == PMIX_SUCCESS ? 0 : 1;
}
