#pragma once
// The physical limits a shared-memory message layer is measured against, taken
// in the same run, between the same two cores as the ranks:
// - cache-line ping-pong: two processes, each spinning on its own cache line
//   that only the other one writes; the one-way time is half a round trip.
//   No one-way message between the two cores can cost less.
// - single-core memcpy bandwidth: what one copy of a long payload can reach.

#include <sched.h>
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "measure.hpp"

namespace bench {

/// One flag in shared memory, alone in a 128-byte block (two lines, so that
/// an adjacent-line prefetch never pulls the other flag along).
struct alignas(128) flag_line {
  std::atomic<uint64_t> value{0};
};

/// The flags of the ping-pong: the driver spins on `to_driver`, which only the
/// echoer writes, and the echoer on `to_echoer`, which only the driver writes.
///
/// Sessions: the driver counts up from 0 across sessions and ends each one
/// with a value carrying `stop_bit`; the echoer returns every new value it
/// sees until it sees that bit. Each side keeps its own count across sessions
/// (driver: `seq`; echoer: the last value seen), so a session may start before
/// or after the echoer has entered it.
struct pingpong_lines {
  static constexpr uint64_t stop_bit = uint64_t{1} << 63;
  flag_line to_driver;
  flag_line to_echoer;
  flag_line quit;  ///< helper process only: leave for good after this session
  /// Rank 1 counts here the sessions it has entered, so that the driver can
  /// wait for it (polling clump) before timing: over a lossy network the
  /// request that starts a session may need a retransmission.
  flag_line entered;
};

/// Memory mapped shared between processes: by name (POSIX shm, for two ranks
/// started separately) or anonymous (inherited across fork).
class shared_area {
 public:
  /// Creates /dev/shm/<name> (which must not exist) of `bytes`, zeroed. Throws std::runtime_error.
  static shared_area create(const std::string& name, size_t bytes);
  /// Opens and maps an area another process created. Throws std::runtime_error.
  static shared_area open(const std::string& name, size_t bytes);
  /// An anonymous MAP_SHARED area, shared with children forked later.
  static shared_area anonymous(size_t bytes);

  shared_area(shared_area&& o) noexcept;
  shared_area& operator=(shared_area&&) = delete;
  ~shared_area();

  void* data() const noexcept { return data_; }
  /// Removes the name (mappings stay valid); call once both sides mapped it.
  void unlink() noexcept;

 private:
  shared_area(void* data, size_t bytes, std::string name) : data_(data), bytes_(bytes), name_(std::move(name)) {}
  void* data_;
  size_t bytes_;
  std::string name_;  // empty: anonymous, or already unlinked
};

/// The driver's side of the cache-line ping-pong, as a workload whose figure
/// is the one-way time in microseconds. `begin`/`end` are left to the caller
/// (who must get the echoer into a session); end_session() must follow each loop.
class cache_line_driver {
 public:
  explicit cache_line_driver(pingpong_lines& lines) : lines_(&lines) {}
  workload make();
  /// Tells the echoer that this session is over.
  void end_session() noexcept;

 private:
  pingpong_lines* lines_;
  uint64_t seq_ = 0;
};

/// The echoer's side: echoes every new value until the session ends. `last`
/// is the echoer's memory across sessions (start it at 0).
void echo_session(pingpong_lines& lines, uint64_t& last) noexcept;

/// A forked process that echoes for the driver, pinned to a CPU: the partner
/// of the ping-pong when there is no second rank. It spins from start() to
/// stop(), as a polling rank would.
class echo_helper {
 public:
  echo_helper() = default;
  echo_helper(const echo_helper&) = delete;
  echo_helper& operator=(const echo_helper&) = delete;
  ~echo_helper() { stop(); }
  /// Maps the lines and forks the helper pinned to `cpu`. Throws std::runtime_error.
  void start(int cpu);
  void stop() noexcept;
  pingpong_lines& lines() const noexcept { return *lines_; }

 private:
  pingpong_lines* lines_ = nullptr;
  void* area_ = nullptr;
  pid_t child_ = -1;
};

/// memcpy of `bytes` from a private page-aligned buffer into `dst`, or into a
/// second private buffer when `dst` is null; both reused and warm. With
/// `slots` > 1 the copies go to `slots` areas of `bytes` in turn (as
/// long_stream writes its rotating area). GB/s.
workload memcpy_workload(size_t bytes, std::byte* dst = nullptr, int slots = 1);

/// Pins the calling thread to one CPU; returns false (errno set) on failure.
bool pin_to(int cpu) noexcept;

/// The CPUs in a set, ascending.
std::vector<int> cpus_of(const cpu_set_t& set);
/// "0", "0-3", "0,2" for a list of CPUs.
std::string cpu_list_text(const std::vector<int>& cpus);

}  // namespace bench
