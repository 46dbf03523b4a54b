#include "boot/job.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include <clump/status.hpp>

#include "boot/launched_job.hpp"
#include "boot/pmix.hpp"
#include "boot/wire.hpp"
#include "core/log.hpp"
#include "core/settings.hpp"

namespace clump::boot {

namespace {

// A process started without clumprun: rank 0 of 1. The collectives have
// nobody to wait for, so they never call progress.
class singleton_job final : public job {
 public:
  singleton_job(uint64_t id, uint64_t tag, int region_fd, std::span<const std::byte> net_address)
      : id_(id), tag_(tag), region_fd_(region_fd), net_address_(net_address.begin(), net_address.end()) {}
  ~singleton_job() override {
    if (region_fd_ >= 0) ::close(region_fd_);
  }

  int rank() const override { return 0; }
  int size() const override { return 1; }
  uint64_t id() const override { return id_; }
  bool launched() const override { return false; }
  uint64_t tag(int r) const override {
    check(r, "tag");
    return tag_;
  }
  pid_t pid(int r) const override {
    check(r, "pid");
    return ::getpid();
  }
  int node(int r) const override {
    check(r, "node");
    return 0;
  }
  int node_count() const override { return 1; }
  int host_ranks() const override { return 1; }
  std::span<const std::byte> net_address(int r) const override {
    check(r, "net_address");
    return net_address_;
  }

  std::vector<int> take_region_fds() override {
    if (region_fd_ < 0) return {};
    return {std::exchange(region_fd_, -1)};
  }

  void barrier(const progress_fn&) override {}

  void allgather(const void* src, void* dst, size_t len, const progress_fn&) override {
    if (len > 0 && (!src || !dst)) throw error(status::bad_arg, "allgather", "null buffer with a non-zero length");
    if (len > 0) std::memmove(dst, src, len);
  }

  void broadcast(void* buf, size_t len, int root, const progress_fn&) override {
    if (root != 0)
      throw error(status::bad_arg, "broadcast", "root " + std::to_string(root) + " is not a rank of this job of 1");
    if (len > 0 && !buf) throw error(status::bad_arg, "broadcast", "null buffer with a non-zero length");
  }

  [[noreturn]] void exit_job(int code) override {
    std::fflush(nullptr);
    ::_exit(code);
  }

  void on_peer_exit(std::function<void(int, int)>) override {}
  std::span<const std::byte> net_key() const override { return {}; }

  std::optional<std::string> getenv_master(const std::string& name) override {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  }

 private:
  static void check(int r, const char* what) {
    if (r != 0) throw error(status::bad_arg, what, "rank " + std::to_string(r) + " is not in this job of 1");
  }

  uint64_t id_;
  uint64_t tag_;
  int region_fd_;  // our duplicate of the caller's region
  std::vector<std::byte> net_address_;
};

}  // namespace

std::unique_ptr<job> job::join(int region_fd, std::span<const std::byte> net_address) {
  static_assert(max_net_address == wire::max_net_address);
  if (net_address.size() > max_net_address)
    throw error(status::bad_arg, "joining the job",
                "a network address of " + std::to_string(net_address.size()) + " bytes is longer than the " +
                    std::to_string(max_net_address) + " bytes the boot protocol carries");
  const core::config& s = core::settings();
  if (s.boot_fd >= 0) return join_clumprun(s.boot_fd, s.rank, s.size, s.job_id, region_fd, net_address);
  if (started_by_pmix()) return join_pmix(region_fd, net_address);

  if (s.size != 1)
    core::log_warning("CLUMP_SIZE=%d but CLUMP_BOOT_FD is not set: running as a job of one (start jobs with "
                      "clumprun -n %d ...)",
                      s.size, s.size);
  uint64_t id = 0, tag = 0;
  if (!wire::random_u64(id) || !wire::random_tag(tag))
    throw error(status::resource, "joining the job", std::string("getrandom failed: ") + std::strerror(errno));
  int dup = ::fcntl(region_fd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0)
    throw error(status::bad_arg, "joining the job",
                "cannot duplicate region descriptor " + std::to_string(region_fd) + ": " + std::strerror(errno));
  core::set_log_rank(0);
  return std::make_unique<singleton_job>(id, tag, dup, net_address);
}

}  // namespace clump::boot
