#include "core/settings.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/log.hpp"

extern char** environ;

namespace clump::core {

namespace {

/// A setting the user got wrong: say which and how to fix it, and end the
/// process with status 1 (no core dump: nothing crashed).
[[noreturn, gnu::format(printf, 1, 2)]] void bad_setting(const char* fmt, ...) noexcept {
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  log_error("%s", text);
  ::_exit(1);
}

const setting_def registry[] = {
    {"CLUMP_SHM_QUEUE_DEPTH", setting_type::integer, "1024",
     "packets (64-byte cache lines) in each request and each reply queue of an endpoint; a power of two",
     false},
    {"CLUMP_SHM_MEDIUM_RING", setting_type::size, "256K",
     "bytes of medium-payload ring behind each request and each reply queue; a power of two, at least 2 x CLUMP_MAX_MEDIUM",
     false},
    {"CLUMP_MAX_MEDIUM", setting_type::size, "64K",
     "largest medium payload (AM_MaxMedium); long payloads through a private segment travel in pieces of this size",
     false},
    {"CLUMP_GAS_SEGMENT", setting_type::size, "64M",
     "each process's share of the gas global address space (clump/gas.hpp), in shared memory (used only where touched)",
     false},
    {"CLUMP_SEGMENT_SIZE", setting_type::size, "64M",
     "size of the segment of the endpoint that clump::runtime and AMX_SPMDStartup create (memory is used only where touched)",
     false},
    {"CLUMP_SHM_REGION_SIZE", setting_type::size, "64G",
     "virtual size of each process's shared region (queue blocks and segments); costs address space, not memory",
     false},
    {"CLUMP_MAX_ENDPOINTS", setting_type::integer, "16", "endpoints one process may own at once", false},
    {"CLUMP_POLL_BATCH", setting_type::integer, "64",
     "messages one poll handles per queue at most, so that one busy queue cannot starve the others", false},
    {"CLUMP_SPIN_BEFORE_SLEEP_US", setting_type::integer, "50",
     "microseconds a blocking wait keeps polling before it sleeps in the kernel", false},
    {"CLUMP_VERBOSE", setting_type::integer, "0", "0: errors and warnings; 1: also info; 2: also debug", false},
    {"CLUMP_PROTOCOL", setting_type::string, "auto",
     "auto: shared memory inside a node, the network between nodes; net: the network to every other rank, even on "
     "one node (the papers' NOW mode); multi: as auto, but the network is open and polled even when every rank "
     "shares the node (the SC97 paper's multi-protocol layer on one SMP, for measuring its cost)",
     false},
    {"CLUMP_PROGRESS", setting_type::string, "poll",
     "poll: the network advances when the program polls or waits; thread: a progress thread also drains it, so a "
     "process that computes without polling still answers remote requests",
     false},
    {"CLUMP_NET_POLL", setting_type::string, "adaptive",
     "how often poll() looks at the network: adaptive (between 1/CLUMP_NET_POLL_MAX and 1/CLUMP_NET_POLL_MIN of "
     "polls, driven by how many recent network polls found something), fractional (always 1/CLUMP_NET_POLL_MIN), "
     "always",
     false},
    {"CLUMP_NET_POLL_MIN", setting_type::integer, "8", "adaptive polling: the network is polled at most once in this many polls", false},
    {"CLUMP_NET_POLL_MAX", setting_type::integer, "32", "adaptive polling: the network is polled at least once in this many polls", false},
    {"CLUMP_NET_POLL_US", setting_type::integer, "50",
     "adaptive polling: the network is also polled when this many microseconds have passed since it last was, "
     "however few the polls (a program that polls rarely still answers the network soon); 0: no time bound",
     false},
    {"CLUMP_NET_MTU", setting_type::size, "65000",
     "largest UDP datagram clump sends; medium and long payloads are cut into fragments that fit (use 1472 on a "
     "lossy Ethernet to avoid IP fragmentation)",
     false},
    {"CLUMP_NET_WINDOW", setting_type::integer, "64", "datagrams in flight per peer and direction (1 to 64)", false},
    {"CLUMP_NET_SEND_SOCKETS", setting_type::integer, "256",
     "datagrams to up to this many peers go out through a socket connected to each (the kernel keeps the route: "
     "shorter latency), the rest through the one receiving socket; 0: that socket only",
     false},
    {"CLUMP_NET_LEND", setting_type::size, "512K",
     "blocking long messages over the network of at least this many bytes are sent from the caller's buffer "
     "without a copy, and the call returns once the destination has acknowledged them (it waits for the "
     "destination to poll); shorter ones, and the async forms, are copied and return at once; 0: always copy",
     false},
    {"CLUMP_NET_TIMEOUT_MS", setting_type::integer, "10000",
     "a peer that answers nothing, not even the library's keep-alives, for this long while messages to it wait is "
     "declared unreachable and its messages come back to handler 0 (a peer that computes without polling still "
     "answers: its library does); 100 or more, or 0: never give up (for debuggers)",
     false},
    {"CLUMP_NET_ACK_DELAY_US", setting_type::integer, "100",
     "an explicit acknowledgement waits at most this long for reverse traffic to ride on", false},
    {"CLUMP_NET_RTO_MIN_US", setting_type::integer, "1000", "lower bound of the retransmission timeout", false},
    {"CLUMP_NET_ADDRESS", setting_type::string, "auto",
     "IPv4 address of this process's UDP socket; auto: the first non-loopback interface, else 127.0.0.1 "
     "(clumprun sets 127.0.0.1 for jobs on this machine)",
     false},
    {"CLUMP_NET_FAULT", setting_type::string, "",
     "fault injection for tests: drop=P,dup=P,reorder=P,delay=P,delay_us=N,dir=in|out|both,seed=N (P a "
     "probability per datagram)",
     false},
    {"CLUMP_BOOT_FD", setting_type::integer, "-1", "socket to clumprun (set by clumprun)", true},
    {"CLUMP_RANK", setting_type::integer, "0", "this process's rank (set by clumprun)", true},
    {"CLUMP_SIZE", setting_type::integer, "1", "number of ranks in the job (set by clumprun)", true},
    {"CLUMP_JOB_ID", setting_type::string, "", "the job's id (set by clumprun)", true},
    {"CLUMP_LOCAL_RANK", setting_type::integer, "0", "rank among the processes of this node (set by clumprun)",
     true},
};

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1] ? 1u : 0u)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

const setting_def& find(const char* name) {
  for (const auto& d : registry)
    if (std::strcmp(d.name, name) == 0) return d;
  fatal("internal: setting %s is not registered", name);  // a bug in clump: abort
}

std::string raw(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : std::string(find(name).default_value);
}

int64_t integer(const char* name) {
  std::string v = raw(name);
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 0);
  if (end == v.c_str() || *end != '\0')
    bad_setting("%s=%s is not an integer (%s)", name, v.c_str(), find(name).help);
  return x;
}

size_t size(const char* name) {
  size_t x = 0;
  std::string v = raw(name);
  if (!parse_size(v, x))
    bad_setting("%s=%s is not a size; write bytes with an optional K, M or G suffix, e.g. 64M", name, v.c_str());
  return x;
}

void warn_unknown() {
  for (char** e = environ; e && *e; ++e) {
    if (std::strncmp(*e, "CLUMP_", 6) != 0) continue;
    std::string name(*e, std::strcspn(*e, "="));
    bool known = std::any_of(std::begin(registry), std::end(registry),
                             [&](const setting_def& d) { return name == d.name; });
    if (!known)
      log_warning("unknown setting %s ignored; did you mean %s? (clump-info --settings lists them all)",
                  name.c_str(), nearest_setting(name));
  }
}

config parse() {
  config c{};
  int64_t depth = integer("CLUMP_SHM_QUEUE_DEPTH");
  if (depth < 16 || depth > (1 << 20) || (depth & (depth - 1)) != 0)
    bad_setting("CLUMP_SHM_QUEUE_DEPTH=%lld must be a power of two between 16 and 1048576",
          static_cast<long long>(depth));
  c.shm_queue_depth = static_cast<uint32_t>(depth);
  c.max_medium = size("CLUMP_MAX_MEDIUM");
  if (c.max_medium < 8192 || c.max_medium > (16u << 20))
    bad_setting("CLUMP_MAX_MEDIUM=%zu must be between 8K and 16M", c.max_medium);
  c.shm_medium_ring = size("CLUMP_SHM_MEDIUM_RING");
  if (c.shm_medium_ring < 2 * c.max_medium || c.shm_medium_ring > (1u << 30) ||
      (c.shm_medium_ring & (c.shm_medium_ring - 1)) != 0)
    bad_setting("CLUMP_SHM_MEDIUM_RING=%zu must be a power of two, hold two maximum medium payloads "
          "(CLUMP_MAX_MEDIUM=%zu) and be at most 1G",
          c.shm_medium_ring, c.max_medium);
  c.segment_size = size("CLUMP_SEGMENT_SIZE");
  c.shm_region_size = size("CLUMP_SHM_REGION_SIZE");
  int64_t eps = integer("CLUMP_MAX_ENDPOINTS");
  if (eps < 1 || eps > 255) bad_setting("CLUMP_MAX_ENDPOINTS=%lld must be between 1 and 255", static_cast<long long>(eps));
  c.max_endpoints = static_cast<uint32_t>(eps);
  int64_t batch = integer("CLUMP_POLL_BATCH");
  if (batch < 1) bad_setting("CLUMP_POLL_BATCH must be at least 1");
  c.poll_batch = static_cast<uint32_t>(batch);
  int64_t spin = integer("CLUMP_SPIN_BEFORE_SLEEP_US");
  if (spin < 0) bad_setting("CLUMP_SPIN_BEFORE_SLEEP_US must not be negative");
  c.spin_before_sleep_us = static_cast<uint32_t>(spin);
  c.verbose = static_cast<int>(integer("CLUMP_VERBOSE"));
  const std::string proto = raw("CLUMP_PROTOCOL");
  if (proto != "auto" && proto != "net" && proto != "multi")
    bad_setting("CLUMP_PROTOCOL=%s must be auto, net or multi", proto.c_str());
  c.force_net = proto == "net";
  c.keep_net = proto == "multi";
  const std::string progress = raw("CLUMP_PROGRESS");
  if (progress != "poll" && progress != "thread")
    bad_setting("CLUMP_PROGRESS=%s must be poll or thread", progress.c_str());
  c.progress_thread = progress == "thread";
  const std::string mode = raw("CLUMP_NET_POLL");
  if (mode == "adaptive") c.net_poll_mode = 0;
  else if (mode == "fractional") c.net_poll_mode = 1;
  else if (mode == "always") c.net_poll_mode = 2;
  else bad_setting("CLUMP_NET_POLL=%s must be adaptive, fractional or always", mode.c_str());
  int64_t pmin = integer("CLUMP_NET_POLL_MIN"), pmax = integer("CLUMP_NET_POLL_MAX");
  if (pmin < 1 || pmax < pmin || pmax > 1 << 20)
    bad_setting("CLUMP_NET_POLL_MIN=%lld and CLUMP_NET_POLL_MAX=%lld must satisfy 1 <= MIN <= MAX <= 1048576",
                static_cast<long long>(pmin), static_cast<long long>(pmax));
  c.net_poll_min = static_cast<uint32_t>(pmin);
  c.net_poll_max = static_cast<uint32_t>(pmax);
  const int64_t poll_us = integer("CLUMP_NET_POLL_US");
  if (poll_us < 0 || poll_us > 10'000'000) bad_setting("CLUMP_NET_POLL_US must be between 0 and 10000000");
  c.net_poll_us = static_cast<uint32_t>(poll_us);
  c.net_mtu = size("CLUMP_NET_MTU");
  if (c.net_mtu < 512 || c.net_mtu > 65507) bad_setting("CLUMP_NET_MTU=%zu must be between 512 and 65507", c.net_mtu);
  int64_t window = integer("CLUMP_NET_WINDOW");
  if (window < 1 || window > 64) bad_setting("CLUMP_NET_WINDOW=%lld must be between 1 and 64", static_cast<long long>(window));
  c.net_window = static_cast<uint32_t>(window);
  c.net_lend = size("CLUMP_NET_LEND");
  c.gas_segment = size("CLUMP_GAS_SEGMENT");
  int64_t send_sockets = integer("CLUMP_NET_SEND_SOCKETS");
  if (send_sockets < 0 || send_sockets > 65536) bad_setting("CLUMP_NET_SEND_SOCKETS must be between 0 and 65536");
  c.net_send_sockets = static_cast<uint32_t>(send_sockets);
  int64_t timeout = integer("CLUMP_NET_TIMEOUT_MS");
  if (timeout < 0 || (timeout > 0 && timeout < 100) || timeout > 86400000)
    bad_setting("CLUMP_NET_TIMEOUT_MS=%lld must be 0 (never) or between 100 and 86400000",
                static_cast<long long>(timeout));
  c.net_timeout_ms = static_cast<uint32_t>(timeout);
  int64_t ack = integer("CLUMP_NET_ACK_DELAY_US");
  if (ack < 0 || ack > 1000000) bad_setting("CLUMP_NET_ACK_DELAY_US must be between 0 and 1000000");
  c.net_ack_delay_us = static_cast<uint32_t>(ack);
  int64_t rto = integer("CLUMP_NET_RTO_MIN_US");
  if (rto < 10 || rto > 10000000) bad_setting("CLUMP_NET_RTO_MIN_US must be between 10 and 10000000");
  c.net_rto_min_us = static_cast<uint32_t>(rto);
  c.net_address = raw("CLUMP_NET_ADDRESS");
  std::string why;
  if (!parse_fault_plan(raw("CLUMP_NET_FAULT"), c.net_fault, why))
    bad_setting("CLUMP_NET_FAULT: %s (e.g. drop=0.1,dup=0.05,reorder=0.05,seed=7)", why.c_str());
  c.boot_fd = static_cast<int>(integer("CLUMP_BOOT_FD"));
  c.rank = static_cast<int>(integer("CLUMP_RANK"));
  c.size = static_cast<int>(integer("CLUMP_SIZE"));
  c.job_id = raw("CLUMP_JOB_ID");
  warn_unknown();
  return c;
}

}  // namespace

const config& settings() {
  static const config c = parse();
  return c;
}

std::span<const setting_def> all_settings() { return registry; }

std::string setting_value(const setting_def& def) { return raw(def.name); }

bool parse_size(const std::string& text, size_t& out) {
  if (text.empty()) return false;
  char* end = nullptr;
  unsigned long long x = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str()) return false;
  std::string suffix(end);
  std::transform(suffix.begin(), suffix.end(), suffix.begin(), [](unsigned char ch) { return std::tolower(ch); });
  unsigned shift = 0;
  if (suffix.empty() || suffix == "b") shift = 0;
  else if (suffix == "k" || suffix == "kb" || suffix == "kib") shift = 10;
  else if (suffix == "m" || suffix == "mb" || suffix == "mib") shift = 20;
  else if (suffix == "g" || suffix == "gb" || suffix == "gib") shift = 30;
  else if (suffix == "t" || suffix == "tb" || suffix == "tib") shift = 40;
  else return false;
  if (shift && x > (~0ull >> shift)) return false;
  out = static_cast<size_t>(x << shift);
  return true;
}

bool parse_fault_plan(const std::string& text, config::fault_plan& out, std::string& why) {
  out = config::fault_plan{};
  size_t pos = 0;
  while (pos < text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos) {
      why = "'" + item + "' is not name=value";
      return false;
    }
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    char* end = nullptr;
    if (key == "dir") {
      if (value != "in" && value != "out" && value != "both") {
        why = "dir must be in, out or both";
        return false;
      }
      out.incoming = value != "out";
      out.outgoing = value != "in";
      continue;
    }
    if (key == "seed" || key == "delay_us") {
      unsigned long long v = std::strtoull(value.c_str(), &end, 0);
      if (value.empty() || *end) {
        why = key + "=" + value + " is not a whole number";
        return false;
      }
      if (key == "seed")
        out.seed = v;
      else
        out.delay_us = static_cast<uint32_t>(std::min<unsigned long long>(v, 10000000));
      continue;
    }
    double p = std::strtod(value.c_str(), &end);
    if (value.empty() || *end || !(p >= 0 && p <= 1)) {
      why = key + "=" + value + " is not a probability between 0 and 1";
      return false;
    }
    if (key == "drop") out.drop = p;
    else if (key == "dup") out.duplicate = p;
    else if (key == "reorder") out.reorder = p;
    else if (key == "delay") out.delay = p;
    else {
      why = "unknown fault '" + key + "' (drop, dup, reorder, delay, delay_us, dir, seed)";
      return false;
    }
  }
  return true;
}

const char* nearest_setting(const std::string& name) {
  const setting_def* best = &registry[0];
  size_t best_d = ~size_t{0};
  for (const auto& d : registry) {
    size_t dist = edit_distance(name, d.name);
    if (dist < best_d) best_d = dist, best = &d;
  }
  return best->name;
}

}  // namespace clump::core
