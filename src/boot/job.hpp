#pragma once
// boot: how a process joins a clump job.
//
// Under clumprun a process inherits a socket to the launcher (CLUMP_BOOT_FD)
// and learns its rank, the job size, the job id and one unguessable 64-bit tag
// per rank. Each process creates its own shared-memory region (a memfd, see
// shm/region.hpp) and hands its descriptor to join(); the launcher passes every
// descriptor to every rank (SCM_RIGHTS), so the regions are mapped without any
// name in /dev/shm and vanish when the last process holding them exits.
// Started without clumprun, a process is a job of one.
//
// The collectives here go through the launcher's socket: they are for startup
// and for the AMX SPMD calls, not for the data path. While they wait they call
// `progress` so that active messages keep flowing (a rank blocked in a barrier
// must still serve the requests of ranks that have not reached it).

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace clump::boot {

/// Called over and over while a collective waits. It handles pending active
/// messages and, when there were none for a while, may sleep for up to about
/// a millisecond, waking at once when a message arrives. The collective only
/// peeks at the launcher's socket between calls.
using progress_fn = std::function<void()>;

class job {
 public:
  virtual ~job() = default;

  /// Joins the job this process was started in: through clumprun when
  /// CLUMP_BOOT_FD is set, else as a job of one. `region_fd` is this process's
  /// shared region; join() does not take ownership of it. Throws clump::error
  /// with a clear message when the launcher cannot be reached or refuses.
  static std::unique_ptr<job> join(int region_fd);

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual uint64_t id() const = 0;
  /// True when started by clumprun (false for a job of one).
  virtual bool launched() const = 0;
  /// The tag of `rank`'s first endpoint: random, never 0 (AM_NONE) or 1 (AM_ALL).
  virtual uint64_t tag(int rank) const = 0;
  /// The region descriptors of all ranks, indexed by rank (this process's own
  /// entry is a duplicate of `region_fd`). The caller owns and closes them.
  /// May be called once; later calls return an empty vector.
  virtual std::vector<int> take_region_fds() = 0;
  /// Process id of every rank (for diagnostics).
  virtual pid_t pid(int rank) const = 0;

  virtual void barrier(const progress_fn& progress) = 0;
  /// dst receives size() * len bytes, rank order.
  virtual void allgather(const void* src, void* dst, size_t len, const progress_fn& progress) = 0;
  virtual void broadcast(void* buf, size_t len, int root, const progress_fn& progress) = 0;
  /// Ends the whole job with `code` (clumprun kills the other ranks and exits
  /// with it). Does not return.
  [[noreturn]] virtual void exit_job(int code) = 0;
  /// The value of `name` in the launcher's environment.
  virtual std::optional<std::string> getenv_master(const std::string& name) = 0;
};

}  // namespace clump::boot
