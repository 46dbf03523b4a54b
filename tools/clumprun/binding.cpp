#include "binding.hpp"

#include <hwloc.h>
#include <hwloc/glibc-sched.h>

#include <cstdlib>
#include <memory>

#include <fmt/format.h>

namespace clumprun {

binding_plan plan_binding(bind_mode mode, int nranks) {
  binding_plan plan;
  if (mode == bind_mode::none) {
    plan.why = "none (--bind none)";
    return plan;
  }
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) {
    plan.why = "none (hwloc could not start)";
    return plan;
  }
  std::unique_ptr<hwloc_topology, void (*)(hwloc_topology_t)> guard(topo, hwloc_topology_destroy);
  if (hwloc_topology_load(topo) != 0) {
    plan.why = "none (hwloc could not read the topology)";
    return plan;
  }
  hwloc_obj_type_t unit = HWLOC_OBJ_CORE;
  int units = hwloc_get_nbobjs_by_type(topo, unit);
  if (units <= 0) {  // some virtual machines report no cores, only PUs
    unit = HWLOC_OBJ_PU;
    units = hwloc_get_nbobjs_by_type(topo, unit);
  }
  if (units <= 0) {
    plan.why = "none (hwloc found no cores)";
    return plan;
  }
  if (mode == bind_mode::automatic && nranks > units) {
    plan.why = fmt::format("none ({} ranks > {} cores; --bind core binds anyway, rank r to core r % {})", nranks,
                           units, units);
    return plan;
  }
  plan.why = mode == bind_mode::core
                 ? fmt::format("core (--bind core: rank r on core r % {})", units)
                 : fmt::format("core ({} ranks <= {} cores; --bind none turns it off)", nranks, units);
  plan.bind = true;
  for (int r = 0; r < nranks; ++r) {
    hwloc_obj_t obj = hwloc_get_obj_by_type(topo, unit, static_cast<unsigned>(r % units));
    cpu_set_t set;
    hwloc_cpuset_to_glibc_sched_affinity(topo, obj->cpuset, &set, sizeof set);
    plan.cpu_sets.push_back(set);
    char* list = nullptr;
    hwloc_bitmap_list_asprintf(&list, obj->cpuset);
    plan.descriptions.push_back(
        fmt::format("{} {} (PUs {})", unit == HWLOC_OBJ_CORE ? "core" : "PU", obj->logical_index, list ? list : "?"));
    std::free(list);
  }
  return plan;
}

}  // namespace clumprun
