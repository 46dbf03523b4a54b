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
// A job spans one or more nodes (machines, or groups of ranks that clumprun
// -N treats as machines). Every rank also hands join() its network address,
// an opaque blob that boot only carries, so that after joining every rank
// knows which node each rank is on and how to reach it over the network.
//
// The collectives here go through the launcher's socket: they are for startup
// and for the AMX SPMD calls, not for the data path. While they wait they call
// `progress` so that active messages keep flowing (a rank blocked in a barrier
// must still serve the requests of ranks that have not reached it).

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace clump::boot {

/// What a collective does while it waits for the launcher: it handles
/// pending active messages (a rank blocked in a barrier must still serve the
/// requests of ranks that have not reached it), and when there have been
/// none for a while it sleeps, without timed naps, until a message arrives
/// or the launcher answers (a thread of the boot layer watches the socket
/// and calls wake). Empty functions: a plain blocking wait on the socket.
struct progress_fn {
  /// Handles pending active messages; returns how many.
  std::function<unsigned()> poll;
  /// Sleeps until a message arrives, `ready` is true, or `timeout` passes;
  /// checks `ready` after it has announced itself as sleeping.
  std::function<void(const std::atomic<bool>& ready, std::chrono::nanoseconds timeout)> sleep;
  /// Ends such a sleep at once; called from another thread.
  std::function<void()> wake;
  explicit operator bool() const noexcept { return static_cast<bool>(poll); }
};

class job {
 public:
  virtual ~job() = default;

  /// Longest network address join() takes.
  static constexpr size_t max_net_address = 64;

  /// Joins the job this process was started in: through clumprun when
  /// CLUMP_BOOT_FD is set, else as a job of one. `region_fd` is this process's
  /// shared region; join() does not take ownership of it. `net_address` is
  /// this rank's address for the network protocol, at most max_net_address
  /// bytes (may be empty); it is copied, never interpreted, and every rank
  /// gets it back through net_address(). Blocks until every rank has joined.
  /// Throws clump::error: bad_arg for a longer address or a closed region
  /// descriptor; not_init, with what to do, when the launcher cannot be
  /// reached, speaks another protocol version, or refuses.
  static std::unique_ptr<job> join(int region_fd, std::span<const std::byte> net_address);

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
  /// The node `rank` runs on: 0 .. node_count() - 1, every index used by at
  /// least one rank (a job of one: 0). Ranks on one node can share memory.
  /// node() and net_address() throw clump::error (bad_arg) for a rank
  /// outside the job.
  virtual int node(int rank) const = 0;
  virtual int node_count() const = 0;
  /// How many ranks of the job run on this host, this one included: the
  /// kernel's processes, not -N's emulated nodes (which share one host).
  virtual int host_ranks() const = 0;
  /// The network address `rank` passed to join(), byte for byte (possibly
  /// empty). Valid as long as the job.
  virtual std::span<const std::byte> net_address(int rank) const = 0;
  /// The key that authenticates the job's datagrams (CLUMP_NET_AUTH: the
  /// launcher decides for the job, and hands it over its socket, never in
  /// the environment); empty when they are not authenticated.
  virtual std::span<const std::byte> net_key() const = 0;

  virtual void barrier(const progress_fn& progress) = 0;
  /// dst receives size() * len bytes, rank order.
  virtual void allgather(const void* src, void* dst, size_t len, const progress_fn& progress) = 0;
  virtual void broadcast(void* buf, size_t len, int root, const progress_fn& progress) = 0;
  /// Ends the whole job with `code` (clumprun kills the other ranks and exits
  /// with it). Does not return.
  [[noreturn]] virtual void exit_job(int code) = 0;
  /// The value of `name` in the launcher's environment.
  virtual std::optional<std::string> getenv_master(const std::string& name) = 0;
  /// From now on, `f` hears (from a thread of the boot layer) of every rank
  /// whose process exits while this one runs, with its wait status: the
  /// launcher says so. A job of one has nobody to hear of.
  virtual void on_peer_exit(std::function<void(int rank, int status)> f) = 0;
};

}  // namespace clump::boot
