// The short- and medium-message paths make no system call, allocate nothing
// and take no lock. Checked for real: the sends and polls run in a child
// process under seccomp strict mode (any system call but read, write and exit
// kills it), and operator new counts every C++ allocation.

#include <gtest/gtest.h>

#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include <clump/clump.hpp>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CLUMP_SANITIZED 1
#endif

namespace {
std::atomic<long> allocations{0};
#ifdef CLUMP_SANITIZED
constexpr bool sanitized = true;
#else
constexpr bool sanitized = false;
#endif
}  // namespace

// Sanitizers replace operator new themselves; the counting version is for
// plain builds only (the tests skip under sanitizers).
#ifndef CLUMP_SANITIZED
void* operator new(size_t n) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
#endif

namespace {

TEST(hot_path, short_and_medium_sends_and_polls_allocate_nothing) {
  if (sanitized) GTEST_SKIP() << "sanitizer runtimes own operator new";
  clump::runtime rt;
  auto& ep = rt.endpoint();
  long received = 0;
  auto on_short = ep.on_request([&](clump::token&, uint32_t, uint64_t) { ++received; });
  auto on_medium = ep.on_request([&](clump::token&, std::span<const std::byte>, uint32_t) { ++received; });
  std::byte payload[512] = {};
  // Warm up: first use builds the remote-endpoint view.
  ASSERT_EQ(ep.request(rt.rank(), on_short, 1u, 2ull), clump::status::ok);
  rt.wait_until([&] { return received == 1; });
  const long before = allocations.load();
  for (int i = 0; i < 20000; ++i) {
    ASSERT_EQ(ep.request(rt.rank(), on_short, 1u, 2ull), clump::status::ok);
    ASSERT_EQ(ep.request(rt.rank(), on_medium, payload, 3u), clump::status::ok);
    rt.bundle().poll();
  }
  while (received < 40001) rt.bundle().poll();
  EXPECT_EQ(allocations.load(), before);
}

TEST(hot_path, short_and_medium_sends_and_polls_make_no_system_call) {
  if (sanitized) GTEST_SKIP() << "sanitizer runtimes make their own system calls";
  clump::runtime rt;
  auto& ep = rt.endpoint();
  long received = 0;
  auto on_short = ep.on_request([&](clump::token&, uint32_t, uint64_t) { ++received; });
  auto on_medium = ep.on_request([&](clump::token&, std::span<const std::byte>, uint32_t) { ++received; });
  ASSERT_EQ(ep.request(rt.rank(), on_short, 1u, 2ull), clump::status::ok);
  rt.wait_until([&] { return received == 1; });
  std::fflush(nullptr);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT) != 0) syscall(SYS_exit, 3);
    // From here any system call but read, write, exit and sigreturn is fatal.
    std::byte payload[256] = {};
    // More sends than the queue holds: a full queue makes the sender poll.
    for (int i = 0; i < 5000; ++i) {
      if (ep.request(rt.rank(), on_short, 1u, 2ull) != clump::status::ok) syscall(SYS_exit, 4);
      if (ep.request(rt.rank(), on_medium, payload, 3u) != clump::status::ok) syscall(SYS_exit, 4);
    }
    while (received < 10001) rt.bundle().poll();
    syscall(SYS_exit, 0);
  }
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  ASSERT_TRUE(WIFEXITED(st)) << "the child was killed by signal " << (WIFSIGNALED(st) ? WTERMSIG(st) : 0)
                             << ": the send or poll path made a system call";
  EXPECT_EQ(WEXITSTATUS(st), 0);
}

}  // namespace
