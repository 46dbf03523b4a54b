#pragma once
// What the net protocol sends its datagrams over: a UDP socket (net/udp.hpp)
// or a libfabric endpoint (src/ofi). The protocol above it (windows, acks,
// retransmission, fragments, authentication, liveness) is the same over
// both; a link only carries datagrams of up to max_datagram() to a rank and back,
// and may lose, duplicate or reorder them.

#include <netinet/in.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <clump/status.hpp>

#include "core/settings.hpp"

namespace clump::net {

using clock = std::chrono::steady_clock;

struct link_counters {
  uint64_t datagrams_sent = 0, datagrams_received = 0, bytes_sent = 0, bytes_received = 0, send_errors = 0;
  uint64_t fault_dropped = 0, fault_duplicated = 0, fault_reordered = 0, fault_delayed = 0;
};

/// Where a datagram came from, as far as the link can tell: `addr` is null
/// when the link cannot say (a libfabric provider: the datagram's own
/// claim, checked by authentication when the job has a key, is all there is).
struct origin {
  const sockaddr_in* addr = nullptr;
};

class link {
 public:
  virtual ~link() = default;

  /// Names the kind of link, the same in every process of a job ("udp",
  /// "ofi tcp;ofi_rxm"): processes of one job must agree on it.
  virtual std::string kind() const = 0;
  /// What every process of a job must have alike to talk over this link
  /// (the kind, and whatever else a receiver relies on): compared when the
  /// job starts.
  virtual std::string agreement() const { return kind(); }
  /// The largest datagram it carries, in bytes (headers included): the
  /// protocol cuts medium and long payloads into fragments that fit.
  virtual size_t max_datagram() const noexcept = 0;
  /// This process's address, for the job's rendezvous.
  virtual std::vector<std::byte> address() const = 0;
  virtual std::string address_text() const = 0;
  /// Learns rank `rank`'s address (from its address()). False: malformed.
  virtual bool add_peer(int rank, std::span<const std::byte> address) = 0;
  /// True when a datagram from `from` may be rank `rank`'s.
  virtual bool sent_by(int rank, const origin& from) const noexcept = 0;
  virtual std::string peer_text(int rank) const = 0;
  virtual std::string origin_text(const origin& from) const = 0;

  /// Queues a datagram to `rank`: `n` bytes at `data`, then `body_n` at
  /// `body` and `tail_n` at `tail`. They must stay unchanged until flush()
  /// (flushes() then moves on).
  virtual void queue(int rank, const std::byte* data, size_t n, const std::byte* body = nullptr, size_t body_n = 0,
                     const std::byte* tail = nullptr, size_t tail_n = 0) noexcept = 0;
  /// Sends what is queued.
  virtual void flush(clock::time_point now) noexcept = 0;
  virtual uint64_t flushes() const noexcept = 0;
  /// True when datagrams wait inside the link for a later poll (held back
  /// by fault injection, or taken in already by a provider).
  virtual bool holding() const noexcept = 0;

  using on_datagram = void (*)(void* context, const std::byte* bytes, size_t n, const origin& from);
  /// Takes in a batch of datagrams, calling `f(context, ...)` for each;
  /// returns how many.
  virtual unsigned receive(clock::time_point now, on_datagram f, void* context) noexcept = 0;
  /// A file descriptor that becomes readable when datagrams arrive (the
  /// service thread sleeps on it); ask sleep_limit() first.
  virtual int wait_fd() const noexcept = 0;
  /// How long a thread may sleep on wait_fd() before it polls the link
  /// again: zero when the link has work that wait_fd() would not show, a
  /// short time when the provider wants polls that may find nothing (its
  /// own bookkeeping), else no limit. May be called without the lock.
  virtual clock::duration sleep_limit() noexcept { return clock::duration::max(); }
  /// True while datagrams wait inside the link for it to be polled again,
  /// whatever arrives (a connection being made): the service thread then
  /// polls it. May be called without the network's lock.
  virtual bool needs_progress() const noexcept { return false; }
  /// True while sends are under way inside the link (a provider with
  /// manual progress moves them only when polled): a program that stops
  /// polling is then covered by the service thread. Without the lock too.
  virtual bool unfinished() const noexcept { return false; }
  /// True when the link has not been polled for longer than its provider
  /// may go unpolled (connections to accept, its own timers): the service
  /// thread then covers for a program that does not poll. Without the lock.
  virtual bool overdue(clock::time_point /*now*/) const noexcept { return false; }

  /// True when the link loses no datagram (a libfabric provider's
  /// reliable endpoint; it may still hand them over out of order): gaps are
  /// then never repaired at once, only after the retransmission timeout.
  virtual bool reliable() const noexcept { return false; }
  // A reliable link tells the retransmission timers what its provider still
  // carries: a datagram being delivered is not lost, and a large one can take
  // longer than a round trip of small ones (over udp;ofi_rxd a datagram of
  // 1 MiB is some 700 packets under a window of 32). Other links: 0, false
  // and the epoch (the timers count from the last transmission).
  /// The number queue() gave the datagram it took last (each call takes one).
  virtual uint64_t last_queued() const noexcept { return 0; }
  /// True while the datagram numbered `ticket` is the provider's to deliver
  /// (waiting in the link, or sent and not completed); false once it is
  /// delivered or dropped.
  virtual bool carrying(int /*rank*/, uint64_t /*ticket*/) const noexcept { return false; }
  /// When a send to `rank` last completed or was dropped.
  virtual clock::time_point delivered(int /*rank*/) const noexcept { return {}; }

  virtual const link_counters& counters() const noexcept = 0;

  // ---- Reads of a peer's memory (RMA), for a link whose provider offers them ----
  // A long message's payload then stays at the sender, exposed to its
  // destination, and the receiver reads it straight into the segment once it
  // has checked the message (docs/net-protocol.md, "Long messages by reads").

  /// The largest read it makes in one piece; 0: it makes none.
  virtual size_t max_read() const noexcept { return 0; }
  /// False when its reads were measured no faster than its datagrams (a
  /// provider that emulates them): then only a chosen CLUMP_OFI_RMA_MIN sends
  /// by reads (a process still reads what its peers expose).
  virtual bool reads_pay() const noexcept { return true; }
  /// What a peer needs to read memory this process exposed (it travels in
  /// the message's datagram).
  struct exposure {
    uint64_t addr = 0, key = 0;
    void* handle = nullptr;  // the link's own, for conceal()
  };
  /// Lets peers read [p, p + n) until conceal(e). False: not now (the
  /// caller sends the bytes in datagrams instead).
  virtual bool expose(const std::byte* /*p*/, size_t /*n*/, exposure& /*e*/) noexcept { return false; }
  /// Ends an exposure: a peer's read of it fails from now on.
  virtual void conceal(exposure& /*e*/) noexcept {}
  /// Starts reading `n` bytes that rank `rank` exposed at (addr, key) into
  /// `to`; its end is reported by reads_done() with `id`. ok; in_use: not
  /// now, try again later; anything else: it cannot be read.
  virtual status read(int /*rank*/, std::byte* /*to*/, size_t /*n*/, uint64_t /*addr*/, uint64_t /*key*/,
                      uint64_t /*id*/) noexcept {
    return status::resource;
  }
  using on_read = void (*)(void* context, uint64_t id, bool ok);
  /// Reports the reads that ended since it was last called (their ids and
  /// whether the bytes arrived); returns how many.
  virtual unsigned reads_done(on_read /*f*/, void* /*context*/) noexcept { return 0; }
};

/// A kind of link that a folder beside src/net offers (src/ofi: "ofi"),
/// registered before main by a static link_maker::add of that folder: a new
/// transport is a new folder, with no edit here or in the AM layer.
struct link_maker {
  const char* name;  // what CLUMP_NET calls it
  /// Opens it as CLUMP_NET asks; throws clump::error naming the cause and the fix.
  std::unique_ptr<link> (*open)(const core::config& cfg);
  /// True when the machine has the fabric it is for (CLUMP_NET=auto takes it then).
  bool (*present)();

  /// Registers `m` (CLUMP_NET=name becomes a valid setting). Returns true,
  /// for a static initialiser: `const bool added = link_maker::add({...});`.
  static bool add(const link_maker& m) noexcept;
};

/// True when a kind of link of this name is registered.
bool is_link(const std::string& name) noexcept;

/// Payloads of this many bytes and more go by reads over `l` (SIZE_MAX:
/// none do): CLUMP_OFI_RMA_MIN where the link reads, not when the job
/// authenticates its datagrams.
size_t read_threshold(const link& l, const core::config& cfg, bool authenticated) noexcept;
/// The same, in words (clump-info, clumprun -v).
std::string reads_text(const link& l, const core::config& cfg);

/// The link CLUMP_NET chooses: null for UDP (the network opens its own
/// socket); auto: the first registered kind whose fabric is present, else
/// UDP. Throws clump::error when the named kind cannot be opened.
std::unique_ptr<link> open_link(const core::config& cfg);

}  // namespace clump::net
