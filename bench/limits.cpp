#include "limits.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <utility>

namespace bench {

namespace {

std::runtime_error sys_error(const std::string& what, const std::string& name) {
  return std::runtime_error(what + " " + name + ": " + std::strerror(errno));
}

struct free_deleter {
  void operator()(std::byte* p) const noexcept { std::free(p); }
};
using buffer = std::unique_ptr<std::byte, free_deleter>;

buffer page_aligned(size_t bytes) {
  const size_t rounded = (bytes + 4095) / 4096 * 4096;
  auto* p = static_cast<std::byte*>(std::aligned_alloc(4096, rounded));
  if (!p) throw std::runtime_error("out of memory for a " + std::to_string(bytes) + "-byte buffer");
  return buffer(p);
}

}  // namespace

// ---- shared_area --------------------------------------------------------------

shared_area shared_area::create(const std::string& name, size_t bytes) {
  int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) throw sys_error("shm_open (create)", name);
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int e = errno;
    ::close(fd);
    ::shm_unlink(name.c_str());
    errno = e;
    throw sys_error("ftruncate", name);
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    ::shm_unlink(name.c_str());
    throw sys_error("mmap", name);
  }
  return shared_area(p, bytes, name);
}

shared_area shared_area::open(const std::string& name, size_t bytes) {
  int fd = ::shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) throw sys_error("shm_open", name);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) throw sys_error("mmap", name);
  return shared_area(p, bytes, std::string());  // the creator unlinks
}

shared_area shared_area::anonymous(size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw sys_error("mmap", "(anonymous shared)");
  return shared_area(p, bytes, std::string());
}

shared_area::shared_area(shared_area&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), bytes_(o.bytes_), name_(std::move(o.name_)) {
  o.name_.clear();
}

shared_area::~shared_area() {
  unlink();
  if (data_) ::munmap(data_, bytes_);
}

void shared_area::unlink() noexcept {
  if (!name_.empty()) ::shm_unlink(name_.c_str());
  name_.clear();
}

// ---- cache-line ping-pong --------------------------------------------------------

workload cache_line_driver::make() {
  workload w;
  w.run = [this](uint64_t n, steady::time_point deadline) -> uint64_t {
    std::atomic<uint64_t>& out = lines_->to_echoer.value;
    std::atomic<uint64_t>& in = lines_->to_driver.value;
    for (uint64_t i = 0; i < n; ++i) {
      if (past<255>(i, deadline)) return i;
      const uint64_t v = ++seq_;
      // Release/acquire: the orders a message queue's publication needs (plain
      // moves on x86, so the limit is the hardware's).
      out.store(v, std::memory_order_release);
      while (in.load(std::memory_order_acquire) != v) {
      }
    }
    return n;
  };
  w.value = [](double secs, uint64_t n) { return secs / static_cast<double>(n) / 2 * 1e6; };
  return w;
}

void cache_line_driver::end_session() noexcept {
  // Release: nothing to order; the bit only ends the echoer's loop.
  lines_->to_echoer.value.store(++seq_ | pingpong_lines::stop_bit, std::memory_order_release);
}

void echo_session(pingpong_lines& lines, uint64_t& last) noexcept {
  std::atomic<uint64_t>& in = lines.to_echoer.value;
  std::atomic<uint64_t>& out = lines.to_driver.value;
  for (;;) {
    uint64_t v;
    while ((v = in.load(std::memory_order_acquire)) == last) {
    }
    last = v;
    if (v & pingpong_lines::stop_bit) return;
    out.store(v, std::memory_order_release);
  }
}

void echo_helper::start(int cpu) {
  area_ = ::mmap(nullptr, sizeof(pingpong_lines), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (area_ == MAP_FAILED) {
    area_ = nullptr;
    throw sys_error("mmap", "(cache-line helper)");
  }
  lines_ = new (area_) pingpong_lines;
  child_ = ::fork();
  if (child_ < 0) throw sys_error("fork", "(cache-line helper)");
  if (child_ == 0) {
    (void)pin_to(cpu);
    uint64_t last = 0;
    // Spins between sessions too: the helper stands for a rank that polls.
    while (lines_->quit.value.load(std::memory_order_acquire) == 0) echo_session(*lines_, last);
    ::_exit(0);
  }
}

void echo_helper::stop() noexcept {
  if (child_ > 0) {
    lines_->quit.value.store(1, std::memory_order_release);
    // Any value with the stop bit that differs from the helper's last ends its session.
    lines_->to_echoer.value.store(pingpong_lines::stop_bit | (lines_->to_echoer.value.load() + 1),
                                  std::memory_order_release);
    ::waitpid(child_, nullptr, 0);
    child_ = -1;
  }
  if (area_) ::munmap(area_, sizeof(pingpong_lines));
  area_ = nullptr;
  lines_ = nullptr;
}

// ---- memcpy ---------------------------------------------------------------------

workload memcpy_workload(size_t bytes, std::byte* dst, int slots) {
  struct buffers {
    buffer src, own_dst;
    std::byte* dst;
  };
  auto b = std::make_shared<buffers>();
  b->src = page_aligned(bytes);
  const size_t area = bytes * static_cast<size_t>(slots);
  if (!dst) {
    b->own_dst = page_aligned(area);
    dst = b->own_dst.get();
  }
  b->dst = dst;
  std::memset(b->src.get(), 0x5a, bytes);
  std::memset(dst, 0, area);  // touch every page before timing
  workload w;
  w.run = [b, bytes, slots](uint64_t n, steady::time_point deadline) -> uint64_t {
    for (uint64_t i = 0; i < n; ++i) {
      if (past<15>(i, deadline)) return i;
      std::memcpy(b->dst + (i % static_cast<uint64_t>(slots)) * bytes, b->src.get(), bytes);
      // The copy must happen every time: tell the compiler that dst is read.
      asm volatile("" : : "r"(b->dst) : "memory");
    }
    return n;
  };
  w.value = [bytes](double secs, uint64_t n) { return static_cast<double>(bytes) * static_cast<double>(n) / secs / 1e9; };
  return w;
}

// ---- CPUs -----------------------------------------------------------------------

bool pin_to(int cpu) noexcept {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return ::sched_setaffinity(0, sizeof set, &set) == 0;
}

std::vector<int> cpus_of(const cpu_set_t& set) {
  std::vector<int> v;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) v.push_back(c);
  return v;
}

std::string cpu_list_text(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out.empty() ? "-" : out;
}

}  // namespace bench
