// datagram_fuzzer: sends random and mutated datagrams at a running job's
// network port (fault_target's rank 0; see datagram_fuzz_test.cpp), then
// writes what it sent and what the receiver must have refused.
//
//   datagram_fuzzer --to 127.0.0.1:PORT --job HEX [--rank 0 --size 2] [--slot S]
//                   [--seed N] [--scale K] [--report FILE] [--forge]
//
// Four families, thousands of datagrams each (times --scale):
//   random     random bytes of random lengths 0..65507, some behind a valid
//              prefix (magic; magic and version; up to the job id; a whole
//              datagram header) so that the later checks are reached too;
//   other_job  valid datagrams of every kind with another job id;
//   version    valid datagrams with another wire-format version;
//   mutated    valid datagrams of this job, from a rank of the job, with each
//              header bit flipped, each field set to boundary and
//              out-of-range values (kinds, nargs, lengths, fragments beyond
//              the message, ranks out of range or equal to the receiver),
//              cut at every length, extended, and randomly mutated.
//
// What the receiver must make of each datagram is what clump::net::decode()
// says (the libFuzzer target tests decode() itself; here the question is
// whether a running job counts and drops what decode() refuses, delivers
// nothing, and keeps working), except that what decode() accepts the network
// must refuse as not coming from the address of the rank it names: the
// fuzzer's socket is no rank's. The mutated datagrams start from the
// sequence numbers and acknowledgements the receiver expects of its peer
// (nothing has been sent yet), so each of those is a forgery that only that
// address check keeps from being delivered. --forge adds two handmade ones
// (see forge()).
//
// The report holds, as "key value" lines: sent, expect_<reason> for each
// refusal reason, and kernel_drops: how many datagrams the receiver's socket
// dropped for want of buffer room (from /proc/net/udp; -1 when unknown). The
// fuzzer paces itself by that socket's receive queue, and before writing the
// report waits until the queue is empty, i.e. the receiver has read
// everything.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "datagrams.hpp"
#include "net/wire.hpp"

namespace {

using namespace clump;
using fuzz::bytes;
using net::refusal;

// ---- options --------------------------------------------------------------

struct options {
  sockaddr_in to{};
  uint64_t job = 0;
  uint32_t rank = 0, size = 2;
  uint64_t seed = 1;
  int scale = 1;
  std::string report;
  bool forge = false;
  uint8_t slot = 0;  // the receiver's endpoint
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "datagram_fuzzer: %s\nusage: datagram_fuzzer --to ADDR:PORT --job HEX [--rank R] [--size N] "
               "[--slot S] [--seed N] [--scale K] [--report FILE] [--forge]\n",
               why);
  std::exit(2);
}

options parse(int argc, char** argv) {
  options o;
  bool have_to = false, have_job = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--forge") {
      o.forge = true;
      continue;
    }
    if (i + 1 >= argc) usage(("missing value after " + a).c_str());
    const std::string v = argv[++i];
    if (a == "--to") {
      const size_t colon = v.rfind(':');
      o.to.sin_family = AF_INET;
      if (colon == std::string::npos || ::inet_pton(AF_INET, v.substr(0, colon).c_str(), &o.to.sin_addr) != 1)
        usage("--to wants an IPv4 ADDR:PORT");
      o.to.sin_port = htons(static_cast<uint16_t>(std::stoul(v.substr(colon + 1))));
      have_to = true;
    } else if (a == "--job") {
      o.job = std::stoull(v, nullptr, 16);
      have_job = true;
    } else if (a == "--rank") {
      o.rank = static_cast<uint32_t>(std::stoul(v));
    } else if (a == "--size") {
      o.size = static_cast<uint32_t>(std::stoul(v));
    } else if (a == "--seed") {
      o.seed = std::stoull(v);
    } else if (a == "--scale") {
      o.scale = std::max(1, std::stoi(v));
    } else if (a == "--slot") {
      o.slot = static_cast<uint8_t>(std::stoul(v));
    } else if (a == "--report") {
      o.report = v;
    } else {
      usage(("unknown option " + a).c_str());
    }
  }
  if (!have_to || !have_job) usage("--to and --job are required");
  if (o.size < 2 || o.rank >= o.size) usage("--rank must be below --size, and --size at least 2");
  return o;
}

// ---- the receiver's socket, as the kernel shows it --------------------------

struct socket_queue {
  bool found = false;
  long long queued = 0;  // bytes waiting in its receive queue
  long long drops = 0;   // datagrams dropped for want of room, since it was opened
};

/// Reads the receiver's line of /proc/net/udp (same host, same network namespace).
socket_queue look_at(const sockaddr_in& a) {
  char local[32];
  std::snprintf(local, sizeof local, "%08X:%04X", a.sin_addr.s_addr, ntohs(a.sin_port));
  std::ifstream in("/proc/net/udp");
  std::string line;
  std::getline(in, line);  // the column titles
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string s; fields >> s;) f.push_back(s);
    // sl local rem st tx:rx tr:when retrnsmt uid timeout inode ref pointer drops
    if (f.size() < 13 || f[1] != local) continue;
    socket_queue q;
    q.found = true;
    q.queued = std::stoll(f[4].substr(f[4].find(':') + 1), nullptr, 16);
    q.drops = std::stoll(f[12]);
    return q;
  }
  return {};
}

// ---- sending, tallying ------------------------------------------------------

/// splitmix64: the same seed sends the same datagrams.
struct random_source {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return n ? next() % n : 0; }
};

/// The report's name for a refusal reason (as in network_stats' counters).
std::string key(refusal r) {
  switch (r) {
    case refusal::none: return "accepted";
    case refusal::truncated: return "truncated";
    case refusal::not_clump: return "foreign";
    case refusal::wrong_version: return "version";
    case refusal::other_job: return "other_job";
    case refusal::bad_rank: return "bad_rank";
    case refusal::malformed: return "malformed";
    case refusal::wrong_source: return "source";
    default: return "reason_" + std::to_string(static_cast<unsigned>(r));  // one this fuzzer does not know yet
  }
}

class fuzzer {
 public:
  explicit fuzzer(const options& o) : o_(o), random_{o.seed} {
    fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    // Connected: a receiver that is gone shows as ECONNREFUSED rather than silence.
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<const sockaddr*>(&o.to), sizeof o.to) != 0) {
      std::fprintf(stderr, "datagram_fuzzer: cannot open a UDP socket to the target: %s\n", std::strerror(errno));
      std::exit(1);
    }
    const socket_queue q = look_at(o.to);
    watch_ = q.found;
    drops_before_ = q.drops;
    if (!watch_)
      std::fprintf(stderr, "datagram_fuzzer: the target's socket is not in /proc/net/udp: sending unpaced, "
                           "kernel drops unknown\n");
  }
  ~fuzzer() { ::close(fd_); }

  random_source& random() { return random_; }
  const options& opt() const { return o_; }
  uint32_t peer() const { return o_.rank == 0 ? 1 : 0; }

  /// What the receiver makes of `b`.
  refusal verdict(const bytes& b) const {
    net::decoded d;
    return net::decode(b.data(), b.size(), o_.job, o_.rank, o_.size, d);
  }

  /// Sends `b` and counts what the receiver must make of it.
  void send(bytes b, const char* family) {
    refusal r = verdict(b);
    // Well formed, but from our address, which is no rank's.
    if (r == refusal::none) r = refusal::wrong_source;
    pace(b.size());
    ssize_t n;
    do n = ::send(fd_, b.data(), b.size(), 0);
    while (n < 0 && (errno == EINTR || errno == ENOBUFS));
    if (n < 0 && errno == ECONNREFUSED) {
      std::fprintf(stderr, "datagram_fuzzer: the target's port refused a datagram (%s): the target is gone\n",
                   family);
      std::exit(1);
    }
    if (n != static_cast<ssize_t>(b.size())) {
      std::fprintf(stderr, "datagram_fuzzer: sending %zu bytes (%s) failed: %s\n", b.size(), family,
                   n < 0 ? std::strerror(errno) : "short send");
      std::exit(1);
    }
    ++expected_[static_cast<unsigned>(r)];
    ++sent_;
  }

  /// Sends `b`, which the fuzzer built to be refused as `want`.
  void send_expecting(bytes b, refusal want, const char* family) {
    const refusal r = verdict(b);
    if (r != want) {
      std::fprintf(stderr, "datagram_fuzzer: a %s datagram of %zu bytes is %s by decode(), expected %s\n", family,
                   b.size(), net::to_string(r), net::to_string(want));
      ++surprises_;
    }
    send(std::move(b), family);
  }

  /// Waits until the receiver has read everything, then writes the report.
  bool finish() {
    long long drops = -1;
    if (watch_) {
      if (!wait_for_queue_below(1, std::chrono::seconds(10))) {
        std::fprintf(stderr, "datagram_fuzzer: the target did not read its socket within 10 s\n");
        return false;
      }
      drops = look_at(o_.to).drops - drops_before_;
    }
    std::string text = "sent " + std::to_string(sent_) + "\n";
    for (unsigned r = 0; r < net::refusal_count; ++r)
      text += "expect_" + key(static_cast<refusal>(r)) + " " + std::to_string(expected_[r]) + "\n";
    text += "kernel_drops " + std::to_string(drops) + "\nseed " + std::to_string(o_.seed) + "\n";
    std::printf("datagram_fuzzer: seed %llu\n%s", static_cast<unsigned long long>(o_.seed), text.c_str());
    if (!o_.report.empty()) {
      // Written aside, then renamed: the target never reads half a report.
      const std::string tmp = o_.report + ".tmp";
      std::ofstream(tmp) << text;
      if (std::rename(tmp.c_str(), o_.report.c_str()) != 0) {
        std::fprintf(stderr, "datagram_fuzzer: cannot write %s: %s\n", o_.report.c_str(), std::strerror(errno));
        return false;
      }
    }
    if (surprises_) std::fprintf(stderr, "datagram_fuzzer: %llu datagram(s) not refused as built to be\n",
                                 static_cast<unsigned long long>(surprises_));
    return surprises_ == 0;
  }

 private:
  // Keeps the receiver's queue short enough that the kernel drops nothing
  // (a drop would make the expected counts an upper bound only).
  void pace(size_t bytes) {
    if (!watch_) return;
    unsent_bytes_ += bytes + 512;  // about what the kernel charges a datagram
    if (unsent_bytes_ < (256u << 10)) return;
    unsent_bytes_ = 0;
    if (!wait_for_queue_below(1 << 20, std::chrono::seconds(10))) {
      std::fprintf(stderr, "datagram_fuzzer: the target stopped reading its socket (%lld bytes queued for 10 s)\n",
                   look_at(o_.to).queued);
      std::exit(1);
    }
  }

  bool wait_for_queue_below(long long limit, std::chrono::seconds most) {
    const auto deadline = std::chrono::steady_clock::now() + most;
    for (;;) {
      const socket_queue q = look_at(o_.to);
      if (!q.found) {
        std::fprintf(stderr, "datagram_fuzzer: the target's socket is gone\n");
        std::exit(1);
      }
      if (q.queued < limit) return true;
      if (std::chrono::steady_clock::now() >= deadline) return false;
      ::poll(nullptr, 0, 1);  // the receiver's service thread drains the queue meanwhile
    }
  }

  options o_;
  random_source random_;
  int fd_ = -1;
  bool watch_ = false;
  long long drops_before_ = 0;
  size_t unsent_bytes_ = 0;
  uint64_t sent_ = 0, surprises_ = 0;
  uint64_t expected_[net::refusal_count] = {};
};

// ---- the families -----------------------------------------------------------

/// Valid datagrams of every kind, as the peer rank would send them to the
/// fuzzer's receiver first (sequence number 0, nothing acknowledged), to
/// its endpoint's slot, to a handler index no legitimate message uses, with
/// a random tag.
std::vector<bytes> bases(fuzzer& f, uint64_t job) {
  random_source& rnd = f.random();
  const fuzz::addressing a{job, f.peer(), f.opt().rank, 0, {0, 0}, {0, 0}};
  std::vector<bytes> out;
  for (auto& e : fuzz::valid_examples(a, f.opt().slot, 77, rnd.next() | 2)) out.push_back(std::move(e.datagram));
  return out;
}

bytes random_bytes(random_source& rnd, size_t n) {
  bytes b(n);
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t r = rnd.next();
    std::memcpy(b.data() + i, &r, std::min<size_t>(8, n - i));
  }
  return b;
}

void random_family(fuzzer& f, const std::vector<bytes>& valid) {
  random_source& rnd = f.random();
  const int count = 2000 * f.opt().scale;
  for (int i = 0; i < count; ++i) {
    size_t n;
    switch (rnd.below(4)) {
      case 0: n = rnd.below(65508); break;                              // anything up to the UDP maximum
      case 1: n = rnd.below(201); break;                                // around the headers
      case 2: n = net::data_header_bytes + rnd.below(81) - 64; break;   // at the header boundaries
      default: n = rnd.below(2000); break;
    }
    bytes b = random_bytes(rnd, n);
    const size_t prefixes[] = {0, 0, 4, 5, 16, sizeof(net::datagram_header)};
    const size_t prefix = std::min(n, prefixes[rnd.below(6)]);
    if (prefix == 0) {
      if (n >= 4 && std::memcmp(b.data(), &net::wire_magic, 4) == 0) b[0] ^= std::byte{1};  // no accidental magic
      f.send_expecting(std::move(b), refusal::not_clump, "random");
      continue;
    }
    // Random bytes behind a valid beginning: the checks after it see noise.
    const bytes& v = valid[rnd.below(valid.size())];
    std::memcpy(b.data(), v.data(), std::min(prefix, v.size()));
    f.send(std::move(b), "random after a valid prefix");
  }
}

void other_job_family(fuzzer& f, const std::vector<bytes>& valid) {
  random_source& rnd = f.random();
  const uint64_t job = f.opt().job;
  const int count = 1000 * f.opt().scale;
  for (int i = 0; i < count; ++i) {
    bytes b = valid[rnd.below(valid.size())];
    const uint64_t others[] = {job ^ (1ull << rnd.below(64)), job + 1, job - 1, 0, ~0ull, rnd.next(), ~job};
    uint64_t other = others[rnd.below(7)];
    if (other == job) other ^= 1;
    std::memcpy(b.data() + offsetof(net::datagram_header, job), &other, 8);
    // Another job's ranks and lengths are its own business: the job is looked at first.
    if (rnd.below(4) == 0) b[offsetof(net::datagram_header, src_rank)] = static_cast<std::byte>(rnd.next());
    if (rnd.below(4) == 0) b.resize(sizeof(net::datagram_header) + rnd.below(b.size() - sizeof(net::datagram_header)));
    f.send_expecting(std::move(b), refusal::other_job, "other_job");
  }
}

void version_family(fuzzer& f, const std::vector<bytes>& valid) {
  random_source& rnd = f.random();
  const int count = 1000 * f.opt().scale;
  for (int i = 0; i < count; ++i) {
    bytes b = valid[rnd.below(valid.size())];
    const uint8_t versions[] = {0, net::wire_version + 1, 0xff, net::wire_version ^ 0x80,
                                static_cast<uint8_t>(rnd.next())};
    uint8_t v = versions[rnd.below(5)];
    if (v == net::wire_version) v = 0;
    b[offsetof(net::datagram_header, version)] = static_cast<std::byte>(v);
    // The version is looked at before the job and everything after it.
    if (rnd.below(4) == 0) b[offsetof(net::datagram_header, job)] ^= std::byte{0x10};
    if (rnd.below(4) == 0) b.resize(sizeof(net::datagram_header) + rnd.below(b.size() - sizeof(net::datagram_header)));
    f.send_expecting(std::move(b), refusal::wrong_version, "version");
  }
}

struct field {
  size_t at, width;
};
// Fields of both headers (wire.hpp), by where they are in a data datagram.
constexpr size_t mh = sizeof(net::datagram_header);
// A whole field, or element i of an array field, of either header.
#define DATAGRAM(name) field{offsetof(net::datagram_header, name), sizeof(net::datagram_header::name)}
#define MESSAGE(name) field{mh + offsetof(net::message_header, name), sizeof(net::message_header::name)}
#define DATAGRAM_AT(name, i)                                                                \
  field{offsetof(net::datagram_header, name) + (i) * sizeof(net::datagram_header::name[0]), \
        sizeof(net::datagram_header::name[0])}
#define MESSAGE_AT(name, i)                                                                      \
  field{mh + offsetof(net::message_header, name) + (i) * sizeof(net::message_header::name[0]), \
        sizeof(net::message_header::name[0])}
constexpr field magic_f = DATAGRAM(magic), version_f = DATAGRAM(version), type_f = DATAGRAM(type),
            channel_f = DATAGRAM(channel), src_f = DATAGRAM(src_rank), dst_f = DATAGRAM(dst_rank),
            kind_f = MESSAGE(kind), nargs_f = MESSAGE(nargs), length_f = MESSAGE(length),
            frag_f = MESSAGE(frag_offset);
constexpr field fields[] = {
    magic_f, version_f, type_f, channel_f, DATAGRAM(flags), DATAGRAM(job), src_f, dst_f, DATAGRAM(seq),
    DATAGRAM_AT(ack, 0), DATAGRAM_AT(ack, 1), DATAGRAM_AT(delay_us, 0), DATAGRAM_AT(delay_us, 1), DATAGRAM(records), DATAGRAM_AT(held, 0),
    DATAGRAM_AT(held, 1), kind_f, MESSAGE(handler), nargs_f, MESSAGE(src_slot), MESSAGE(dst_slot),
    MESSAGE(how), MESSAGE(lent), MESSAGE(reserved), MESSAGE(msg_id),
    MESSAGE(reserved2), MESSAGE(dst_gen), MESSAGE(src_gen), MESSAGE(tag), MESSAGE(src_tag), length_f, frag_f,
    MESSAGE(offset), MESSAGE(aux),
};
constexpr size_t width_of_all() {
  size_t n = 0;
  for (const field& f : fields) n += f.width;
  return n;
}
static_assert(width_of_all() == net::data_header_bytes, "a header field is missing from the list");
bool operator==(field a, field b) { return a.at == b.at && a.width == b.width; }

void put(bytes& b, field fd, uint64_t v) {
  if (fd.at + fd.width <= b.size()) std::memcpy(b.data() + fd.at, &v, fd.width);
}

/// Boundary and out-of-range values for a field of a datagram whose payload
/// fragment has `fragment` bytes: the general ones for its width, and those
/// that matter to the field (every kind, every nargs, ranks around the job,
/// lengths around the fragment).
std::vector<uint64_t> values_for(field fd, const fuzzer& f, size_t fragment) {
  const uint64_t max = fd.width == 8 ? ~0ull : (1ull << (8 * fd.width)) - 1;
  std::vector<uint64_t> v = {0, 1, 2, max, max - 1, max / 2, max / 2 + 1};
  // Every value of the fields that say what the rest means.
  if (fd == version_f || fd == type_f || fd == channel_f || fd == kind_f || fd == nargs_f)
    for (uint64_t i = 3; i < 256; ++i) v.push_back(i);
  const uint32_t size = f.opt().size, me = f.opt().rank;
  if (fd == src_f || fd == dst_f)
    for (uint64_t r : {uint64_t{me}, uint64_t{f.peer()}, uint64_t{size}, uint64_t{size} + 1, uint64_t{me} + 0x10000})
      v.push_back(r);
  if (fd == length_f || fd == frag_f)
    for (uint64_t d : {fragment - 1, uint64_t{fragment}, fragment + 1, 2 * uint64_t{fragment}, uint64_t{0x1000000}})
      v.push_back(d & max);
  return v;
}

void mutated_family(fuzzer& f, const std::vector<bytes>& valid) {
  random_source& rnd = f.random();
  for (const bytes& base : valid) {
    net::message_header m{};
    const bool data = base.size() > mh;
    if (data) std::memcpy(&m, base.data() + mh, sizeof m);
    const size_t headers = data ? net::data_header_bytes + 4u * m.nargs : mh;
    const size_t fragment = base.size() - headers;
    // Every bit of the headers and arguments.
    for (size_t bit = 0; bit < 8 * headers; ++bit) {
      bytes b = base;
      b[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
      f.send(std::move(b), "bit flip");
    }
    // Every field at its boundaries and beyond.
    for (const field& fd : fields) {
      if (fd.at + fd.width > headers) continue;
      for (uint64_t v : values_for(fd, f, fragment)) {
        bytes b = base;
        put(b, fd, v);
        f.send(std::move(b), "boundary value");
      }
    }
    // Cut at every length, and extended.
    for (size_t n = 0; n < base.size(); ++n) f.send(bytes(base.begin(), base.begin() + static_cast<long>(n)), "cut");
    for (size_t extra = 1; extra <= 8; ++extra) {
      bytes b = base;
      b.resize(b.size() + extra, std::byte{0xee});
      f.send(std::move(b), "extended");
    }
    if (!data) continue;
    // The cases that must be refused whatever the rest says.
    const auto kind = static_cast<net::msg_kind>(m.kind);
    auto refused = [&](auto change, refusal want, const char* what) {
      bytes b = base;
      change(b);
      f.send_expecting(std::move(b), want, what);
    };
    if (net::carries_payload(kind) && fragment > 0) {
      refused([&](bytes& b) { put(b, frag_f, m.length); }, refusal::malformed, "fragment past the end");
      refused([&](bytes& b) { put(b, frag_f, m.length - fragment + 1); }, refusal::malformed, "fragment over the end");
      refused([&](bytes& b) { put(b, frag_f, 0xffffffffu); }, refusal::malformed, "fragment at 4 GiB");
      refused([&](bytes& b) { put(b, length_f, fragment - 1); put(b, frag_f, 0); }, refusal::malformed,
              "message shorter than its fragment");
      refused([&](bytes& b) { put(b, length_f, 0); }, refusal::malformed, "empty message with a fragment");
    } else if (!net::carries_payload(kind)) {
      refused([&](bytes& b) { b.push_back(std::byte{1}); }, refusal::malformed, "payload on a kind without");
      refused([&](bytes& b) { put(b, frag_f, 1); }, refusal::malformed, "fragment offset on a kind without payload");
    }
    for (uint64_t r : {uint64_t{f.opt().size}, uint64_t{0xffffffffu}, uint64_t{f.opt().rank}})
      refused([&](bytes& b) { put(b, src_f, r); }, refusal::bad_rank, "source rank out of range or the receiver");
    refused([&](bytes& b) { put(b, dst_f, f.peer()); }, refusal::bad_rank, "destination another rank");
    for (uint64_t k : {0, 4, 9, 11, 0xff})
      refused([&](bytes& b) { put(b, kind_f, k); }, refusal::malformed, "unknown kind");
    for (uint64_t n : {21, 0x80, 0xff}) refused([&](bytes& b) { put(b, nargs_f, n); }, refusal::malformed, "nargs");
    refused([&](bytes& b) { put(b, channel_f, static_cast<uint8_t>(b[channel_f.at]) ^ 1u); }, refusal::malformed,
            "the other channel");
    refused([&](bytes& b) { put(b, channel_f, 2); }, refusal::malformed, "no such channel");
    refused([&](bytes& b) { b.resize(net::data_header_bytes - 1); }, refusal::truncated, "cut in the message header");
    if (m.nargs) refused([&](bytes& b) { b.resize(headers - 1); }, refusal::truncated, "cut in the arguments");
  }
  // Several changes at once, at random.
  const int count = 3000 * f.opt().scale;
  for (int i = 0; i < count; ++i) {
    bytes b = valid[rnd.below(valid.size())];
    for (uint64_t c = 1 + rnd.below(6); c > 0 && !b.empty(); --c) {
      switch (rnd.below(5)) {
        case 0: b[rnd.below(b.size())] ^= static_cast<std::byte>(1u << rnd.below(8)); break;
        case 1: {
          const size_t at = rnd.below(std::min<size_t>(b.size(), net::data_header_bytes));
          b[at] = static_cast<std::byte>(rnd.next());
          break;
        }
        case 2: {
          const field fd = fields[rnd.below(std::size(fields))];
          const size_t fragment = b.size() > net::data_header_bytes ? b.size() - net::data_header_bytes : 0;
          const std::vector<uint64_t> v = values_for(fd, f, fragment);
          put(b, fd, v[rnd.below(v.size())]);
          break;
        }
        case 3: b.resize(rnd.below(b.size() + 1)); break;
        default: b.resize(b.size() + rnd.below(64), static_cast<std::byte>(rnd.next())); break;
      }
    }
    f.send(std::move(b), "random mutations");
  }
}

/// Two forgeries that only the check of the sender's address stops: as from
/// the peer rank, with sequence number 0 (the first each channel expects), a
/// returned message for the receiver's endpoint (accepted, it would run
/// handler 0, which checks no tag), and a short request with a tag nobody has
/// (accepted, it would come back to the peer's handler 0). Either would also
/// take the sequence number of the peer's first real datagram on its
/// channel, which the receiver would then drop as a duplicate.
void forge(fuzzer& f) {
  const fuzz::addressing a{f.opt().job, f.peer(), f.opt().rank, 0, {0, 0}, {0, 0}};
  for (auto& e : fuzz::valid_examples(a, f.opt().slot, 200, 0x0f0f0f0f0f0f0f0full))
    if (e.name == "returned" || e.name == "short_request_1")
      f.send_expecting(std::move(e.datagram), refusal::none, "forged");
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  fuzzer f(o);
  const std::vector<bytes> valid = bases(f, o.job);
  random_family(f, valid);
  other_job_family(f, valid);
  version_family(f, valid);
  mutated_family(f, valid);
  if (o.forge) forge(f);
  return f.finish() ? 0 : 1;
}
