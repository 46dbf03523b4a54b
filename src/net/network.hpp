#pragma once
// The net protocol: reliable, exactly-once delivery of active messages over
// UDP, after the SSAM paper's software flow control.
//
// Per ordered pair of processes and per channel (requests; replies and
// returned messages) the sender numbers datagrams and keeps up to
// CLUMP_NET_WINDOW of them until they are acknowledged; the receiver delivers
// them in sequence order, exactly once, and tells the sender, on every
// datagram going back (piggybacked) or in a delayed explicit ack, how far it
// has delivered and which later datagrams it holds. Lost datagrams are sent
// again after a timeout that follows the measured round trip (Jacobson/Karn)
// and doubles on every retry; a gap shown by the held bits is filled at once.
// A duplicate is dropped and answered with an immediate ack, and the replies
// the duplicate's sender may have lost are sent again (the saved replies: a
// handler never runs twice). A peer that acknowledges nothing for
// CLUMP_NET_TIMEOUT_MS is unreachable: what it did not acknowledge goes back
// to the sending endpoints' handler 0, and new sends to it fail at once.
//
// Medium and long payloads are cut into fragments of at most CLUMP_NET_MTU
// bytes of datagram. A long fragment is written straight into the destination
// segment when it is delivered in order; a medium message is assembled and
// delivered whole. When the am layer has no room for a message (its queue is
// full) the channel stalls: the datagram stays held, the ack does not move on,
// and the sender's window closes, which is the flow control.
//
// Threads: one mutex guards everything here. poll() only tries it (a thread
// that finds another polling leaves the work to it); send() takes it. The
// sink is called with the mutex held and must not call back into the network.

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include <clump/status.hpp>

#include "core/settings.hpp"
#include "net/auth.hpp"
#include "net/udp.hpp"
#include "net/wire.hpp"

namespace clump::net {

/// What a protocol promises its user (the am layer), like a libfabric provider's caps.
struct capabilities {
  bool reliable;              // every message arrives, or comes back
  bool ordered;               // per channel and peer pair
  bool may_duplicate;         // the user must tolerate duplicates (never, here)
  bool reports_peer_failure;  // undeliverable messages come back as unreachable
};

/// Where complete messages go: implemented by the am layer.
class sink {
 public:
  virtual ~sink() = default;
  /// Writes `n` bytes of long message `m` from `peer` (the fragment at
  /// m.frag_offset) into the segment of endpoint m.dst_slot at m.offset +
  /// m.frag_offset, when the whole message fits in that segment; otherwise
  /// writes nothing (and the message is refused when it is delivered).
  virtual void write_long(int peer, const message_header& m, const std::byte* data, size_t n) noexcept = 0;
  /// Hands over a complete message (medium: `payload` holds it, or, with
  /// `tail`, its first m.frag_offset bytes, and `tail` the rest: the last
  /// fragment, straight from its datagram; long: it is in the segment
  /// already). False: no room now; it is offered again later.
  virtual bool deliver(int peer, const message_header& m, const uint32_t* args, const std::byte* payload,
                       const std::byte* tail) noexcept = 0;
  /// Long message `m` from `peer` comes by a read (wire.hpp, how_read):
  /// where its payload goes (the segment of endpoint m.dst_slot at
  /// m.offset), when the endpoint the sender meant takes its tag and the
  /// whole message fits; null otherwise (nothing is read, and the message is
  /// refused when it is delivered). That memory stays where it is until
  /// read_ended(m).
  virtual std::byte* read_destination(int /*peer*/, const message_header& /*m*/) noexcept { return nullptr; }
  virtual void read_ended(const message_header& /*m*/) noexcept {}
  /// Long message `m`'s payload could not be read (its sender stopped
  /// exposing it, or the fabric failed): it goes back to the sender as
  /// unreachable. False: no room now; it is offered again later.
  virtual bool unread(int /*peer*/, const message_header& /*m*/, const uint32_t* /*args*/) noexcept { return true; }
  /// A message sent to `peer` that will never be delivered (the peer is
  /// unreachable). False: no room now; it is offered again later.
  virtual bool give_back(int peer, const message_header& m, const uint32_t* args) noexcept = 0;
  /// Called after every poll, without the network's lock, in the polling
  /// thread: the place to send what deliver() could only note down.
  virtual void after_poll() noexcept {}
  /// `peer` has just been declared unreachable (called with the lock held).
  virtual void lost(int /*peer*/) noexcept {}
};

struct statistics {
  uint64_t datagrams_sent, datagrams_received, bytes_sent, bytes_received;
  uint64_t messages_sent, messages_delivered, retransmits, duplicates, out_of_order, acks_sent, stalls;
  // The retransmissions by cause: a timeout, a tail probe, a gap the
  // receiver's held bits showed, a reply sent again for a duplicate request.
  uint64_t resent_timeout, resent_probe, resent_gap, resent_reply;
  uint64_t refused[refusal_count];  // by refusal reason
  uint64_t fault_dropped, fault_duplicated, fault_reordered, fault_delayed;
  uint64_t peers_unreachable, send_errors;
  uint64_t pings_sent;  // keep-alives sent to silent peers
  uint64_t covered;     // times the service thread took the network over from an absent program
  uint64_t messages_read, messages_sent_by_read;  // messages whose payload was read (link::read)
  uint64_t messages_packed;  // messages that joined a datagram open with others (CLUMP_NET_COALESCE_US)
  uint64_t resumed;          // packed datagrams delivered in part (a stall), then from the record after
  uint64_t unacknowledged;   // send channels with a datagram unacked (see expecting())
  uint64_t partial;          // receive channels partway through a message (see expecting())
};

class network {
 public:
  /// Sends over `over`, or when null over a UDP socket (bound per
  /// CLUMP_NET_ADDRESS). Throws clump::error.
  explicit network(const core::config& cfg, int rank_hint, std::unique_ptr<link> over = nullptr);
  ~network();

  /// This process's address as an opaque blob for the job's rendezvous.
  std::vector<std::byte> address_blob() const;
  /// Starts talking to the job: `addresses[r]` is rank r's blob (empty for
  /// ranks never reached over the network). With a `key` (auth_key_bytes),
  /// every datagram is authenticated (net/auth.hpp); throws clump::error
  /// when this build cannot. Starts the service thread.
  void start(uint64_t job, int rank, std::span<const std::vector<std::byte>> addresses, sink& s,
             std::span<const std::byte> key = {});
  /// True when datagrams are authenticated.
  bool authenticated() const noexcept { return auth_ != nullptr; }

  static capabilities caps() noexcept { return {true, true, false, true}; }

  /// Hands fragments of message `m` to `peer` from payload byte `done` on,
  /// advancing `done`, and sets m.msg_id on the first call of a message.
  /// ok: the whole message is handed over; in_use: the window is full (poll,
  /// then call again with the same m and done); resource: the peer is
  /// unreachable (what was handed over already will not be delivered).
  /// False when send() should not be given `until`: the payload is better
  /// copied (an authenticated datagram is signed fastest in one piece).
  bool lends_payloads() const noexcept { return !(auth_ && auth_->wants_one_piece()); }
  /// Lent long payloads of this many bytes and more go by a read (SIZE_MAX: none do).
  size_t reads_from() const noexcept { return read_from_; }
  /// With `until`, the payload is lent rather than copied: it must stay valid
  /// and unchanged until settled(peer, m, *until), and *until is set when
  /// the whole message is handed over. `waits`: the caller blocks until then
  /// (the destination acknowledges the end at once); else it kept a copy of
  /// its own and the acknowledgement may wait for the answer to ride on.
  /// `unhurried`: a message that fits in a datagram may wait there for the
  /// ones that follow it even when nothing else of its channel is in flight
  /// (clump::unhurried_sends); otherwise it leaves at once then.
  status send(int peer, message_header& m, const uint32_t* args, const void* data, uint32_t& done,
              uint32_t* until = nullptr, bool waits = true, bool unhurried = false) noexcept;
  /// True once `peer` has acknowledged every datagram of m's channel before
  /// `until` (a lent payload is then no longer needed), or is unreachable.
  bool settled(int peer, const message_header& m, uint32_t until) noexcept;

  /// Receives, acknowledges, retransmits and delivers; returns the number of
  /// datagrams received (acks and fragments too: the activity an adaptive
  /// poller follows). Returns 0 at once when another thread is at it.
  unsigned poll() noexcept;
  /// Sends the open datagrams now (see send), unless another thread is at
  /// the network (it sends them itself).
  void flush() noexcept;

  /// The launcher says `peer`'s process has exited: it is unreachable now
  /// (what it did not acknowledge comes back), without waiting out the timeout.
  void peer_gone(int peer) noexcept;

  /// Before the process exits: acknowledges what arrived and waits up to
  /// `most` for what we sent to be acknowledged (by reachable peers).
  void linger(clock::duration most) noexcept;
  /// A thread of this process is about to sleep: until disarm(), the service
  /// thread watches the socket and the timers for it, so that an arriving
  /// message wakes the sleeper and acks and retransmissions go on.
  void arm() noexcept;
  void disarm() noexcept;

  /// The doorbell, for a network that has gone quiet: instead of polling the
  /// socket with a system call, pollers look at `rung()` (a load), and the
  /// service thread, blocked on the socket, rings it when a datagram (or a
  /// timer) wants attention. watch() starts it (or, after a poll that found
  /// nothing, starts it again); unwatch() goes back to polling the socket.
  void watch() noexcept;
  // Relaxed: a hint between pollers and the service thread; a stale value
  // costs one needless socket poll or one ring, never a lost datagram (the
  // socket keeps it, level-triggered).
  void unwatch() noexcept { watching_.store(false, std::memory_order_relaxed); }
  bool watching() const noexcept { return watching_.load(std::memory_order_relaxed); }
  bool rung() const noexcept { return doorbell_.load(std::memory_order_acquire); }
  /// The two flags themselves, for a poller that tests them inline.
  const std::atomic<bool>& watching_flag() const noexcept { return watching_; }
  const std::atomic<bool>& doorbell_flag() const noexcept { return doorbell_; }
  /// True while a datagram is open (see send): the next poll sends it, so a
  /// poller must not skip the network then (relaxed: a hint, set by the
  /// sending thread, which polls next itself, or read by another poller).
  const std::atomic<bool>& open_flag() const noexcept { return open_waiting_; }
  /// True while a datagram of ours waits for its ack, a message of several
  /// datagrams is partly here, or the link has work of ours under way (a
  /// read, a payload a peer reads, a send a provider moves only when
  /// polled): an answer (at least the ack, the message's next datagram, or
  /// the read's end) is on its way, so a poller should keep looking at the
  /// link rather than go quiet behind the doorbell (relaxed: a hint).
  bool expecting() const noexcept;

  statistics stats() const noexcept;
  /// Writes the windows of every peer to stderr (for debugging: call it from gdb).
  void dump() noexcept;
  std::string address_text() const { return link_->address_text(); }
  /// What datagrams go over ("udp", "ofi tcp;ofi_rxm").
  std::string link_kind() const { return link_->kind(); }

 private:
  struct send_entry;
  struct send_channel;
  struct recv_channel;
  struct peer_state;

  unsigned poll_locked(clock::time_point now) noexcept;
  void on_datagram(const std::byte* bytes, size_t n, const origin& from, clock::time_point now) noexcept;
  peer_state* sender_of(const decoded& d, const origin& from) noexcept;
  void on_acks(peer_state& p, int rank, const datagram_header& h, clock::time_point now) noexcept;
  void on_data(peer_state& p, int rank, const std::byte* bytes, size_t n, decoded& d, clock::time_point now) noexcept;
  /// Delivers the records of datagram `bytes` (decoded into `d`) at the head
  /// of `rc`, from where an earlier call stopped; false when the am layer
  /// had no room for one (the channel stalls; the next call resumes there).
  bool consume_all(peer_state& p, int rank, recv_channel& rc, const std::byte* bytes, decoded& d) noexcept;
  bool consume(peer_state& p, int rank, recv_channel& rc, const decoded& d) noexcept;
  bool consume_read(int rank, recv_channel& rc, const decoded& d) noexcept;
  void read_done(uint64_t id, bool ok, clock::time_point now) noexcept;
  /// The channel's head message is done with its read: its destination is let go.
  void end_read(recv_channel& rc) noexcept;
  /// Marks a receive channel partway through a message, or not (channels_partial_).
  void set_partial(recv_channel& rc, bool partial) noexcept;
  void drain_held(peer_state& p, int rank, recv_channel& rc, clock::time_point now) noexcept;
  void transmit(peer_state& p, int rank, send_entry& e, clock::time_point now) noexcept;
  /// Writes message `m`, its arguments and `n` payload bytes as one record at `to`.
  static void write_record(std::byte* to, const message_header& m, const uint32_t* args, const void* payload,
                           size_t n) noexcept;
  /// Sends every open datagram (see send).
  void close_open(clock::time_point now) noexcept;
  void send_ack(peer_state& p, int rank, datagram_type type = datagram_type::ack) noexcept;
  void fill_acks(peer_state& p, datagram_header& h, clock::time_point now) const noexcept;
  void run_timers(clock::time_point now) noexcept;
  void dump_locked() noexcept;
  void declare_unreachable(peer_state& p, int rank, const char* why) noexcept;
  void offer_give_backs() noexcept;
  void service() noexcept;
  bool work_waiting(clock::time_point now) noexcept;
  void wake_service() noexcept;

  core::config cfg_;
  std::unique_ptr<link> link_;
  udp_link* udp_ = nullptr;  // link_ when it is the UDP one: the hot paths call it directly (see on_link)
  /// Calls f with the link: as a udp_link (a final class: direct calls,
  /// inlined, as before links existed) when it is one, else through the interface.
  template <class F>
  decltype(auto) on_link(F&& f) {
    return udp_ ? f(*udp_) : f(*link_);
  }
  std::unique_ptr<authenticator> auth_;  // null: datagrams are not authenticated
  size_t trailer_ = 0;                   // sizeof(auth_trailer) when they are
  uint8_t flags_ = 0;                    // flag_auth when authenticated: what decode() expects (flag_gcm aside)
  mutable std::mutex mutex_;
  uint64_t job_ = 0;
  int rank_ = 0;
  sink* sink_ = nullptr;
  /// A network peer's state, made on first use; nullptr if `peer` is not one
  /// (or memory ran out). Under mutex_.
  peer_state* state_of(int peer) noexcept;
  std::vector<bool> present_;                       // by rank: a network peer (not this rank, nor one of its node)
  std::vector<std::unique_ptr<peer_state>> peers_;  // by rank; null until messages flow, or where no network peer
  clock::time_point next_timer_ = clock::time_point::max();
  std::vector<std::vector<std::byte>> pool_;        // spare datagram buffers
  struct give_back_item {
    int peer;
    message_header m;
    uint32_t args[max_args];
  };
  std::vector<give_back_item> give_backs_;  // undeliverable messages not yet taken by the sink
  uint64_t resent_[4] = {};  // by cause, as in statistics
  uint64_t messages_sent_ = 0, messages_delivered_ = 0, retransmits_ = 0, duplicates_ = 0, out_of_order_ = 0,
           acks_sent_ = 0, stalls_ = 0, unreachable_ = 0, pings_sent_ = 0;
  uint64_t refused_[refusal_count] = {};
  uint64_t messages_read_ = 0, sent_by_read_ = 0, packed_ = 0, resumed_ = 0;
  /// Packing (CLUMP_NET_COALESCE_US; zero: none). The channels whose newest
  /// datagram is open, since open_since_ (a channel may have been sent since).
  clock::duration coalesce_{};
  struct open_datagram {
    int rank;
    uint8_t channel;
  };
  std::vector<open_datagram> open_;
  clock::time_point open_since_;
  std::atomic<bool> open_waiting_{false};  // !open_.empty(), for pollers (open_flag)
  std::atomic<uint32_t> channels_in_flight_{0};  // send channels with a datagram unacked (expecting)
  std::atomic<uint32_t> channels_partial_{0};    // receive channels partway through a message (expecting)
  /// Long messages of this many bytes and more whose payload is lent go by a
  /// read (link::read), when the link reads and the job does not authenticate.
  size_t read_from_ = SIZE_MAX;
  bool version_warned_ = false;

  // The service thread (see arm()).
  std::thread service_;
  int event_fd_ = -1;
  std::atomic<int> armed_{0};
  std::atomic<bool> service_active_{false};  // the service thread drains the network (see arm())
  std::atomic<bool> watching_{false};
  std::atomic<bool> doorbell_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<clock::rep> sleeping_until_{0};  // when the service thread's present sleep ends (see service())
  std::atomic<clock::rep> program_polled_{0};  // when a program thread last called poll()
  std::atomic<uint64_t> covered_{0};
};

}  // namespace clump::net
