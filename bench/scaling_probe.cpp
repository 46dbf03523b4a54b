// scaling_probe: what one process of a P-rank job costs, and how long the job
// takes to start. bench/scaling runs it for P = 2 .. 256 under clumprun and
// under mpirun (PMIx) and prints the table.
//
// Each rank joins the job and passes the first barrier; rank 0 prints the
// wall-clock time (CLOCK_REALTIME, comparable with the launching script's)
// at which it left it. Then each rank exchanges requests and replies with its
// two ring neighbours only: it talks to 2 peers and is idle towards the
// others, as most ranks of a large job are towards most others. After a
// second barrier each rank reads its proportional set size (Pss, shared
// pages divided among the processes that map them) and its resident size
// from /proc/self/smaps_rollup, and rank 0 prints every rank's as one JSON
// line:
//   {"ranks":P,"nodes":N,"first_barrier":T,"pss_kib":[...],"rss_kib":[...]}
#include <time.h>

#include <clump/clump.hpp>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

/// Pss and Rss of this process in KiB, from /proc/self/smaps_rollup; 0 where unreadable.
void memory_kib(long& pss, long& rss) {
  pss = rss = 0;
  std::FILE* f = std::fopen("/proc/self/smaps_rollup", "r");
  if (!f) return;
  char line[256];
  while (std::fgets(line, sizeof line, f)) {
    long v = 0;
    if (std::sscanf(line, "Pss: %ld kB", &v) == 1) pss = v;
    else if (std::sscanf(line, "Rss: %ld kB", &v) == 1) rss = v;
  }
  std::fclose(f);
}

std::string json_list(const std::vector<long>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
  s += ']';
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  clump::runtime rt{argc, argv};
  // Handlers first: a neighbour may send as soon as it leaves the barrier.
  clump::endpoint& ep = rt.endpoint();
  static int replies = 0;  // static: handlers run inside polls of this function only
  auto pong = ep.on_reply([](clump::token&, uint32_t) { ++replies; });
  auto ping = ep.on_request([pong](clump::token& t, uint32_t i) { t.reply(pong, i); });
  rt.barrier();
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  const double first_barrier = static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;

  // Talk to the two ring neighbours: 100 request/reply pairs each.
  const int n = rt.size(), me = rt.rank();
  int expected = 0;
  if (n > 1) {
    const int right = (me + 1) % n, left = (me + n - 1) % n;
    for (uint32_t i = 0; i < 100; ++i) {
      while (ep.request(right, ping, i) != clump::status::ok) rt.bundle().poll();
      ++expected;
      if (left != right) {
        while (ep.request(left, ping, i) != clump::status::ok) rt.bundle().poll();
        ++expected;
      }
    }
    rt.wait_until([&] { return replies == expected; });
  }
  rt.barrier();

  long pss = 0, rss = 0;
  memory_kib(pss, rss);
  std::vector<long> all_pss(static_cast<size_t>(n)), all_rss(static_cast<size_t>(n));
  rt.allgather(&pss, all_pss.data(), sizeof pss);
  rt.allgather(&rss, all_rss.data(), sizeof rss);
  if (me == 0) {
    std::printf("{\"ranks\":%d,\"nodes\":%d,\"first_barrier\":%.6f,\"pss_kib\":%s,\"rss_kib\":%s}\n", n,
                n / rt.node_size(), first_barrier, json_list(all_pss).c_str(), json_list(all_rss).c_str());
    std::fflush(stdout);
  }
  rt.barrier();
  return 0;
}
