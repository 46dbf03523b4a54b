#include "am/process.hpp"

#include <chrono>
#include <memory>

#include <clump/am.hpp>

#include "am/endpoint_impl.hpp"
#include "core/log.hpp"
#include "core/settings.hpp"

namespace clump::am {

namespace {
std::atomic<process*> instance{nullptr};
}

process::process() {
  const auto& cfg = core::settings();
  region_ = std::make_unique<shm::region>(cfg.shm_queue_depth, cfg.shm_medium_ring, cfg.max_endpoints,
                                          cfg.shm_region_size);
  region_->set_rank(cfg.boot_fd >= 0 ? cfg.rank : 0);
  job_ = boot::job::join(region_->fd());
  rank_ = job_->rank();
  size_ = job_->size();
  job_id_ = job_->id();
  region_->set_rank(rank_);
  std::vector<int> fds = job_->take_region_fds();
  for (size_t r = 0; r < fds.size(); ++r) peers_.attach(static_cast<int>(r), fds[r], region_.get());
  if (peers_.count() < static_cast<size_t>(size_)) {
    // A job of one or a launcher that passed no descriptors: map our own.
    peers_.attach(rank_, -1, region_.get());
  }
  remotes_ = std::make_unique<std::atomic<remote_endpoint*>[]>(static_cast<size_t>(size_) * max_slots_);
  for (size_t i = 0; i < static_cast<size_t>(size_) * max_slots_; ++i)
    remotes_[i].store(nullptr, std::memory_order_relaxed);
}

process& process::get() {
  // Magic static: thread-safe creation; the pointer is kept for existing().
  static process* p = [] {
    auto* q = new process();  // lives until exit: handlers may run during static destruction
    instance.store(q, std::memory_order_release);
    return q;
  }();
  return *p;
}

process* process::existing() noexcept { return instance.load(std::memory_order_acquire); }

remote_endpoint* process::make_remote(int rank, uint32_t slot) noexcept {
  std::byte* base = peers_.base(rank);
  if (!base) return nullptr;
  auto* h = reinterpret_cast<const shm::region_header*>(base);
  if (slot >= h->max_endpoints) return nullptr;
  std::lock_guard lock(mutex_);
  auto& cell = remotes_[static_cast<size_t>(rank) * max_slots_ + slot];
  if (remote_endpoint* e = cell.load(std::memory_order_relaxed)) return e;
  auto e = std::make_unique<remote_endpoint>();
  e->view = shm::view_queue_block(base + h->queue_block_base + h->queue_block_stride * slot, base, h->depth,
                                  h->ring_bytes);
  e->region_base = base;
  e->rank = rank;
  e->slot = slot;
  remote_endpoint* raw = e.get();
  remote_storage_.push_back(std::move(e));
  // Release: the view is complete before another thread can find it.
  cell.store(raw, std::memory_order_release);
  return raw;
}

boot::progress_fn process::progress_fn(bundle& b) {
  // See boot::progress_fn: poll; after CLUMP_SPIN_BEFORE_SLEEP_US without a
  // message, sleep on the bundle's wake word for a short while, so that a rank
  // waiting in a barrier uses no CPU yet answers messages at once.
  auto last_work = std::make_shared<std::chrono::steady_clock::time_point>(std::chrono::steady_clock::now());
  const auto spin = std::chrono::microseconds(core::settings().spin_before_sleep_us);
  return [&b, last_work, spin] {
    const auto now = std::chrono::steady_clock::now();
    if (b.poll() != 0) {
      *last_work = now;
      return;
    }
    if (now - *last_work >= spin) b.sleep_until_message(std::chrono::microseconds(200));
  };
}

}  // namespace clump::am
