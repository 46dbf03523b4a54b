// boot_probe: drives clump::boot::job from real processes for launcher_test.
//
//   boot_probe hello              join, print and check rank, size, tags, pids, region fds
//   boot_probe barrier N          N barriers (rank 0 arrives late to the first)
//   boot_probe allgather          allgathers of 0 B .. 1 MiB per rank, checked
//   boot_probe broadcast          broadcasts from every root, 0 B .. 1 MiB, checked
//   boot_probe exit CODE RANK     RANK calls exit_job(CODE); the others block in a barrier
//   boot_probe exitcode CODE RANK [stubborn]
//                                 RANK returns CODE from main; the others block in a barrier
//                                 (stubborn: every rank's SIGTERM handler sleeps forever, as
//                                 some AM-2 programs' handlers do: only SIGKILL ends them)
//   boot_probe crash RANK         RANK dies of SIGSEGV; the others block in a barrier
//   boot_probe eat RANK MIB       RANK touches MIB MiB of new memory (the test limits its
//                                 memory: the OOM killer ends it); the others block in a barrier
//   boot_probe hang [ignore-term] the last rank sleeps forever, the others block in a barrier
//                                 (ignore-term: every rank ignores SIGTERM)
//   boot_probe mismatch           rank 0 calls barrier, the others allgather: clumprun must refuse
//   boot_probe early RANK CODE    RANK exits with CODE before joining; the others join
//   boot_probe getenv NAME        print the launcher's value of NAME
//   boot_probe args ...           print the arguments (no join)
//   boot_probe nodes [NAME...]    print this rank's node, the node map and CLUMP_LOCAL_RANK
//                                 ("nodes rank R node K of N map 0,0,1 local L"), then
//                                 "env rank R NAME=VALUE" (or "NAME unset") for each NAME
//   boot_probe address            join with a distinct network address per rank (0 to 64
//                                 bytes) and check every rank's address, byte for byte
//   boot_probe longaddress        join with a 65-byte address (must throw bad_arg), then
//                                 join properly
//   boot_probe rawhello V LEN     (no join) send a hand-made hello of protocol version V
//                                 whose address slot claims LEN bytes (LEN "none": no slot,
//                                 as version 1), print clumprun's answer ("refused: TEXT"
//                                 or "answer TYPE"), exit 4
//
// Every rank first prints "pid RANK PID" (before joining) so that tests can
// check that no process outlives its job. Any failed check prints "FAIL ..."
// and exits 2; a join that throws prints "join failed: WHAT" and exits 3.

#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iterator>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <clump/status.hpp>

#include "boot/channel.hpp"
#include "boot/job.hpp"
#include "boot/wire.hpp"
#include "core/settings.hpp"

namespace {

struct region_stamp {
  uint64_t magic;
  int32_t rank;
  int32_t pid;
};
constexpr uint64_t stamp_magic = 0x70726f6265ull;

[[gnu::format(printf, 1, 2)]] void say(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::vprintf(fmt, ap);
  va_end(ap);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

[[noreturn, gnu::format(printf, 1, 2)]] void fail(const char* fmt, ...) {
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  std::printf("FAIL %s\n", text);
  std::fflush(stdout);
  std::exit(2);
}

int make_region(int rank) {
  int fd = ::memfd_create("clump-probe", MFD_CLOEXEC);
  if (fd < 0) fail("memfd_create: %s", std::strerror(errno));
  region_stamp s{stamp_magic, rank, static_cast<int32_t>(::getpid())};
  if (::pwrite(fd, &s, sizeof s, 0) != static_cast<ssize_t>(sizeof s)) fail("pwrite: %s", std::strerror(errno));
  return fd;
}

// Each received descriptor must be the memfd that rank `r` stamped; a rank on
// another node may instead get a stand-in (from the agent of a job across
// hosts: descriptors do not cross machines).
void check_regions(const clump::boot::job& job, const std::vector<int>& fds) {
  if (fds.size() != static_cast<size_t>(job.size())) fail("got %zu region fds for %d ranks", fds.size(), job.size());
  const int mine = job.node(job.rank());
  for (size_t r = 0; r < fds.size(); ++r) {
    char name[256] = {}, fd_path[64];
    std::snprintf(fd_path, sizeof fd_path, "/proc/self/fd/%d", fds[r]);
    if (job.node(static_cast<int>(r)) != mine && ::readlink(fd_path, name, sizeof name - 1) > 0 &&
        std::strcmp(name, "/dev/null") == 0)
      continue;
    struct stat st{};
    if (::fstat(fds[r], &st) != 0 || !S_ISREG(st.st_mode)) fail("region fd of rank %zu is not a file", r);
    char link[256] = {};
    std::string path = "/proc/self/fd/" + std::to_string(fds[r]);
    if (::readlink(path.c_str(), link, sizeof link - 1) < 0 || std::strncmp(link, "/memfd:clump-probe", 18) != 0)
      fail("region fd of rank %zu is not a memfd: %s", r, link);
    region_stamp s{};
    if (::pread(fds[r], &s, sizeof s, 0) != static_cast<ssize_t>(sizeof s) || s.magic != stamp_magic ||
        s.rank != static_cast<int32_t>(r) || s.pid != job.pid(static_cast<int>(r)))
      fail("region fd %zu holds rank %d pid %d, expected rank %zu pid %d", r, s.rank, s.pid, r,
           job.pid(static_cast<int>(r)));
  }
}

std::byte pattern(int who, size_t len, size_t i) { return static_cast<std::byte>((who * 31 + len * 7 + i) & 0xff); }

int arg_int(int argc, char** argv, int i) {
  if (i >= argc) fail("missing argument %d", i);
  return std::atoi(argv[i]);
}

// Rank r's network address: lengths cycle through 0 and 64, the edges, and
// the bytes name the rank, so that no two non-empty addresses are equal.
std::vector<std::byte> address_of(int r) {
  static constexpr size_t lengths[] = {64, 0, 1, 28, 63, 17, 2};
  size_t len = lengths[static_cast<size_t>(r) % std::size(lengths)];
  std::vector<std::byte> a(len);
  for (size_t i = 0; i < len; ++i) a[i] = static_cast<std::byte>((r * 37 + static_cast<int>(i) * 11 + 1) & 0xff);
  if (len > 0) a[0] = static_cast<std::byte>(r & 0xff);
  return a;
}

// Plays a rank of another build: a hello of version `version` whose slot
// claims `length` bytes (or, `body_only`, without the slot, as version 1
// sent it), straight onto the boot socket, then prints what clumprun answers.
int raw_hello(uint32_t version, uint32_t length, bool body_only) {
  namespace wire = clump::boot::wire;
  const clump::core::config& s = clump::core::settings();
  int region = make_region(s.rank);
  struct {
    wire::hello_body body;
    wire::net_address_slot address;
  } hello{{version, s.rank, static_cast<int32_t>(::getpid()), 0}, {}};
  hello.address.length = length;
  clump::boot::frame_writer out;
  // A version-1 rank sent the body alone.
  if (body_only) out.push_body(wire::msg::hello, hello.body, {}, std::span<const int>(&region, 1));
  else out.push_body(wire::msg::hello, hello, {}, std::span<const int>(&region, 1));
  while (out.flush(s.boot_fd) == 0) {
    pollfd p{s.boot_fd, POLLOUT, 0};
    ::poll(&p, 1, 100);
  }
  clump::boot::frame_reader in;
  clump::boot::frame f;
  std::string why;
  for (;;) {
    auto res = in.next(f, why);
    if (res == clump::boot::frame_reader::result::bad) fail("bad answer: %s", why.c_str());
    if (res == clump::boot::frame_reader::result::frame) break;
    pollfd p{s.boot_fd, POLLIN, 0};
    ::poll(&p, 1, 100);
    ssize_t n = in.fill(s.boot_fd);
    if (n == 0) fail("clumprun closed the socket without an answer");
    if (n < 0 && errno != EAGAIN) fail("reading the boot socket: %s", std::strerror(errno));
  }
  if (f.type == wire::msg::refuse)
    say("refused: %.*s", static_cast<int>(f.payload.size()), reinterpret_cast<const char*>(f.payload.data()));
  else
    say("answer %d", static_cast<int>(f.type));
  for (int fd : f.fds) ::close(fd);
  return 4;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: boot_probe hello|barrier N|allgather|broadcast|exit C R|exitcode C R|crash R|"
                         "eat R MIB|hang [ignore-term]|mismatch|early R C|getenv NAME|args ...|nodes [NAME...]|address|"
                         "longaddress|rawhello V LEN\n");
    return 2;
  }
  const std::string cmd = argv[1];
  if (cmd == "args") {
    for (int i = 2; i < argc; ++i) say("arg %d %s", i - 1, argv[i]);
    return 0;
  }
  const int my_rank = clump::core::settings().rank;
  // Before joining, so that a test knows every process even if joining fails.
  say("pid %d %d", my_rank, static_cast<int>(::getpid()));
  if (cmd == "early" && my_rank == arg_int(argc, argv, 2)) return arg_int(argc, argv, 3);
  if (cmd == "rawhello") {
    bool body_only = argc > 3 && std::string(argv[3]) == "none";
    return raw_hello(static_cast<uint32_t>(arg_int(argc, argv, 2)),
                     body_only ? 0 : static_cast<uint32_t>(arg_int(argc, argv, 3)), body_only);
  }

  if (cmd == "hang" && argc > 2 && std::string(argv[2]) == "ignore-term") std::signal(SIGTERM, SIG_IGN);
  if (cmd == "exitcode" && argc > 4 && std::string(argv[4]) == "stubborn")
    std::signal(SIGTERM, [](int) {
      for (;;) ::pause();
    });

  int region = make_region(my_rank);
  std::vector<std::byte> my_address = cmd == "address" ? address_of(my_rank) : std::vector<std::byte>{};
  if (cmd == "longaddress") {
    std::vector<std::byte> too_long(clump::boot::job::max_net_address + 1, std::byte{7});
    try {
      clump::boot::job::join(region, too_long);
      fail("join took a network address of %zu bytes", too_long.size());
    } catch (const clump::error& e) {
      if (e.code() != clump::status::bad_arg) fail("join refused a long address with the wrong status: %s", e.what());
      say("long address refused: %s", e.what());
    }
  }
  std::unique_ptr<clump::boot::job> job;
  try {
    job = clump::boot::job::join(region, my_address);
  } catch (const std::exception& e) {
    say("join failed: %s", e.what());
    return 3;
  }
  const int rank = job->rank(), size = job->size();
  long progress_calls = 0;
  // Counts its polls; sleeps in short naps that end early when the boot
  // layer's watcher says the launcher answered (it has no bundle to wake).
  clump::boot::progress_fn progress;
  progress.poll = [&] {
    ++progress_calls;
    return 0u;
  };
  progress.sleep = [](const std::atomic<bool>& ready, std::chrono::nanoseconds timeout) {
    const auto until = std::chrono::steady_clock::now() + std::min<std::chrono::nanoseconds>(timeout, std::chrono::milliseconds(1));
    while (!ready.load() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::microseconds(50));
  };
  progress.wake = [] {};
  std::vector<int> fds = job->take_region_fds();
  ::close(region);

  if (cmd == "hello") {
    if (rank != my_rank) fail("rank %d but CLUMP_RANK says %d", rank, my_rank);
    if (job->pid(rank) != ::getpid()) fail("pid(%d) = %d, not mine (%d)", rank, job->pid(rank), ::getpid());
    if (job->launched() != (size > 1 || clump::core::settings().boot_fd >= 0)) fail("launched() is wrong");
    std::set<uint64_t> tags;
    for (int r = 0; r < size; ++r) {
      uint64_t t = job->tag(r);
      if (t <= 1) fail("tag of rank %d is %llu", r, static_cast<unsigned long long>(t));
      tags.insert(t);
    }
    if (tags.size() != static_cast<size_t>(size)) fail("tags are not distinct");
    check_regions(*job, fds);
    if (!job->take_region_fds().empty()) fail("take_region_fds gave descriptors twice");
    job->barrier(progress);
    say("hello rank %d of %d job %016llx tag %016llx", rank, size, static_cast<unsigned long long>(job->id()),
        static_cast<unsigned long long>(job->tag(rank)));
  } else if (cmd == "barrier") {
    int n = arg_int(argc, argv, 2);
    // Rank 0 comes late to the first barrier, so the others must wait in it
    // and run their progress function meanwhile.
    if (rank == 0 && size > 1) ::usleep(20000);
    for (int i = 0; i < n; ++i) job->barrier(progress);
    if (rank != 0 && size > 1 && progress_calls == 0) fail("no progress calls while waiting for rank 0");
    say("barrier ok rank %d progress %ld", rank, progress_calls);
  } else if (cmd == "allgather") {
    for (size_t len : {size_t{0}, size_t{1}, size_t{7}, size_t{4096}, size_t{1} << 20}) {
      std::vector<std::byte> src(len), dst(len * static_cast<size_t>(size), std::byte{0xee});
      for (size_t i = 0; i < len; ++i) src[i] = pattern(rank, len, i);
      job->allgather(src.data(), dst.data(), len, progress);
      for (int r = 0; r < size; ++r)
        for (size_t i = 0; i < len; ++i)
          if (dst[static_cast<size_t>(r) * len + i] != pattern(r, len, i))
            fail("allgather of %zu: byte %zu of rank %d is wrong", len, i, r);
    }
    say("allgather ok rank %d", rank);
  } else if (cmd == "broadcast") {
    for (int root = 0; root < size; ++root)
      for (size_t len : {size_t{0}, size_t{13}, size_t{1} << 20}) {
        std::vector<std::byte> buf(len, std::byte{0});
        if (rank == root)
          for (size_t i = 0; i < len; ++i) buf[i] = pattern(root, len, i);
        job->broadcast(buf.data(), len, root, progress);
        for (size_t i = 0; i < len; ++i)
          if (buf[i] != pattern(root, len, i)) fail("broadcast of %zu from %d: byte %zu is wrong", len, root, i);
      }
    say("broadcast ok rank %d", rank);
  } else if (cmd == "exit" || cmd == "exitcode" || cmd == "crash") {
    int code = cmd == "crash" ? 0 : arg_int(argc, argv, 2);
    int who = arg_int(argc, argv, cmd == "crash" ? 2 : 3);
    job->barrier(progress);  // everybody has printed its pid
    if (rank == who) {
      say("rank %d ends now", rank);
      if (cmd == "exit") job->exit_job(code);
      if (cmd == "exitcode") return code;
      std::signal(SIGSEGV, SIG_DFL);
      std::raise(SIGSEGV);
    }
    // Left in stdio's buffer (stdout is a pipe in the tests): it comes out
    // only if the rank ends by exiting, as it does when clumprun tells a
    // rank waiting in a barrier that another rank called exit_job.
    std::printf("unflushed rank %d\n", rank);
    job->barrier(progress);
    fail("rank %d came out of a barrier that rank %d never entered", rank, who);
  } else if (cmd == "eat") {
    const int who = arg_int(argc, argv, 2);
    if (rank == who) {
      const size_t bytes = static_cast<size_t>(arg_int(argc, argv, 3)) << 20;
      auto* p = static_cast<volatile char*>(std::malloc(bytes));
      if (!p) fail("malloc of %zu bytes failed", bytes);
      for (size_t i = 0; i < bytes; i += 4096) p[i] = 1;
      say("ate %zu bytes", bytes);
      return 0;
    }
    job->barrier(progress);
    fail("rank %d came out of a barrier that rank %d never entered", rank, who);
  } else if (cmd == "hang") {
    job->barrier(progress);
    say("ready rank %d", rank);
    if (rank == size - 1)
      for (;;) ::pause();
    job->barrier(progress);
    fail("rank %d came out of a barrier that rank %d never entered", rank, size - 1);
  } else if (cmd == "mismatch") {
    uint64_t word = 0;
    std::vector<uint64_t> all(static_cast<size_t>(size));
    if (rank == 0) job->barrier(progress);
    else job->allgather(&word, all.data(), sizeof word, progress);
    fail("rank %d came out of a mismatched collective", rank);
  } else if (cmd == "early") {
    job->barrier(progress);
    fail("rank %d came out of a barrier with a rank that never joined", rank);
  } else if (cmd == "nodes") {
    std::string map;
    for (int r = 0; r < size; ++r) {
      if (r) map += ',';
      map += std::to_string(job->node(r));
    }
    const char* local = std::getenv("CLUMP_LOCAL_RANK");
    say("nodes rank %d node %d of %d map %s local %s", rank, job->node(rank), job->node_count(), map.c_str(),
        local ? local : "unset");
    for (int i = 2; i < argc; ++i) {
      const char* v = std::getenv(argv[i]);
      if (v) say("env rank %d %s=%s", rank, argv[i], v);
      else say("env rank %d %s unset", rank, argv[i]);
    }
  } else if (cmd == "address" || cmd == "longaddress") {
    for (int r = 0; r < size; ++r) {
      std::vector<std::byte> want = cmd == "address" ? address_of(r) : std::vector<std::byte>{};
      auto got = job->net_address(r);
      if (got.size() != want.size() || !std::equal(got.begin(), got.end(), want.begin()))
        fail("rank %d sees a network address of %zu bytes for rank %d, expected %zu", rank, got.size(), r,
             want.size());
    }
    say("address ok rank %d", rank);
  } else if (cmd == "getenv") {
    if (argc < 3) fail("getenv needs a name");
    auto v = job->getenv_master(argv[2]);
    if (v) say("getenv %s=%s", argv[2], v->c_str());
    else say("getenv %s unset", argv[2]);
  } else {
    fail("unknown command %s", cmd.c_str());
  }
  for (int fd : fds) ::close(fd);
  return 0;
}
