#pragma once
// The frames clumprun sends a rank, read by a thread of their own once the
// rank has joined (boot/launched_job.cpp). Some need no one to ask for them
// and are acted on at once, whatever the program is doing:
//   end          another rank ended the job (exit_job): flush stdio and exit
//                with its code;
//   peer_exited  a rank's process has exited: its peers stop waiting for it
//                (the callback from on_peer_exit; see job.hpp);
// the rest (the answers to collectives and getenv) wait in a queue for the
// thread that asked. A thread waiting for one polls its active messages and
// sleeps; take() wakes it (its `wake`) when a frame arrives, after setting
// ready(), which its sleep checks after announcing itself (the Dekker
// pattern of shm/wake.hpp), so no frame is missed. When the launcher is gone
// (end of stream, a broken stream) the waiter is told too.

#include <atomic>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "boot/channel.hpp"

namespace clump::boot {

class inbox {
 public:
  /// Reads `sock` from `reader` on (which holds what was read before).
  inbox(int sock, frame_reader& reader) noexcept : sock_(sock), in_(reader) {}
  ~inbox();
  inbox(const inbox&) = delete;
  inbox& operator=(const inbox&) = delete;

  /// Called (from the reading thread) for each peer_exited notice.
  void on_peer_exit(std::function<void(int rank, int status)> f);
  /// Starts the reading thread (once); false when it cannot be made (the
  /// caller then reads the socket itself).
  bool start() noexcept;
  bool started() const noexcept { return thread_.joinable(); }

  enum class result { frame, none, lost };
  /// The next queued frame, if any; `lost` (with `why`) once the stream ended.
  result take(frame& out, std::string& why);
  /// A waiter announces itself: `wake` is called (once) when a frame arrives
  /// or the stream ends; ready() is true from then on. disarm() stops that;
  /// when it returns, `wake` is not running and will not be called.
  void arm(std::function<void()> wake);
  void disarm();
  const std::atomic<bool>& ready() const noexcept { return ready_; }

 private:
  void run() noexcept;
  void deliver(frame f);
  void ring() noexcept;  // with mutex_ held

  int sock_;
  frame_reader& in_;
  int control_ = -1;  // an eventfd: the destructor stops the thread through it
  std::mutex mutex_;  // guards everything below; held while `wake_` runs
  std::deque<frame> queue_;
  bool lost_ = false;
  std::string why_;
  std::function<void()> wake_;
  std::function<void(int, int)> peer_exit_;
  std::deque<std::pair<int, int>> early_exits_;  // notices before on_peer_exit
  bool stop_ = false;
  std::atomic<bool> ready_{false};
  std::thread thread_;
};

}  // namespace clump::boot
