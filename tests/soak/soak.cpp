// soak: random traffic of every kind between all ranks for a given time,
// every message checked to arrive exactly once and intact (tests/soak/run
// starts it, adds up what the ranks print and says whether the job passed).
//
//   clumprun -n 4 -N 2 soak --seconds 60 [--window W] [--max-long BYTES] [--seed S]
//
// Every rank sends, to random ranks (itself included), requests of six kinds:
//   short        a short request, answered by a short reply
//   medium       a medium request (0..max_medium bytes), answered by a short reply
//   long         a long request into the destination's segment (blocking or
//                async), answered by a short reply
//   medium-reply a short request answered by a medium reply
//   long-reply   a short request answered by a long reply into the sender's segment
//   get          a get of the destination's pattern area into the sender's segment
// Payloads are a function of (source, destination, sequence number), so the
// receiver checks every byte. Requests from one rank to another carry
// sequence numbers; the receiver keeps a window of the numbers it has seen
// and counts any number it sees twice (duplicated) or that skips further
// than the sender's window allows (lost or reordered beyond the rules). Each
// request gets exactly one reply, which must find its request outstanding.
// At most `window` operations are outstanding per destination; each owns a
// slot of `max-long` bytes in the destination's segment (long requests) and
// in the sender's own (long replies and gets), so no two operations write
// the same bytes at once. Handler 0 counts returned messages: none may come.
//
// Now and then a rank computes without polling for up to half a second (a
// long quiet phase), so the network's own liveness is tested too.
//
// At the end, every rank stops sending, waits for its replies, and the ranks
// compare what each sent to each with what each received. Memory is sampled
// once a second after a warm-up: resident set, private memory
// (/proc/self/smaps_rollup) and the heap in use (mallinfo2).
//
// Prints one line per rank:
//   soak: rank R sent S requests G gets received Q requests P replies G gets; errors E (lost L,
//   duplicated D, corrupted C, returned T, failed sends F); quiet phases Q; memory rss A->B (peak C) KiB
//   private A->B (peak C) KiB heap A->B (peak C) KiB
// (A: after the warm-up, B: at the end) and on rank 0:
//   soak: total M messages in T s (K per second; operations: short N, ...); lost L, duplicated D,
//   corrupted C, returned T, failed sends F
// Exits 1 when any error was found.

#include <clump/clump.hpp>

#include <malloc.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace {

using steady = std::chrono::steady_clock;

uint64_t mix(uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The bytes a payload must hold: word j of the stream named `seed` is
// mix(seed ^ j * K); `first_word` lets a slice start inside the stream.
void fill(std::byte* out, size_t len, uint64_t seed, uint64_t first_word = 0) {
  for (size_t i = 0; i < len; i += 8) {
    const uint64_t w = mix(seed ^ ((first_word + i / 8) * 0xd6e8feb86659fd93ull));
    std::memcpy(out + i, &w, std::min<size_t>(8, len - i));
  }
}

bool matches(std::span<const std::byte> got, uint64_t seed, uint64_t first_word = 0) {
  std::byte want[8];
  for (size_t i = 0; i < got.size(); i += 8) {
    const size_t n = std::min<size_t>(8, got.size() - i);
    const uint64_t w = mix(seed ^ ((first_word + i / 8) * 0xd6e8feb86659fd93ull));
    std::memcpy(want, &w, n);
    if (std::memcmp(got.data() + i, want, n) != 0) return false;
  }
  return true;
}

enum kind : uint32_t { k_short, k_medium, k_long, k_medium_reply, k_long_reply, k_get, k_kinds };
const char* const kind_names[k_kinds] = {"short", "medium", "long", "medium-reply", "long-reply", "get"};

uint64_t payload_seed(uint32_t src, uint32_t dst, uint32_t seq, uint32_t k) {
  return mix((uint64_t(src) << 40) ^ (uint64_t(dst) << 20) ^ (uint64_t(k) << 56) ^ seq);
}
uint64_t pattern_seed(uint32_t rank) { return mix(0x5041545445524eull ^ rank); }

// The sequence numbers seen from one source: all below `base`, and those of
// base + i whose bit i of `ahead` is set.
struct seen_window {
  uint32_t base = 0;
  uint64_t ahead = 0;
  // 0: new; 1: seen before; 2: further ahead than any sender's window allows.
  int accept(uint32_t seq) {
    const uint32_t d = seq - base;
    if (d >= 0x80000000u) return 1;  // below base
    if (d >= 64) return 2;
    if (ahead >> d & 1) return 1;
    ahead |= uint64_t(1) << d;
    while (ahead & 1) {
      ahead >>= 1;
      ++base;
    }
    return 0;
  }
};

struct memory_sample {
  uint64_t rss_kib = 0, private_kib = 0, heap_kib = 0;
};

memory_sample sample_memory() {
  memory_sample m;
  std::ifstream rollup("/proc/self/smaps_rollup");  // a header line, then "Key:   value kB" lines
  std::string line;
  while (std::getline(rollup, line)) {
    char key[64];
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str(), "%63s %llu kB", key, &kib) != 2) continue;
    if (std::strcmp(key, "Rss:") == 0) m.rss_kib = kib;
    if (std::strcmp(key, "Private_Clean:") == 0 || std::strcmp(key, "Private_Dirty:") == 0) m.private_kib += kib;
  }
  const struct mallinfo2 mi = mallinfo2();
  m.heap_kib = (mi.uordblks + mi.hblkhd) / 1024;
  return m;
}

struct options {
  double seconds = 10;
  uint32_t window = 8;
  size_t max_long = 128 * 1024;
  uint64_t seed = 1;
  double pause_every_s = 5;  // a quiet phase about this often (0: never)
};

[[noreturn]] void usage(const char* msg) {
  std::fprintf(stderr,
               "soak: %s\nusage: soak [--seconds S] [--window W (1..64)] [--max-long BYTES] [--seed N] "
               "[--pause-every S (0: no quiet phases)]\n",
               msg);
  std::exit(2);
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(("missing value after " + a).c_str());
    char* end = nullptr;
    const char* v = argv[++i];
    errno = 0;
    if (a == "--seconds") {
      o.seconds = std::strtod(v, &end);
      if (!(o.seconds > 0 && o.seconds < 1e6)) usage("--seconds must be in (0, 1e6)");
    } else if (a == "--window") {
      const long w = std::strtol(v, &end, 10);
      if (w < 1 || w > 64) usage("--window must be 1..64");
      o.window = static_cast<uint32_t>(w);
    } else if (a == "--max-long") {
      const long long b = std::strtoll(v, &end, 10);
      if (b < 8 || b > (64ll << 20)) usage("--max-long must be 8..67108864");
      o.max_long = static_cast<size_t>(b);
    } else if (a == "--seed") {
      o.seed = std::strtoull(v, &end, 10);
    } else if (a == "--pause-every") {
      o.pause_every_s = std::strtod(v, &end);
      if (!(o.pause_every_s >= 0)) usage("--pause-every must be >= 0");
    } else {
      usage(("unknown option " + a).c_str());
    }
    if (errno != 0 || end == v || *end != '\0') usage(("bad value for " + a).c_str());
  }
  return o;
}

struct slot {
  bool busy = false;
  uint32_t seq = 0;  // request sequence number (gets: their own counter)
  uint32_t kind = 0;
  uint32_t len = 0;
  uint64_t src_off = 0;  // gets: where in the destination's pattern area
};

struct peer {
  std::vector<slot> slots;
  uint32_t next_seq = 0;      // requests to this peer
  uint32_t next_get = 0;      // gets from this peer
  uint32_t busy = 0;
  uint64_t sent_requests = 0;  // kinds short..long-reply (the peer's handlers count them)
  uint64_t sent_gets = 0;
  uint64_t received_requests = 0;  // from this peer
  seen_window seen;
};

struct counts {
  uint64_t replies = 0, gets_done = 0;
  uint64_t duplicated = 0, lost = 0, corrupted = 0, returned = 0, failed_sends = 0;
  uint64_t by_kind[k_kinds] = {};
  uint64_t errors() const { return duplicated + lost + corrupted + returned + failed_sends; }
};

}  // namespace

int main(int argc, char** argv) try {
  clump::runtime rt{argc, argv};
  const options o = parse(argc, argv);
  clump::endpoint& ep = rt.endpoint();
  const uint32_t n = static_cast<uint32_t>(rt.size());
  const uint32_t me = static_cast<uint32_t>(rt.rank());
  const uint32_t W = o.window;
  const size_t L = o.max_long;

  // Segment: [pattern area][long requests from each rank: n * W slots][long replies and gets: n * W slots].
  const size_t pattern_bytes = 256 * 1024;
  const size_t region = size_t(n) * W * L;
  const size_t in_req = pattern_bytes, in_own = pattern_bytes + region;
  std::span<std::byte> seg = ep.segment();
  if (seg.size() < in_own + region) {
    std::fprintf(stderr, "soak: the segment has %zu bytes, %zu needed: set CLUMP_SEGMENT_SIZE or lower --max-long\n",
                 seg.size(), in_own + region);
    return 1;
  }
  fill(seg.data(), pattern_bytes, pattern_seed(me));
  std::memset(seg.data() + pattern_bytes, 0, 2 * region);  // touched now, so that memory stays flat later
  const size_t max_med = clump::max_medium();

  std::vector<peer> peers(n);
  for (auto& p : peers) p.slots.resize(W);
  counts c;
  auto complaint = [&](uint64_t& counter, const char* what, uint32_t from, uint32_t seq, const char* k) {
    if (++counter <= 5)
      std::fprintf(stderr, "soak: rank %u: %s (from rank %u, seq %u, %s)\n", me, what, from, seq, k);
  };

  // ---- at the destination ----
  auto arrived = [&](clump::token& t, uint32_t seq, uint32_t k) -> bool {
    const uint32_t from = static_cast<uint32_t>(t.source_index());
    if (from >= n) {
      complaint(c.corrupted, "request from an unknown source", from, seq, "?");
      return false;
    }
    peer& p = peers[from];
    switch (p.seen.accept(seq)) {
      case 1: complaint(c.duplicated, "request seen twice", from, seq, kind_names[k]); return false;
      case 2: complaint(c.lost, "request skipped past the sender's window", from, seq, kind_names[k]); break;
      default: break;
    }
    ++p.received_requests;
    return true;
  };

  // Payloads are built here: one buffer for sends from the main loop, one for
  // replies (a send may poll, and a handler run then must not overwrite its payload).
  std::vector<std::byte> send_buf(std::max(L, max_med)), reply_buf(std::max(L, max_med));
  auto check_word = [](uint32_t seq, uint32_t s, uint32_t k) { return static_cast<uint32_t>(mix(seq * 64ull + s) ^ k); };

  // ---- back at the sender: each reply must find its operation outstanding ----
  auto finish = [&](clump::token& t, uint32_t seq, uint32_t s, uint32_t k) -> slot* {
    const uint32_t from = static_cast<uint32_t>(t.source_index());
    if (from >= n || s >= W || k >= k_kinds) {
      complaint(c.corrupted, "reply with arguments out of range", from, seq, "?");
      return nullptr;
    }
    slot& sl = peers[from].slots[s];
    if (!sl.busy || sl.seq != seq || sl.kind != k) {
      complaint(c.duplicated, "reply for no outstanding operation", from, seq, kind_names[k]);
      return nullptr;
    }
    sl.busy = false;
    --peers[from].busy;
    ++c.by_kind[k];
    if (k == k_get) ++c.gets_done; else ++c.replies;
    return &sl;
  };
  auto r_ack = ep.on_reply([&](clump::token& t, uint32_t seq, uint32_t s, uint32_t k, uint32_t check) {
    if (finish(t, seq, s, k) && check != check_word(seq, s, k))
      complaint(c.corrupted, "short reply with wrong arguments", static_cast<uint32_t>(t.source_index()), seq,
                kind_names[k]);
  });
  auto r_medium = ep.on_reply([&](clump::token& t, std::span<const std::byte> p, uint32_t seq, uint32_t s) {
    const uint32_t from = static_cast<uint32_t>(t.source_index());
    const slot* sl = finish(t, seq, s, k_medium_reply);
    if (sl && (p.size() != sl->len || !matches(p, payload_seed(from, me, seq, k_medium_reply))))
      complaint(c.corrupted, "medium reply with wrong bytes", from, seq, "medium-reply");
  });
  auto r_long = ep.on_reply([&](clump::token& t, std::span<const std::byte> p, uint32_t seq, uint32_t s) {
    const uint32_t from = static_cast<uint32_t>(t.source_index());
    const slot* sl = finish(t, seq, s, k_long_reply);
    if (sl && (p.data() != seg.data() + in_own + (size_t(from) * W + s) * L || p.size() != sl->len ||
               !matches(p, payload_seed(from, me, seq, k_long_reply))))
      complaint(c.corrupted, "long reply with wrong bytes or place", from, seq, "long-reply");
  });
  auto r_get = ep.on_reply([&](clump::token& t, std::span<const std::byte> p, uint32_t gseq, uint32_t s) {
    const uint32_t from = static_cast<uint32_t>(t.source_index());
    const slot* sl = finish(t, gseq, s, k_get);
    if (sl && (p.data() != seg.data() + in_own + (size_t(from) * W + s) * L || p.size() != sl->len ||
               !matches(p, pattern_seed(from), sl->src_off / 8)))
      complaint(c.corrupted, "get with wrong bytes or place", from, gseq, "get");
  });

  // ---- at the destination ----
  auto q_short = ep.on_request([&](clump::token& t, uint32_t seq, uint32_t s, uint32_t k, uint32_t len) {
    const uint32_t from = static_cast<uint32_t>(t.source_index());
    if (s >= W || (k != k_short && k != k_medium_reply && k != k_long_reply) ||
        (k == k_medium_reply && len > max_med) || (k == k_long_reply && len > L)) {
      complaint(c.corrupted, "short request with arguments out of range", from, seq, "?");
      return;
    }
    if (!arrived(t, seq, k)) return;
    clump::status st = clump::status::ok;
    if (k == k_short) {
      st = t.reply(r_ack, seq, s, k, check_word(seq, s, k));
    } else {
      fill(reply_buf.data(), len, payload_seed(me, from, seq, k));
      const std::span<const std::byte> p(reply_buf.data(), len);
      st = k == k_medium_reply ? t.reply(r_medium, p, seq, s)
                               : t.reply_long(r_long, p, in_own + (size_t(me) * W + s) * L, seq, s);
    }
    if (st != clump::status::ok) complaint(c.failed_sends, clump::to_string(st), from, seq, "reply");
  });
  auto q_payload = ep.on_request([&](clump::token& t, std::span<const std::byte> p, uint32_t seq, uint32_t s,
                                     uint32_t k, uint32_t len) {
    const uint32_t from = static_cast<uint32_t>(t.source_index());
    if (s >= W || (k != k_medium && k != k_long) || from >= n) {
      complaint(c.corrupted, "payload request with arguments out of range", from, seq, "?");
      return;
    }
    if (!arrived(t, seq, k)) return;
    const bool place_ok = k == k_medium || p.data() == seg.data() + in_req + (size_t(from) * W + s) * L;
    if (p.size() != len || !place_ok || !matches(p, payload_seed(from, me, seq, k)))
      complaint(c.corrupted, "payload with wrong bytes or place", from, seq, kind_names[k]);
    const clump::status st = t.reply(r_ack, seq, s, k, check_word(seq, s, k));
    if (st != clump::status::ok) complaint(c.failed_sends, clump::to_string(st), from, seq, "reply");
  });
  ep.on_returned([&](const clump::returned_message& m) {
    if (++c.returned <= 5)
      std::fprintf(stderr, "soak: rank %u: a message to rank %u came back: %s\n", me, m.destination.rank,
                   clump::to_string(m.reason));
  });
  rt.barrier();

  // ---- sending ----
  std::mt19937_64 rng(mix(o.seed * 1000003 + me));
  auto rand_len = [&](size_t max) -> uint32_t {  // about log-uniform over 0..max
    const unsigned bits = 64 - static_cast<unsigned>(__builtin_clzll(max | 1));
    const uint64_t r = rng() & ((uint64_t(1) << (rng() % (bits + 1))) - 1);
    return static_cast<uint32_t>(std::min<uint64_t>(r, max));
  };
  // short 30%, medium 20%, long 15%, medium-reply 12%, long-reply 11%, get 12%
  const uint32_t cumulative[k_kinds] = {30, 50, 65, 77, 88, 100};
  auto issue = [&](uint32_t dest) {
    peer& p = peers[dest];
    uint32_t s = 0;
    while (p.slots[s].busy) ++s;
    const uint32_t roll = static_cast<uint32_t>(rng() % 100);
    uint32_t k = 0;
    while (roll >= cumulative[k]) ++k;
    slot& sl = p.slots[s];
    sl = slot{true, 0, k, 0, 0};
    ++p.busy;
    clump::status st = clump::status::ok;
    if (k == k_get) {
      sl.seq = p.next_get++;
      sl.len = rand_len(std::min(L, pattern_bytes));
      sl.src_off = 8 * (rng() % ((pattern_bytes - sl.len) / 8 + 1));
      ++p.sent_gets;
      st = ep.get(static_cast<int>(dest), r_get, sl.src_off, in_own + (size_t(dest) * W + s) * L, sl.len, sl.seq, s);
    } else {
      sl.seq = p.next_seq++;
      ++p.sent_requests;
      if (k == k_short) {
        st = ep.request(static_cast<int>(dest), q_short, sl.seq, s, k, 0u);
      } else if (k == k_medium_reply || k == k_long_reply) {
        sl.len = rand_len(k == k_medium_reply ? max_med : L);
        st = ep.request(static_cast<int>(dest), q_short, sl.seq, s, k, sl.len);
      } else {
        sl.len = rand_len(k == k_medium ? max_med : L);
        fill(send_buf.data(), sl.len, payload_seed(me, dest, sl.seq, k));
        const std::span<const std::byte> pl(send_buf.data(), sl.len);
        if (k == k_medium) {
          st = ep.request(static_cast<int>(dest), q_payload, pl, sl.seq, s, k, sl.len);
        } else if (rng() & 1) {
          st = ep.request_long(static_cast<int>(dest), q_payload, pl, in_req + (size_t(me) * W + s) * L, sl.seq, s,
                               k, sl.len);
        } else {  // the async form: in_use means "the queue is full, poll and try again"
          const uint64_t off = in_req + (size_t(me) * W + s) * L;
          while ((st = ep.request_long_async(static_cast<int>(dest), q_payload, pl, off, sl.seq, s, k, sl.len)) ==
                 clump::status::in_use)
            rt.bundle().poll();
        }
      }
    }
    if (st != clump::status::ok) {
      complaint(c.failed_sends, clump::to_string(st), dest, sl.seq, kind_names[k]);
      sl.busy = false;
      --p.busy;
    }
  };

  const auto start = steady::now();
  const auto end = start + std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(o.seconds));
  const auto warm = start + std::chrono::duration_cast<steady::duration>(
                                std::chrono::duration<double>(std::min(5.0, o.seconds / 4)));
  auto pause_gap = [&] {
    return std::chrono::duration_cast<steady::duration>(
        std::chrono::duration<double>(o.pause_every_s * (0.5 + double(rng() % 1000) / 1000)));
  };
  auto next_pause = o.pause_every_s > 0 ? start + pause_gap() : steady::time_point::max();
  memory_sample base{}, peak{};
  bool have_base = false;
  auto next_sample = warm;
  uint64_t pauses = 0;
  for (auto now = start; now < end; now = steady::now()) {
    for (int i = 0; i < 64; ++i) {
      const uint32_t dest = static_cast<uint32_t>(rng() % n);
      if (peers[dest].busy < W) issue(dest);
    }
    rt.bundle().poll();
    if (now >= next_sample) {
      const memory_sample m = sample_memory();
      if (!have_base) {
        base = peak = m;
        have_base = true;
      }
      peak.rss_kib = std::max(peak.rss_kib, m.rss_kib);
      peak.private_kib = std::max(peak.private_kib, m.private_kib);
      peak.heap_kib = std::max(peak.heap_kib, m.heap_kib);
      next_sample = now + std::chrono::seconds(1);
    }
    if (now >= next_pause) {  // compute without calling the library
      const auto until = now + std::chrono::milliseconds(rng() % 500);
      while (steady::now() < until) {
      }
      ++pauses;
      next_pause = steady::now() + pause_gap();
    }
  }

  // ---- the end: every reply in, then compare counts across ranks ----
  auto outstanding = [&] {
    uint64_t b = 0;
    for (const auto& p : peers) b += p.busy;
    return b;
  };
  const auto give_up = steady::now() + std::chrono::seconds(120);
  rt.wait_until([&] { return outstanding() == 0 || steady::now() > give_up; });
  if (const uint64_t left = outstanding()) {
    c.lost += left;
    std::fprintf(stderr, "soak: rank %u: %" PRIu64 " operations still unanswered 120 s after the end\n", me, left);
  }
  const double elapsed = std::chrono::duration<double>(steady::now() - start).count();
  rt.barrier();
  const memory_sample last = sample_memory();
  if (!have_base) base = peak = last;

  std::vector<uint64_t> sent_to(n), all_sent(size_t(n) * n);
  for (uint32_t d = 0; d < n; ++d) sent_to[d] = peers[d].sent_requests;
  rt.allgather(sent_to.data(), all_sent.data(), n * sizeof(uint64_t));
  uint64_t sent_requests = 0, sent_gets = 0, received = 0;
  for (uint32_t r = 0; r < n; ++r) {
    const uint64_t want = all_sent[size_t(r) * n + me], got = peers[r].received_requests;
    if (got < want) c.lost += want - got;
    if (got > want) c.duplicated += got - want;
    if (got != want)
      std::fprintf(stderr, "soak: rank %u: rank %u sent %" PRIu64 " requests here, %" PRIu64 " arrived\n", me, r,
                   want, got);
    sent_requests += peers[r].sent_requests;
    sent_gets += peers[r].sent_gets;
    received += got;
  }
  std::printf("soak: rank %u sent %" PRIu64 " requests %" PRIu64 " gets received %" PRIu64 " requests %" PRIu64
              " replies %" PRIu64 " gets; errors %" PRIu64 " (lost %" PRIu64 ", duplicated %" PRIu64
              ", corrupted %" PRIu64 ", returned %" PRIu64 ", failed sends %" PRIu64 "); quiet phases %" PRIu64
              "; memory rss %" PRIu64 "->%" PRIu64 " (peak %" PRIu64 ") KiB private %" PRIu64 "->%" PRIu64
              " (peak %" PRIu64 ") KiB heap %" PRIu64 "->%" PRIu64 " (peak %" PRIu64 ") KiB\n",
              me, sent_requests, sent_gets, received, c.replies, c.gets_done, c.errors(), c.lost, c.duplicated,
              c.corrupted, c.returned, c.failed_sends, pauses, base.rss_kib, last.rss_kib, peak.rss_kib,
              base.private_kib, last.private_kib, peak.private_kib, base.heap_kib, last.heap_kib, peak.heap_kib);

  // Totals on rank 0.
  constexpr size_t fields = 7 + k_kinds;
  uint64_t mine[fields] = {sent_requests, sent_gets, c.lost, c.duplicated, c.corrupted, c.returned, c.failed_sends};
  for (uint32_t k = 0; k < k_kinds; ++k) mine[7 + k] = c.by_kind[k];
  std::vector<uint64_t> all(size_t(n) * fields);
  rt.allgather(mine, all.data(), sizeof mine);
  uint64_t tot[fields] = {};
  for (uint32_t r = 0; r < n; ++r)
    for (size_t f = 0; f < fields; ++f) tot[f] += all[r * fields + f];
  if (me == 0) {
    const uint64_t messages = 2 * (tot[0] + tot[1]);
    std::string kinds;
    for (uint32_t k = 0; k < k_kinds; ++k) kinds += std::string(k ? ", " : "") + kind_names[k] + " " +
                                                     std::to_string(tot[7 + k]);
    std::printf("soak: total %" PRIu64 " messages in %.1f s (%.0f per second; operations: %s); lost %" PRIu64
                ", duplicated %" PRIu64 ", corrupted %" PRIu64 ", returned %" PRIu64 ", failed sends %" PRIu64 "\n",
                messages, elapsed, double(messages) / elapsed, kinds.c_str(), tot[2], tot[3], tot[4], tot[5], tot[6]);
  }
  rt.barrier();
  return tot[2] + tot[3] + tot[4] + tot[5] + tot[6] == 0 ? 0 : 1;
} catch (const clump::error& e) {
  std::fprintf(stderr, "soak: %s\n", e.what());
  return 1;
}
