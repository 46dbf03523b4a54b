#pragma once
// The one registry of clump's settings. Each setting has a name (CLUMP_*), a
// type, a default and a help line, and is read once from the environment.
// Nothing else in clump reads CLUMP_* variables directly.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace clump::core {

/// The parsed values. Filled once, on first use, from the environment.
struct config {
  uint32_t shm_queue_depth;      // packets per request or reply queue (power of two)
  size_t shm_medium_ring;        // bytes of medium payload ring per queue
  size_t max_medium;             // largest medium payload (AM_MaxMedium)
  size_t segment_size;           // segment of the runtime's endpoint
  size_t shm_region_size;        // virtual size of a process's shared region
  uint32_t max_endpoints;        // endpoints one process may own
  uint32_t poll_batch;           // messages one poll handles per queue at most
  uint32_t spin_before_sleep_us; // wait_until polls this long before it sleeps
  bool spin_chosen;              // CLUMP_SPIN_BEFORE_SLEEP_US is set (not its default)
  int yield;                     // CLUMP_YIELD: 0 auto, 1 on, 2 off
  int verbose;                   // 0 quiet, 1 info, 2 debug
  // Network protocol (src/net) and multi-protocol polling.
  bool force_net;                // CLUMP_PROTOCOL=net: every other rank is reached over the network
  bool keep_net;                 // CLUMP_PROTOCOL=multi: the network stays open (and polled) on one node too
  bool progress_thread;          // CLUMP_PROGRESS=thread
  int net_poll_mode;             // 0 adaptive, 1 fractional, 2 always
  uint32_t net_poll_min;         // the network is polled at most once in this many polls...
  uint32_t net_poll_max;         // ...and at least once in this many
  uint32_t net_poll_us;          // adaptive: ...or when this many microseconds have passed (0: no time bound)
  size_t net_mtu;                // largest datagram clump sends (bytes of UDP payload)
  uint32_t net_window;           // packets in flight per peer and channel
  uint32_t net_send_sockets;     // peers reached through a connected socket each, at most
  size_t gas_segment;            // bytes of global memory per process (gas)
  size_t rpc_landing;            // bytes of the rpc engine's landing area (async)
  size_t net_lend;               // blocking long payloads of this size and more are lent to the network, not copied; 0: never
  uint32_t net_timeout_ms;       // retry budget before a peer is declared unreachable; 0: never
  uint32_t net_ack_delay_us;     // an explicit acknowledgement waits at most this long
  uint32_t net_rto_min_us;       // lower bound of the retransmission timeout
  uint32_t net_coalesce_us;      // a message waits at most this long in an open datagram (0: no packing)
  std::string net_address;       // IPv4 address to bind, or "auto"
  std::string net;               // CLUMP_NET: auto, udp, or a kind of link a transport folder registered (ofi)
  size_t ofi_mtu;                // CLUMP_OFI_MTU: the largest datagram over libfabric (bytes, headers included)
  bool ofi_mtu_chosen;           // CLUMP_OFI_MTU is set (not its default)
  size_t ofi_read_min;           // CLUMP_OFI_RMA_MIN: payloads of this size and more are read by the receiver; 0: never
  bool ofi_read_min_chosen;      // CLUMP_OFI_RMA_MIN is set (not its default)
  std::string ofi_domain;        // CLUMP_OFI_DOMAIN: the libfabric domain (an interface name for tcp and udp), or ""
  int net_auth;                  // CLUMP_NET_AUTH: 0 auto (when the job spans hosts), 1 on, 2 off
  uint32_t join_timeout_s;       // under a PMIx launcher: wait for the ranks of this host to join
  size_t cma_max;                // CLUMP_CMA_MAX: long messages into private segments by cross-memory attach up to this size
  size_t cma_split;              // CLUMP_CMA_SPLIT: blocking long requests from this size copied half by each side
  struct fault_plan {
    double drop = 0, duplicate = 0, reorder = 0, delay = 0;  // probabilities per datagram
    uint32_t delay_us = 1000;
    uint32_t open_us = 0;  // a path to a peer opens this long after the first datagram to it
    bool outgoing = true, incoming = true;
    uint64_t seed = 1;
  } net_fault;
  // Set by clumprun for its ranks; not meant to be set by hand.
  int boot_fd;
  int rank;
  int size;
  int host_ranks;                // CLUMP_HOST_RANKS: ranks of the job on this host; 0: not known
  int host_cpus;                 // CLUMP_HOST_CPUS: cores the job may use on this host; 0: not known
  std::string job_id;
};

enum class setting_type { integer, size, boolean, string };

/// Parses a CLUMP_NET_FAULT value ("drop=0.1,dup=0.05,reorder=0.05,delay=0.01,delay_us=2000,
/// dir=out|in|both,seed=7"); returns false with `why` set on bad input.
bool parse_fault_plan(const std::string& text, config::fault_plan& out, std::string& why);

struct setting_def {
  const char* name;     // CLUMP_...
  setting_type type;
  const char* default_value;
  const char* help;
  bool internal;        // set by clumprun, not by users
};

/// The parsed settings (thread-safe; parsed on first call). A malformed value
/// is fatal with a message naming the variable and the expected form.
const config& settings();

/// The kinds of link that transport folders registered (net::link_maker::add
/// adds each, before main): what CLUMP_NET accepts beside udp and auto.
std::vector<std::string>& link_names() noexcept;

/// Every registered setting, in the order clump-info prints them.
std::span<const setting_def> all_settings();

/// The effective value of a setting as text (environment or default).
std::string setting_value(const setting_def& def);

/// Parses "64M", "1g", "4096", "2KiB" into bytes; returns false on bad input.
bool parse_size(const std::string& text, size_t& out);

/// The registered name nearest to `name` (for "did you mean" warnings).
const char* nearest_setting(const std::string& name);

}  // namespace clump::core
