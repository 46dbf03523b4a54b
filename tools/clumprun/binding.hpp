#pragma once
// Where each rank runs: clumprun pins rank r to core r % ncores (all the
// hardware threads of that core) so that ranks do not migrate and a rank's
// queue lines stay in one core's caches. The topology comes from hwloc,
// which already leaves out CPUs this process may not use (cgroup cpusets,
// taskset).

#include <sched.h>

#include <string>
#include <vector>

namespace clumprun {

enum class bind_mode {
  automatic,  ///< core when there are no more ranks than cores, else none
  none,
  core,
};

struct binding_plan {
  bool bind = false;
  std::string why;                       ///< the decision, for -v
  std::vector<cpu_set_t> cpu_sets;       ///< per rank when bind
  std::vector<std::string> descriptions; ///< per rank when bind: "core 1 (PUs 1,5)"
};

/// Decides the binding of `nranks` ranks. Never fails: when the topology
/// cannot be read, the plan says so in `why` and does not bind.
binding_plan plan_binding(bind_mode mode, int nranks);

}  // namespace clumprun
