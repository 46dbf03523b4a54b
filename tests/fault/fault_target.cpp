// fault_target: the job that datagram_fuzzer attacks (datagram_fuzz_test.cpp
// runs both). Run with its ranks on different nodes, so that they talk over
// the network protocol:
//
//   clumprun -n 2 -N 2 fault_target DIR
//
// Rank 0 prints where its socket is and whose job it is:
//
//   fault_target: listening at 127.0.0.1:PORT job JOBID rank 0 of 2 slot SLOT
//
// then keeps polling (so that the network is read while the fuzzer sends)
// until the file DIR/go appears. The fuzzer writes there what it sent: how
// many datagrams, how many it expects refused for each reason (well-formed
// ones of this job as not from the address of the rank they name), and how
// many the kernel dropped before rank 0 could read them. Rank 0 then checks
// that its refusal counters rose by exactly that (at least 1 each, and no
// more than sent, if the kernel dropped any), that nothing was delivered, and,
// with rank 1, that ordinary requests and replies still work both ways with
// exact payloads. Every handler index that no legitimate message uses holds
// a trap that counts, and so does handler 0 on both ranks: none may run.
//
// Prints "fault_target: rank R ok" and exits 0 when every check holds;
// otherwise says what failed and exits 1.

#include <clump/clump.hpp>

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

int failures = 0;
int my_rank = -1;

#define CHECK(cond, ...)                                                                                  \
  do {                                                                                                    \
    if (!(cond)) {                                                                                        \
      std::fprintf(stderr, "fault_target: rank %d: check failed: %s: ", my_rank, #cond);                  \
      std::fprintf(stderr, __VA_ARGS__);                                                                  \
      std::fprintf(stderr, "\n");                                                                         \
      ++failures;                                                                                         \
    }                                                                                                     \
  } while (0)

// Messages that reached a handler no legitimate message goes to.
std::atomic<int> trapped{0};

void trap(void*, clump::token_base& t, const uint32_t*, unsigned nargs, std::byte*, size_t length) {
  trapped.fetch_add(1, std::memory_order_relaxed);
  std::fprintf(stderr, "fault_target: rank %d: a message reached a trap handler: rank %u, %u words, %zu bytes\n",
               my_rank, t.source().rank, nargs, length);
}

std::byte pattern(size_t i, uint32_t seed) { return static_cast<std::byte>((i * 131 + seed * 7 + (i >> 8)) & 0xff); }

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

/// Polls (and sleeps while idle, which lets the network's service thread
/// read the socket) until done() or the deadline; false at the deadline.
template <class Pred>
bool wait_for(clump::runtime& rt, Pred&& done, clock_type::duration most) {
  const auto deadline = clock_type::now() + most;
  while (!done()) {
    if (clock_type::now() >= deadline) return false;
    if (rt.bundle().poll() == 0) rt.bundle().sleep_until_message(5ms);
  }
  return true;
}

/// "key value" lines.
std::map<std::string, long long> read_report(const std::string& path) {
  std::map<std::string, long long> kv;
  std::ifstream in(path);
  std::string key;
  long long value;
  while (in >> key >> value) kv[key] = value;
  return kv;
}

// Rank 0, once the fuzzer is done: what the network refused and delivered meanwhile.
void check_fuzzing(const clump::network_stats& before, const clump::network_stats& after,
                   const clump::endpoint_stats& ep_before, const clump::endpoint_stats& ep_after,
                   std::map<std::string, long long> sent) {
  const long long drops = sent.count("kernel_drops") ? sent["kernel_drops"] : -1;
  struct category {
    const char* name;
    uint64_t clump::network_stats::*counter;
  };
  const category categories[] = {
      {"foreign", &clump::network_stats::refused_foreign},     {"truncated", &clump::network_stats::refused_truncated},
      {"version", &clump::network_stats::refused_version},     {"other_job", &clump::network_stats::refused_other_job},
      {"bad_rank", &clump::network_stats::refused_bad_rank},   {"malformed", &clump::network_stats::refused_malformed},
      {"source", &clump::network_stats::refused_source},
  };
  std::printf("fault_target: fuzzer sent %lld datagrams, the kernel dropped %lld; refused:", sent["sent"], drops);
  for (const category& c : categories) {
    const long long got = static_cast<long long>(after.*c.counter - before.*c.counter);
    const long long want = sent["expect_" + std::string(c.name)];
    std::printf(" %s %lld/%lld", c.name, got, want);
    CHECK(want > 0, "the fuzzer sent nothing that should be refused as %s", c.name);
    if (drops == 0)
      CHECK(got == want, "%lld datagrams refused as %s, the fuzzer expected %lld", got, c.name, want);
    else
      CHECK(got >= 1 && got <= want, "%lld datagrams refused as %s, expected 1..%lld (%lld dropped by the kernel)",
            got, c.name, want, drops);
  }
  std::printf("\n");
  const auto received = static_cast<long long>(after.datagrams_received - before.datagrams_received);
  if (drops >= 0)
    CHECK(received == sent["sent"] - drops, "received %lld datagrams, the fuzzer sent %lld and %lld were dropped",
          received, sent["sent"], drops);
  CHECK(after.messages_delivered == before.messages_delivered, "%llu messages delivered during the fuzzing",
        static_cast<unsigned long long>(after.messages_delivered - before.messages_delivered));
  for (int k = 0; k < 3; ++k) {
    CHECK(ep_after.requests_received[k] == ep_before.requests_received[k], "requests of kind %d received", k);
    CHECK(ep_after.replies_received[k] == ep_before.replies_received[k], "replies of kind %d received", k);
  }
  CHECK(ep_after.returned == ep_before.returned, "%llu returned messages during the fuzzing",
        static_cast<unsigned long long>(ep_after.returned - ep_before.returned));
}

}  // namespace

int main(int argc, char** argv) {
  clump::runtime rt{argc, argv};
  my_rank = rt.rank();
  if (argc != 2 || rt.size() != 2) {
    std::fprintf(stderr, "usage: clumprun -n 2 -N 2 fault_target DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  clump::endpoint& ep = rt.endpoint();
  const int peer = 1 - rt.rank();

  // The legitimate traffic: a medium ping answered with its payload
  // transformed (so that the answer proves the handler read it), and a short sum.
  int returned = 0;
  ep.on_returned([&](const clump::returned_message& m) {
    ++returned;
    std::fprintf(stderr, "fault_target: rank %d: handler 0 ran: a message to handler %u came back: %s\n", my_rank,
                 m.handler, clump::to_string(m.reason));
  });
  struct answer {
    bool arrived = false;
    uint32_t id = 0;
    std::vector<std::byte> payload;
  } pong_got;
  uint32_t sum_got = 0;
  std::vector<std::byte> scratch;
  auto pong = ep.on_reply([&](clump::token&, std::span<const std::byte> p, uint32_t id) {
    pong_got = {true, id, std::vector<std::byte>(p.begin(), p.end())};
  });
  auto ping = ep.on_request([&](clump::token& t, std::span<const std::byte> p, uint32_t id) {
    scratch.assign(p.begin(), p.end());
    for (std::byte& b : scratch) b ^= std::byte{0x5a};
    CHECK(t.reply(pong, scratch, id + 1) == clump::status::ok, "reply to ping %u", id);
  });
  auto sum = ep.on_reply([&](clump::token&, uint32_t v) { sum_got = v; });
  auto add = ep.on_request([&](clump::token& t, uint32_t a, uint32_t b) {
    CHECK(t.reply(sum, a + b) == clump::status::ok, "reply to add");
  });
  // Raw handlers of any role, any argument count and any payload, so that a
  // message that got this far is counted here rather than sent back as a bad handler.
  for (int i = 1; i < static_cast<int>(clump::max_handlers); ++i)
    if (!ep.has_handler(static_cast<clump::handler_index>(i)))
      ep.set_raw_handler(i, trap, nullptr, clump::detail::role::any, -1, -1);
  rt.barrier();

  if (rt.rank() == 0) {
    const std::string address = clump::network_address();
    if (address.empty()) {
      std::fprintf(stderr, "fault_target: rank 0 has no network: run with -N 2 so that ranks talk over UDP\n");
      rt.exit(1);
    }
    const clump::network_stats before = clump::network_statistics();
    const clump::endpoint_stats ep_before = ep.stats();
    std::printf("fault_target: listening at %s job %016llx rank 0 of 2 slot %u\n", address.c_str(),
                static_cast<unsigned long long>(ep.name().job), ep.name().slot);
    std::fflush(stdout);
    const std::string go = dir + "/go";
    if (!wait_for(rt, [&] { return exists(go); }, 60s)) {
      std::fprintf(stderr, "fault_target: %s did not appear within 60 s\n", go.c_str());
      rt.exit(1);
    }
    check_fuzzing(before, clump::network_statistics(), ep_before, ep.stats(), read_report(go));
  }
  rt.barrier();

  // Both ways, every size from empty to the largest medium (several
  // datagrams each when CLUMP_NET_MTU is small), exact payloads back.
  const size_t sizes[] = {0, 1, 7, 1000, 1400, 1500, 4096, 30000, clump::max_medium()};
  uint32_t id = static_cast<uint32_t>(rt.rank()) * 1000;
  for (size_t n : sizes) {
    std::vector<std::byte> payload(n);
    for (size_t i = 0; i < n; ++i) payload[i] = pattern(i, id);
    pong_got = {};
    CHECK(ep.request(peer, ping, payload, id) == clump::status::ok, "ping %u of %zu bytes", id, n);
    if (!wait_for(rt, [&] { return pong_got.arrived; }, 10s)) {
      std::fprintf(stderr, "fault_target: rank %d: no answer to a ping of %zu bytes within 10 s: the network "
                           "exchange after the fuzzing is broken\n", my_rank, n);
      rt.exit(1);
    }
    CHECK(pong_got.id == id + 1, "answer to ping %u has id %u", id, pong_got.id);
    CHECK(pong_got.payload.size() == n, "answer to a ping of %zu bytes has %zu", n, pong_got.payload.size());
    bool same = pong_got.payload.size() == n;
    for (size_t i = 0; same && i < n; ++i) same = pong_got.payload[i] == (payload[i] ^ std::byte{0x5a});
    CHECK(same, "answer to a ping of %zu bytes has other bytes", n);
    ++id;
  }
  sum_got = 0;
  CHECK(ep.request(peer, add, 40000u, 2u + static_cast<uint32_t>(rt.rank())) == clump::status::ok, "add");
  if (!wait_for(rt, [&] { return sum_got != 0; }, 10s)) {
    std::fprintf(stderr, "fault_target: rank %d: no answer to add within 10 s\n", my_rank);
    rt.exit(1);
  }
  CHECK(sum_got == 40002u + static_cast<uint32_t>(rt.rank()), "sum %u", sum_got);
  rt.barrier();

  CHECK(trapped.load() == 0, "%d messages reached trap handlers", trapped.load());
  CHECK(returned == 0, "handler 0 ran %d times", returned);
  if (rt.rank() == 0) {
    const clump::network_stats s = clump::network_statistics();
    std::printf("fault_target: rank 0: %llu datagrams received, %llu messages delivered, %llu duplicates\n",
                static_cast<unsigned long long>(s.datagrams_received),
                static_cast<unsigned long long>(s.messages_delivered), static_cast<unsigned long long>(s.duplicates));
  }
  if (failures) {
    std::fprintf(stderr, "fault_target: rank %d: %d check(s) failed\n", my_rank, failures);
    return 1;
  }
  std::printf("fault_target: rank %d ok\n", my_rank);
  return 0;
}
