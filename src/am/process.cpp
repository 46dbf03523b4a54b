#include "am/process.hpp"

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include <clump/am.hpp>

#include "am/endpoint_impl.hpp"
#include "am/returns.hpp"
#include "am/via_shm/transport.hpp"
#include "boot/pmix.hpp"
#include "shm/wake.hpp"
#include "core/log.hpp"
#include "core/settings.hpp"

namespace clump::am {

namespace {
std::atomic<process*> instance{nullptr};

/// The cores this job may use on this host: what clumprun may run on when it
/// says (CLUMP_HOST_CPUS); else the cgroup's cpuset (Slurm's allocation,
/// which outlasts the binding of each task to fewer); else the online CPUs.
int cores_for_job(const core::config& cfg) {
  if (cfg.host_cpus > 0) return cfg.host_cpus;
  std::FILE* f = std::fopen("/proc/self/cgroup", "r");
  char line[4096];
  std::string path;
  while (f && std::fgets(line, sizeof line, f))
    if (std::strncmp(line, "0::", 3) == 0) path.assign(line + 3, std::strcspn(line + 3, "\n"));
  if (f) std::fclose(f);
  int n = 0;
  if (!path.empty() && (f = std::fopen(("/sys/fs/cgroup" + path + "/cpuset.cpus.effective").c_str(), "r"))) {
    // A list of ranges: "0-3,8,10-11".
    unsigned a = 0, b = 0;
    char sep = 0;
    while (std::fscanf(f, "%u", &a) == 1) {
      b = a;
      if (std::fscanf(f, "%c", &sep) == 1 && sep == '-') {
        if (std::fscanf(f, "%u", &b) != 1) break;
        if (std::fscanf(f, "%c", &sep) != 1) sep = 0;
      }
      if (b >= a) n += static_cast<int>(b - a + 1);
      if (sep != ',') break;
    }
    std::fclose(f);
  }
  if (n > 0) return n;
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? static_cast<int>(online) : 1;
}
}  // namespace

process::process() {
  const auto& cfg = core::settings();
  region_ = std::make_unique<shm::region>(cfg.shm_queue_depth, cfg.shm_medium_ring, cfg.max_endpoints,
                                          cfg.shm_region_size);
  // Under a PMIx server the rank and size are known only once joined.
  const bool by_pmix = cfg.boot_fd < 0 && boot::started_by_pmix();
  const int early_rank = cfg.boot_fd >= 0 ? cfg.rank : by_pmix ? std::atoi(std::getenv("PMIX_RANK")) : 0;
  region_->set_rank(early_rank);
  // A launched job of several ranks may span nodes: open the socket first, so
  // that its address travels with the rendezvous.
  // A failure here matters only if some rank turns out to be on another node.
  std::string net_failure;
  if ((cfg.boot_fd >= 0 && cfg.size > 1) || by_pmix) {
    try {
      net_ = open_node_transport(*this, cfg, early_rank);
    } catch (const error& e) {
      net_failure = e.what();
    }
  }
  const std::vector<std::byte> address = net_ ? net_->address_blob() : std::vector<std::byte>{};
  job_ = boot::job::join(region_->fd(), address);
  rank_ = job_->rank();
  size_ = job_->size();
  job_id_ = job_->id();
  region_->set_rank(rank_);
  const int host_ranks = job_->host_ranks(), host_cpus = cores_for_job(cfg);
  crowded_ = cfg.yield == 1 || (cfg.yield == 0 && host_ranks > host_cpus);
  if (crowded_ && rank_ == 0)
    core::log_info("crowded host: %d ranks of the job on %d core%s%s; blocking waits give up the core between "
                   "polls and look at the network at every poll",
                   host_ranks, host_cpus, host_cpus == 1 ? "" : "s", cfg.yield == 1 ? " (CLUMP_YIELD=on)" : "");

  // Routing: shared memory with the ranks of our node, the network with the
  // others (with every other rank under CLUMP_PROTOCOL=net).
  std::vector<char> net_rank(static_cast<size_t>(size_), 0);
  bool any_net = false;
  for (int r = 0; r < size_; ++r)
    if (r != rank_ && (cfg.force_net || job_->node(r) != job_->node(rank_))) net_rank[static_cast<size_t>(r)] = 1, any_net = true;
  std::vector<int> fds = job_->take_region_fds();
  peers_.reserve(static_cast<size_t>(size_));
  for (size_t r = 0; r < fds.size(); ++r) {
    if (net_rank[r]) {
      ::close(fds[r]);  // another node: never mapped
      continue;
    }
    peers_.attach(static_cast<int>(r), fds[r], region_.get());
  }
  if (!peers_.base(rank_)) {
    // A job of one or a launcher that passed no descriptors: map our own.
    peers_.attach(rank_, -1, region_.get());
  }
  dead_ = std::make_unique<std::atomic<bool>[]>(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) dead_[static_cast<size_t>(r)].store(false, std::memory_order_relaxed);
  remotes_ = std::make_unique<std::atomic<remote_endpoint*>[]>(static_cast<size_t>(size_) * max_slots_);
  // The launcher says when a rank's process exits: its peers then stop
  // waiting for it at once (the network would find out only after
  // CLUMP_NET_TIMEOUT_MS, and only with messages in flight to it).
  job_->on_peer_exit([this](int r, int status) {
    char how[96];
    if (WIFEXITED(status))
      std::snprintf(how, sizeof how, "has exited with code %d (the launcher says so)", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
      std::snprintf(how, sizeof how, "was killed by signal %d (the launcher says so)", WTERMSIG(status));
    else
      std::snprintf(how, sizeof how, "has exited (the launcher says so)");
    found_dead(r, how, WIFEXITED(status) && WEXITSTATUS(status) == 0);
  });
  for (size_t i = 0; i < static_cast<size_t>(size_) * max_slots_; ++i)
    remotes_[i].store(nullptr, std::memory_order_relaxed);
  shm_ = std::make_unique<shm_transport>(*this);
  via_.assign(static_cast<size_t>(size_), shm_.get());

  if (!any_net && !cfg.keep_net) {
    net_.reset();  // every rank shares this node
    return;
  }
  if (!net_ && !any_net) return;  // CLUMP_PROTOCOL=multi without a socket (a job of one): nothing to keep open
  if (!net_)
    throw error(status::resource, "starting the network",
                "some ranks of this job are on other nodes, but this process could not open its network: " + net_failure);
  std::vector<std::vector<std::byte>> addresses(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r)
    if (net_rank[static_cast<size_t>(r)]) {
      auto a = job_->net_address(r);
      addresses[static_cast<size_t>(r)].assign(a.begin(), a.end());
      via_[static_cast<size_t>(r)] = net_.get();
    }
  net_->start(job_id_, rank_, addresses, job_->net_key());
  polled_ = net_.get();
  // At a normal exit, give the network a moment to deliver what is in flight
  // and to acknowledge what arrived, so that peers see no false failures.
  std::atexit([] {
    process* p = existing();
    if (p && p->polled_) p->polled_->leave(std::chrono::milliseconds(500));
  });
}

remote_endpoint* meant(process& p, uint8_t slot, uint64_t gen, uint64_t& state) noexcept {
  remote_endpoint* own = p.remote(source_id(p.rank(), slot));
  // Relaxed: see queue_block.hpp (state).
  state = own ? own->view.header->state.load(std::memory_order_relaxed) : 0;
  return own && state == shm::alive_state(gen) ? own : nullptr;
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

void process::found_dead(int rank, const char* how, bool quietly, bool from_network) noexcept {
  if (rank < 0 || rank >= size_ || rank == rank_) return;
  {
    std::lock_guard lock(dead_mutex_);
    if (dead_[static_cast<size_t>(rank)].load(std::memory_order_relaxed)) return;
    dead_[static_cast<size_t>(rank)].store(true, std::memory_order_relaxed);
    // Relaxed: published by the release increment of deaths_ below.
    last_death_.store(std::chrono::steady_clock::now().time_since_epoch().count(), std::memory_order_relaxed);
  }
  // Every endpoint of it is gone: sends to them come back at once (unreachable).
  for (uint32_t s = 0; s < max_slots_; ++s)
    // Relaxed: a hint (see remote_endpoint::gone).
    if (remote_endpoint* e = remotes_[static_cast<size_t>(rank) * max_slots_ + s].load(std::memory_order_acquire))
      e->gone.store(true, std::memory_order_relaxed);
  // Release: pairs with deaths(): whoever sees the count sees the flag.
  deaths_.fetch_add(1, std::memory_order_release);
  // Over the network, what it did not acknowledge comes back now (unless
  // the network itself found it: it is giving them back already).
  if (polled_ && !from_network) polled_->peer_gone(rank);
  // A rank that ended normally (while others go on) is no error to report.
  (quietly ? core::log_info : core::log_error)(
      "rank %d %s; messages to it come back unreachable, and waits that depend on it end with an error", rank, how);
}

uint64_t process::check_local_peers(std::chrono::milliseconds every) noexcept {
  const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  auto last = last_check_.load(std::memory_order_relaxed);
  const auto gap = std::chrono::duration_cast<std::chrono::steady_clock::duration>(every).count();
  // Relaxed: a rate limit between this process's threads; one of them checks.
  if (now - last < gap || !last_check_.compare_exchange_strong(last, now, std::memory_order_relaxed))
    return deaths();
  for (int r = 0; r < size_; ++r)
    if (r != rank_ && peers_.has(r) && !known_dead(r) && ::kill(peers_.geometry(r).pid, 0) != 0 && errno == ESRCH)
      found_dead(r, "has exited (its process is gone)");
  return deaths();
}

bool process::rank_failed(int rank) noexcept {
  if (rank < 0 || rank >= size_ || rank == rank_) return false;
  if (!known_dead(rank) && peers_.has(rank) && ::kill(peers_.geometry(rank).pid, 0) != 0 && errno == ESRCH)
    found_dead(rank, "has exited (its process is gone)");
  return known_dead(rank);
}

bool process::quiesce_copies() noexcept {
  // Every process of the node that may copy into our segments: wait until
  // none is inside a copy. The caller has published the segment change
  // (seq_cst) before this: a copy that starts later reads the new segment.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (int r = 0; r < size_; ++r) {
    // Its counter is in its header: a peer we never sent to is mapped now
    // (it may have sent to us, and be copying into our segment).
    if (!peers_.has(r)) continue;
    std::byte* base = map_peer(r, "releasing a segment (its memory is retired, never used again)");
    if (!base) return false;
    auto& copying = reinterpret_cast<shm::region_header*>(base)->copying;
    const pid_t pid = peers_.geometry(r).pid;
    for (unsigned round = 0;; ++round) {
      // seq_cst: pairs with the copier's seq_cst increment (copy_guard).
      if (copying.load(std::memory_order_seq_cst) == 0) break;
      if (r != rank_ && (round & 255) == 255 && ::kill(pid, 0) != 0 && errno == ESRCH) break;  // it has exited
      if (std::chrono::steady_clock::now() >= deadline) {
        core::log_warning("rank %d kept copying into segments for 2 s while this process released one; the "
                          "released memory is retired, never used again",
                          r);
        return false;
      }
      sched_yield();
    }
  }
  return true;
}

std::byte* process::map_peer(int rank, const char* doing) noexcept {
  try {
    return peers_.map(rank);
  } catch (const error& e) {
    core::log_error("%s: %s", doing, e.what());
    return nullptr;
  }
}

remote_endpoint* process::make_remote(int rank, uint32_t slot) noexcept {
  transport& t = *via_[static_cast<size_t>(rank)];
  if (!t.may_exist(rank, slot)) return nullptr;
  auto& cell = remotes_[static_cast<size_t>(rank) * max_slots_ + slot];
  // Reached outside the lock (mapping a region may take a while), kept once.
  std::unique_ptr<remote_endpoint> e = t.reach(rank, slot);
  if (!e) return nullptr;
  std::lock_guard lock(mutex_);
  if (remote_endpoint* known = cell.load(std::memory_order_relaxed)) return known;
  remote_endpoint* raw = e.get();
  remote_storage_.push_back(std::move(e));
  // Release: the view is complete before another thread can find it.
  cell.store(raw, std::memory_order_release);
  return raw;
}

boot::progress_fn process::progress_fn(bundle& b) {
  // See boot::progress_fn: the collective polls, and when idle sleeps on the
  // bundle's wake word (a message wakes it as any sleeper), which the boot
  // layer's socket watcher also rings when the launcher answers.
  boot::progress_fn p;
  p.poll = [&b] { return b.poll(); };
  p.sleep = [&b](const std::atomic<bool>& ready, std::chrono::nanoseconds timeout) {
    // Seq_cst: the sleeper's half of the watcher's handshake (socket_watcher.hpp).
    const std::function<bool()> set = [&ready] { return ready.load(std::memory_order_seq_cst); };
    detail::sleep_bundle(*b.impl(), timeout, &set);
  };
  p.wake = [&b] { shm::wake(*b.impl()->wake); };
  return p;
}

}  // namespace clump::am
