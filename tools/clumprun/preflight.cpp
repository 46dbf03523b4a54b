#include "preflight.hpp"

#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "boot/capacity.hpp"
#include "core/settings.hpp"

namespace clumprun {

namespace {

// Descriptors clumprun holds per rank: its socket end, the rank's region
// until it has been passed on, and with --label two output pipes; plus a few
// for itself.
constexpr long long launcher_fds_per_rank = 2;
constexpr long long launcher_fds_per_rank_label = 4;
constexpr long long launcher_spare_fds = 32;
// What a rank needs besides one region per rank (see boot/launched_job.cpp).
constexpr long long rank_spare_fds = 64;

int check_file(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return errno;
  if (S_ISDIR(st.st_mode)) return EISDIR;
  if (::access(path.c_str(), X_OK) != 0) return errno;
  return 0;
}

// Processes the real user id of this process has now (what RLIMIT_NPROC counts).
long long count_user_processes() {
  long long n = 0;
  uid_t uid = ::getuid();
  DIR* d = ::opendir("/proc");
  if (!d) return 0;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    struct stat st{};
    if (::stat((std::string("/proc/") + e->d_name).c_str(), &st) == 0 && st.st_uid == uid) ++n;
  }
  ::closedir(d);
  return n;
}

std::optional<long long> read_count(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return std::nullopt;
  return std::strtoll(text.c_str(), nullptr, 10);
}

// Room left under the pids controller of this process's cgroup (v2 or v1).
std::optional<long long> cgroup_pids_room(std::string& where) {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    std::string dir;
    if (controllers.empty() && line.compare(0, 2, "0:") == 0) dir = "/sys/fs/cgroup" + path;
    else if (("," + controllers + ",").find(",pids,") != std::string::npos) dir = "/sys/fs/cgroup/pids" + path;
    else continue;
    auto max = read_count(dir + "/pids.max");
    auto current = read_count(dir + "/pids.current");
    if (max && current) {
      where = dir + "/pids.max";
      return *max - *current;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> resolve_program(const std::string& name, int& error, std::string& why) {
  error = 0;
  if (name.empty()) {
    error = ENOENT;
    why = "empty program name";
    return std::nullopt;
  }
  if (name.find('/') != std::string::npos) {
    error = check_file(name);
    if (error == 0) return name;
    why = std::strerror(error);
    return std::nullopt;
  }
  const char* path_env = std::getenv("PATH");
  std::string search = path_env ? path_env : "/bin:/usr/bin";
  int first_error = 0;
  std::stringstream dirs(search);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    int e = check_file(candidate);
    if (e == 0) return candidate;
    // Like execvp: a match we may not run is reported if nothing better turns up.
    if (e != ENOENT && e != ENOTDIR && first_error == 0) first_error = e;
  }
  error = first_error ? first_error : ENOENT;
  why = first_error ? std::string(std::strerror(error)) : std::string(std::strerror(ENOENT)) + " (not found in PATH)";
  return std::nullopt;
}

std::optional<std::string> check_capacity(int nranks, bool label) {
  const long long p = nranks;

  // File descriptors. Children inherit clumprun's limits, so raising the soft
  // limit here serves both (and ranks raise their own too).
  rlimit fds{};
  ::getrlimit(RLIMIT_NOFILE, &fds);
  long long launcher_need = p * (label ? launcher_fds_per_rank_label : launcher_fds_per_rank) + launcher_spare_fds;
  long long rank_need = p + rank_spare_fds;
  long long need = std::max(launcher_need, rank_need);
  if (fds.rlim_max != RLIM_INFINITY && static_cast<long long>(fds.rlim_max) < need)
    return fmt::format(
        "-n {} needs ~{} file descriptors ({}); the limit is {} (raise with ulimit -n, or run fewer ranks)", p, need,
        launcher_need >= rank_need ? fmt::format("clumprun holds {} per rank", label ? 4 : 2)
                                   : std::string("every rank holds one shared region per rank"),
        static_cast<long long>(fds.rlim_max));
  if (fds.rlim_cur != RLIM_INFINITY && static_cast<long long>(fds.rlim_cur) < need) {
    rlimit raised = fds;
    raised.rlim_cur = fds.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) != 0) {
      raised.rlim_cur = static_cast<rlim_t>(need);
      ::setrlimit(RLIMIT_NOFILE, &raised);
    }
  }

  // Processes.
  rlimit nproc{};
  if (::geteuid() != 0 && ::getrlimit(RLIMIT_NPROC, &nproc) == 0 && nproc.rlim_cur != RLIM_INFINITY) {
    long long have = count_user_processes();
    long long limit = static_cast<long long>(nproc.rlim_cur);
    if (have + p > limit)
      return fmt::format("-n {} needs {} more processes; this user has {} of at most {} (ulimit -u): raise it or "
                         "run fewer ranks",
                         p, p, have, limit);
  }
  std::string where;
  if (auto room = cgroup_pids_room(where); room && p > *room)
    return fmt::format("-n {} needs {} more processes; the cgroup allows only {} more ({}): run fewer ranks", p, p,
                       *room, where);

  // Shared memory.
  size_t per_rank = clump::boot::estimate_shm_bytes_per_rank();
  size_t capacity = clump::boot::shm_capacity_bytes();
  size_t total = per_rank * static_cast<size_t>(p);
  if (total > capacity) {
    const auto& s = clump::core::settings();
    return fmt::format(
        "-n {} needs ~{} of shared memory at start ({} per rank with CLUMP_SHM_QUEUE_DEPTH={} and "
        "CLUMP_SHM_MEDIUM_RING={}), but only {} is available (MemAvailable and cgroup limit): run fewer ranks or "
        "lower CLUMP_SHM_QUEUE_DEPTH / CLUMP_SHM_MEDIUM_RING",
        p, clump::boot::format_bytes(total), clump::boot::format_bytes(per_rank), s.shm_queue_depth,
        clump::boot::format_bytes(s.shm_medium_ring), clump::boot::format_bytes(capacity));
  }
  return std::nullopt;
}

}  // namespace clumprun
