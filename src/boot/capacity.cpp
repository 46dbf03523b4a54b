#include "boot/capacity.hpp"

#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "core/settings.hpp"

namespace clump::boot {

namespace {

// The runtime touches one endpoint per process at start-up (the one that
// clump::runtime and AMX_SPMDStartup create); more endpoints are the program's
// choice and are not known to the launcher.
constexpr size_t endpoints_touched_at_start = 1;
constexpr size_t queue_block_control_bytes = 64 * 1024;
constexpr size_t packet_bytes = 64;

std::optional<unsigned long long> read_number_file(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text)) return std::nullopt;
  if (text == "max") return ~0ull;
  char* end = nullptr;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str()) return std::nullopt;
  return v;
}

std::optional<size_t> mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  unsigned long long kib;
  std::string unit;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return static_cast<size_t>(kib) * 1024;
  }
  return std::nullopt;
}

// Limits this high mean "no limit" (cgroup v1 reports 2^63 rounded to a page).
constexpr unsigned long long unlimited_threshold = 1ull << 62;

struct cgroup_memory {
  std::string dir;        // the cgroup whose limit binds
  size_t limit = 0;
  size_t usage = 0;
};

// Walks from `dir` up to `root`, returning the ancestor with the least
// headroom that has a limit, if any does.
std::optional<cgroup_memory> tightest(std::string dir, const std::string& root, const char* limit_file,
                                      const char* usage_file) {
  std::optional<cgroup_memory> best;
  for (;;) {
    auto limit = read_number_file(dir + "/" + limit_file);
    auto usage = read_number_file(dir + "/" + usage_file);
    if (limit && usage && *limit < unlimited_threshold) {
      size_t headroom = *limit > *usage ? static_cast<size_t>(*limit - *usage) : 0;
      if (!best || headroom < best->limit - std::min(best->limit, best->usage))
        best = cgroup_memory{dir, static_cast<size_t>(*limit), static_cast<size_t>(*usage)};
    }
    if (dir.size() <= root.size()) break;
    size_t slash = dir.find_last_of('/');
    if (slash == std::string::npos || slash < root.size()) break;
    dir.resize(slash);
  }
  return best;
}

bool is_dir(const std::string& path) {
  std::ifstream probe(path + "/cgroup.procs");
  return probe.good();
}

// The memory limit of this process's cgroup: v2 ("0::/path"), or the v1
// memory controller ("N:...memory...:/path"). Inside a cgroup namespace the
// path is relative to the mount, so fall back to the mount's root.
std::optional<cgroup_memory> cgroup_limit() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  std::optional<cgroup_memory> found;
  while (std::getline(in, line)) {
    size_t a = line.find(':');
    size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    if (path == "/") path.clear();
    std::optional<cgroup_memory> here;
    if (line.compare(0, 2, "0:") == 0 && controllers.empty()) {
      for (const char* mount : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
        const std::string root = mount;
        std::string dir = is_dir(root + path) ? root + path : root;
        if (!is_dir(dir)) continue;
        here = tightest(dir, root, "memory.max", "memory.current");
        if (here) break;
      }
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      const std::string root = "/sys/fs/cgroup/memory";
      std::string dir = is_dir(root + path) ? root + path : root;
      here = tightest(dir, root, "memory.limit_in_bytes", "memory.usage_in_bytes");
    }
    if (here && (!found || here->limit - std::min(here->limit, here->usage) <
                               found->limit - std::min(found->limit, found->usage)))
      found = here;
  }
  return found;
}

}  // namespace

size_t estimate_shm_bytes_per_rank() {
  const auto& s = core::settings();
  size_t one_queue = size_t{s.shm_queue_depth} * packet_bytes + s.shm_medium_ring;
  return endpoints_touched_at_start * (2 * one_queue + queue_block_control_bytes);
}

size_t shm_capacity_bytes() {
  size_t cap = SIZE_MAX;
  if (auto avail = mem_available()) cap = *avail;
  if (auto cg = cgroup_limit()) cap = std::min(cap, cg->limit - std::min(cg->limit, cg->usage));
  return cap;
}

std::string format_bytes(size_t bytes) {
  static const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 5) v /= 1024, ++u;
  char text[64];
  if (u == 0) std::snprintf(text, sizeof text, "%zu bytes", bytes);
  else if (v == static_cast<double>(static_cast<uint64_t>(v))) std::snprintf(text, sizeof text, "%.0f %s", v, units[u]);
  else std::snprintf(text, sizeof text, "%.1f %s", v, units[u]);
  return text;
}

std::string shm_capacity_report() {
  std::ostringstream out;
  auto avail = mem_available();
  out << "  MemAvailable          " << (avail ? format_bytes(*avail) : "unknown (no /proc/meminfo)") << "\n";
  if (auto cg = cgroup_limit())
    out << "  cgroup memory limit   " << format_bytes(cg->limit) << ", " << format_bytes(cg->usage) << " in use ("
        << cg->dir << ")\n";
  else
    out << "  cgroup memory limit   none\n";
  struct statvfs vfs{};
  if (::statvfs("/dev/shm", &vfs) == 0)
    out << "  /dev/shm              " << format_bytes(size_t{vfs.f_blocks} * vfs.f_frsize) << ", "
        << format_bytes(size_t{vfs.f_bavail} * vfs.f_frsize)
        << " free (clump maps memfds, which this does not limit; other shm users need it)\n";
  else
    out << "  /dev/shm              not mounted: " << std::strerror(errno) << "\n";
  const auto& s = core::settings();
  size_t per_rank = estimate_shm_bytes_per_rank();
  out << "  per rank at start     " << format_bytes(per_rank) << " (CLUMP_SHM_QUEUE_DEPTH=" << s.shm_queue_depth
      << ", CLUMP_SHM_MEDIUM_RING=" << s.shm_medium_ring << ")\n";
  size_t cap = shm_capacity_bytes();
  if (cap == SIZE_MAX)
    out << "  ranks that fit        unknown\n";
  else
    out << "  ranks that fit        " << cap / per_rank << " (before segments are touched)\n";
  return out.str();
}

}  // namespace clump::boot
