#include "core/settings.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
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
    {"CLUMP_RPC_LANDING", setting_type::size, "64M",
     "bytes of each process's rpc engine segment where big rpc arguments and results land, each by one long message "
     "(used only where touched; by default at most a sixteenth of CLUMP_SHM_REGION_SIZE); what does not fit travels in "
     "pieces of CLUMP_MAX_MEDIUM; 0: always in pieces",
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
     "microseconds a blocking wait keeps polling before it sleeps in the kernel (on a crowded host, see "
     "CLUMP_YIELD: 2000 unless set)",
     false},
    {"CLUMP_YIELD", setting_type::string, "auto",
     "auto: a blocking wait gives up its core between polls (sched_yield) when this host runs more of the job's "
     "ranks than it has cores for the job, and looks at the network at every poll; on: always; off: never",
     false},
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
     "lossy Ethernet to avoid IP fragmentation). Over libfabric: CLUMP_OFI_MTU",
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
    {"CLUMP_NET_COALESCE_US", setting_type::integer, "50",
     "short and medium messages (and long ones that fit) to a peer that still has datagrams in flight are packed "
     "into one datagram while it fills, for at most this long while the program calls clump (its next send or "
     "poll sends it; a program that computes without calling clump has it sent by the library's service thread "
     "within a few ms); a message to a peer with nothing in flight (unless sent under clump::unhurried_sends, as "
     "gas::store and gas::put are), and every poll or wait, sends at once; 0: a datagram per message",
     false},
    {"CLUMP_NET_ADDRESS", setting_type::string, "auto",
     "IPv4 address of this process's UDP socket; auto: the first non-loopback interface, else 127.0.0.1 "
     "(clumprun sets 127.0.0.1 for jobs on this machine)",
     false},
    {"CLUMP_NET", setting_type::string, "auto",
     "what the network protocol's datagrams travel over between nodes: udp (a UDP socket), ofi (a libfabric "
     "reliable-datagram endpoint: the provider FI_PROVIDER names, else libfabric's first choice), auto (ofi when "
     "libfabric offers a provider that is not one of its socket emulations (tcp, udp, sockets, net), else udp). "
     "Every process of a job must use the same",
     false},
    {"CLUMP_OFI_DOMAIN", setting_type::string, "",
     "with CLUMP_NET=ofi: the libfabric domain to use, as fi_info names it (an interface name such as eth0 for "
     "the tcp and udp providers, a device such as mlx5_0 for verbs); empty: the one whose address is "
     "CLUMP_NET_ADDRESS, else the provider's first",
     false},
    {"CLUMP_OFI_MTU", setting_type::size, "256K",
     "with CLUMP_NET=ofi: the largest datagram clump hands the provider (its own headers included); medium and "
     "long payloads are cut into fragments that fit. A reliable provider (tcp;ofi_rxm, verbs;ofi_rxm) moves a "
     "large one in one operation; every receive posted is this large (memory becomes resident only as data "
     "lands in it). 512 to 16M, at most what the provider sends in one message; every process of a job must "
     "use the same. Unset, udp;ofi_rxd takes CLUMP_NET_MTU (it cuts datagrams into UDP packets itself, and was "
     "slower with large ones)",
     false},
    {"CLUMP_OFI_RMA_MIN", setting_type::size, "32K",
     "with CLUMP_NET=ofi and a provider that offers RMA: a medium or long message (or a get's answer) of at least "
     "this many bytes is not cut into datagrams; its destination checks it, then reads the payload with one "
     "fi_read (a long one straight into its segment), from the sender's buffer when the send lends it (CLUMP_NET_LEND: the call returns "
     "once read), else from a copy (the call returns at once). Not in a job that authenticates (CLUMP_NET_AUTH: "
     "the bytes read would not be checked), nor from a process under CLUMP_NET_FAULT; 0: never. Unset, not over "
     "udp;ofi_rxd (its reads were no faster than its messages)",
     false},
    {"CLUMP_NET_AUTH", setting_type::string, "auto",
     "authenticate every datagram of the job with a key only its processes hold (a MAC and a replay window: "
     "nobody without the key can inject or replay one): auto (when the job spans hosts), on (emulated nodes too), "
     "off. Decided by clumprun for the whole job",
     false},
    {"CLUMP_CMA_MAX", setting_type::size, "512K",
     "long messages up to this size into a segment outside shared memory (AM_SetSeg with the program's own "
     "memory), on one node, are written straight into the owner's memory by cross-memory attach "
     "(process_vm_writev: one copy) where the kernel allows it; larger ones travel through the medium ring in "
     "pieces (two copies on two cores), unless CLUMP_CMA_SPLIT applies; 0: always the ring",
     false},
    {"CLUMP_CMA_SPLIT", setting_type::size, "64K",
     "blocking long requests of at least this size into such a segment (and CLUMP_CMA_MAX not 0) are copied by "
     "both processes at once: the sender writes the front half by cross-memory attach while the receiver pulls "
     "the rest (process_vm_readv), one copy on each of two cores; 0: never",
     false},
    {"CLUMP_NET_FAULT", setting_type::string, "",
     "fault injection for tests: drop=P,dup=P,reorder=P,delay=P,delay_us=N,open_us=N,dir=in|out|both,seed=N (P a "
     "probability per datagram; open_us: each path opens N µs after its first datagram, as a provider that connects "
     "on a first send)",
     false},
    {"CLUMP_JOIN_TIMEOUT_S", setting_type::integer, "30",
     "under srun or mpirun: how long a rank waits for the other ranks of its host to join; one that never "
     "starts, or exits before it joins, ends the job after this long (1 to 3600)",
     false},
    {"CLUMP_BOOT_FD", setting_type::integer, "-1", "socket to clumprun (set by clumprun)", true},
    {"CLUMP_RANK", setting_type::integer, "0", "this process's rank (set by clumprun)", true},
    {"CLUMP_SIZE", setting_type::integer, "1", "number of ranks in the job (set by clumprun)", true},
    {"CLUMP_JOB_ID", setting_type::string, "",
     "the job's id, checked against what the launcher says when set (clumprun no longer sets it: it is no "
     "business of the environment)",
     true},
    {"CLUMP_LAUNCHER_PID", setting_type::integer, "0",
     "the pid of the clumprun that started this rank (set by clumprun; tools find a job's processes by it)", true},
    {"CLUMP_LOCAL_RANK", setting_type::integer, "0", "rank among the processes of this node (set by clumprun)",
     true},
    {"CLUMP_HOST_RANKS", setting_type::integer, "0",
     "how many ranks of the job run on this host (set by clumprun; 0: not known)", true},
    {"CLUMP_HOST_CPUS", setting_type::integer, "0",
     "how many cores the job may use on this host: clumprun's own CPU affinity (set by clumprun; 0: not known)",
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

/// Whether the environment sets registered setting `name` (to anything but
/// the empty string, which means its default).
bool given(const char* name) {
  find(name);
  const char* v = std::getenv(name);
  return v && *v;
}

std::string raw(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : std::string(find(name).default_value);
}

/// An integer setting in [lo, hi], checked in 64 bits: a value outside is
/// refused, never cut to fit a narrower type.
int64_t integer(const char* name, int64_t lo, int64_t hi) {
  std::string v = raw(name);
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(v.c_str(), &end, 0);
  if (end == v.c_str() || *end != '\0' || std::isspace(static_cast<unsigned char>(v[0])))
    bad_setting("%s=%s is not an integer (%s)", name, v.c_str(), find(name).help);
  if (errno == ERANGE || x < lo || x > hi)
    bad_setting("%s=%s is out of range: it must be between %lld and %lld (%s)", name, v.c_str(),
                static_cast<long long>(lo), static_cast<long long>(hi), find(name).help);
  return x;
}

/// A setting of auto, on or off: 0, 1 or 2.
int auto_on_off(const char* name) {
  const std::string v = raw(name);
  if (v == "auto") return 0;
  if (v == "on") return 1;
  if (v != "off") bad_setting("%s=%s must be auto, on or off", name, v.c_str());
  return 2;
}

/// A size setting in [lo, hi] bytes.
size_t size(const char* name, size_t lo, size_t hi) {
  size_t x = 0;
  std::string v = raw(name);
  if (!parse_size(v, x))
    bad_setting("%s=%s is not a size; write a number of bytes with an optional K, M, G or T suffix, e.g. 64M", name,
                v.c_str());
  if (x < lo || x > hi)
    bad_setting("%s=%s is out of range: it must be between %zu and %zu bytes (%s)", name, v.c_str(), lo, hi,
                find(name).help);
  return x;
}

}  // namespace

std::vector<std::string>& link_names() noexcept {
  static std::vector<std::string> names;  // filled by static initialisers, before main; read after
  return names;
}

namespace {

constexpr size_t kib = size_t{1} << 10, mib = size_t{1} << 20, gib = size_t{1} << 30, tib = size_t{1} << 40;

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
  const int64_t depth = integer("CLUMP_SHM_QUEUE_DEPTH", 16, 1 << 20);
  if ((depth & (depth - 1)) != 0)
    bad_setting("CLUMP_SHM_QUEUE_DEPTH=%lld must be a power of two between 16 and 1048576",
                static_cast<long long>(depth));
  c.shm_queue_depth = static_cast<uint32_t>(depth);
  c.max_medium = size("CLUMP_MAX_MEDIUM", 8 * kib, 16 * mib);
  c.shm_medium_ring = size("CLUMP_SHM_MEDIUM_RING", 16 * kib, gib);
  if (c.shm_medium_ring < 2 * c.max_medium || (c.shm_medium_ring & (c.shm_medium_ring - 1)) != 0)
    bad_setting("CLUMP_SHM_MEDIUM_RING=%zu must be a power of two, hold two maximum medium payloads "
                "(CLUMP_MAX_MEDIUM=%zu) and be at most 1G",
                c.shm_medium_ring, c.max_medium);
  // A process's region holds its segments: at most 64 TiB of address space
  // (x86-64 user space is 128 TiB), and a segment at most the region.
  c.shm_region_size = size("CLUMP_SHM_REGION_SIZE", 16 * mib, 64 * tib);
  c.segment_size = size("CLUMP_SEGMENT_SIZE", 0, c.shm_region_size);
  c.gas_segment = size("CLUMP_GAS_SEGMENT", 0, c.shm_region_size);
  // The landing area's default yields to a small region (a sixteenth of it,
  // leaving the rest to the segments a program asks for); a size given is
  // checked against the whole region.
  c.rpc_landing = given("CLUMP_RPC_LANDING") ? size("CLUMP_RPC_LANDING", 0, c.shm_region_size)
                                              : std::min(size("CLUMP_RPC_LANDING", 0, SIZE_MAX), c.shm_region_size / 16);
  c.max_endpoints = static_cast<uint32_t>(integer("CLUMP_MAX_ENDPOINTS", 1, 255));
  c.poll_batch = static_cast<uint32_t>(integer("CLUMP_POLL_BATCH", 1, 1 << 20));
  c.spin_before_sleep_us = static_cast<uint32_t>(integer("CLUMP_SPIN_BEFORE_SLEEP_US", 0, 10'000'000));
  c.spin_chosen = given("CLUMP_SPIN_BEFORE_SLEEP_US");
  c.yield = auto_on_off("CLUMP_YIELD");
  c.verbose = static_cast<int>(integer("CLUMP_VERBOSE", 0, 3));
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
  const int64_t pmin = integer("CLUMP_NET_POLL_MIN", 1, 1 << 20), pmax = integer("CLUMP_NET_POLL_MAX", 1, 1 << 20);
  if (pmax < pmin)
    bad_setting("CLUMP_NET_POLL_MIN=%lld and CLUMP_NET_POLL_MAX=%lld must satisfy 1 <= MIN <= MAX <= 1048576",
                static_cast<long long>(pmin), static_cast<long long>(pmax));
  c.net_poll_min = static_cast<uint32_t>(pmin);
  c.net_poll_max = static_cast<uint32_t>(pmax);
  c.net_poll_us = static_cast<uint32_t>(integer("CLUMP_NET_POLL_US", 0, 10'000'000));
  c.net_mtu = size("CLUMP_NET_MTU", 512, 65507);
  c.net_window = static_cast<uint32_t>(integer("CLUMP_NET_WINDOW", 1, 64));
  c.net_lend = size("CLUMP_NET_LEND", 0, 4 * gib);
  c.net_send_sockets = static_cast<uint32_t>(integer("CLUMP_NET_SEND_SOCKETS", 0, 65536));
  const int64_t timeout = integer("CLUMP_NET_TIMEOUT_MS", 0, 86'400'000);
  if (timeout > 0 && timeout < 100)
    bad_setting("CLUMP_NET_TIMEOUT_MS=%lld must be 0 (never) or between 100 and 86400000",
                static_cast<long long>(timeout));
  c.net_timeout_ms = static_cast<uint32_t>(timeout);
  c.net_ack_delay_us = static_cast<uint32_t>(integer("CLUMP_NET_ACK_DELAY_US", 0, 1'000'000));
  c.net_rto_min_us = static_cast<uint32_t>(integer("CLUMP_NET_RTO_MIN_US", 10, 10'000'000));
  c.net_coalesce_us = static_cast<uint32_t>(integer("CLUMP_NET_COALESCE_US", 0, 1'000'000));
  c.net_address = raw("CLUMP_NET_ADDRESS");
  c.net = raw("CLUMP_NET");
  const std::vector<std::string>& links = link_names();
  if (c.net != "auto" && c.net != "udp" && std::find(links.begin(), links.end(), c.net) == links.end()) {
    std::string choices = "udp";
    for (const std::string& n : links) choices += ", " + n;
    bad_setting("CLUMP_NET=%s must be %s or auto", c.net.c_str(), choices.c_str());
  }
  c.ofi_domain = raw("CLUMP_OFI_DOMAIN");
  c.ofi_mtu = size("CLUMP_OFI_MTU", 512, 16 * mib);
  c.ofi_mtu_chosen = given("CLUMP_OFI_MTU");
  c.ofi_read_min = size("CLUMP_OFI_RMA_MIN", 0, 4 * gib);
  c.ofi_read_min_chosen = given("CLUMP_OFI_RMA_MIN");
  c.net_auth = auto_on_off("CLUMP_NET_AUTH");
  c.cma_max = size("CLUMP_CMA_MAX", 0, 4 * gib);
  c.cma_split = size("CLUMP_CMA_SPLIT", 0, 4 * gib);
  std::string why;
  c.join_timeout_s = static_cast<uint32_t>(integer("CLUMP_JOIN_TIMEOUT_S", 1, 3600));
  if (!parse_fault_plan(raw("CLUMP_NET_FAULT"), c.net_fault, why))
    bad_setting("CLUMP_NET_FAULT: %s (e.g. drop=0.1,dup=0.05,reorder=0.05,seed=7)", why.c_str());
  c.boot_fd = static_cast<int>(integer("CLUMP_BOOT_FD", -1, INT32_MAX));
  c.rank = static_cast<int>(integer("CLUMP_RANK", 0, (1 << 24) - 1));
  c.size = static_cast<int>(integer("CLUMP_SIZE", 1, 1 << 24));
  c.host_ranks = static_cast<int>(integer("CLUMP_HOST_RANKS", 0, 1 << 24));
  c.host_cpus = static_cast<int>(integer("CLUMP_HOST_CPUS", 0, 1 << 24));
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
  // Digits first: strtoull would take "-1" as 2^64 - 1, and " 5" or "+5" as 5.
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long x = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str() || errno == ERANGE) return false;
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
    if (key == "seed" || key == "delay_us" || key == "open_us") {
      errno = 0;
      unsigned long long v = std::strtoull(value.c_str(), &end, 0);
      if (value.empty() || !std::isdigit(static_cast<unsigned char>(value[0])) || *end || errno == ERANGE) {
        why = key + "=" + value + " is not a whole number";
        return false;
      }
      if (key != "seed" && v > 10'000'000) {
        why = key + "=" + value + " is more than 10 s (10000000)";
        return false;
      }
      if (key == "seed")
        out.seed = v;
      else if (key == "open_us")
        out.open_us = static_cast<uint32_t>(v);
      else
        out.delay_us = static_cast<uint32_t>(v);
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
      why = "unknown fault '" + key + "' (drop, dup, reorder, delay, delay_us, open_us, dir, seed)";
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
