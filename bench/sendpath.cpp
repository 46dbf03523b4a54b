// sendpath: a bare loop of short requests from rank 0 to rank 1 over shared
// memory, for counting the instructions of clump's send path. bench/send-breakdown
// runs it under callgrind and splits the count into the stages of the SC97
// paper's Figure 4 (the send-stage markers in the sources).
//
//   clumprun -n 2 --bind core ./sendpath [--sends N] [--warmup W] [--words 0|2|8] [--no-poll]
//                                        [--callgrind FILE] [--perf]
//   clumprun -n 4 -N 2 --bind core ./sendpath ...   (rank 0's process has its network open)
//
// Each iteration polls the bundle, then sends one short request of `words`
// 32-bit arguments: the paper's send polled before sending; clump's does not,
// so the loop does (--no-poll leaves it out). Rank 1 only polls, never
// sleeping, so the queue drains and no send has to wake it; at the end it
// acknowledges with the count it received. Ranks 2 and up wait asleep.
//
// --callgrind FILE: rank 0 runs itself again under valgrind --tool=callgrind
// (only rank 0: the receiver keeps its native speed), instrumentation on for
// the warm-up and the timed loop, collection on for the N timed iterations of
// this thread only (client requests), each instruction with its address
// (relative to its object, as addr2line takes it) so that the caller can find
// the inlined source lines behind it. --perf: the user-space cycles and
// instructions of the timed loop (perf_event_open), when this machine has the
// counters.
//
// Rank 0 prints one line: "sendpath: sends=N words=K poll=1 ns_per_send=...
// send_waits=W received=R perf=..." (send_waits: sends that found the queue full).

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define SENDPATH_HAVE_VALGRIND 1
#else
#define SENDPATH_HAVE_VALGRIND 0
#define RUNNING_ON_VALGRIND 0
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#define CALLGRIND_TOGGLE_COLLECT
#endif

#include "pingpong_driver.hpp"  // clump's headers, with GCC 12's false warning silenced

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "sendpath: %s\n", what.c_str());
  std::exit(1);
}

struct options {
  long sends = 100000;
  long warmup = 10000;
  int words = 8;
  bool poll = true;
  std::string callgrind;  // output file; empty: run natively
  bool perf = false;
};

options parse(int argc, char** argv) {
  options o;
  auto value = [&](int& i) -> const char* {
    if (i + 1 >= argc) die(std::string(argv[i]) + " needs a value");
    return argv[++i];
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--sends") o.sends = std::atol(value(i));
    else if (a == "--warmup") o.warmup = std::atol(value(i));
    else if (a == "--words") o.words = std::atoi(value(i));
    else if (a == "--no-poll") o.poll = false;
    else if (a == "--callgrind") o.callgrind = value(i);
    else if (a == "--perf") o.perf = true;
    else
      die("unknown option " + a + "; usage: sendpath [--sends N] [--warmup W] [--words 0|2|8] [--no-poll] "
          "[--callgrind FILE] [--perf]");
  }
  if (o.sends < 1 || o.warmup < 0) die("--sends must be at least 1 and --warmup at least 0");
  if (o.words != 0 && o.words != 2 && o.words != 8) die("--words must be 0, 2 or 8");
  return o;
}

/// Rank 0 only, before joining the job: runs this program again, same
/// arguments, pid and descriptors (the boot socket), under callgrind.
void become_callgrind(const options& o, char** argv) {
  const char* rank = std::getenv("CLUMP_RANK");
  if (o.callgrind.empty() || RUNNING_ON_VALGRIND || !rank || std::strcmp(rank, "0") != 0) return;
  if (!SENDPATH_HAVE_VALGRIND) die("built without <valgrind/callgrind.h>: --callgrind cannot count the loop alone");
  char exe[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) die(std::string("readlink /proc/self/exe: ") + std::strerror(errno));
  exe[n] = '\0';
  // The parser in bench/send-breakdown expects these: addresses and lines on
  // every cost line, no name or position compression.
  std::vector<std::string> args = {"valgrind", "-q", "--tool=callgrind", "--callgrind-out-file=" + o.callgrind,
                                   "--instr-atstart=no", "--collect-atstart=no", "--dump-instr=yes",
                                   "--dump-line=yes", "--compress-strings=no", "--compress-pos=no", exe};
  for (char** a = argv + 1; *a; ++a) args.emplace_back(*a);
  std::vector<char*> raw;
  for (std::string& s : args) raw.push_back(s.data());
  raw.push_back(nullptr);
  ::execvp("valgrind", raw.data());
  die(std::string("cannot run valgrind: ") + std::strerror(errno));
}

/// The loop's user-space cycles and instructions, when the kernel lets us count them.
class perf_counters {
 public:
  explicit perf_counters(bool want) {
    if (!want) {
      why_ = "not asked";  // (--perf)
      return;
    }
    leader_ = open(PERF_COUNT_HW_CPU_CYCLES, -1);
    if (leader_ >= 0) member_ = open(PERF_COUNT_HW_INSTRUCTIONS, leader_);
    if (leader_ < 0 || member_ < 0) why_ = std::string("perf_event_open: ") + std::strerror(errno);
  }
  ~perf_counters() {
    if (member_ >= 0) ::close(member_);
    if (leader_ >= 0) ::close(leader_);
  }
  perf_counters(const perf_counters&) = delete;
  perf_counters& operator=(const perf_counters&) = delete;
  bool usable() const noexcept { return leader_ >= 0 && member_ >= 0; }
  void start() noexcept {
    if (!usable()) return;
    ::ioctl(leader_, PERF_EVENT_IOC_RESET, PERF_IOC_FLAG_GROUP);
    ::ioctl(leader_, PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP);
  }
  void stop() noexcept {
    if (usable()) ::ioctl(leader_, PERF_EVENT_IOC_DISABLE, PERF_IOC_FLAG_GROUP);
  }
  /// "cycles=C,instructions=I", or "unsupported:reason" (one word).
  std::string result() const {
    if (!usable()) {
      std::string w = "unsupported:" + why_;
      for (char& c : w)
        if (c == ' ') c = '_';
      return w;
    }
    uint64_t v[3] = {};  // nr, cycles, instructions (PERF_FORMAT_GROUP)
    if (::read(leader_, v, sizeof v) != static_cast<ssize_t>(sizeof v) || v[0] != 2) return "unsupported:read";
    return "cycles=" + std::to_string(v[1]) + ",instructions=" + std::to_string(v[2]);
  }

 private:
  static int open(uint64_t config, int group) {
    perf_event_attr a{};
    a.type = PERF_TYPE_HARDWARE;
    a.size = sizeof a;
    a.config = config;
    a.disabled = group < 0 ? 1 : 0;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    a.read_format = PERF_FORMAT_GROUP;
    return static_cast<int>(::syscall(SYS_perf_event_open, &a, 0, -1, group, 0));
  }
  int leader_ = -1, member_ = -1;
  std::string why_;
};

template <size_t>
using word = uint32_t;

// send-stage: call
// The loop, the argument values and the wrapper's status check: the paper's
// "prepares the arguments and calls the Active Message layer". The poll
// before each send is its own stage (bundle.cpp).
template <bool Poll, size_t... I>
[[gnu::noinline]] void send_loop(clump::endpoint& ep, clump::bundle& b, clump::request_handler<word<I>...> h,
                                 long from, long to) {
  for (long i = from; i < to; ++i) {
    // send-stage: poll
    if constexpr (Poll) b.poll();
    // send-stage: call
    if (ep.request(1, h, static_cast<uint32_t>(i + static_cast<long>(I))...) != clump::status::ok) [[unlikely]]
      die("a request failed");
  }
}

struct result {
  double ns_per_send = 0;
  uint64_t send_waits = 0;
  std::string perf;
};

template <size_t... I>
result measure(clump::runtime& rt, const options& o, clump::request_handler<word<I>...> h, std::index_sequence<I...>) {
  clump::endpoint& ep = rt.endpoint();
  clump::bundle& b = rt.bundle();
  auto loop = o.poll ? &send_loop<true, I...> : &send_loop<false, I...>;
  perf_counters perf(o.perf);
  CALLGRIND_START_INSTRUMENTATION;
  loop(ep, b, h, 0, o.warmup);  // the path's first-use costs (lazy binding, cold caches) stay out
  const uint64_t waits = ep.stats().send_waits;
  const auto t0 = std::chrono::steady_clock::now();
  perf.start();
  CALLGRIND_TOGGLE_COLLECT;
  loop(ep, b, h, o.warmup, o.warmup + o.sends);
  CALLGRIND_TOGGLE_COLLECT;
  perf.stop();
  const auto t1 = std::chrono::steady_clock::now();
  CALLGRIND_STOP_INSTRUMENTATION;
  // send-stage: end
  result r;
  r.ns_per_send = std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(o.sends);
  r.send_waits = ep.stats().send_waits - waits;
  r.perf = perf.result();
  return r;
}

template <size_t... I>
clump::request_handler<word<I>...> count_into(clump::endpoint& ep, uint64_t& count, std::index_sequence<I...>) {
  return ep.on_request([&count](clump::token&, word<I>...) { ++count; });
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  become_callgrind(o, argv);
  clump::runtime rt{argc, argv};
  if (rt.size() < 2) die("run it under clumprun with at least 2 ranks (rank 0 sends to rank 1)");
  clump::endpoint& ep = rt.endpoint();
  uint64_t count = 0, acked = 0;
  bool stop = false, got_ack = false;
  // Every rank registers the same handlers in the same order.
  auto sink0 = count_into(ep, count, std::make_index_sequence<0>{});
  auto sink2 = count_into(ep, count, std::make_index_sequence<2>{});
  auto sink8 = count_into(ep, count, std::make_index_sequence<8>{});
  auto ack = ep.on_reply([&](clump::token&, uint64_t n) {
    acked = n;
    got_ack = true;
  });
  auto quit = ep.on_request([&](clump::token& t) {
    stop = true;
    if (t.source().rank == 0 && rt.rank() == 1) (void)t.reply(ack, count);
  });
  rt.barrier();

  if (rt.rank() == 1) {
    while (!stop) rt.bundle().poll();  // never sleeps: no send has to wake us
  } else if (rt.rank() >= 2) {
    rt.wait_until([&] { return stop; });
  } else {
    result r;
    if (o.words == 0) r = measure(rt, o, sink0, std::make_index_sequence<0>{});
    else if (o.words == 2) r = measure(rt, o, sink2, std::make_index_sequence<2>{});
    else r = measure(rt, o, sink8, std::make_index_sequence<8>{});
    for (int peer = 1; peer < rt.size(); ++peer)
      if (ep.request(peer, quit) != clump::status::ok) die("the stop request failed");
    rt.wait_until([&] { return got_ack; });
    std::printf("sendpath: sends=%ld warmup=%ld words=%d poll=%d ns_per_send=%.2f send_waits=%llu received=%llu "
                "perf=%s valgrind=%d\n",
                o.sends, o.warmup, o.words, o.poll ? 1 : 0, r.ns_per_send,
                static_cast<unsigned long long>(r.send_waits), static_cast<unsigned long long>(acked),
                r.perf.c_str(), RUNNING_ON_VALGRIND ? 1 : 0);
    std::fflush(stdout);
    if (acked != static_cast<uint64_t>(o.warmup + o.sends))
      die("rank 1 received " + std::to_string(acked) + " messages, not " + std::to_string(o.warmup + o.sends));
  }
  rt.barrier();
  return 0;
}
