// A job started by a PMIx server (srun --mpi=pmix, mpirun): rank, size,
// nodes, tags, addresses and the collectives through PMIx; the regions'
// descriptors through a socket of each node; the datagram key sealed for
// each rank. News of peers that exit comes from the launcher ending the job,
// and before that from clump's own detection (pids, the network's timeout).
#include "boot/pmix.hpp"

#include <clump/status.hpp>

#if defined(CLUMP_HAVE_PMIX)

#include <fcntl.h>
#include <pmix.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "boot/wire.hpp"
#include "core/log.hpp"
#include "core/settings.hpp"

#if defined(CLUMP_HAVE_SODIUM)
#include <sodium.h>
#endif

namespace clump::boot {

namespace {

/// "rank R on HOST": who failed, for errors (the rank from the launcher's
/// environment, since PMIx_Init itself may be what failed).
std::string who() {
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  const char* r = std::getenv("PMIX_RANK");
  return std::string("rank ") + (r ? r : "?") + " on " + host;
}

[[noreturn]] void fail(const char* call, pmix_status_t rc, const std::string& what) {
  throw error(status::not_init, "joining the job through PMIx",
              who() + ": " + call + " failed (" + PMIx_Error_string(rc) + ")" + (what.empty() ? "" : " " + what));
}

/// Ends the job with `code` (not 0) through PMIx_Abort: the launcher ends
/// every rank and exits with the code. (Not by exiting with it: the rank
/// would then be gone while the others may wait in a fence, and mpirun
/// across hosts completes a fence without a rank that has died, so they
/// went on past a barrier; and srun lets a step's other ranks run on.)
[[noreturn]] void end_job(int code, const char* why) {
  std::fflush(nullptr);
  PMIx_Abort(code, why, nullptr, 0);
  ::_exit(code);
}

/// What each rank publishes once.
struct hello {
  uint64_t id = 0;   // rank 0's is the job's
  uint64_t tag = 0;
  int32_t rank = -1;
  int32_t pid = 0;
  int32_t leader = 0;  // lowest rank of its node
  uint32_t address_bytes = 0;
  std::byte address[job::max_net_address]{};
  unsigned char box_key[32]{};  // a public key for the job's sealed datagram key (libsodium crypto_box)
};

/// The datagram key as rank 0 hands it to each rank: sealed with that rank's
/// public key (crypto_box_seal), so that what PMIx carries between hosts,
/// in clear, says nothing of it.
constexpr size_t sealed_key_bytes = 32 + 48;  // key + crypto_box_SEALBYTES

/// A rank's line on its node's board (shared memory of the node's ranks):
/// how many fences it has entered. A launcher may complete a fence without
/// a rank that has died or finalized (OpenMPI 4.1.4's mpirun across hosts
/// does); the board lets the rank's node see that it never entered.
struct alignas(64) board_slot {
  std::atomic<uint64_t> entered{0};
};

// ---- descriptors between the ranks of one node -------------------------------------

/// Descriptors per message: the kernel takes at most 253 (SCM_MAX_FD) in one.
constexpr size_t fds_per_message = 200;

/// Sends n hellos, with the descriptor that goes with each, in one message;
/// and `extra`, when it is not -1, after them (the node's board).
bool send_fds(int sock, const hello* items, const int* fds, size_t n, int extra = -1) {
  msghdr m{};
  iovec io{const_cast<hello*>(items), n * sizeof(hello)};
  m.msg_iov = &io;
  m.msg_iovlen = 1;
  const size_t k = n + (extra >= 0 ? 1 : 0);
  std::vector<char> control(CMSG_SPACE(k * sizeof(int)));
  m.msg_control = control.data();
  m.msg_controllen = control.size();
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(k * sizeof(int));
  std::memcpy(CMSG_DATA(c), fds, n * sizeof(int));
  if (extra >= 0) std::memcpy(CMSG_DATA(c) + n * sizeof(int), &extra, sizeof(int));
  return ::sendmsg(sock, &m, MSG_NOSIGNAL) == static_cast<ssize_t>(n * sizeof(hello));
}

/// Receives up to `max` (hello, descriptor) pairs within `wait_ms`, and,
/// where `extra` is given, the one descriptor that may follow them (-1 when
/// none did); returns how many pairs, or -1.
int recv_fds(int sock, hello* items, int* fds, size_t max, int wait_ms, int* extra = nullptr) {
  pollfd p{sock, POLLIN, 0};
  if (::poll(&p, 1, wait_ms) != 1) return -1;
  msghdr m{};
  iovec io{items, max * sizeof(hello)};
  m.msg_iov = &io;
  m.msg_iovlen = 1;
  std::vector<char> control(CMSG_SPACE((max + 1) * sizeof(int)));
  m.msg_control = control.data();
  m.msg_controllen = control.size();
  const ssize_t got = ::recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
  if (got <= 0 || got % sizeof(hello) || (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) return -1;
  const size_t n = static_cast<size_t>(got) / sizeof(hello);
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  if (!c || c->cmsg_type != SCM_RIGHTS) return -1;
  const bool more = c->cmsg_len == CMSG_LEN((n + 1) * sizeof(int));
  if (c->cmsg_len != CMSG_LEN(n * sizeof(int)) && !more) return -1;
  std::memcpy(fds, CMSG_DATA(c), n * sizeof(int));
  if (more) {
    int x = -1;
    std::memcpy(&x, CMSG_DATA(c) + n * sizeof(int), sizeof(int));
    if (!extra) {
      ::close(x);
      return -1;
    }
    *extra = x;
  } else if (extra) {
    *extra = -1;
  }
  return static_cast<int>(n);
}

sockaddr_un node_socket_name(const char* nspace, int leader, socklen_t& len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const int n = std::snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "clump-pmix-%s-%d", nspace, leader);
  len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + static_cast<size_t>(n));
  return a;  // abstract: sun_path[0] is 0
}

class pmix_job final : public job {
 public:
  pmix_job(int region_fd, std::span<const std::byte> net_address) {
    pmix_status_t rc = PMIx_Init(&me_, nullptr, 0);
    if (rc != PMIX_SUCCESS) fail("PMIx_Init", rc, "(is the launcher's PMIx server reachable?)");
    PMIX_LOAD_PROCID(&all_, me_.nspace, PMIX_RANK_WILDCARD);
    // The launcher counts a rank that exits without PMIx_Finalize as failed,
    // and this job may outlive main (the process keeps it).
    std::atexit([] {
      if (PMIx_Initialized()) PMIx_Finalize(nullptr, 0);
    });
    rank_ = static_cast<int>(me_.rank);
    core::set_log_rank(rank_);
    size_ = static_cast<int>(get_u32(all_, PMIX_JOB_SIZE));
    // The ranks of this node.
    pmix_value_t* v = nullptr;
    rc = PMIx_Get(&all_, PMIX_LOCAL_PEERS, nullptr, 0, &v);
    if (rc != PMIX_SUCCESS || v->type != PMIX_STRING) fail("PMIx_Get(PMIX_LOCAL_PEERS)", rc, "");
    for (const char* s = v->data.string; *s;) {
      local_.push_back(std::atoi(s));
      while (*s && *s != ',') ++s;
      if (*s == ',') ++s;
    }
    PMIX_VALUE_RELEASE(v);
    std::sort(local_.begin(), local_.end());
    if (local_.empty() || !std::binary_search(local_.begin(), local_.end(), rank_))
      throw error(status::not_init, "joining the job through PMIx", who() + ": PMIX_LOCAL_PEERS does not name this rank");
    const int leader = local_.front();
    // As clumprun sets it, for the program: this rank's index on its node.
    const auto local_rank = std::lower_bound(local_.begin(), local_.end(), rank_) - local_.begin();
    ::setenv("CLUMP_LOCAL_RANK", std::to_string(local_rank).c_str(), 1);
    int listener = -1;
    if (leader == rank_ && local_.size() > 1) listener = listen_node(leader);

    hello h;
    h.rank = rank_;
    if (!wire::random_u64(h.id) || !wire::random_tag(h.tag))
      throw error(status::resource, "joining the job through PMIx", "getrandom failed");
    unsigned char box_public[32]{}, box_secret[32]{};
#if defined(CLUMP_HAVE_SODIUM)
    if (sodium_init() < 0 || crypto_box_keypair(box_public, box_secret) != 0)
      throw error(status::resource, "joining the job through PMIx", "libsodium could not make a key pair");
    std::memcpy(h.box_key, box_public, sizeof box_public);
#endif
    h.pid = ::getpid();
    h.leader = leader;
    h.address_bytes = static_cast<uint32_t>(net_address.size());
    std::memcpy(h.address, net_address.data(), net_address.size());
    // The ranks of a node pass each other their hellos and region
    // descriptors through the node's socket; each node's lowest rank then
    // publishes its node's hellos as one value, and after one fence every
    // rank reads one value per node (not one per rank: 256 Gets took 0.37 s
    // per rank with 256 ranks on one host).
    std::vector<hello> node = share_regions(h, region_fd, leader, listener);
    if (rank_ == leader) put("clump.node", node.data(), node.size() * sizeof(hello));
    fence({});
    read_nodes(node);
    id_ = hellos_[0].id;
    share_key(box_public, box_secret);
  }

  ~pmix_job() override {
    if (board_) ::munmap(board_, local_.size() * sizeof(board_slot));
    for (int fd : region_fds_)
      if (fd >= 0) ::close(fd);
    if (PMIx_Initialized()) PMIx_Finalize(nullptr, 0);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  uint64_t id() const override { return id_; }
  bool launched() const override { return true; }
  uint64_t tag(int r) const override { return at(r, "tag").tag; }
  pid_t pid(int r) const override { return at(r, "pid").pid; }
  int node(int r) const override {
    at(r, "node");
    return node_of_[static_cast<size_t>(r)];
  }
  int node_count() const override { return node_count_; }
  int host_ranks() const override { return static_cast<int>(local_.size()); }
  std::span<const std::byte> net_address(int r) const override {
    const hello& h = at(r, "net_address");
    return {h.address, h.address_bytes};
  }
  std::span<const std::byte> net_key() const override { return key_; }
  std::vector<int> take_region_fds() override { return std::exchange(region_fds_, {}); }

  // With data collection: Slurm 22.05's PMIx plugin completes a fence
  // without it on each node alone, unless mpi.conf sets PMIxFenceBarrier
  // (measured: ranks left the fence while another node's had not entered).
  void barrier(const progress_fn& progress) override { fence(progress); }

  /// Through one value per node: each rank's piece goes to its node's
  /// lowest rank (PMIX_LOCAL, then a fence of the node), which publishes the
  /// node's pieces as one value; after a fence of the job every rank reads
  /// one value per node. (A Get per rank took 1.6 s of a 256-rank job's
  /// start-up on one host: 65 536 Gets on 2 cores.)
  void allgather(const void* src, void* dst, size_t len, const progress_fn& progress) override {
    if (len > 0 && (!src || !dst)) throw error(status::bad_arg, "allgather", "null buffer with a non-zero length");
    const std::string key = "clump.c" + std::to_string(++collectives_);
    auto* out = static_cast<std::byte*>(dst);
    const bool leader = rank_ == local_.front();
    if (local_.size() > 1) {
      if (!leader) put(key, src, len, PMIX_LOCAL);
      fence(progress, node_procs_);
    }
    if (leader) {
      std::vector<std::byte> node(local_.size() * len);
      for (size_t i = 0; i < local_.size(); ++i) {
        std::byte* at = node.data() + i * len;
        if (local_[i] == rank_) {
          if (len) std::memcpy(at, src, len);
        } else {
          get(key, local_[i], at, len);
        }
      }
      put(key + "n", node.data(), node.size());
    }
    fence(progress);
    std::vector<std::byte> node;
    for (const std::vector<int>& ranks : nodes_) {
      node.resize(ranks.size() * len);
      get(key + "n", ranks.front(), node.data(), node.size());
      for (size_t i = 0; i < ranks.size(); ++i)
        if (len) std::memcpy(out + static_cast<size_t>(ranks[i]) * len, node.data() + i * len, len);
    }
  }

  void broadcast(void* buf, size_t len, int root, const progress_fn& progress) override {
    at(root, "broadcast");
    if (len > 0 && !buf) throw error(status::bad_arg, "broadcast", "null buffer with a non-zero length");
    const std::string key = "clump.c" + std::to_string(++collectives_);
    if (rank_ == root) put(key, buf, len);
    fence(progress);
    if (rank_ != root) get(key, root, buf, len);
  }

  /// exit_job(0) ends this rank alone, finalized, as the launchers want a
  /// rank that ends well: every rank calls it at the end of an AM-2
  /// program, and ranks that still wait for this one in a barrier or
  /// collective end the job with 1 (fence()). Not PMIx_Abort(0): Slurm
  /// cancels the step for it (srun exits with 137), and OpenMPI 4.1.4's
  /// mpirun crashed in its PMIx_server_finalize after it in 8 of 60 jobs on
  /// a loaded machine. Another code ends the job (end_job).
  [[noreturn]] void exit_job(int code) override {
    std::fflush(nullptr);
    if (code == 0) {
      if (PMIx_Initialized()) PMIx_Finalize(nullptr, 0);
      ::_exit(0);
    }
    end_job(code, "clump: the job ends (exit_job)");
  }

  std::optional<std::string> getenv_master(const std::string& name) override {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  }

  void on_peer_exit(std::function<void(int, int)>) override {}

 private:
  const hello& at(int r, const char* what) const {
    if (r < 0 || r >= size_)
      throw error(status::bad_arg, what, "rank " + std::to_string(r) + " is not in this job of " + std::to_string(size_));
    return hellos_[static_cast<size_t>(r)];
  }

  uint32_t get_u32(const pmix_proc_t& p, const char* key) {
    pmix_value_t* v = nullptr;
    const pmix_status_t rc = PMIx_Get(&p, key, nullptr, 0, &v);
    if (rc != PMIX_SUCCESS) fail("PMIx_Get", rc, std::string("of ") + key);
    uint32_t out = 0;
    if (v->type == PMIX_UINT32) out = v->data.uint32;
    else if (v->type == PMIX_UINT16) out = v->data.uint16;
    else if (v->type == PMIX_INT) out = static_cast<uint32_t>(v->data.integer);
    PMIX_VALUE_RELEASE(v);
    return out;
  }

  /// Publishes `key` for every rank (PMIX_GLOBAL), or for this node's only
  /// (PMIX_LOCAL: a fence that collects data does not carry it elsewhere).
  void put(const std::string& key, const void* data, size_t len, pmix_scope_t scope = PMIX_GLOBAL) {
    pmix_value_t v;
    PMIX_VALUE_CONSTRUCT(&v);
    v.type = PMIX_BYTE_OBJECT;
    v.data.bo.bytes = static_cast<char*>(const_cast<void*>(data));
    v.data.bo.size = len;
    pmix_status_t rc = PMIx_Put(scope, key.c_str(), &v);
    if (rc != PMIX_SUCCESS) fail("PMIx_Put", rc, "of " + key);
    rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS) fail("PMIx_Commit", rc, "of " + key);
  }

  void get(const std::string& key, int r, void* out, size_t len) {
    pmix_proc_t p;
    PMIX_LOAD_PROCID(&p, me_.nspace, static_cast<pmix_rank_t>(r));
    pmix_value_t* v = nullptr;
    const pmix_status_t rc = PMIx_Get(&p, key.c_str(), nullptr, 0, &v);
    if (rc != PMIX_SUCCESS) fail("PMIx_Get", rc, "of " + key + " from rank " + std::to_string(r));
    const bool ok = v->type == PMIX_BYTE_OBJECT && v->data.bo.size == len;
    if (ok && len) std::memcpy(out, v->data.bo.bytes, len);
    PMIX_VALUE_RELEASE(v);
    if (!ok)
      throw error(status::not_init, "joining the job through PMIx",
                  key + " from rank " + std::to_string(r) + " is not " + std::to_string(len) + " bytes");
  }

  /// The rank of this host that this one watches while it waits in a fence:
  /// the next one on this node (the last watches the first), or -1 when it
  /// is alone here. Every rank that exits is thus watched by one that
  /// waits, unless all of this node's have exited.
  int watched_rank() const {
    if (local_.size() < 2 || hellos_.empty()) return -1;
    auto it = std::upper_bound(local_.begin(), local_.end(), rank_);
    return it == local_.end() ? local_.front() : *it;
  }

  /// Whether process `r` of this host has exited.
  bool has_exited(int r) const {
    return ::kill(hellos_[static_cast<size_t>(r)].pid, 0) != 0 && errno == ESRCH;
  }

  /// Every rank's hello and node, from one value per node: the rank not yet
  /// known with the lowest number is the lowest of its node (every lower
  /// rank is known, and so is its node), so its value lists another node.
  /// Nodes are numbered in the order of their lowest ranks.
  void read_nodes(const std::vector<hello>& own) {
    hellos_.assign(static_cast<size_t>(size_), hello{});
    node_of_.assign(static_cast<size_t>(size_), -1);
    auto bad = [&](int r, const std::string& what) {
      throw error(status::not_init, "joining the job through PMIx",
                  who() + ": the value of rank " + std::to_string(r) + "'s node (clump.node) " + what);
    };
    int nodes = 0;
    for (int r = 0; r < size_; ++r) {
      if (node_of_[static_cast<size_t>(r)] >= 0) continue;
      pmix_proc_t p;
      PMIX_LOAD_PROCID(&p, me_.nspace, static_cast<pmix_rank_t>(r));
      pmix_value_t* v = nullptr;
      const pmix_status_t rc = PMIx_Get(&p, "clump.node", nullptr, 0, &v);
      if (rc != PMIX_SUCCESS) fail("PMIx_Get", rc, "of clump.node from rank " + std::to_string(r));
      std::vector<hello> got;
      if (v->type == PMIX_BYTE_OBJECT && v->data.bo.size % sizeof(hello) == 0) {
        got.resize(v->data.bo.size / sizeof(hello));
        if (!got.empty()) std::memcpy(got.data(), v->data.bo.bytes, v->data.bo.size);
      }
      PMIX_VALUE_RELEASE(v);
      if (got.empty()) bad(r, "is not a list of hellos");
      for (const hello& x : got) {
        if (x.rank < r || x.rank >= size_ || x.leader != r || node_of_[static_cast<size_t>(x.rank)] >= 0)
          bad(r, "names rank " + std::to_string(x.rank) + ", which is not one of its node's");
        hellos_[static_cast<size_t>(x.rank)] = x;
        node_of_[static_cast<size_t>(x.rank)] = nodes;
      }
      if (node_of_[static_cast<size_t>(r)] < 0) bad(r, "does not name that rank");
      ++nodes;
    }
    node_count_ = nodes;
    nodes_.assign(static_cast<size_t>(nodes), {});
    for (int r = 0; r < size_; ++r) nodes_[static_cast<size_t>(node_of_[static_cast<size_t>(r)])].push_back(r);
    for (int r : local_) {
      pmix_proc_t p;
      PMIX_LOAD_PROCID(&p, me_.nspace, static_cast<pmix_rank_t>(r));
      node_procs_.push_back(p);
    }
    // This node's, as its ranks passed them through the node's socket.
    for (const hello& x : own)
      if (std::memcmp(&hellos_[static_cast<size_t>(x.rank)], &x, sizeof x) != 0)
        throw error(status::not_init, "joining the job through PMIx",
                    who() + ": rank " + std::to_string(x.rank) +
                        " published another hello than it passed through the node's socket");
  }

  /// A fence of every rank that collects what they put, serving active
  /// messages while it waits. It does not come back if the job cannot go
  /// on: a fence that fails, or a rank of this host that has exited while
  /// the others wait, ends the job (code 1), since no collective of it can
  /// complete now (and Slurm would leave the other nodes' ranks waiting).
  /// `procs` empty: every rank, collecting what they put; else those ranks
  /// (this node's), without collecting.
  void fence(const progress_fn& progress, const std::vector<pmix_proc_t>& procs = {}, bool confirming = false) {
    // Every rank of a node enters the same fences in the same order (the
    // job's and the node's): each counts them on the board as it enters.
    ++fences_;
    if (board_) board_[local_index()].entered.store(fences_, std::memory_order_release);
    pmix_info_t info;
    PMIX_INFO_CONSTRUCT(&info);
    bool flag = procs.empty();
    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &flag, PMIX_BOOL);
    struct done_t {
      std::atomic<bool> ready{false}, finished{false};
      std::mutex m;
      std::condition_variable cv;
      pmix_status_t rc = PMIX_SUCCESS;
      const progress_fn* progress = nullptr;
    } done;
    done.progress = &progress;
    auto cb = [](pmix_status_t status, void* arg) {
      auto* d = static_cast<done_t*>(arg);
      d->rc = status;
      {
        std::lock_guard<std::mutex> l(d->m);
        d->ready.store(true, std::memory_order_release);
      }
      d->cv.notify_all();
      if (*d->progress && d->progress->wake) d->progress->wake();
      d->finished.store(true, std::memory_order_release);  // the last touch: `done` may go now
    };
    pmix_status_t rc = procs.empty() ? PMIx_Fence_nb(&all_, 1, &info, 1, cb, &done)
                                     : PMIx_Fence_nb(procs.data(), procs.size(), &info, 1, cb, &done);
    if (rc != PMIX_SUCCESS) {
      PMIX_INFO_DESTRUCT(&info);
      fail("PMIx_Fence_nb", rc, "");
    }
    // Serve messages, or sleep (hundreds of ranks on a few cores must not
    // spin here), and look now and then at the rank this one watches: a
    // rank that has exited will never enter this fence, and a launcher does
    // not always fail it (Slurm and mpirun keep a job whose rank exited with
    // 0 after PMIx_Finalize). The rank may also have left this very fence,
    // complete, before our callback ran: hence it must be gone for 5 s.
    const int watched = watched_rank();
    auto next_look = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
    std::chrono::steady_clock::time_point gone_since{};
    while (!done.ready.load(std::memory_order_acquire)) {
      if (progress && progress.poll() > 0) continue;
      if (progress && progress.sleep) {
        progress.sleep(done.ready, std::chrono::milliseconds(10));
      } else {
        std::unique_lock<std::mutex> l(done.m);
        done.cv.wait_for(l, std::chrono::milliseconds(watched >= 0 ? 100 : 1000),
                         [&] { return done.ready.load(std::memory_order_acquire); });
      }
      const auto now = std::chrono::steady_clock::now();
      if (watched < 0 || now < next_look || done.ready.load(std::memory_order_acquire)) continue;
      next_look = now + std::chrono::milliseconds(100);
      if (!has_exited(watched)) continue;
      if (gone_since == std::chrono::steady_clock::time_point{}) gone_since = now;
      if (now - gone_since < std::chrono::seconds(5)) continue;
      core::log_error("%s: rank %d (pid %d) of this host has exited while the others wait for it in a barrier or "
                      "collective: ending the job (code 1)",
                      who().c_str(), watched, static_cast<int>(hellos_[static_cast<size_t>(watched)].pid));
      end_job(1, "clump: a rank exited while the others waited for it");
    }
    while (!done.finished.load(std::memory_order_acquire)) std::this_thread::yield();
    PMIX_INFO_DESTRUCT(&info);
    if (done.rc != PMIX_SUCCESS) {
      core::log_error("%s: PMIx_Fence failed (%s): a rank has ended or died, or the launcher is ending the job",
                      who().c_str(), PMIx_Error_string(done.rc));
      cannot_go_on("a failed PMIx_Fence");
    }
    // The fence is complete: had every rank of this node entered it?
    for (size_t i = 0; board_ && i < local_.size(); ++i) {
      if (board_[i].entered.load(std::memory_order_acquire) >= fences_) continue;
      core::log_error("%s: the launcher completed a PMIx_Fence that rank %d of this host never entered (it has "
                      "ended or died)",
                      who().c_str(), local_[i]);
      cannot_go_on("a fence completed without a rank");
    }
    // Only this node can see that one of its ranks was missing: across
    // nodes, a second fence, which its ranks then do not enter, keeps the
    // others' from passing the barrier while the launcher ends the job.
    if (procs.empty() && node_count_ > 1 && !confirming) fence(progress, procs, true);
  }

  /// Gives the launcher a moment to end this rank itself, so that its exit
  /// code (a rank's own, or its signal's) is the job's; then ends the job.
  [[noreturn]] void cannot_go_on(const char* what) {
    std::fflush(nullptr);
    for (int i = 0; i < 30; ++i) ::usleep(100'000);
    core::log_error("%s: the launcher has not ended the job after %s: ending it (code 1)", who().c_str(), what);
    end_job(1, "clump: a barrier or collective cannot complete");
  }

  size_t local_index() const {
    return static_cast<size_t>(std::lower_bound(local_.begin(), local_.end(), rank_) - local_.begin());
  }

  /// Maps the node's board (one line per rank of the node), from the
  /// node's lowest rank.
  bool map_board(int fd) {
    const size_t bytes = local_.size() * sizeof(board_slot);
    struct stat st {};
    if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes) return false;
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return false;
    board_ = static_cast<board_slot*>(p);
    return true;
  }

  /// The job's datagram key (CLUMP_NET_AUTH: auto, when the job spans
  /// nodes; on): rank 0 draws it and publishes it sealed for each rank.
  void share_key(const unsigned char (&pub)[32], unsigned char (&sec)[32]) {
    const int auth = core::settings().net_auth;
    const bool wanted = auth == 1 || (auth == 0 && node_count_ > 1);
#if defined(CLUMP_HAVE_SODIUM)
    if (wanted) {
      std::vector<unsigned char> sealed(static_cast<size_t>(size_) * sealed_key_bytes);
      unsigned char key[32];
      if (rank_ == 0) {
        randombytes_buf(key, sizeof key);
        for (int r = 0; r < size_; ++r)
          crypto_box_seal(sealed.data() + static_cast<size_t>(r) * sealed_key_bytes, key, sizeof key,
                          hellos_[static_cast<size_t>(r)].box_key);
      }
      broadcast(sealed.data(), sealed.size(), 0, {});
      if (crypto_box_seal_open(key, sealed.data() + static_cast<size_t>(rank_) * sealed_key_bytes, sealed_key_bytes,
                               pub, sec) != 0)
        throw error(status::not_init, "joining the job through PMIx", "the job's datagram key did not open");
      key_.assign(reinterpret_cast<std::byte*>(key), reinterpret_cast<std::byte*>(key) + sizeof key);
      sodium_memzero(key, sizeof key);
    }
    sodium_memzero(sec, sizeof sec);
#else
    (void)pub;
    (void)sec;
    if (wanted)
      throw error(status::not_init, "joining the job through PMIx",
                  "the job spans nodes, and its datagrams must be authenticated (CLUMP_NET_AUTH), but this build has "
                  "no libsodium: install libsodium-dev and rebuild, or set CLUMP_NET_AUTH=off on a trusted network");
#endif
  }

  int listen_node(int leader) {
    const int s = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    socklen_t len = 0;
    const sockaddr_un a = node_socket_name(me_.nspace, leader, len);
    if (s < 0 || ::bind(s, reinterpret_cast<const sockaddr*>(&a), len) != 0 || ::listen(s, 128) != 0)
      throw error(status::not_init, "joining the job through PMIx",
                  who() + ": cannot open this node's socket for the ranks' regions: " + std::strerror(errno));
    return s;
  }

  /// Every rank of this node gets every rank of this node's hello and
  /// region descriptor: the lowest rank collects them, then hands them out.
  /// Returns this node's hellos, in rank order.
  std::vector<hello> share_regions(const hello& mine, int region_fd, int leader, int listener) {
    region_fds_.assign(static_cast<size_t>(size_), -1);
    const int own = ::fcntl(region_fd, F_DUPFD_CLOEXEC, 0);
    if (own < 0) throw error(status::bad_arg, "joining the job", "cannot duplicate the region descriptor");
    region_fds_[static_cast<size_t>(rank_)] = own;
    if (local_.size() == 1) return {mine};
    auto broken = [](const char* what) {
      throw error(status::not_init, "joining the job through PMIx",
                  who() + ": exchanging hellos and region descriptors with the ranks of this node: " + what);
    };
    const size_t n = local_.size();
    // The ranks of a node start when the launcher gets to them: wait for
    // them, but not for ever (CLUMP_JOIN_TIMEOUT_S).
    const int wait_s = static_cast<int>(core::settings().join_timeout_s);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(wait_s);
    auto left_ms = [&] {
      const auto d = deadline - std::chrono::steady_clock::now();
      return static_cast<int>(std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(d).count()));
    };
    std::vector<hello> node(n);
    std::vector<int> fds(n, -1);
    auto index = [&](int r) { return static_cast<size_t>(std::lower_bound(local_.begin(), local_.end(), r) - local_.begin()); };
    if (rank_ == leader) {
      node[0] = mine;
      fds[0] = own;
      std::vector<int> peers;
      for (size_t i = 1; i < n; ++i) {
        pollfd p{listener, POLLIN, 0};
        if (::poll(&p, 1, left_ms()) != 1) {
          std::string missing;
          for (size_t k = 1; k < n; ++k)
            if (fds[k] < 0) missing += (missing.empty() ? "" : ", ") + std::to_string(local_[k]);
          broken(("rank(s) " + missing + " of this node did not connect in " + std::to_string(wait_s) +
                  " s (exited before joining? CLUMP_JOIN_TIMEOUT_S)")
                     .c_str());
        }
        const int c = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) broken("accept failed");
        ucred cred{};
        socklen_t cl = sizeof cred;
        hello x;
        int fd = -1;
        // A rank of this node, of our user, that is the process it says
        // (its pid as the kernel sees it), and not one already seen.
        if (::getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 || cred.uid != ::getuid() ||
            recv_fds(c, &x, &fd, 1, std::max(left_ms(), 1000)) != 1 || !std::binary_search(local_.begin(), local_.end(), x.rank) ||
            x.rank == rank_ || cred.pid != x.pid || x.leader != leader || fds[index(x.rank)] >= 0)
          broken("a connection that is not one of this node's ranks");
        node[index(x.rank)] = x;
        fds[index(x.rank)] = fd;
        peers.push_back(c);
      }
      ::close(listener);
      const int board = ::memfd_create("clump-board", MFD_CLOEXEC);
      if (board < 0 || ::ftruncate(board, static_cast<off_t>(n * sizeof(board_slot))) != 0 || !map_board(board))
        broken(("cannot make the node's board: " + std::string(std::strerror(errno))).c_str());
      for (int c : peers) {
        for (size_t at = 0; at < n; at += fds_per_message)
          if (!send_fds(c, node.data() + at, fds.data() + at, std::min(fds_per_message, n - at),
                        at == 0 ? board : -1))
            broken("sending them failed");
        ::close(c);
      }
      ::close(board);
    } else {
      const int s = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
      if (s < 0) broken(std::strerror(errno));
      socklen_t len = 0;
      const sockaddr_un a = node_socket_name(me_.nspace, leader, len);
      // The leader may not have started yet (no fence has passed): try
      // again every millisecond until the deadline.
      while (::connect(s, reinterpret_cast<const sockaddr*>(&a), len) != 0) {
        if ((errno != ECONNREFUSED && errno != ENOENT) || left_ms() == 0)
          broken(("cannot reach rank " + std::to_string(leader) + ", this node's lowest, in " +
                  std::to_string(wait_s) + " s (" + std::strerror(errno) +
                  "; exited before joining? CLUMP_JOIN_TIMEOUT_S)")
                     .c_str());
        ::usleep(1000);
      }
      // The name is guessable: the socket must be of our user, and held by
      // the process that published the leader's hello (checked below).
      ucred cred{};
      socklen_t cl = sizeof cred;
      if (::getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 || cred.uid != ::getuid())
        broken("the node's socket is held by another user");
      if (!send_fds(s, &mine, &own, 1)) broken("sending ours failed");
      int board = -1;
      for (size_t got = 0; got < n;) {
        // The leader answers once every rank of the node has come, by its
        // own deadline (a little after ours, at most); its first message
        // carries the node's board.
        const int k = recv_fds(s, node.data() + got, fds.data() + got, std::min(fds_per_message, n - got),
                               left_ms() + 5000, got == 0 ? &board : nullptr);
        if (k <= 0) broken("receiving them failed");
        got += static_cast<size_t>(k);
      }
      const bool mapped = board >= 0 && map_board(board);
      if (board >= 0) ::close(board);
      if (!mapped) broken("the node's lowest rank sent no board, or it cannot be mapped");
      ::close(s);
      for (size_t i = 0; i < n; ++i)
        if (node[i].rank != local_[i] || node[i].leader != leader)
          broken("the node's lowest rank sent ranks that are not this node's");
      if (node[0].pid != cred.pid) broken("the node's socket is not held by the node's lowest rank");
    }
    for (size_t i = 0; i < n; ++i) {
      const int q = local_[i];
      if (q == rank_) {
        if (fds[i] != own) ::close(fds[i]);  // our own, back from the leader
        continue;
      }
      region_fds_[static_cast<size_t>(q)] = fds[i];
    }
    return node;
  }

  pmix_proc_t me_{};
  pmix_proc_t all_{};
  int rank_ = 0, size_ = 1, node_count_ = 1;
  uint64_t id_ = 0;
  uint64_t collectives_ = 0;
  uint64_t fences_ = 0;            // fences this rank has entered
  board_slot* board_ = nullptr;    // this node's board (none when alone on it)
  std::vector<int> local_;
  std::vector<hello> hellos_;
  std::vector<int> node_of_;
  std::vector<std::vector<int>> nodes_;  // each node's ranks, in order
  std::vector<pmix_proc_t> node_procs_;  // this node's ranks, for its fences
  std::vector<int> region_fds_;
  std::vector<std::byte> key_;
};

}  // namespace

std::unique_ptr<job> join_pmix(int region_fd, std::span<const std::byte> net_address) {
  try {
    return std::make_unique<pmix_job>(region_fd, net_address);
  } catch (const error& e) {
    // Once PMIx is up, a rank that cannot join dooms the job: the others
    // would wait for it in their first fence (under Slurm, for ever). End
    // the job, saying why, as the launcher ends one whose rank fails.
    if (!PMIx_Initialized()) throw;
    core::log_error("%s; ending the job (code 1)", e.what());
    end_job(1, "clump: a rank could not join the job");
  }
}

}  // namespace clump::boot

#else

namespace clump::boot {
std::unique_ptr<job> join_pmix(int, std::span<const std::byte>) {
  throw error(status::not_init, "joining the job",
              "started by a PMIx server (srun, mpirun), but this build of clump has no PMIx: install libpmix-dev and "
              "rebuild, or start the job with clumprun");
}
}  // namespace clump::boot

#endif
