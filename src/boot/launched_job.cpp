#include "boot/launched_job.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <clump/status.hpp>

#include "boot/channel.hpp"
#include "boot/inbox.hpp"
#include "core/log.hpp"
#include "core/settings.hpp"
#include "core/tsan.hpp"

namespace clump::boot {

namespace {

constexpr const char* joining = "joining the job";
// Headroom above one descriptor per rank: stdio, the boot socket, the
// program's own files.
constexpr int spare_fds = 64;

std::string errno_text(int e) { return std::string(std::strerror(e)) + " (errno " + std::to_string(e) + ")"; }

// Every rank holds one region descriptor per rank: make sure the soft limit
// allows it, raising it to the hard limit (which any process may do) if needed.
void ensure_fd_limit(int size) {
  rlim_t need = static_cast<rlim_t>(size) + spare_fds;
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0)
    throw error(status::resource, joining, "getrlimit(RLIMIT_NOFILE) failed: " + errno_text(errno));
  if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need) return;
  if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need)
    throw error(status::resource, joining,
                "a job of " + std::to_string(size) + " ranks needs about " + std::to_string(need) +
                    " open file descriptors in every process (one shared region per rank), but the hard limit "
                    "is " + std::to_string(rl.rlim_max) +
                    ": raise it (ulimit -Hn as root, /etc/security/limits.conf, LimitNOFILE= for systemd) "
                    "or run fewer ranks");
  rlimit raised = rl;
  raised.rlim_cur = rl.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &raised) != 0) {
    raised.rlim_cur = need;  // an infinite hard limit cannot be the soft one
    if (::setrlimit(RLIMIT_NOFILE, &raised) != 0)
      throw error(status::resource, joining,
                  "cannot raise the open file limit from " + std::to_string(rl.rlim_cur) + " to " +
                      std::to_string(need) + ": " + errno_text(errno) + "; raise it with ulimit -n");
  }
}

class launched_job final : public job {
 public:
  launched_job(int sock, int rank, int size) : sock_(sock), rank_(rank), size_(size) {}

  ~launched_job() override {
    for (int fd : region_fds_) ::close(fd);
    // clumprun treats the end of the stream as harmless until this process exits.
    ::close(sock_);
  }

  void connect(const std::string& job_id_hex, int region_fd, std::span<const std::byte> net_address) {
    // Before anything can arrive: descriptors the kernel cannot install are lost.
    ensure_fd_limit(size_);
    struct {
      wire::hello_body body;
      wire::net_address_slot address;
    } hello{{wire::protocol_version, rank_, static_cast<int32_t>(::getpid()), 0}, {}};
    static_assert(sizeof hello == wire::hello_length);
    if (!wire::to_slot(net_address, hello.address))
      throw error(status::bad_arg, joining, "network address longer than " + std::to_string(wire::max_net_address) +
                                                " bytes");
    out_.push_body(wire::msg::hello, hello, {}, std::span<const int>(&region_fd, 1));
    send({}, joining, true);

    frame f = receive({}, joining, true, wire::msg::job);
    wire::job_body jb{};
    if (!wire::read_body(f.payload.data(), f.payload.size(), jb))
      fail(true, joining, "short job message from clumprun");
    if (jb.version != wire::protocol_version)
      fail(true, joining,
           "clumprun speaks boot protocol version " + std::to_string(jb.version) + ", this program version " +
               std::to_string(wire::protocol_version) + ": build the program and clumprun from the same clump");
    if (jb.size != size_)
      fail(true, joining,
           "clumprun says the job has " + std::to_string(jb.size) + " ranks but CLUMP_SIZE is " +
               std::to_string(size_));
    size_t n = static_cast<size_t>(size_);
    if (f.payload.size() != wire::job_length(n))
      fail(true, joining,
           "job message of " + std::to_string(f.payload.size()) + " bytes from clumprun, expected " +
               std::to_string(wire::job_length(n)) + " for " + std::to_string(size_) +
               " ranks (clumprun and this program from different builds of the same version?)");
    id_ = jb.job_id;
    if (jb.flags & wire::job_authenticated) {
      net_key_.assign(reinterpret_cast<const std::byte*>(jb.net_key),
                      reinterpret_cast<const std::byte*>(jb.net_key) + sizeof jb.net_key);
      if (std::all_of(net_key_.begin(), net_key_.end(), [](std::byte b) { return b == std::byte{0}; }))
        fail(true, joining, "clumprun says the job authenticates its datagrams but sent no key");
    }
    if (!job_id_hex.empty()) {
      char* end = nullptr;
      unsigned long long expected = std::strtoull(job_id_hex.c_str(), &end, 16);
      if (*end != '\0' || expected != id_)
        fail(true, joining,
             "CLUMP_JOB_ID=" + job_id_hex + " does not match the job clumprun runs on this socket");
    }
    const std::byte* at = f.payload.data() + sizeof jb;
    tags_.resize(n);
    std::memcpy(tags_.data(), at, n * sizeof(uint64_t));
    at += n * sizeof(uint64_t);
    std::vector<int32_t> words(n);
    std::memcpy(words.data(), at, n * sizeof(int32_t));
    at += n * sizeof(int32_t);
    pids_.assign(words.begin(), words.end());
    std::memcpy(words.data(), at, n * sizeof(int32_t));
    at += n * sizeof(int32_t);
    nodes_.assign(words.begin(), words.end());
    addresses_.resize(n);
    std::memcpy(addresses_.data(), at, n * sizeof(wire::net_address_slot));
    for (uint64_t t : tags_)
      if (t <= 1) fail(true, joining, "clumprun handed out an invalid tag (0 or 1)");
    check_nodes();
    for (size_t r = 0; r < n; ++r)
      if (!wire::valid_slot(addresses_[r]))
        fail(true, joining, "clumprun sent a malformed network address for rank " + std::to_string(r));

    region_fds_.reserve(n);
    while (region_fds_.size() < n) {
      frame r = receive({}, joining, true, wire::msg::region_fds);
      wire::region_fds_body rb{};
      if (!wire::read_body(r.payload.data(), r.payload.size(), rb) ||
          rb.first_rank != static_cast<int32_t>(region_fds_.size()) || rb.count < 0 ||
          static_cast<size_t>(rb.count) != r.fds.size() || region_fds_.size() + r.fds.size() > n) {
        for (int fd : r.fds) ::close(fd);
        fail(true, joining, "clumprun sent region descriptors out of order");
      }
      region_fds_.insert(region_fds_.end(), r.fds.begin(), r.fds.end());
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  uint64_t id() const override { return id_; }
  bool launched() const override { return true; }
  uint64_t tag(int r) const override { return tags_.at(static_cast<size_t>(check_rank(r, "tag"))); }
  pid_t pid(int r) const override { return pids_.at(static_cast<size_t>(check_rank(r, "pid"))); }
  int node(int r) const override { return nodes_.at(static_cast<size_t>(check_rank(r, "node"))); }
  int node_count() const override { return node_count_; }
  int host_ranks() const override {
    const int n = core::settings().host_ranks;  // clumprun says; an older one did not
    return n > 0 && n <= size_ ? n : size_;
  }
  std::span<const std::byte> net_address(int r) const override {
    const wire::net_address_slot& a = addresses_.at(static_cast<size_t>(check_rank(r, "net_address")));
    return {a.bytes, a.length};
  }

  std::vector<int> take_region_fds() override { return std::exchange(region_fds_, {}); }

  std::span<const std::byte> net_key() const override { return net_key_; }

  void on_peer_exit(std::function<void(int rank, int status)> f) override {
    inbox_.on_peer_exit(std::move(f));
    inbox_.start();  // (if it cannot, collectives read the socket themselves, and notices wait for them)
  }

  void barrier(const progress_fn& progress) override {
    collective(wire::collective_kind::barrier, 0, {}, nullptr, 0, progress);
  }

  void allgather(const void* src, void* dst, size_t len, const progress_fn& progress) override {
    if (len > (wire::max_payload - sizeof(wire::collective_done_body)) / static_cast<size_t>(size_))
      throw error(status::bad_arg, "allgather",
                  std::to_string(size_) + " x " + std::to_string(len) + " bytes exceeds the launcher's limit of " +
                      std::to_string(wire::max_payload) + " bytes");
    if (len > 0 && (!src || !dst)) throw error(status::bad_arg, "allgather", "null buffer with a non-zero length");
    collective(wire::collective_kind::allgather, 0, {static_cast<const std::byte*>(src), len},
               static_cast<std::byte*>(dst), len * static_cast<size_t>(size_), progress);
  }

  void broadcast(void* buf, size_t len, int root, const progress_fn& progress) override {
    if (root < 0 || root >= size_)
      throw error(status::bad_arg, "broadcast",
                  "root " + std::to_string(root) + " is not a rank of this job of " + std::to_string(size_));
    if (len > wire::max_payload - sizeof(wire::collective_done_body))
      throw error(status::bad_arg, "broadcast", std::to_string(len) + " bytes exceeds the launcher's limit");
    if (len > 0 && !buf) throw error(status::bad_arg, "broadcast", "null buffer with a non-zero length");
    auto* bytes = static_cast<std::byte*>(buf);
    if (root == rank_)
      collective(wire::collective_kind::broadcast, root, {bytes, len}, nullptr, 0, progress, len);
    else
      collective(wire::collective_kind::broadcast, root, {}, bytes, len, progress, len);
  }

  [[noreturn]] void exit_job(int code) override {
    std::fflush(nullptr);
    wire::exit_body b{code, 0};
    out_.push_body(wire::msg::exit, b);
    // Bounded: if clumprun does not take the message within a second, exiting
    // with the code still ends the job (clumprun sees this rank's exit status).
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (out_.flush(sock_) == 0 && std::chrono::steady_clock::now() < deadline) {
      pollfd p{sock_, POLLOUT, 0};
      ::poll(&p, 1, 10);
    }
    ::_exit(code);
  }

  std::optional<std::string> getenv_master(const std::string& name) override {
    out_.push(wire::msg::getenv, std::as_bytes(std::span(name.data(), name.size())));
    send({}, "getenv_master", false);
    frame f = receive({}, "getenv_master", false, wire::msg::getenv_reply);
    wire::getenv_reply_body b{};
    if (!wire::read_body(f.payload.data(), f.payload.size(), b))
      fail(false, "getenv_master", "short reply from clumprun");
    if (!b.found) return std::nullopt;
    return std::string(reinterpret_cast<const char*>(f.payload.data()) + sizeof b, f.payload.size() - sizeof b);
  }

 private:
  // Node indices must be dense, 0 .. node_count-1 each naming some rank: the
  // am layer sizes its per-node tables by node_count.
  void check_nodes() {
    std::vector<bool> used(nodes_.size(), false);
    node_count_ = 0;
    for (size_t r = 0; r < nodes_.size(); ++r) {
      int k = nodes_[r];
      if (k < 0 || k >= size_)
        fail(true, joining, "clumprun put rank " + std::to_string(r) + " on node " + std::to_string(k) +
                                ", outside 0.." + std::to_string(size_ - 1));
      used[static_cast<size_t>(k)] = true;
      node_count_ = std::max(node_count_, k + 1);
    }
    for (int k = 0; k < node_count_; ++k)
      if (!used[static_cast<size_t>(k)])
        fail(true, joining, "clumprun's node map skips node " + std::to_string(k) + " (indices must be dense)");
  }

  int check_rank(int r, const char* what) const {
    if (r < 0 || r >= size_)
      throw error(status::bad_arg, what, "rank " + std::to_string(r) + " is not in this job of " + std::to_string(size_));
    return r;
  }

  // Sends `contribution`, then waits for the result, which must be
  // `result_len` bytes and lands in `result`. `len` is what every rank
  // declares (equal on all ranks; clumprun checks it).
  void collective(wire::collective_kind kind, int root, std::span<const std::byte> contribution, std::byte* result,
                  size_t result_len, const progress_fn& progress, size_t len = SIZE_MAX) {
    const char* what = wire::to_string(kind);
    if (len == SIZE_MAX) len = contribution.size();
    wire::collective_body b{static_cast<uint32_t>(kind), root, seq_, len};
    out_.push_body(wire::msg::collective, b, contribution);
    send(progress, what, false);
    frame f = receive(progress, what, false, wire::msg::collective_done);
    wire::collective_done_body done{};
    if (!wire::read_body(f.payload.data(), f.payload.size(), done) || done.seq != seq_ ||
        f.payload.size() != sizeof done + result_len)
      fail(false, what, "clumprun answered with the wrong result (sequence or length)");
    if (result_len) std::memcpy(result, f.payload.data() + sizeof done, result_len);
    ++seq_;
  }

  // The launcher is gone or the stream is broken. While joining this is an
  // error the program may handle; afterwards the job cannot go on, and hanging
  // would be worse than ending, so the process ends.
  [[noreturn]] void fail(bool throwing, const char* what, const std::string& why) {
    if (throwing) throw error(status::not_init, what, why);
    core::log_error("%s: %s; ending this process", what, why.c_str());
    ::_exit(1);
  }

  [[noreturn]] void lost(bool throwing, const char* what) {
    fail(throwing, what,
         "the socket to clumprun closed: the launcher died or is ending the job (another rank failed?)");
  }

  // True when the socket is ready for `events` now (POLLHUP and POLLERR
  // too: the next read or write says what happened).
  bool ready_now(short events, int timeout_ms) {
    pollfd p{sock_, events, 0};
    const int r = ::poll(&p, 1, timeout_ms);
    if (r < 0 && errno != EINTR) {
      core::log_error("poll on the boot socket failed: %s; ending this process", std::strerror(errno));
      ::_exit(1);
    }
    return r > 0;
  }

  // Waits until the socket can take more of what we send (a big allgather
  // contribution), handling active messages meanwhile.
  void wait_writable(const progress_fn& progress) {
    while (!ready_now(POLLOUT, progress ? 0 : -1))
      if (progress && progress.poll() == 0) ready_now(POLLOUT, 1);
  }

  void send(const progress_fn& progress, const char* what, bool throwing) {
    core::sent_outside();  // see core/tsan.hpp
    for (;;) {
      int r = out_.flush(sock_);
      if (r == 1) return;
      if (r < 0) {
        if (errno == EPIPE || errno == ECONNRESET) lost(throwing, what);
        fail(throwing, what, "sending to clumprun failed: " + errno_text(errno));
      }
      wait_writable(progress);
    }
  }

  // What clumprun sends: `end` ends this process at once; `refuse` and
  // anything but `expected` are errors.
  frame accept(frame f, const char* what, bool throwing, wire::msg expected) {
    if (f.type == wire::msg::end) {
      // Another rank ended the job (exit_job): end quietly, as it would.
      wire::exit_body b{};
      wire::read_body(f.payload.data(), f.payload.size(), b);
      std::fflush(nullptr);
      ::_exit(b.code);
    }
    if (f.type == wire::msg::refuse)
      fail(throwing, what,
           "clumprun refused: " + std::string(reinterpret_cast<const char*>(f.payload.data()), f.payload.size()));
    if (f.type != expected) {
      for (int fd : f.fds) ::close(fd);
      fail(throwing, what,
           "unexpected message " + std::to_string(static_cast<int>(f.type)) + " from clumprun (expected " +
               std::to_string(static_cast<int>(expected)) + ")");
    }
    return f;
  }

  frame receive(const progress_fn& progress, const char* what, bool throwing, wire::msg expected) {
    struct heard {
      ~heard() { core::heard_from_outside(); }  // whatever the frame, once it is in (see core/tsan.hpp)
    } on_return;
    if (inbox_.started()) return from_inbox(progress, what, throwing, expected);
    // Joining (before the inbox reads the socket): read it here.
    frame f;
    std::string why;
    for (;;) {
      switch (in_.next(f, why)) {
        case frame_reader::result::frame:
          if (f.type == wire::msg::peer_exited) continue;  // (no one waits on anyone yet)
          return accept(std::move(f), what, throwing, expected);
        case frame_reader::result::bad:
          fail(throwing, what, why);
        case frame_reader::result::need_more:
          break;
      }
      ssize_t n = in_.fill(sock_);
      if (n > 0) continue;
      if (n == 0) lost(throwing, what);
      if (errno == ECONNRESET) lost(throwing, what);
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        fail(throwing, what, "receiving from clumprun failed: " + errno_text(errno));
      if (progress) progress.poll();
      ready_now(POLLIN, progress ? 1 : -1);
    }
  }

  // The answer from the inbox's queue. With a progress function it keeps
  // handling active messages; once nothing has happened for
  // CLUMP_SPIN_BEFORE_SLEEP_US it sleeps until a message arrives or the
  // answer does (the inbox wakes it), so a rank waiting here answers active
  // messages within microseconds without burning a core, and costs nothing
  // while idle. Without one: a sleep on the inbox alone.
  frame from_inbox(const progress_fn& progress, const char* what, bool throwing, wire::msg expected) {
    const auto spin = std::chrono::microseconds(core::settings().spin_before_sleep_us);
    auto last_work = std::chrono::steady_clock::now();
    frame f;
    std::string why;
    for (;;) {
      switch (inbox_.take(f, why)) {
        case inbox::result::frame: return accept(std::move(f), what, throwing, expected);
        case inbox::result::lost: fail(throwing, what, why);
        case inbox::result::none: break;
      }
      if (progress && progress.poll() != 0) last_work = std::chrono::steady_clock::now();
      if (progress && std::chrono::steady_clock::now() - last_work < spin) continue;
      if (progress) {
        inbox_.arm(progress.wake);
        progress.sleep(inbox_.ready(), std::chrono::seconds(1));
        inbox_.disarm();
        last_work = std::chrono::steady_clock::now();  // a message or the answer: spin again first
      } else {
        std::mutex m;
        std::condition_variable cv;
        bool rung = false;
        inbox_.arm([&] {
          std::lock_guard lock(m);
          rung = true;
          cv.notify_one();
        });
        {
          std::unique_lock lock(m);
          cv.wait_for(lock, std::chrono::seconds(1), [&] { return rung; });
        }
        inbox_.disarm();
      }
    }
  }

  int sock_;
  int rank_;
  int size_;
  uint64_t id_ = 0;
  uint64_t seq_ = 0;
  std::vector<uint64_t> tags_;
  std::vector<pid_t> pids_;
  std::vector<int> nodes_;
  int node_count_ = 1;
  std::vector<wire::net_address_slot> addresses_;
  std::vector<std::byte> net_key_;  // empty: datagrams are not authenticated
  std::vector<int> region_fds_;
  frame_reader in_;
  frame_writer out_;
  inbox inbox_{sock_, in_};  // reads the socket once the rank has joined (see start_inbox)
};

}  // namespace

std::unique_ptr<job> join_clumprun(int boot_fd, int rank, int size, const std::string& job_id_hex, int region_fd,
                                   std::span<const std::byte> net_address) {
  const std::string fd_text = "CLUMP_BOOT_FD=" + std::to_string(boot_fd);
  struct stat st{};
  if (::fstat(boot_fd, &st) != 0 || !S_ISSOCK(st.st_mode))
    throw error(status::not_init, joining,
                fd_text + " is not an open socket; clumprun sets it for the processes it starts, so run the "
                          "program with clumprun, or unset CLUMP_BOOT_FD to run it as a job of one");
  if (size < 1 || rank < 0 || rank >= size)
    throw error(status::not_init, joining,
                "CLUMP_RANK=" + std::to_string(rank) + " and CLUMP_SIZE=" + std::to_string(size) +
                    " do not describe a rank of a job; they are set by clumprun, not by hand");
  if (region_fd < 0 || ::fcntl(region_fd, F_GETFD) < 0)
    throw error(status::bad_arg, joining, "region descriptor " + std::to_string(region_fd) + " is not open");
  // The socket must not leak into programs this rank runs: they would keep it
  // open and hide this process's end of the stream from clumprun.
  ::fcntl(boot_fd, F_SETFD, FD_CLOEXEC);
  auto j = std::make_unique<launched_job>(boot_fd, rank, size);
  j->connect(job_id_hex, region_fd, net_address);
  core::set_log_rank(rank);
  return j;
}

}  // namespace clump::boot
