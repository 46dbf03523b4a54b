#pragma once
// The process-wide state of the am layer: this process's shared region, the
// job it belongs to, the regions of its peers, and a cache of views of remote
// endpoints (built on first use, then read without locks on every send).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "am/transport.hpp"
#include "boot/job.hpp"
#include "shm/queue_block.hpp"
#include "shm/region.hpp"

namespace clump {
class bundle;
}

namespace clump::am {

/// A remote (or local) endpoint as a sender sees it: through shared memory
/// (its queue block, mapped here) or, on another node, through the network.
struct remote_endpoint {
  transport_kind kind = transport_kind::shm;  // the one byte the hot path tests
  transport* via = nullptr;                   // the transport that reaches it
  shm::queue_block_view view;     // shared memory only
  shm::head_cache request_cache;  // this process's copy of the request queue head
  shm::head_cache reply_cache;
  std::byte* region_base = nullptr;  // the owner's region, mapped here (shared memory only)
  uint64_t region_size = 0;          // its size, as checked when it was mapped
  pid_t pid = 0;                     // the owner's process (shared memory only)
  std::atomic<bool> gone{false};     // its process was found dead: fail sends at once
  // Cross-memory attach into its process (a private segment): 0 not tried
  // yet, 1 works, -1 the kernel refuses it (long payloads then go through the ring).
  // Relaxed everywhere: a hint that orders nothing; a stale value costs one
  // more probe or one message through the ring.
  std::atomic<int8_t> cma{0};
  // It could not pull a shared copy's rest from our memory (the kernel
  // refuses): our long messages to it are no longer shared copies. Relaxed: a hint.
  std::atomic<bool> no_pull{false};
  // Network only: what the endpoint told us about itself in its last message
  // (a reply goes out with the requester's tag, to its generation).
  std::atomic<uint64_t> peer_tag{0};
  std::atomic<uint64_t> peer_gen{0};
  int rank = 0;
  uint32_t slot = 0;
};

/// Our endpoint in `slot` as it is now, when it is the one a message from
/// another process meant (alive, of generation `gen`); else nullptr.
remote_endpoint* meant(class process& p, uint8_t slot, uint64_t gen, uint64_t& state) noexcept;

inline constexpr uint32_t source_id(int rank, uint32_t slot) noexcept {
  return (static_cast<uint32_t>(rank) << 8) | slot;
}
inline constexpr int source_rank(uint32_t id) noexcept { return static_cast<int>(id >> 8); }
inline constexpr uint32_t source_slot(uint32_t id) noexcept { return id & 0xffu; }

class process {
 public:
  /// The process's state, created (region, job, peers) on first use. Throws
  /// clump::error when joining the job fails.
  static process& get();
  /// The state if it exists already, else nullptr.
  static process* existing() noexcept;

  shm::region& region() noexcept { return *region_; }
  boot::job& job() noexcept { return *job_; }
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  uint64_t job_id() const noexcept { return job_id_; }

  /// The endpoint `id` (rank << 8 | slot) as seen from here, or nullptr when
  /// no such rank or slot exists. Lock-free after the first call per endpoint.
  remote_endpoint* remote(uint32_t id) noexcept {
    int r = source_rank(id);
    uint32_t s = source_slot(id);
    if (r >= size_ || s >= max_slots_) [[unlikely]]
      return nullptr;
    // Acquire: pairs with the release that publishes a new entry.
    remote_endpoint* e = remotes_[static_cast<size_t>(r) * max_slots_ + s].load(std::memory_order_acquire);
    return e ? e : make_remote(r, s);
  }

  /// Whether endpoint slot `slot` can exist on `rank` (what remote() would
  /// find), without reaching it.
  bool has_endpoint(int rank, uint32_t slot) const noexcept {
    if (rank < 0 || rank >= size_ || slot >= max_slots_) return false;
    return via_[static_cast<size_t>(rank)]->may_exist(rank, slot);
  }

  /// The transport that polls for what arrives (the network's), or nullptr
  /// when every rank is reached through shared memory.
  transport* polled() noexcept { return polled_; }
  /// The transport between nodes, or nullptr.
  const node_transport* between_nodes() const noexcept { return net_.get(); }
  /// Receives from the network now, if there is one. Returns what it found.
  unsigned poll_network() noexcept { return polled_ ? polled_->poll() : 0; }
  /// Endpoint `slot` of this process now has this segment (nullptr: none).
  void segment_changed(uint32_t slot, std::byte* base, size_t length) noexcept {
    if (polled_) polled_->segment_changed(slot, base, length);
  }
  /// The regions of this node's processes, and `rank`'s mapped now if it was
  /// not yet: nullptr when it has none or the mapping failed (logged,
  /// saying what this was `doing`).
  shm::peer_regions& peers() noexcept { return peers_; }
  std::byte* map_peer(int rank, const char* doing) noexcept;
  /// After this process published a change of one of its segments: waits
  /// until no process of the node is inside a copy into a segment (so none
  /// still writes into the old one). False when one kept copying for 2 s
  /// (the old memory must then be retired, not reused).
  bool quiesce_copies() noexcept;
  /// The program has left the job (its runtime is gone, after the last
  /// barrier): segments of the region released from now on are retired
  /// without waiting for copies, which would map the region of every process of the node
  /// that this one never sent to (see shm::peer_regions). The memory is
  /// never handed out again, so a late copy into it harms nothing.
  void leaving() noexcept { leaving_.store(true, std::memory_order_relaxed); }
  bool is_leaving() const noexcept { return leaving_.load(std::memory_order_relaxed); }

  /// Whether blocking waits give up the core between polls (CLUMP_YIELD):
  /// with more ranks than cores on this host, the rank a waiter needs may
  /// be waiting for this very core.
  bool crowded() const noexcept { return crowded_; }

  // ---- ranks whose process is gone -------------------------------------
  /// Records that `rank`'s process is gone (`how`: "has exited", "is
  /// unreachable..."): said once; sends to it fail at once from now on.
  void found_dead(int rank, const char* how, bool quietly = false, bool from_network = false) noexcept;
  /// Looks whether the processes of this node's other ranks still exist (a
  /// kill(pid, 0) each), at most once in `every`; returns deaths() after.
  uint64_t check_local_peers(std::chrono::milliseconds every = std::chrono::milliseconds(100)) noexcept;
  /// True once `rank` is known to be gone; a rank of this node is looked at now.
  bool rank_failed(int rank) noexcept;
  bool known_dead(int rank) const noexcept {
    // Relaxed: a flag that only ever turns on; its news travels with deaths_.
    return rank >= 0 && rank < size_ && dead_[static_cast<size_t>(rank)].load(std::memory_order_relaxed);
  }
  /// How many deaths this process has found, and how many the program has
  /// acknowledged (acknowledge_failures); when the last was found.
  uint64_t deaths() const noexcept { return deaths_.load(std::memory_order_acquire); }
  uint64_t acknowledged() const noexcept { return acknowledged_.load(std::memory_order_relaxed); }
  void acknowledge() noexcept { acknowledged_.store(deaths(), std::memory_order_relaxed); }
  std::chrono::steady_clock::time_point last_death() const noexcept {
    return std::chrono::steady_clock::time_point(
        std::chrono::steady_clock::duration(last_death_.load(std::memory_order_relaxed)));
  }

  /// The progress function for a boot collective called by the thread that
  /// owns bundle `b`: polls `b` (only: other bundles may belong to other
  /// threads) and, when idle, sleeps briefly on its wake word.
  static boot::progress_fn progress_fn(bundle& b);

 private:
  process();
  remote_endpoint* make_remote(int rank, uint32_t slot) noexcept;

  std::unique_ptr<shm::region> region_;
  std::unique_ptr<boot::job> job_;
  shm::peer_regions peers_;
  int rank_ = 0;
  int size_ = 1;
  uint64_t job_id_ = 0;
  uint32_t max_slots_ = 256;
  std::unique_ptr<std::atomic<remote_endpoint*>[]> remotes_;
  std::vector<std::unique_ptr<remote_endpoint>> remote_storage_;
  std::mutex mutex_;  // guards remote_storage_ (setup path)

  // The transports: shared memory always; the network when some rank is on
  // another node (or CLUMP_PROTOCOL=net). By rank: the one that reaches it.
  std::unique_ptr<transport> shm_;
  std::unique_ptr<node_transport> net_;
  transport* polled_ = nullptr;
  std::vector<transport*> via_;

  std::unique_ptr<std::atomic<bool>[]> dead_;  // by rank
  std::atomic<uint64_t> deaths_{0}, acknowledged_{0};
  std::atomic<bool> leaving_{false};
  bool crowded_ = false;
  std::atomic<std::chrono::steady_clock::rep> last_death_{0};
  std::atomic<std::chrono::steady_clock::rep> last_check_{0};
  std::mutex dead_mutex_;  // one finder at a time: said once
};

}  // namespace clump::am
