#pragma once
/// \file
/// Joining a clump job: `clump::runtime` is the one object an SPMD program
/// creates first. Under clumprun it joins the job; started alone, the program
/// is a job of one. It owns a bundle and an endpoint whose translation index i
/// names rank i's endpoint, with tags set and a segment allocated in shared
/// memory (CLUMP_SEGMENT_SIZE), ready to send.

#include <cstddef>
#include <cstdint>
#include <memory>

#include <clump/am.hpp>

namespace clump {

class runtime {
 public:
  /// Joins the job. Throws clump::error when the launcher cannot be reached or
  /// shared memory cannot be set up; the message says why and what to do.
  runtime();
  runtime(int& argc, char**& argv);
  /// Waits for every rank (a barrier) so that no rank frees its endpoint while
  /// another may still send to it, unless an exception is unwinding. Handlers
  /// still run during that barrier: a program whose handlers use objects that
  /// die before the runtime (locals declared after it) ends its traffic with
  /// barrier() first, as the examples do.
  ~runtime();
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  int rank() const noexcept;
  int size() const noexcept;
  uint64_t job_id() const noexcept;
  /// The ranks on this process's node (itself included): those it reaches
  /// through shared memory, and whose memory comes from the same machine.
  int node_size() const noexcept;

  clump::bundle& bundle() noexcept;
  clump::endpoint& endpoint() noexcept;

  /// Waits until every rank has called barrier(); keeps handling the messages
  /// of this runtime's bundle meanwhile (call it from the thread that polls it).
  void barrier();
  /// dst receives size() * len bytes, in rank order.
  void allgather(const void* src, void* dst, size_t len);
  void broadcast(void* buf, size_t len, int root);
  /// Polls, then sleeps when idle, until `done()` is true.
  template <class Pred>
  void wait_until(Pred&& done) {
    bundle().wait_until(std::forward<Pred>(done));
  }
  /// Ends the whole job with `code` (every rank exits). Does not return.
  [[noreturn]] void exit(int code);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace clump
