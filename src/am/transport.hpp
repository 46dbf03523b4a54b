#pragma once
// The one interface under the AM layer. A transport carries active messages
// between endpoints of different processes, in the AM layer's terms: shared
// memory within a node (src/am/via_shm), the network protocol between nodes
// (src/am/via_net, over any datagram link: UDP, libfabric). Each lives in a
// folder of its own. A transport between nodes registers itself
// (node_transport_maker): a new one is a new folder, with no edit in the AM
// layer.
//
// The AM semantics stay above it, in one place each: translations, tags and
// the checks before a send (send.cpp), returned messages (returns.cpp), flow
// control and the rule that handlers only reply (detail::wait_for_room,
// which a transport calls whenever it waits for room), and dispatch into
// handlers (dispatch.cpp). Every transport delivers into the receiving
// endpoint's own queues (detail::inject), so one dispatch serves them all.
//
// The short-message hot path does not go through this interface: send.cpp
// tests the one byte remote_endpoint::kind and calls the shared-memory
// transport's inline send (via_shm/short.hpp), as it tested `net` before.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <clump/am.hpp>

#include "shm/packet.hpp"

namespace clump::core {
struct config;
}

namespace clump::detail {
struct endpoint_impl;
enum class when_full;
}  // namespace clump::detail

namespace clump::am {

struct remote_endpoint;
class adaptive_poller;
class process;

/// Which transport reaches a peer: the one byte the hot path tests (net:
/// any transport between nodes).
enum class transport_kind : uint8_t { shm, net };

/// One active message as the AM layer hands it to a transport.
struct message {
  shm::packet_kind kind = shm::packet_kind::short_request;  // the numbering the inbox and every transport share
  handler_index handler = 0;
  const uint32_t* args = nullptr;
  unsigned nargs = 0;
  const void* data = nullptr;  // the payload of a medium or long message
  size_t length = 0;           // its length; of a get, the bytes asked for
  uint64_t offset = 0;         // long: where in the destination's segment; get: where in the source's
  uint64_t aux = 0;            // get: where in the requester's segment the bytes land; returned: returned_aux
  tag_t tag = 0;
  bool reply() const noexcept { return !shm::is_request(kind); }
};

/// What a send came to.
struct sent {
  status s = status::ok;    // ok; in_use (give_up: nothing sent); bad_arg (a misuse, logged)
  bool comes_back = false;  // it cannot be delivered: it goes back to handler 0, saying `why`
  return_reason why = return_reason::bad_endpoint;
  static sent back(return_reason r) noexcept { return {status::ok, true, r}; }
  /// A transport's status as what came of the message: not_sent (the
  /// endpoint meant was freed) and resource (its process is unreachable)
  /// send it back.
  static sent of(status s) noexcept {
    if (s == status::not_sent) return back(return_reason::bad_endpoint);
    if (s == status::resource) return back(return_reason::unreachable);
    return {s};
  }
};

/// What sending a returned message came to.
enum class returned_sent {
  sent,
  full,         // no room now: try again later
  sender_gone,  // its sender no longer exists (dropped)
  unreachable,  // its sender's process is unreachable (dropped)
  freed,        // its sender was freed meanwhile (dropped)
};

class transport {
 public:
  explicit transport(transport_kind k) noexcept : kind_(k) {}
  virtual ~transport() = default;
  transport(const transport&) = delete;
  transport& operator=(const transport&) = delete;
  transport_kind kind() const noexcept { return kind_; }

  // ---- peers -----------------------------------------------------------
  /// Whether endpoint `slot` can exist on `rank`, without reaching it.
  virtual bool may_exist(int rank, uint32_t slot) const noexcept = 0;
  /// A new view of endpoint `slot` of `rank` (kind and via set), or nullptr
  /// when it cannot be reached (said in the log).
  virtual std::unique_ptr<remote_endpoint> reach(int rank, uint32_t slot) noexcept = 0;
  /// The endpoint's tag and queue-block state as far as this process can
  /// tell now (where a reply goes, a name for handler 0).
  virtual void describe(const remote_endpoint& to, tag_t& tag, uint64_t& state) const noexcept = 0;
  /// Its segment, mapped into this process; empty where the transport maps none.
  virtual std::span<std::byte> mapped_segment(const remote_endpoint&) const noexcept { return {}; }
  /// Wakes its owner if it sleeps, where the transport can.
  virtual void wake(const remote_endpoint&) noexcept {}

  // ---- sending ---------------------------------------------------------
  /// Sends `m` (a short, medium or long message, or a get) from `from` to
  /// `to`, whose state must still be `expect`, waiting for room as `policy`
  /// says (through detail::wait_for_room). Sizes against the AM limits are
  /// checked by the caller; the transport checks its own.
  virtual sent send(detail::endpoint_impl& from, remote_endpoint& to, const message& m, detail::when_full policy,
                    uint64_t expect) noexcept = 0;
  /// Sends returned message `m` back to `to` (whose generation, low 32 bits,
  /// must be `to_gen`) as endpoint `from_id` of generation `from_gen`
  /// (`from`: that endpoint, or nullptr once freed). Never waits.
  virtual returned_sent send_returned(detail::endpoint_impl* from, uint32_t from_id, uint64_t from_gen,
                                      remote_endpoint& to, const message& m, uint32_t to_gen) noexcept = 0;

  // ---- progress (a transport with a receive path of its own) -----------
  /// True when the transport's doorbell rang while it was watched, or it
  /// holds sends back for the next poll (it asks for a poll now, whatever
  /// the poller says). Inline: a bundle tests it on
  /// every poll, before it calls progress().
  bool rang() const noexcept {
    // Relaxed and acquire: as net::network::watching() and rung().
    return watching_ && ((watching_->load(std::memory_order_relaxed) && rung_->load(std::memory_order_acquire)) ||
                         waiting_->load(std::memory_order_relaxed));
  }
  /// True when the transport holds sends back for the next poll (inline, as rang()).
  bool holding() const noexcept { return waiting_ && waiting_->load(std::memory_order_relaxed); }
  /// Sends what it holds back, now.
  virtual void flush() noexcept {}
  /// Receives what came in (into the endpoints' queues), when rang() or
  /// `poller` says it is due; tells the poller what it found. Returns that.
  virtual unsigned progress(adaptive_poller& /*poller*/) noexcept { return 0; }
  /// Receives now; returns what it found.
  virtual unsigned poll() noexcept { return 0; }
  /// Around a bundle's sleep: keep receiving (and waking it) meanwhile.
  virtual void before_sleep() noexcept {}
  virtual void after_sleep() noexcept {}

  // ---- this process's endpoints and peers -------------------------------
  /// Endpoint `slot` of this process now has this segment (nullptr: none).
  virtual void segment_changed(uint32_t /*slot*/, std::byte* /*base*/, size_t /*length*/) noexcept {}
  /// `rank` was found dead elsewhere: what is in flight to it comes back.
  virtual void peer_gone(int /*rank*/) noexcept {}
  /// A normal exit: lets what is in flight arrive, for at most `d`.
  virtual void leave(std::chrono::milliseconds /*d*/) noexcept {}

 protected:
  /// A transport with a doorbell: the flags rang() tests. `waiting`: it
  /// holds something back for the next poll (the network's open datagrams),
  /// so the next poll must not skip it.
  void set_doorbell(const std::atomic<bool>& watching, const std::atomic<bool>& rung,
                    const std::atomic<bool>& waiting) noexcept {
    watching_ = &watching;
    rung_ = &rung;
    waiting_ = &waiting;
  }

 private:
  transport_kind kind_;
  const std::atomic<bool>* watching_ = nullptr;
  const std::atomic<bool>* rung_ = nullptr;
  const std::atomic<bool>* waiting_ = nullptr;
};

/// A transport between nodes. It is opened before the job is joined (its
/// address travels with the rendezvous), then started with every rank's.
class node_transport : public transport {
 public:
  node_transport() noexcept : transport(transport_kind::net) {}
  /// This process's address, for the job's rendezvous.
  virtual std::vector<std::byte> address_blob() const = 0;
  /// Starts talking to the job: `addresses[r]` is rank r's blob (empty for
  /// ranks of this node); `key`, the job's key where it authenticates.
  virtual void start(uint64_t job, int rank, std::span<const std::vector<std::byte>> addresses,
                     std::span<const std::byte> key) = 0;
  /// The address in words (clump::network_address).
  virtual std::string address_text() const = 0;
  /// What it counted (clump::network_statistics).
  virtual network_stats statistics() const noexcept = 0;
};

/// A kind of transport between nodes that a folder of src/am offers,
/// registered before main by a static node_transport_maker::add there.
struct node_transport_maker {
  /// The value of CLUMP_NET that chooses it, made a valid setting (nullptr:
  /// none; src/am/via_net takes udp, auto and every kind of net::link).
  const char* name;
  /// True when it carries the network that CLUMP_NET names.
  bool (*takes)(const core::config& cfg);
  /// Opens it; throws clump::error naming the cause.
  std::unique_ptr<node_transport> (*open)(process& p, const core::config& cfg, int rank_hint);

  /// Registers `m`. Returns true, for a static initialiser.
  static bool add(const node_transport_maker& m) noexcept;
};

/// The transport between nodes that takes CLUMP_NET. Throws clump::error
/// when none does or it cannot be opened.
std::unique_ptr<node_transport> open_node_transport(process& p, const core::config& cfg, int rank_hint);

}  // namespace clump::am
