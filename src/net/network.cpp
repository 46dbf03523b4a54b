#include "net/network.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <clump/status.hpp>

#include "core/log.hpp"
#include "core/tsan.hpp"
#include "net/fault.hpp"

namespace clump::net {

namespace {
/// Sequence numbers a channel may have in flight (the width of the held bits).
constexpr uint32_t ring_size = 64;
/// Retransmission timeout bounds before the first round trip is measured, and at most.
constexpr double initial_rto_us = 5000;
constexpr double max_rto_us = 1e6;
// Over a reliable link, a datagram larger than this does not carry the acks
// the peer waits for alone (transmit).
constexpr size_t ack_ahead_bytes = 64 * 1024;
/// How often a stalled channel offers its head message again.
constexpr auto stall_retry = std::chrono::microseconds(200);
/// The service thread takes the network over from a program that has not
/// polled it for this long (it computes, or it is not scheduled), so that the
/// process keeps acknowledging, retransmitting and answering keep-alives.
constexpr auto absent_after = std::chrono::milliseconds(2);

double micros(clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

/// A datagram whose delivery its sender is waiting to hear of, to reuse a
/// lent payload: the last of a message of several, or a message by a read.
/// (The last of a copied message, or a message read from a copy its sender
/// keeps, waits for the usual ack: an ack of its own would cost the receiver
/// a system call before it even runs the handler, whose answer carries it.)
bool sender_waits(const decoded& d) noexcept {
  return d.m.lent && (d.m.how == how_read || (d.m.frag_offset > 0 && d.m.frag_offset + d.payload_bytes == d.m.length));
}

/// A read's id (link::read): the channel whose head message it is for.
uint64_t read_id(int rank, unsigned channel) noexcept {
  return static_cast<uint64_t>(rank) * channel_count + channel;
}
}  // namespace

struct network::send_entry {
  // The encoded datagram (or its headers, if the payload is lent), kept until
  // acknowledged; when authenticated and whole, with room for its trailer at the end.
  std::vector<std::byte> bytes;
  const std::byte* lent = nullptr;  // the payload, lent by the sender until acknowledged
  size_t lent_bytes = 0;
  clock::time_point first_sent, last_sent;
  uint32_t transmissions = 0;
  bool open = false;           // not sent yet: whole messages are packed into it (see send); first_sent: when opened
  bool held = false;           // the receiver holds it (selective ack): probed, not resent
  bool last_fragment = false;  // the message's final fragment: stands for the message if it comes back
  link::exposure exposed;      // a message by a read: its payload, exposed until acknowledged
  auth_trailer trailer;        // CLUMP_NET_AUTH, lent payload: signed anew at every transmission (the acks change)
  uint64_t queued_in = ~uint64_t{0};  // the socket's batch it waits in, if it waits (see transmit)
  // A reliable link (see run_timers): its number for the last transmission,
  // and until when the provider carried it, once known.
  uint64_t ticket = 0;
  clock::time_point carried_until;
  bool delivery_known = false;
};

struct network::send_channel {
  uint32_t next_seq = 0;  // the next sequence number to give out
  uint32_t acked = 0;     // every sequence number below this was delivered
  clock::time_point progress;  // when `acked` last moved: the receiver is working through what we sent
  send_entry ring[ring_size];
  uint32_t in_flight() const noexcept { return next_seq - acked; }
  send_entry& at(uint32_t seq) noexcept { return ring[seq % ring_size]; }
};

struct network::recv_channel {
  uint32_t next = 0;  // the next sequence number to deliver
  std::vector<std::byte> held[ring_size];  // datagrams next .. next + 63 that arrived early or stalled
  clock::time_point arrived[ring_size];    // when each held datagram arrived
  clock::time_point last_arrival;          // when datagram next - 1 arrived (for the ack's delay_us)
  bool stalled = false;                    // the datagram at `next` is held: the am layer had no room, or it is read
  bool partial = false;                    // a message of several datagrams is partly here: the rest is on its way
  size_t resume_at = 0;                    // of a packed one at `next`, delivered in part: the record to go on from
  /// The message at `next` when it comes by a read: its payload being read,
  /// read, or not to be had; read_m is that message (its destination stays
  /// in place until the read ends, even if its sender is declared gone).
  enum class read_phase : uint8_t { none, reading, arrived, failed } reading = read_phase::none;
  message_header read_m{};
  std::vector<std::byte> read_buffer;  // a medium message's payload, read here (a long one goes to its segment)
  struct assembly {
    uint32_t msg_id;
    uint32_t length;
    std::vector<std::byte> data;  // at least `length` bytes
  };
  std::vector<assembly> assemblies;  // medium messages whose fragments are arriving
  std::vector<std::byte> spare;      // the buffer of the last one assembled, for the next (not zeroed again)
  std::vector<std::byte>& at(uint32_t seq) noexcept { return held[seq % ring_size]; }
};

// What a peer costs once messages flow to or from it (about 20 KiB: the
// send and receive windows); made on first use (state_of).
struct network::peer_state {
  bool unreachable = false;
  send_channel out[channel_count];
  recv_channel in[channel_count];
  bool ack_due = false;
  clock::time_point ack_since;
  uint32_t unacked = 0;  // datagrams delivered or held since the last ack went out
  double srtt_us = 0, rttvar_us = 0, min_rtt_us = 1e9;
  bool rtt_known = false;
  clock::time_point heard;  // the last time it showed it is alive (or our first datagram to it)
  clock::time_point first_heard;  // when its first datagram came (none yet: the epoch)
  clock::time_point pinged;  // the last keep-alive we sent it
  // Acks and pings go out of these: a few, since several may wait in one
  // batch (an authenticated one must not be overwritten before it leaves:
  // the copy would carry the same counter, a replay).
  struct small_datagram {
    std::byte bytes[sizeof(datagram_header) + sizeof(auth_trailer)];  // the header, then the trailer if any
  };
  small_datagram small[4];
  uint64_t small_batch[4] = {~uint64_t{0}, ~uint64_t{0}, ~uint64_t{0}, ~uint64_t{0}};
  unsigned next_small = 0;
  double rto_us(uint32_t floor_us) const noexcept {
    double r = rtt_known ? srtt_us + 4 * rttvar_us : initial_rto_us;
    return std::clamp(r, static_cast<double>(floor_us), max_rto_us);
  }
};

network::network(const core::config& cfg, int rank_hint, std::unique_ptr<link> over)
    : cfg_(cfg),
      link_(over ? std::move(over)
                 : std::make_unique<udp_link>(cfg.net_address, cfg.net_mtu, cfg.net_window, cfg.net_send_sockets)) {
  // Faults for tests (CLUMP_NET_FAULT) over whichever link.
  if (injects(cfg.net_fault))
    link_ = std::make_unique<fault_link>(std::move(link_), cfg.net_fault, static_cast<uint64_t>(rank_hint));
  udp_ = dynamic_cast<udp_link*>(link_.get());
  coalesce_ = std::chrono::microseconds(cfg.net_coalesce_us);
}

network::~network() {
  stopping_.store(true, std::memory_order_relaxed);  // relaxed: the eventfd write below carries it
  wake_service();
  if (service_.joinable()) service_.join();
  if (event_fd_ >= 0) ::close(event_fd_);
}

namespace {

/// A link's kind in 4 bytes (FNV-1a of its name): the address blobs of the
/// rendezvous have 64 bytes, and a fabric address may need 48 of them.
uint32_t kind_code(const std::string& kind) {
  uint32_t h = 2166136261u;
  for (char c : kind) h = (h ^ static_cast<uint8_t>(c)) * 16777619u;
  return h;
}

}  // namespace

// The address blob: the link's kind_code(), the link's address, then whether
// this process can check AES-256-GCM tags (a job uses them only where every
// process can: see auth.hpp).
std::vector<std::byte> network::address_blob() const {
  const uint32_t kind = kind_code(link_->agreement());
  const std::vector<std::byte> a = link_->address();
  std::vector<std::byte> blob(sizeof kind + a.size() + 1);
  std::memcpy(blob.data(), &kind, sizeof kind);
  std::memcpy(blob.data() + sizeof kind, a.data(), a.size());
  blob.back() = std::byte{authenticator::gcm_available()};
  return blob;
}

void network::start(uint64_t job, int rank, std::span<const std::vector<std::byte>> addresses, sink& s,
                    std::span<const std::byte> key) {
  std::lock_guard lock(mutex_);
  job_ = job;
  rank_ = rank;
  sink_ = &s;
  if (!key.empty()) {
    if (!authenticator::available() || key.size() != auth_key_bytes)
      throw error(status::not_init, "starting the network",
                  "this job authenticates its datagrams (CLUMP_NET_AUTH), but this clump was built without "
                  "libsodium: install libsodium-dev and rebuild, or run with CLUMP_NET_AUTH=off on a network you "
                  "trust");
    bool gcm = authenticator::gcm_available();
    for (const auto& a : addresses) gcm = gcm && (a.empty() || a.back() == std::byte{1});  // empty: not a peer
    auth_ = std::make_unique<authenticator>(key.first<auth_key_bytes>(), static_cast<uint32_t>(rank),
                                            static_cast<uint32_t>(addresses.size()), gcm);
    trailer_ = sizeof(auth_trailer);
    flags_ = flag_auth;
  }
  // Long payloads by reads: only where the link reads, and not in a job that
  // authenticates (the bytes read would not be checked by the tags).
  read_from_ = read_threshold(*link_, cfg_, auth_ != nullptr);
  // Only the addresses now: a peer's state is made when messages first
  // flow to or from it, so that a peer never talked to costs 8 + 24 bytes.
  peers_.resize(addresses.size());
  present_.assign(addresses.size(), false);
  const uint32_t kind = kind_code(link_->agreement());
  for (size_t r = 0; r < addresses.size(); ++r) {
    const std::vector<std::byte>& blob = addresses[r];
    if (static_cast<int>(r) == rank || blob.empty()) continue;
    uint32_t theirs = 0;
    if (blob.size() >= sizeof theirs + 1) std::memcpy(&theirs, blob.data(), sizeof theirs);
    if (theirs != kind)
      throw error(status::bad_arg, "starting the network",
                  "rank " + std::to_string(r) + " talks over another network than this process (rank " +
                      std::to_string(rank) + ", " + link_->kind() +
                      "): every process of a job must use the same one (set CLUMP_NET, FI_PROVIDER, "
                      "CLUMP_OFI_DOMAIN and CLUMP_OFI_MTU alike everywhere)");
    if (!link_->add_peer(static_cast<int>(r), std::span(blob).subspan(sizeof theirs, blob.size() - sizeof theirs - 1)))
      throw error(status::bad_arg, "starting the network", "rank " + std::to_string(r) + " sent a bad address");
    present_[r] = true;
  }
  event_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (event_fd_ < 0)
    throw error(status::resource, "starting the network", std::string("eventfd failed: ") + std::strerror(errno));
  service_ = std::thread([this] { service(); });
  core::log_info("network: rank %d at %s over %s, datagrams of up to %zu bytes, window %u, %s, %s", rank,
                 address_text().c_str(), link_->kind().c_str(), link_->max_datagram(), cfg_.net_window,
                 cfg_.progress_thread ? "progress thread" : "polled",
                 auth_ ? (std::string("authenticated with ") + auth_->construction()).c_str() : "not authenticated");
}

network::peer_state* network::state_of(int peer) noexcept {
  if (peer < 0 || static_cast<size_t>(peer) >= peers_.size()) return nullptr;
  std::unique_ptr<peer_state>& p = peers_[static_cast<size_t>(peer)];
  if (p) [[likely]] return p.get();
  if (!present_[static_cast<size_t>(peer)]) return nullptr;
  p.reset(new (std::nothrow) peer_state);
  return p.get();
}

// ---- sending ----------------------------------------------------------------

status network::send(int peer, message_header& m, const uint32_t* args, const void* data, uint32_t& done,
                     uint32_t* until, bool waits, bool unhurried) noexcept {
  std::lock_guard lock(mutex_);
  peer_state* ps = state_of(peer);
  if (!ps) return status::resource;
  peer_state& p = *ps;
  if (p.unreachable) return status::resource;
  const auto kind = static_cast<msg_kind>(m.kind);
  const auto ch = is_request(kind) ? channel::request : channel::reply;
  send_channel& sc = p.out[static_cast<unsigned>(ch)];
  const bool payload = carries_payload(kind);
  const size_t most = on_link([](auto& l) { return l.max_datagram(); }) - trailer_;  // a datagram less its trailer
  const size_t room = fragment_room(most, m.nargs);
  // A lent payload the link can read whole: one datagram that says where it is.
  bool by_read = until && done == 0 && payload && m.length >= read_from_ && m.length <= link_->max_read();
  // Packing: a whole message that fits in a datagram, copied (not lent),
  // joins the channel's open datagram, the newest one, not sent yet.
  const size_t record = record_bytes(m);
  const bool packs = coalesce_ > clock::duration::zero() && !until && done == 0 && sizeof(datagram_header) + record <= most;
  send_entry* open = sc.in_flight() && sc.at(sc.next_seq - 1).open ? &sc.at(sc.next_seq - 1) : nullptr;
  // The end of every send that may have queued datagrams.
  auto finish = [&](clock::time_point now) {
    // The time bound of the open datagrams, while the program sends.
    if (!open_.empty() && now - open_since_ >= coalesce_) close_open(now);
    // A datagram the link could not send yet (a connection being made) needs
    // progress even while this thread blocks elsewhere: the service thread's.
    if (on_link([&](auto& l) {
          l.flush(now);
          return l.needs_progress();
        })) [[unlikely]]
      wake_service();
  };
  status result = status::ok;
  if (packs && open && open->bytes.size() - trailer_ + record <= most) {
    const size_t at = open->bytes.size() - trailer_;
    open->bytes.resize(open->bytes.size() + record);
    m.msg_id = sc.next_seq - 1;
    m.frag_offset = 0;
    m.how = 0;
    m.lent = 0;
    write_record(open->bytes.data() + at, m, args, data, payload ? m.length : 0);
    uint32_t records;
    std::memcpy(&records, open->bytes.data() + offsetof(datagram_header, records), sizeof records);
    ++records;
    std::memcpy(open->bytes.data() + offsetof(datagram_header, records), &records, sizeof records);
    ++messages_sent_, ++packed_;
    core::sent_outside();  // see core/tsan.hpp
    // Full: it cannot take another message. Not full, the time bound is
    // looked at every 16th message only (a clock read costs as much as the
    // rest of this path).
    const bool full = open->bytes.size() - trailer_ + sizeof(message_header) > most;
    if (!full && (packed_ & 15) != 0) return status::ok;
    const auto now = clock::now();
    if (full) transmit(p, peer, *open, now);
    finish(now);
    return status::ok;
  }
  const auto now = clock::now();
  // What follows the open datagram must not overtake it.
  if (open) transmit(p, peer, *open, now);
  do {
    if (sc.in_flight() >= cfg_.net_window) {
      result = status::in_use;
      break;
    }
    if (sc.in_flight() == 0) {
      p.heard = std::max(p.heard, now);  // the retry budget starts now
      // An answer is expected from now on: a bundle that watches the
      // doorbell is rung, to take up polling the link itself (see
      // am::adaptive_poller) rather than be woken for the answer.
      // Release: as the service thread's ring.
      if (channels_in_flight_.fetch_add(1, std::memory_order_relaxed) == 0 && watching_.load(std::memory_order_relaxed))
        doorbell_.store(true, std::memory_order_release);
    }
    link::exposure exposed;
    read_source source{};
    // (Not exposed, the payload goes in datagrams after all.)
    if (by_read && !link_->expose(static_cast<const std::byte*>(data), m.length, exposed)) by_read = false;
    if (by_read) source = {exposed.addr, exposed.key};
    const uint32_t seq = sc.next_seq++;
    if (done == 0) m.msg_id = seq;
    // Of several fragments, the first is the short one: the last ones fill
    // their datagrams.
    const size_t first = done == 0 && m.length > room && m.length % room ? m.length % room : room;
    const size_t n = by_read ? sizeof source : payload ? std::min<size_t>(first, m.length - done) : 0;
    const std::byte* bytes = by_read ? reinterpret_cast<const std::byte*>(&source)
                                     : static_cast<const std::byte*>(data) + done;
    send_entry& e = sc.at(seq);
    const bool lend = until && n && !by_read;
    e.bytes.resize(data_header_bytes + 4u * m.nargs + (lend ? 0 : n + trailer_));
    datagram_header h{};
    h.magic = wire_magic;
    h.version = wire_version;
    h.flags = flags_;
    h.type = static_cast<uint8_t>(datagram_type::data);
    h.channel = static_cast<uint8_t>(ch);
    h.job = job_;
    h.src_rank = static_cast<uint32_t>(rank_);
    h.dst_rank = static_cast<uint32_t>(peer);
    h.seq = seq;
    h.records = 1;
    std::memcpy(e.bytes.data(), &h, sizeof h);
    m.frag_offset = done;
    m.how = by_read ? how_read : 0;
    m.lent = until && waits;  // its sender waits for the end (settled)
    e.lent = lend ? bytes : nullptr;
    e.lent_bytes = e.lent ? n : 0;
    write_record(e.bytes.data() + sizeof h, m, args, bytes, lend ? 0 : n);
    e.exposed = exposed;
    e.first_sent = now;
    e.transmissions = 0;
    e.held = false;
    done += static_cast<uint32_t>(by_read ? m.length : n);
    sent_by_read_ += by_read;
    e.last_fragment = !payload || done == m.length;
    // Nagle's rule: a message goes at once when nothing else of the channel
    // is in flight (a lone ping-pong waits for nothing); otherwise its
    // datagram stays open for the messages that follow, until it is full,
    // the program polls, or CLUMP_NET_COALESCE_US has passed. An unhurried
    // one (one-way, its sender waits for nothing) waits so in any case.
    e.open = packs && (sc.in_flight() > 1 || unhurried);
    if (e.open) {
      if (open_.empty()) {
        open_since_ = now;
        open_waiting_.store(true, std::memory_order_relaxed);
        // For a program that computes now without calling clump: the
        // service thread covers for it once it is absent (service()), and
        // must not sleep past that on an older timer.
        next_timer_ = std::min(next_timer_, now + coalesce_);
        if (clock::time_point(clock::duration(sleeping_until_.load(std::memory_order_relaxed))) >
            now + coalesce_ + absent_after)
          wake_service();
      }
      open_.push_back({peer, static_cast<uint8_t>(ch)});
    } else {
      transmit(p, peer, e, now);
    }
    if (e.last_fragment) {
      ++messages_sent_;
      if (until) *until = sc.next_seq;
      break;
    }
  } while (true);
  next_timer_ = std::min(next_timer_, now + std::chrono::microseconds(static_cast<int64_t>(p.rto_us(cfg_.net_rto_min_us))));
  core::sent_outside();  // see core/tsan.hpp
  finish(now);
  return result;
}

void network::write_record(std::byte* to, const message_header& m, const uint32_t* args, const void* payload,
                           size_t n) noexcept {
  std::memcpy(to, &m, sizeof m);
  if (m.nargs) std::memcpy(to + sizeof m, args, 4u * m.nargs);
  if (n) std::memcpy(to + sizeof m + 4u * m.nargs, payload, n);
}

void network::close_open(clock::time_point now) noexcept {
  for (const open_datagram& o : open_) {
    peer_state* p = peers_[static_cast<size_t>(o.rank)].get();
    send_channel& sc = p->out[o.channel];
    // (Sent already, by a later message or a resend, or given back.)
    if (sc.in_flight() && sc.at(sc.next_seq - 1).open) transmit(*p, o.rank, sc.at(sc.next_seq - 1), now);
  }
  open_.clear();
  open_waiting_.store(false, std::memory_order_relaxed);
}

bool network::settled(int peer, const message_header& m, uint32_t until) noexcept {
  std::lock_guard lock(mutex_);
  if (peer < 0 || static_cast<size_t>(peer) >= peers_.size() || !peers_[peer]) return true;  // nothing was sent
  peer_state& p = *peers_[peer];
  const send_channel& sc = p.out[static_cast<unsigned>(is_request(static_cast<msg_kind>(m.kind)) ? channel::request
                                                                                                  : channel::reply)];
  return p.unreachable || seq_diff(sc.acked, until) >= 0;
}

void network::fill_acks(peer_state& p, datagram_header& h, clock::time_point now) const noexcept {
  for (unsigned c = 0; c < channel_count; ++c) {
    recv_channel& rc = p.in[c];
    h.ack[c] = rc.next;
    const double held_us = micros(now - rc.last_arrival);
    h.delay_us[c] = static_cast<uint32_t>(std::clamp(held_us, 0.0, 4e9));
    uint64_t bits = 0;
    for (uint32_t i = 0; i < ring_size; ++i)
      if (!rc.at(rc.next + i).empty()) bits |= uint64_t{1} << i;
    h.held[c] = bits;
  }
}

void network::transmit(peer_state& p, int rank, send_entry& e, clock::time_point now) noexcept {
  if (e.open) [[unlikely]] {  // closed now: its round trip starts here
    e.open = false;
    e.first_sent = now;
  }
  // Queued already in the batch not yet sent: once is enough (and its bytes,
  // and their tag, must not change before they leave).
  const uint64_t batch = on_link([](auto& l) { return l.flushes(); });
  if (e.queued_in == batch) return;
  e.queued_in = batch;
  // A large datagram over a provider is delivered long after it is handed
  // over (udp;ofi_rxd moves 1 MiB in some 700 packets under a window of 32):
  // acks that the peer waits for go ahead of it in a datagram of their own,
  // or its timers would send again what it has delivered.
  if (p.unacked && e.bytes.size() + e.lent_bytes > ack_ahead_bytes && link_->reliable()) {
    send_ack(p, rank);
    e.queued_in = on_link([](auto& l) { return l.flushes(); });  // (the ack may have sent the batch)
  }
  // Piggyback the acknowledgements as they are now.
  datagram_header h;
  std::memcpy(&h, e.bytes.data(), sizeof h);
  fill_acks(p, h, now);
  if (auth_) h.flags = auth_->flags(e.lent == nullptr);
  std::memcpy(e.bytes.data(), &h, sizeof h);
  p.ack_due = false;
  p.unacked = 0;
  e.last_sent = now;
  ++e.transmissions;
  if (!auth_) {
    on_link([&](auto& l) { l.queue(rank, e.bytes.data(), e.bytes.size(), e.lent, e.lent_bytes, nullptr, 0); });
  } else if (!e.lent) {
    // In one piece, trailer included: one buffer for the system call.
    const size_t signed_n = e.bytes.size() - sizeof e.trailer;
    auth_->sign({e.bytes.data(), signed_n}, {}, e.trailer);
    std::memcpy(e.bytes.data() + signed_n, &e.trailer, sizeof e.trailer);
    on_link([&](auto& l) { l.queue(rank, e.bytes.data(), e.bytes.size(), nullptr, 0, nullptr, 0); });
  } else {
    auth_->sign(e.bytes, {e.lent, e.lent_bytes}, e.trailer);
    on_link([&](auto& l) {
      l.queue(rank, e.bytes.data(), e.bytes.size(), e.lent, e.lent_bytes,
              reinterpret_cast<const std::byte*>(&e.trailer), sizeof e.trailer);
    });
  }
  if (!udp_) [[unlikely]] {  // (see run_timers)
    e.ticket = link_->last_queued();
    e.delivery_known = false;
  }
}

void network::send_ack(peer_state& p, int rank, datagram_type type) noexcept {
  datagram_header h{};
  h.magic = wire_magic;
  h.version = wire_version;
  h.flags = auth_ ? auth_->flags(true) : 0;
  h.type = static_cast<uint8_t>(type);
  h.job = job_;
  h.src_rank = static_cast<uint32_t>(rank_);
  h.dst_rank = static_cast<uint32_t>(rank);
  fill_acks(p, h, clock::now());
  // Its own buffer: an ack and a ping may wait in one batch.
  const unsigned slot = p.next_small++ % std::size(p.small);
  // One waiting to leave in this batch must not be overwritten: send the batch first.
  on_link([&](auto& l) {
    if (p.small_batch[slot] == l.flushes()) l.flush(clock::now());
    p.small_batch[slot] = l.flushes();
  });
  peer_state::small_datagram& out = p.small[slot];
  std::memcpy(out.bytes, &h, sizeof h);
  if (auth_) {
    auth_trailer t;
    auth_->sign({out.bytes, sizeof h}, {}, t);
    std::memcpy(out.bytes + sizeof h, &t, sizeof t);
  }
  on_link([&](auto& l) { l.queue(rank, out.bytes, sizeof h + trailer_, nullptr, 0, nullptr, 0); });
  p.ack_due = false;
  p.unacked = 0;
  if (type == datagram_type::ping)
    ++pings_sent_;
  else
    ++acks_sent_;
}

// ---- receiving --------------------------------------------------------------

bool network::expecting() const noexcept {
  return channels_in_flight_.load(std::memory_order_relaxed) != 0 ||
         channels_partial_.load(std::memory_order_relaxed) != 0 || link_->unfinished();
}

void network::set_partial(recv_channel& rc, bool partial) noexcept {
  if (rc.partial == partial) return;
  rc.partial = partial;
  if (partial)
    channels_partial_.fetch_add(1, std::memory_order_relaxed);
  else
    channels_partial_.fetch_sub(1, std::memory_order_relaxed);
}

unsigned network::poll() noexcept {
  // The program looks after the network: the service thread need not (see service()).
  // Relaxed: a hint for the service thread, read with a margin of milliseconds.
  const auto now = clock::now();
  program_polled_.store(now.time_since_epoch().count(), std::memory_order_relaxed);
  unsigned n = 0;
  {
    std::unique_lock lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock()) return 0;
    n = poll_locked(now);
  }
  if (sink_) sink_->after_poll();
  return n;
}

void network::flush() noexcept {
  std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock() || open_.empty()) return;
  const auto now = clock::now();
  close_open(now);
  on_link([&](auto& l) { l.flush(now); });
}

unsigned network::poll_locked(clock::time_point now) noexcept {
  if (!sink_) return 0;
  // A poll, a wait, a barrier: every open datagram goes now.
  if (!open_.empty()) close_open(now);
  const uint64_t before = link_->counters().datagrams_received;
  unsigned reads_ended = 0;  // activity too, for the adaptive poller
  // A few batches at most, so that one poll cannot be held forever by a flood.
  for (int round = 0; round < 4; ++round) {
    unsigned got;
    if (udp_) [[likely]] {
      got = udp_->receive_each(
          now, [&](const std::byte* bytes, size_t n, const origin& from) { on_datagram(bytes, n, from, now); });
    } else {
      struct context {
        network* self;
        clock::time_point now;
      } c{this, now};
      got = link_->receive(
          now,
          [](void* v, const std::byte* bytes, size_t n, const origin& from) {
            auto* c = static_cast<context*>(v);
            c->self->on_datagram(bytes, n, from, c->now);
          },
          &c);
      reads_ended += link_->reads_done(
          [](void* v, uint64_t id, bool ok) {
            auto* c = static_cast<context*>(v);
            c->self->read_done(id, ok, c->now);
          },
          &c);
    }
    if (got < 32) break;
  }
  on_link([&](auto& l) {
    if (now >= next_timer_ || l.holding()) run_timers(now);
    if (!give_backs_.empty()) offer_give_backs();
    l.flush(now);
  });
  return static_cast<unsigned>(link_->counters().datagrams_received - before) + reads_ended;
}

void network::on_datagram(const std::byte* bytes, size_t n, const origin& from, clock::time_point now) noexcept {
  decoded d;
  refusal r = refusal::none;
  if (auth_) {
    // The trailer off (decode sees the datagram as it was signed); then, for
    // what decode accepts (a sender rank of the job among other things), the
    // tag and the counter.
    const size_t signed_n = n >= sizeof(datagram_header) + trailer_ ? n - trailer_ : 0;
    r = signed_n ? decode(bytes, signed_n, job_, static_cast<uint32_t>(rank_), static_cast<uint32_t>(peers_.size()), d,
                          flags_)
                 : decode(bytes, n, job_, static_cast<uint32_t>(rank_), static_cast<uint32_t>(peers_.size()), d,
                          flags_);
    if (r == refusal::none && !signed_n) r = refusal::truncated;
    if (r == refusal::none) {
      switch (auth_->check(d.h.src_rank, d.h.flags, {bytes, n})) {
        case authenticator::verdict::ok: n = signed_n; break;
        case authenticator::verdict::forged: r = refusal::unauthenticated; break;
        case authenticator::verdict::replayed: r = refusal::replayed; break;
        case authenticator::verdict::cannot:
          r = refusal::unauthenticated;
          break;  // GCM from a process that was told this one cannot check it: not one of the job's
      }
    }
  } else {
    r = decode(bytes, n, job_, static_cast<uint32_t>(rank_), static_cast<uint32_t>(peers_.size()), d);
  }
  if (r != refusal::none) [[unlikely]] {
    ++refused_[static_cast<unsigned>(r)];
    if (r == refusal::wrong_version && !version_warned_) {
      version_warned_ = true;
      core::log_error("refused a datagram from %s: it speaks clump wire format version %u, this process version %u; "
                      "run the same clump build on every node",
                      link_->origin_text(from).c_str(), static_cast<unsigned>(d.h.version), wire_version);
    }
    return;
  }
  peer_state* p = sender_of(d, from);
  if (!p) return;
  const int rank = static_cast<int>(d.h.src_rank);
  core::heard_from_outside();  // see core/tsan.hpp
  p->heard = now;
  if (p->first_heard == clock::time_point{}) p->first_heard = now;
  on_acks(*p, rank, d.h, now);
  if (d.h.type == static_cast<uint8_t>(datagram_type::data))
    on_data(*p, rank, bytes, n, d, now);
  else if (d.h.type == static_cast<uint8_t>(datagram_type::ping))
    send_ack(*p, rank);  // a keep-alive: answer at once, whatever the program is doing
}

network::peer_state* network::sender_of(const decoded& d, const origin& from) noexcept {
  if (!present_[d.h.src_rank]) [[unlikely]] {
    ++refused_[static_cast<unsigned>(refusal::bad_rank)];  // a rank we reach through shared memory
    return nullptr;
  }
  // Over UDP, nothing but its address ties a datagram to a rank: one of the
  // right job from anywhere else is an impostor (or a stray), never a
  // message. (Checked before a first datagram makes the peer's state.) A
  // libfabric link cannot tell where a datagram came from (origin without
  // an address): there only authentication ties it to its rank.
  if (from.addr && !on_link([&](auto& l) { return l.sent_by(static_cast<int>(d.h.src_rank), from); })) [[unlikely]] {
    ++refused_[static_cast<unsigned>(refusal::wrong_source)];
    return nullptr;
  }
  peer_state* p = state_of(d.h.src_rank);
  if (!p) [[unlikely]] return nullptr;  // out of memory: as if lost
  if (p->unreachable) return nullptr;  // declared gone: its late datagrams change nothing
  return p;
}

void network::on_acks(peer_state& p, int rank, const datagram_header& h, clock::time_point now) noexcept {
  for (unsigned c = 0; c < channel_count; ++c) {
    send_channel& sc = p.out[c];
    const uint32_t a = h.ack[c];
    // An ack outside [acked, next_seq] is stale (reordered) or bogus: ignore its position.
    if (seq_diff(a, sc.acked) > 0 && seq_diff(a, sc.next_seq) <= 0) {
      // One round-trip sample per ack, from the newest datagram it covers
      // that was sent once (Karn: the ack of a datagram sent twice could be
      // the first one's) and not held behind a gap (its ack then measures
      // the gap, not the path), and sent after the peer was first heard
      // from: a round trip begun before then includes the making of the path
      // (tcp;ofi_rxm connects on a first send, each way), hundreds of ms on
      // a crowded host. Such a first sample would be the timeout and the
      // shortest round trip until the next, which a window stuck behind a
      // loss never takes: under 10% loss, a peer's requests then stalled
      // for seconds, each repair a whole inflated timeout.
      uint32_t at = a - 1;
      while (at != sc.acked && (sc.at(at).transmissions != 1 || sc.at(at).held)) --at;
      const send_entry& newest = sc.at(at);
      if (newest.transmissions == 1 && !newest.held && newest.first_sent >= p.first_heard) {
        // Two estimates from one sample. The retransmission timeout follows
        // the whole response time, whatever made it long: a receiver that
        // computes, a process the scheduler left waiting (16 ranks on 2
        // cores), a full queue. A timeout shorter than that only sends
        // duplicates. The path alone (the sample less the time the receiver
        // says it held the datagram before this ack left) gives the shortest
        // round trip, which paces the repair of real losses, seen as gaps.
        const double raw = std::min(micros(now - newest.first_sent), max_rto_us);
        const double held = static_cast<double>(h.delay_us[c]);
        p.min_rtt_us = std::min(p.min_rtt_us, held < raw ? std::max(raw - held, 1.0) : raw);
        const double sample = raw;
        if (!p.rtt_known) {
          p.srtt_us = sample;
          p.rttvar_us = sample / 2;
          p.rtt_known = true;
        } else {
          p.rttvar_us = 0.75 * p.rttvar_us + 0.25 * std::abs(p.srtt_us - sample);
          p.srtt_us = 0.875 * p.srtt_us + 0.125 * sample;
        }
      }
      for (uint32_t s = sc.acked; s != a; ++s) {
        send_entry& done = sc.at(s);
        done.transmissions = 0;
        // Delivered: a payload it was reading from is ours again.
        if (done.exposed.handle) link_->conceal(done.exposed);
      }
      sc.acked = a;
      sc.progress = now;
      if (sc.in_flight() == 0) channels_in_flight_.fetch_sub(1, std::memory_order_relaxed);
    }
    if (seq_diff(a, sc.acked) < 0) continue;  // older news than we have
    // Held bits: mark what the receiver holds; fill gaps below the highest held at once.
    uint32_t highest_held = sc.acked;
    bool any_held = false;
    for (uint32_t s = sc.acked; s != sc.next_seq; ++s) {
      const uint32_t i = s - a;
      send_entry& e = sc.at(s);
      e.held = i < ring_size && ((h.held[c] >> i) & 1u);
      if (e.held) highest_held = s, any_held = true;
    }
    // Over a link that loses nothing but may complete out of order (a
    // libfabric provider), a gap is a datagram still on its way.
    if (!any_held || link_->reliable()) continue;
    // A gap: the receiver holds later datagrams, so these were lost (or are
    // still on their way: not if sent less than about a round trip ago).
    // (From the shortest round trip: a smoothed one inflated by a pause
    // would hold the repair back.)
    const double recent_us = std::max(50.0, p.rtt_known ? 2 * p.min_rtt_us : initial_rto_us);
    for (uint32_t s = sc.acked; s != highest_held; ++s) {
      send_entry& e = sc.at(s);
      if (e.held || micros(now - e.last_sent) < recent_us) continue;
      ++retransmits_, ++resent_[2];
      transmit(p, rank, e, now);
    }
  }
}

void network::on_data(peer_state& p, int rank, const std::byte* bytes, size_t n, decoded& d,
                      clock::time_point now) noexcept {
  recv_channel& rc = p.in[d.h.channel];
  const int32_t ahead = seq_diff(d.h.seq, rc.next);
  if (ahead < 0 || (ahead < static_cast<int32_t>(ring_size) && !rc.at(d.h.seq).empty())) {
    // A duplicate: our ack was lost or is late. Ack at once; and if it is a
    // request, its sender may have lost our reply too: send our unacked
    // replies again (the saved replies) rather than wait for their timers.
    ++duplicates_;
    send_ack(p, rank);
    if (d.h.channel == static_cast<uint8_t>(channel::request)) {
      send_channel& replies = p.out[static_cast<unsigned>(channel::reply)];
      for (uint32_t s = replies.acked; s != replies.next_seq; ++s) {
        send_entry& e = replies.at(s);
        if (!e.held && micros(now - e.last_sent) > p.rto_us(cfg_.net_rto_min_us) / 4) {
          ++retransmits_, ++resent_[3];
          transmit(p, rank, e, now);
        }
      }
    }
    return;
  }
  if (ahead >= static_cast<int32_t>(ring_size)) return;  // beyond any window: a sender never does this
  if (!p.ack_due) {
    p.ack_due = true;
    p.ack_since = now;
    next_timer_ = std::min(next_timer_, now + std::chrono::microseconds(cfg_.net_ack_delay_us));
  }
  ++p.unacked;
  if (ahead == 0 && !rc.stalled && consume_all(p, rank, rc, bytes, d)) {
    ++rc.next;
    rc.last_arrival = now;
    drain_held(p, rank, rc, now);
    // The end of a message of several datagrams: its sender may be waiting
    // to reuse its payload (a lent one), so it hears at once.
    if (sender_waits(d)) {
      send_ack(p, rank);
      return;
    }
  } else {
    // Early (a gap before it) or the am layer is full: keep a copy.
    if (ahead > 0) ++out_of_order_;
    std::vector<std::byte>& slot = rc.at(d.h.seq);
    if (!pool_.empty()) {
      slot.swap(pool_.back());
      pool_.pop_back();
    }
    slot.assign(bytes, bytes + n);
    rc.arrived[d.h.seq % ring_size] = now;
    if (ahead == 0 && !rc.stalled) {
      rc.stalled = true;
      stalls_ += rc.reading == recv_channel::read_phase::none;  // (a read under way is no stall)
      next_timer_ = std::min(next_timer_, now + stall_retry);
    }
  }
  // Ack soon when a quarter of the window waits, so that the sender never stops for acks.
  // (Sent now, not after the rest of the batch: a receiver busy with a long
  // batch of large datagrams must still show its progress.)
  if (p.unacked >= std::max<uint32_t>(1, cfg_.net_window / 4)) {
    send_ack(p, rank);
    link_->flush(now);
  }
}

void network::drain_held(peer_state& p, int rank, recv_channel& rc, clock::time_point now) noexcept {
  const uint32_t first = rc.next;
  bool ended = false;  // a message of several datagrams was completed
  while (!rc.at(rc.next).empty()) {
    std::vector<std::byte>& slot = rc.at(rc.next);
    decoded d;
    decode(slot.data(), slot.size(), job_, static_cast<uint32_t>(rank_), static_cast<uint32_t>(peers_.size()), d,
           flags_);
    if (!consume_all(p, rank, rc, slot.data(), d)) {
      rc.stalled = true;
      break;
    }
    ended |= sender_waits(d);
    rc.stalled = false;
    pool_.emplace_back();
    pool_.back().swap(slot);
    pool_.back().clear();
    rc.last_arrival = rc.arrived[rc.next % ring_size];
    ++rc.next;
  }
  if (rc.next == first) return;
  if (!rc.at(rc.next).empty()) rc.stalled = true;
  if (ended) {
    send_ack(p, rank);  // as in on_data
    return;
  }
  // Delivered late: the sender must hear of it (it may be waiting on a full
  // window of datagrams it knows we hold), so an ack is due.
  if (!p.ack_due) {
    p.ack_due = true;
    p.ack_since = now;
    next_timer_ = std::min(next_timer_, now + std::chrono::microseconds(cfg_.net_ack_delay_us));
  }
}

bool network::consume_all(peer_state& p, int rank, recv_channel& rc, const std::byte* bytes, decoded& d) noexcept {
  if (rc.resume_at > d.at) {  // delivered in part before: on from the record the am layer had no room for
    d.next = rc.resume_at;
    next_record(bytes, d);
    ++resumed_;
  }
  while (consume(p, rank, rc, d)) {
    if (d.last_record()) {
      rc.resume_at = 0;
      return true;
    }
    next_record(bytes, d);
  }
  rc.resume_at = d.at;
  return false;
}

bool network::consume(peer_state& /*p*/, int rank, recv_channel& rc, const decoded& d) noexcept {
  const message_header& m = d.m;
  if (m.how == how_read) return consume_read(rank, rc, d);
  const auto kind = static_cast<msg_kind>(m.kind);
  if (!carries_payload(kind)) {
    if (!sink_->deliver(rank, m, d.args, nullptr, nullptr)) return false;
    ++messages_delivered_;
    return true;
  }
  const bool last = m.frag_offset + d.payload_bytes == m.length;
  // A message's fragments are consecutive on its channel: after one that is
  // not the last, the next comes (see expecting()).
  set_partial(rc, !last);
  if (is_long(kind)) {
    // Straight into the destination segment (again, harmlessly, if this is a stalled last fragment).
    if (d.payload_bytes) sink_->write_long(rank, m, d.payload, d.payload_bytes);
    if (!last) return true;
    if (!sink_->deliver(rank, m, d.args, nullptr, nullptr)) return false;
    ++messages_delivered_;
    return true;
  }
  // Medium: whole in one datagram, or assembled.
  if (m.frag_offset == 0 && last) {
    if (!sink_->deliver(rank, m, d.args, d.payload, nullptr)) return false;
    ++messages_delivered_;
    return true;
  }
  // Longer than our queues take (their payload ring holds two): not worth
  // assembling; the last fragment hands it over without payload, to be refused.
  if (m.length > cfg_.shm_medium_ring / 2) {
    if (!last) return true;
    if (!sink_->deliver(rank, m, d.args, nullptr, nullptr)) return false;
    return true;
  }
  auto it = std::find_if(rc.assemblies.begin(), rc.assemblies.end(),
                         [&](const recv_channel::assembly& a) { return a.msg_id == m.msg_id; });
  if (it == rc.assemblies.end()) {
    // A sender has at most a window of messages in flight on a channel; more
    // half-built ones come from a broken peer: refused, so memory stays bounded.
    if (rc.assemblies.size() >= ring_size) {
      ++refused_[static_cast<unsigned>(refusal::malformed)];
      return true;
    }
    rc.assemblies.push_back({m.msg_id, m.length, {}});
    it = rc.assemblies.end() - 1;
    it->data.swap(rc.spare);
    if (it->data.size() < m.length) it->data.resize(m.length);
  }
  if (it->length != m.length) {  // fragments that disagree: a corrupt sender
    ++refused_[static_cast<unsigned>(refusal::malformed)];
    return true;
  }
  if (!last) {
    std::memcpy(it->data.data() + m.frag_offset, d.payload, d.payload_bytes);
    return true;
  }
  // The last fragment goes from its datagram, not copied here first.
  if (!sink_->deliver(rank, m, d.args, it->data.data(), d.payload)) return false;
  if (it->data.capacity() > rc.spare.capacity()) rc.spare.swap(it->data);
  rc.assemblies.erase(it);
  ++messages_delivered_;
  return true;
}

// A long message by a read stays at the head of its channel (the channel
// stalls behind it, and its ack waits) while its payload is read straight
// into the destination segment: the sender, whose blocking send waits for
// that ack, then takes its buffer back. The destination is checked before
// the read starts, as write_long checks a fragment, so no byte lands where
// the message would be refused.
bool network::consume_read(int rank, recv_channel& rc, const decoded& d) noexcept {
  using phase = recv_channel::read_phase;
  const message_header& m = d.m;
  const bool medium = !is_long(static_cast<msg_kind>(m.kind));
  if (rc.reading == phase::none) {
    // A medium message is read into a buffer of ours, then handed over as if
    // assembled (the am layer checks it as any medium); one its queues could
    // never take (see consume) is not read, and is refused.
    std::byte* to = nullptr;
    if (medium && m.length <= cfg_.shm_medium_ring / 2) try {
        rc.read_buffer.resize(m.length);
        to = rc.read_buffer.data();
      } catch (...) {  // no memory now: later (the stall timer)
        return false;
      }
    if (!medium) to = sink_->read_destination(rank, m);
    if (to) {
      read_source from;
      std::memcpy(&from, d.payload, sizeof from);
      const status s = link_->read(rank, to, m.length, from.addr, from.key, read_id(rank, d.h.channel));
      if (s == status::in_use) {  // the link is busy: the stall timer offers it again
        if (!medium) sink_->read_ended(m);
        return false;
      }
      rc.read_m = m;
      rc.reading = s == status::ok ? phase::reading : phase::failed;
    }
  }
  switch (rc.reading) {
    case phase::reading: return false;
    case phase::failed:
      if (!sink_->unread(rank, m, d.args)) return false;
      break;
    case phase::arrived:
    case phase::none:  // the destination refused it: delivered without its bytes, to be refused there
      if (!sink_->deliver(rank, m, d.args, medium && rc.reading == phase::arrived ? rc.read_buffer.data() : nullptr,
                          nullptr))
        return false;
      ++messages_delivered_;
      messages_read_ += rc.reading == phase::arrived;
      break;
  }
  end_read(rc);
  return true;
}

void network::end_read(recv_channel& rc) noexcept {
  // Only a long message's destination was held (read_destination); a
  // medium one is read into rc.read_buffer.
  if (rc.reading != recv_channel::read_phase::none && is_long(static_cast<msg_kind>(rc.read_m.kind)))
    sink_->read_ended(rc.read_m);
  rc.reading = recv_channel::read_phase::none;
}

void network::read_done(uint64_t id, bool ok, clock::time_point now) noexcept {
  const size_t rank = id / channel_count;
  if (rank >= peers_.size() || !peers_[rank]) return;
  peer_state& p = *peers_[rank];
  recv_channel& rc = p.in[id % channel_count];
  if (rc.reading != recv_channel::read_phase::reading) return;
  if (p.unreachable) {  // its message was dropped with it: only the destination is let go
    end_read(rc);
    return;
  }
  rc.reading = ok ? recv_channel::read_phase::arrived : recv_channel::read_phase::failed;
  // The ack due since the message came waits from now: the handler's answer
  // may carry it (see run_timers).
  if (p.ack_due) p.ack_since = now;
  drain_held(p, static_cast<int>(rank), rc, now);
}

// ---- timers, failure --------------------------------------------------------

void network::run_timers(clock::time_point now) noexcept {
  clock::time_point next = clock::time_point::max();
  for (size_t r = 0; r < peers_.size(); ++r) {
    if (!peers_[r] || peers_[r]->unreachable) continue;
    peer_state& p = *peers_[r];
    const int rank = static_cast<int>(r);
    for (unsigned c = 0; c < channel_count; ++c)
      if (p.in[c].stalled) {
        drain_held(p, rank, p.in[c], now);
        if (p.in[c].stalled) next = std::min(next, now + stall_retry);
      }
    if (p.ack_due) {
      // While a payload is read, its message is held, and an ack now would
      // only cost both sides a system call in the middle of the transfer
      // (a 256 KiB read over tcp;ofi_rxm takes about the ack delay): the
      // ack waits for the read's end, or for half the least retransmission
      // timeout, which a read of many MiB may outlast.
      bool reading = false;
      for (const recv_channel& rc : p.in) reading |= rc.reading == recv_channel::read_phase::reading;
      const uint32_t delay = reading ? std::max(cfg_.net_ack_delay_us, cfg_.net_rto_min_us / 2) : cfg_.net_ack_delay_us;
      const auto due = p.ack_since + std::chrono::microseconds(delay);
      if (due <= now)
        send_ack(p, rank);
      else
        next = std::min(next, due);
    }
    const double rto = p.rto_us(cfg_.net_rto_min_us);
    const double probe = p.rtt_known ? std::min(rto, 2 * p.srtt_us + cfg_.net_ack_delay_us) : rto;
    bool in_flight = false;
    for (unsigned c = 0; c < channel_count; ++c) {
      send_channel& sc = p.out[c];
      if (sc.in_flight() == 0) continue;
      in_flight = true;
      // One timer per channel, as TCP's: for the oldest datagram the
      // receiver does not hold, from its last transmission or from the last
      // ack of new data, whichever is later (datagrams queued behind others
      // at a busy receiver wait for those: no reason to send them again).
      // When it fires, that datagram goes again, and the newest too, whose
      // ack's held bits then show every gap between, repaired at once (see
      // on_acks); everything else in flight stays put. A channel whose
      // datagrams the receiver all holds (it has no room yet) is probed with
      // its newest, now and then, so that a lost ack cannot leave the window
      // closed. The tail loss probe: the newest datagram, if nothing follows
      // it, has no later datagram to reveal its loss (or the loss of its
      // ack), so it goes again after two round trips and an ack delay
      // rather than a whole timeout (the receiver answers a duplicate with
      // an ack at once). Not over a reliable link, which loses nothing: its
      // datagrams are all the timeout's, and a probe only sends again what a
      // provider is still delivering (a 32 KiB datagram after a run of small
      // ones, whose round trip is all the probe knows, takes udp;ofi_rxd
      // several of those round trips).
      const bool probes = !link_->reliable();
      uint32_t oldest = sc.acked;
      while (oldest != sc.next_seq && sc.at(oldest).held) ++oldest;
      const uint32_t newest_seq = sc.next_seq - 1;
      send_entry& newest = sc.at(newest_seq);
      const bool all_held = oldest == sc.next_seq;
      send_entry& e = all_held ? newest : sc.at(oldest);
      const double backoff = static_cast<double>(1u << std::min<uint32_t>(e.transmissions - 1, 8));
      const bool tail = probes && !all_held && oldest == newest_seq && e.transmissions == 1;
      const double wait = tail ? probe : std::min(max_rto_us, rto * backoff * (all_held ? 8 : 1));
      // Over a reliable link the timer waits while the provider still
      // carries the datagram (link::carrying), and counts from when it
      // stopped: the first time the timer finds it delivered (or dropped),
      // the last send to the peer that ended is taken for its end, once, so
      // that later traffic (keep-alives) cannot put its timeout off for
      // ever. What took the provider long to hand over may take the peer as
      // long to take in (tcp;ofi_rxm completes a send of 1 MiB once it is in
      // the socket): its answer gets as long again.
      clock::time_point carried{};
      if (!udp_ && e.ticket) [[unlikely]] {
        if (link_->carrying(rank, e.ticket)) {
          e.carried_until = now;
        } else if (!e.delivery_known) {
          e.delivery_known = true;
          e.carried_until = std::max(e.carried_until, link_->delivered(rank));
        }
        if (e.carried_until > e.last_sent) carried = e.carried_until;
      }
      auto due = std::max({e.last_sent, sc.progress, carried}) + std::chrono::microseconds(static_cast<int64_t>(wait));
      if (carried != clock::time_point{})
        due = std::max(due, carried + std::min<clock::duration>(carried - e.last_sent,
                                                                std::chrono::microseconds(static_cast<int64_t>(max_rto_us))));
      if (due <= now) {
        ++retransmits_, ++resent_[tail ? 1 : 0];
        transmit(p, rank, e, now);
        if (&e != &newest && !newest.held) {
          ++retransmits_, ++resent_[0];
          transmit(p, rank, newest, now);
        }
        due = now + std::chrono::microseconds(static_cast<int64_t>(std::min(max_rto_us, 2 * wait)));
      } else if (probes && !tail && !all_held && newest.transmissions == 1 && !newest.held) {
        // The newest's own tail probe, when older datagrams are in flight.
        const auto probe_due =
            std::max(newest.last_sent, sc.progress) + std::chrono::microseconds(static_cast<int64_t>(probe));
        if (probe_due <= now) {
          ++retransmits_, ++resent_[1];
          transmit(p, rank, newest, now);
        } else {
          next = std::min(next, probe_due);
        }
      }
      next = std::min(next, due);
    }
    if (in_flight && cfg_.net_timeout_ms) {
      const auto budget = std::chrono::milliseconds(cfg_.net_timeout_ms);
      if (now - p.heard > budget) {
        declare_unreachable(p, rank, "answered nothing");
        continue;
      }
      // Keep-alives: a peer that has said nothing for a quarter of the
      // budget is asked for an ack, every eighth of it, whatever its
      // retransmission timers are doing. Its library answers even while its
      // program computes (service()), so only a dead process, host or path
      // stays silent for the whole budget.
      const auto quiet = budget / 4, every = budget / 8;
      if (now - p.heard >= quiet && now - p.pinged >= every) {
        send_ack(p, rank, datagram_type::ping);
        p.pinged = now;
      }
      next = std::min({next, p.heard + budget, std::max(p.heard + quiet, p.pinged + every)});
    }
  }
  if (link_->holding()) next = std::min(next, now + std::chrono::microseconds(100));
  next_timer_ = next;
}

void network::declare_unreachable(peer_state& p, int rank, const char* why) noexcept {
  if (std::strstr(why, "launcher") == nullptr)
    core::log_error("rank %d at %s %s for %u ms (CLUMP_NET_TIMEOUT_MS), not even keep-alives: its process, its host "
                    "or the path to it is gone. It is now unreachable: the messages it did not acknowledge come back "
                    "to handler 0 as unreachable, and new ones at once",
                    rank, link_->peer_text(rank).c_str(), why, cfg_.net_timeout_ms);
  if (cfg_.verbose >= 2) dump_locked();
  p.unreachable = true;
  ++unreachable_;
  if (sink_) sink_->lost(rank);
  for (unsigned c = 0; c < channel_count; ++c) {
    send_channel& sc = p.out[c];
    for (uint32_t s = sc.acked; s != sc.next_seq; ++s) {
      send_entry& e = sc.at(s);
      e.open = false;
      // A payload it may have been reading: its reads fail from now on.
      if (e.exposed.handle) link_->conceal(e.exposed);
      if (!e.last_fragment) continue;
      // Every message it carries (several when packed) comes back.
      uint32_t records;
      std::memcpy(&records, e.bytes.data() + offsetof(datagram_header, records), sizeof records);
      for (size_t i = 0, at = sizeof(datagram_header); i < records; ++i) {
        give_back_item item{};
        item.peer = rank;
        std::memcpy(&item.m, e.bytes.data() + at, sizeof item.m);
        std::memcpy(item.args, e.bytes.data() + at + sizeof item.m, 4u * std::min<unsigned>(item.m.nargs, max_args));
        give_backs_.push_back(item);
        at += record_bytes(item.m);
      }
    }
    if (sc.in_flight()) channels_in_flight_.fetch_sub(1, std::memory_order_relaxed);
    sc.acked = sc.next_seq;
    recv_channel& rc = p.in[c];
    for (auto& h : rc.held) h.clear();
    rc.assemblies.clear();
    set_partial(rc, false);
    rc.stalled = false;
    rc.resume_at = 0;
    // A read under way keeps its destination until it ends (read_done).
    if (rc.reading != recv_channel::read_phase::reading) end_read(rc);
  }
  p.ack_due = false;
}

void network::peer_gone(int peer) noexcept {
  std::lock_guard lock(mutex_);
  // (Made if it was never talked to: later sends must come back at once.)
  if (!state_of(peer) || peers_[peer]->unreachable) return;
  // What it sent before it died may be in our socket still (the launcher's
  // word can overtake it): take that in first, it counts.
  poll_locked(clock::now());
  if (peers_[peer]->unreachable) return;
  declare_unreachable(*peers_[peer], peer, "has exited (the launcher says so)");
  if (!give_backs_.empty()) offer_give_backs();
}

void network::offer_give_backs() noexcept {
  auto keep = std::remove_if(give_backs_.begin(), give_backs_.end(),
                             [&](const give_back_item& g) { return sink_->give_back(g.peer, g.m, g.args); });
  give_backs_.erase(keep, give_backs_.end());
  if (!give_backs_.empty()) next_timer_ = std::min(next_timer_, clock::now() + stall_retry);
}

void network::linger(clock::duration most) noexcept {
  const auto deadline = clock::now() + most;
  for (;;) {
    bool pending = false;
    {
      std::lock_guard lock(mutex_);
      const auto now = clock::now();
      poll_locked(now);
      for (size_t r = 0; r < peers_.size(); ++r) {
        if (!peers_[r] || peers_[r]->unreachable) continue;
        if (peers_[r]->ack_due) send_ack(*peers_[r], static_cast<int>(r));
        for (const send_channel& sc : peers_[r]->out) pending |= sc.in_flight() > 0;
      }
      link_->flush(now);
    }
    if (!pending || clock::now() >= deadline) return;
    pollfd fd{link_->wait_fd(), POLLIN, 0};
    if (link_->sleep_limit() > clock::duration::zero()) ::poll(&fd, 1, 1);
  }
}

// ---- the service thread -----------------------------------------------------

void network::arm() noexcept {
  // Seq_cst, with the service thread's store of service_active_ and load of
  // armed_ (Dekker): either it sees us armed, or we see it inactive and wake
  // it. While it is active (it stays so a few ms after the last sleeper),
  // arming costs no system call.
  armed_.fetch_add(1, std::memory_order_seq_cst);
  if (!service_active_.load(std::memory_order_seq_cst)) wake_service();
}

// Relaxed: a leaving sleeper needs nothing from the service thread; at worst
// it drains the network once more than needed.
void network::disarm() noexcept { armed_.fetch_sub(1, std::memory_order_relaxed); }

void network::watch() noexcept {
  // Relaxed: the eventfd write hands the new state to the service thread.
  doorbell_.store(false, std::memory_order_relaxed);
  watching_.store(true, std::memory_order_relaxed);
  wake_service();
}

void network::wake_service() noexcept {
  if (event_fd_ < 0) return;
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(event_fd_, &one, sizeof one);
}

bool network::work_waiting(clock::time_point now) noexcept {
  pollfd fd{link_->wait_fd(), POLLIN, 0};
  if (link_->sleep_limit() == clock::duration::zero() || link_->unfinished() || link_->overdue(now) ||
      ::poll(&fd, 1, 0) > 0)
    return true;
  std::unique_lock lock(mutex_, std::try_to_lock);
  // A program thread holding the lock is not absent.
  return lock.owns_lock() && (next_timer_ <= now || link_->holding() || !give_backs_.empty() || !open_.empty());
}

void network::service() noexcept {
  pollfd fds[2] = {{link_->wait_fd(), POLLIN, 0}, {event_fd_, POLLIN, 0}};
  // (`on_link`: the sleep watches the link's descriptor, and the link may
  // want polls sooner. Asked only then: a provider's fi_trywait takes the
  // locks a polling program thread wants.)
  auto timeout_until = [this](clock::time_point next, bool on_link = true) {
    const auto now = clock::now();
    if (on_link) {
      const clock::duration limit = link_->sleep_limit();
      if (limit < std::chrono::milliseconds(100)) next = std::min(next, now + limit);
    }
    const auto wait = next <= now ? clock::duration::zero()
                                  : std::min<clock::duration>(next - now, std::chrono::milliseconds(100));
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count();
    return timespec{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  };
  // After the last sleeper leaves, stay active a little: a thread that sleeps
  // again soon (a barrier's short naps) then needs no wake-up call.
  constexpr auto stay_active = std::chrono::milliseconds(5);
  clock::time_point active_until{};
  // Liveness belongs to the process, not to its program: while the program
  // computes without polling (or is not scheduled), this thread covers for
  // it, from the first sign of work, until the program polls again.
  bool covering = false;
  auto program_absent = [this](clock::time_point now) {
    // Relaxed: see poll().
    const clock::time_point last{clock::duration(program_polled_.load(std::memory_order_relaxed))};
    return now - last >= absent_after;
  };
  // Sleeps for t on fds, and says until when (sleeping_until_): a send that
  // opens a datagram wakes a sleep that would end too late (see send()). A
  // sleep computed from timer `next` is not begun if the timer came forward
  // meanwhile (such a send holds the lock: it either sees the new end, or
  // came before and is seen here). A sleep that serves no timer (`next` is
  // min: the program is there and polls) takes no lock. The program holds
  // mutex_ at every poll, and a blocking lock from this thread, which wakes
  // every absent_after on the program's core, cost both threads futex calls
  // and switches at each wake-up (an 8-byte echo over tcp;ofi_rxm: 1.2 futex
  // calls a round trip, 0.015 without). A send that reads the end before
  // it is written wakes this sleep needlessly at worst, or lets it run its
  // course: within absent_after, which is what send() allows.
  auto sleep = [this](pollfd* f, nfds_t nf, timespec t, clock::time_point next) {
    // Relaxed: read by send() under mutex_.
    auto say_until = [&] {
      sleeping_until_.store(
          (clock::now() + std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec)).time_since_epoch().count(),
          std::memory_order_relaxed);
    };
    if (next == clock::time_point::min()) {
      say_until();
    } else {
      std::lock_guard lock(mutex_);
      if (next_timer_ < next) t = timespec{0, 0};
      say_until();
    }
    return ::ppoll(f, nf, &t, nullptr);
  };
  while (!stopping_.load(std::memory_order_relaxed)) {
    fds[0].revents = fds[1].revents = 0;
    const auto now = clock::now();
    // Someone sleeps (or the progress thread is on): serve until the next
    // timer, a datagram or an eventfd write, for as long as that lasts.
    const bool serving =
        cfg_.progress_thread || armed_.load(std::memory_order_seq_cst) > 0 || link_->needs_progress();
    bool active = serving;
    if (active) {
      active_until = now + stay_active;
    } else if (service_active_.load(std::memory_order_relaxed)) {
      if (now < active_until) {
        active = true;
      } else {
        service_active_.store(false, std::memory_order_seq_cst);
        active = armed_.load(std::memory_order_seq_cst) > 0;  // armed meanwhile: it did not wake us
      }
    }
    if (active) {
      covering = false;
    } else if (!program_absent(now)) {
      covering = false;
    } else if (!covering && work_waiting(now)) {
      covering = true;
      ++covered_;
    }
    if (active || covering) {
      if (active) service_active_.store(true, std::memory_order_seq_cst);
      // Someone sleeps, the progress thread is on, or the program is away:
      // drain the network here.
      clock::time_point next;
      {
        std::lock_guard lock(mutex_);
        poll_locked(clock::now());
        next = next_timer_;
      }
      sink_->after_poll();
      // Lingering after the last sleeper: until active_until. Covering: look
      // again within absent_after, to hand the network back to a program
      // that polls again. Serving: the next timer (100 ms at most).
      const timespec t = timeout_until(serving ? next
                                               : std::min(next, active ? active_until : clock::now() + absent_after));
      sleep(fds, 2, t, next);
    } else if (watching_.load(std::memory_order_relaxed) && !doorbell_.load(std::memory_order_relaxed)) {
      // (Relaxed: every change of these is followed by an eventfd write that
      // brings us round this loop again.)
      // The doorbell: wait for a datagram or a timer, then ring for the pollers.
      clock::time_point next;
      {
        std::lock_guard lock(mutex_);
        next = next_timer_;
      }
      const int n = sleep(fds, 2, timeout_until(next), next);
      // Release: a poller that sees the bell sees what made us ring it.
      if (n == 0 || (fds[0].revents & POLLIN)) doorbell_.store(true, std::memory_order_release);
    } else {
      // Until armed, watching again, stopping, or the moment the program
      // would be absent if it does not poll meanwhile.
      // Relaxed: see poll().
      const clock::time_point last{clock::duration(program_polled_.load(std::memory_order_relaxed))};
      sleep(fds + 1, 1, timeout_until(std::max(last + absent_after, clock::now() + absent_after / 4), false),
            clock::time_point::min());
    }
    if (fds[1].revents & POLLIN) {
      uint64_t v;
      [[maybe_unused]] ssize_t n = ::read(event_fd_, &v, sizeof v);
    }
  }
}

void network::dump() noexcept {
  std::lock_guard lock(mutex_);
  dump_locked();
}

void network::dump_locked() noexcept {
  const auto now = clock::now();
  const link_counters& u = link_->counters();
  uint64_t refused = 0;
  for (uint64_t r : refused_) refused += r;
  std::fprintf(stderr,
               "network of rank %d: next timer in %.0f us, %zu give-backs; datagrams %llu out (%llu failed), %llu in "
               "(%llu refused)\n",
               rank_, next_timer_ == clock::time_point::max() ? -1.0 : micros(next_timer_ - now), give_backs_.size(),
               static_cast<unsigned long long>(u.datagrams_sent), static_cast<unsigned long long>(u.send_errors),
               static_cast<unsigned long long>(u.datagrams_received), static_cast<unsigned long long>(refused));
  for (size_t r = 0; r < peers_.size(); ++r) {
    if (!peers_[r]) continue;
    const peer_state& p = *peers_[r];
    std::fprintf(stderr, "  peer %zu%s: srtt %.0f us, rto %.0f us, heard %.0f us ago, ack due %d (%u)\n", r,
                 p.unreachable ? " (unreachable)" : "", p.srtt_us, p.rto_us(cfg_.net_rto_min_us),
                 micros(now - p.heard), p.ack_due, p.unacked);
    for (unsigned c = 0; c < channel_count; ++c) {
      const send_channel& sc = p.out[c];
      const recv_channel& rc = p.in[c];
      unsigned held = 0;
      for (const auto& h : rc.held) held += !h.empty();
      std::fprintf(stderr, "    ch %u out: acked %u next %u; in: next %u, %u held, stalled %d\n", c, sc.acked,
                   sc.next_seq, rc.next, held, rc.stalled);
    }
  }
}

statistics network::stats() const noexcept {
  std::lock_guard lock(mutex_);
  const link_counters& u = link_->counters();
  statistics s{};
  s.datagrams_sent = u.datagrams_sent;
  s.datagrams_received = u.datagrams_received;
  s.bytes_sent = u.bytes_sent;
  s.bytes_received = u.bytes_received;
  s.messages_sent = messages_sent_;
  s.messages_delivered = messages_delivered_;
  s.retransmits = retransmits_;
  s.resent_timeout = resent_[0];
  s.resent_probe = resent_[1];
  s.resent_gap = resent_[2];
  s.resent_reply = resent_[3];
  s.duplicates = duplicates_;
  s.out_of_order = out_of_order_;
  s.acks_sent = acks_sent_;
  s.stalls = stalls_;
  std::copy(std::begin(refused_), std::end(refused_), s.refused);
  s.fault_dropped = u.fault_dropped;
  s.fault_duplicated = u.fault_duplicated;
  s.fault_reordered = u.fault_reordered;
  s.fault_delayed = u.fault_delayed;
  s.peers_unreachable = unreachable_;
  s.pings_sent = pings_sent_;
  s.covered = covered_.load(std::memory_order_relaxed);
  s.send_errors = u.send_errors;
  s.messages_read = messages_read_;
  s.messages_packed = packed_;
  s.resumed = resumed_;
  s.messages_sent_by_read = sent_by_read_;
  s.unacknowledged = channels_in_flight_.load(std::memory_order_relaxed);
  s.partial = channels_partial_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace clump::net
