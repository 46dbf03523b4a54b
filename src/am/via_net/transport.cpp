#include "am/via_net/transport.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "am/endpoint_impl.hpp"
#include "am/returns.hpp"
#include "am/send.hpp"
#include "core/log.hpp"
#include "core/settings.hpp"
#include "shm/queue.hpp"

namespace clump::am {

using net::msg_kind;

/// What the network hands over: complete messages into our endpoints'
/// queues, long fragments into their segments, messages it gives back.
class net_transport::sink final : public net::sink {
 public:
  explicit sink(net_transport& t) : t_(t) {}

  void write_long(int /*peer*/, const net::message_header& m, const std::byte* data, size_t n) noexcept override {
    // The tag and the destination's identity guard every byte: a fragment
    // lands only in the segment of the endpoint the sender meant (not one
    // that took its slot since), and only if that endpoint takes the
    // message's tag. Otherwise nothing lands, and the message is refused
    // when it is delivered.
    uint64_t state = 0;
    remote_endpoint* own = meant(t_.p_, m.dst_slot, m.dst_gen, state);
    // Relaxed: our own tag, written by this process.
    if (!own || !detail::tag_accepts(own->view.header->tag.load(std::memory_order_relaxed), m.tag)) return;
    t_.write_segment(m.dst_slot, m.offset, m.length, m.frag_offset, data, n);
  }

  std::byte* read_destination(int /*peer*/, const net::message_header& m) noexcept override {
    // As write_long: only into the segment of the endpoint meant, if it takes the tag.
    uint64_t state = 0;
    remote_endpoint* own = meant(t_.p_, m.dst_slot, m.dst_gen, state);
    // Relaxed: our own tag, written by this process.
    if (!own || !detail::tag_accepts(own->view.header->tag.load(std::memory_order_relaxed), m.tag)) return nullptr;
    return t_.hold_segment(m.dst_slot, m.offset, m.length);
  }
  void read_ended(const net::message_header& m) noexcept override { t_.release_segment(m.dst_slot); }
  bool unread(int peer, const net::message_header& m, const uint32_t* args) noexcept override {
    net::message_header back{};
    if (detail::refuse_from_network(peer, m, return_reason::unreachable, back)) t_.defer(peer, back, args);
    return true;
  }

  bool deliver(int peer, const net::message_header& m, const uint32_t* args, const std::byte* payload,
               const std::byte* tail) noexcept override {
    const auto kind = static_cast<msg_kind>(m.kind);
    const bool request = net::is_request(kind);
    uint64_t state = 0;
    remote_endpoint* own = meant(t_.p_, m.dst_slot, m.dst_gen, state);
    auto refuse = [&](return_reason why) {
      net::message_header back{};
      if (detail::refuse_from_network(peer, m, why, back)) t_.defer(peer, back, args);
      return true;
    };
    if (!own) return refuse(return_reason::bad_endpoint);
    // The progress thread's "network processor" service: a get is answered
    // at once from the segment, even while the program computes without
    // polling (its tag is checked as dispatch would).
    if (kind == msg_kind::get_request && core::settings().progress_thread) {
      // Relaxed: our own tag, written by this process.
      if (!detail::tag_accepts(own->view.header->tag.load(std::memory_order_relaxed), m.tag))
        return refuse(return_reason::bad_tag);
      if (t_.serve_get(peer, m, args)) return true;
    }
    const shm::queue_ref& q = request ? own->view.request : own->view.reply;
    const bool medium = kind == msg_kind::medium_request || kind == msg_kind::medium_reply;
    if (medium && 2 * shm::lines_for_bytes(m.length) > q.ring_lines) return refuse(return_reason::bad_length);
    const uint32_t source = source_id(peer, m.src_slot);
    if (remote_endpoint* from = t_.p_.remote(source)) {
      // Relaxed: hints for replies and names, read by the same or a later poll.
      if (request) from->peer_tag.store(m.src_tag, std::memory_order_relaxed);
      from->peer_gen.store(m.src_gen, std::memory_order_relaxed);
    }
    const bool offsets = net::is_long(kind) || kind == msg_kind::get_request || kind == msg_kind::returned;
    switch (detail::inject(*own, !request, source, shm::gen32(m.src_gen), static_cast<shm::packet_kind>(m.kind),
                           m.handler, args, m.nargs, m.length, offsets ? m.offset : 0, m.tag,
                           kind == msg_kind::get_request || kind == msg_kind::returned ? m.aux : 0, payload,
                           medium ? m.length : 0, state, medium ? tail : nullptr, m.frag_offset)) {
      case detail::inject_result::sent: return true;
      case detail::inject_result::full: return false;
      case detail::inject_result::gone: break;  // freed meanwhile
    }
    return refuse(return_reason::bad_endpoint);
  }

  bool give_back(int peer, const net::message_header& m, const uint32_t* args) noexcept override {
    return detail::give_back_unreachable(t_.p_, peer, m, args);
  }
  void after_poll() noexcept override { t_.send_deferred(); }
  void lost(int peer) noexcept override { t_.p_.found_dead(peer, "is unreachable over the network", false, true); }

 private:
  net_transport& t_;
};

net_transport::net_transport(process& p, const core::config& cfg, int rank_hint)
    : p_(p),
      net_(std::make_unique<net::network>(cfg, rank_hint, net::open_link(cfg))),
      sink_(std::make_unique<sink>(*this)), slot_segments_(cfg.max_endpoints) {
  set_doorbell(net_->watching_flag(), net_->doorbell_flag(), net_->open_flag());
}

net_transport::~net_transport() = default;

void net_transport::start(uint64_t job, int rank, std::span<const std::vector<std::byte>> addresses,
                          std::span<const std::byte> key) {
  net_->start(job, rank, addresses, *sink_, key);
}

bool net_transport::may_exist(int /*rank*/, uint32_t /*slot*/) const noexcept {
  return true;  // the owner checks slot and state on arrival
}

std::unique_ptr<remote_endpoint> net_transport::reach(int rank, uint32_t slot) noexcept {
  auto e = std::make_unique<remote_endpoint>();  // no view: the owner checks on arrival
  e->kind = transport_kind::net;
  e->via = this;
  e->rank = rank;
  e->slot = slot;
  return e;
}

void net_transport::describe(const remote_endpoint& to, tag_t& tag, uint64_t& state) const noexcept {
  // Relaxed: what the endpoint said of itself in its last message.
  tag = to.peer_tag.load(std::memory_order_relaxed);
  state = shm::alive_state(to.peer_gen.load(std::memory_order_relaxed));
}

namespace {

/// The protocol's header of message `m` from endpoint slot `src_slot`
/// (generation `src_gen`) to `to` (meant with generation `dst_gen`).
net::message_header header_of(const message& m, uint32_t src_slot, uint64_t src_gen, const remote_endpoint& to,
                              uint64_t dst_gen) noexcept {
  net::message_header h{};
  h.kind = static_cast<uint8_t>(m.kind);
  h.handler = m.handler;
  h.nargs = static_cast<uint8_t>(m.nargs);
  h.src_slot = static_cast<uint8_t>(src_slot);
  h.dst_slot = static_cast<uint8_t>(to.slot);
  h.dst_gen = dst_gen;
  h.src_gen = src_gen;
  h.tag = m.tag;
  h.length = static_cast<uint32_t>(m.length);
  h.offset = m.offset;
  h.aux = m.aux;
  return h;
}

}  // namespace

/// Sends message `m` as endpoint `from` to `to` over the network, waiting for
/// window room as `policy` says. ok, in_use (give_up and nothing sent), or
/// resource (the destination's process is unreachable; `to` is marked gone).
status net_transport::send_net(detail::endpoint_impl& from, remote_endpoint& to, const message& msg,
                               detail::when_full policy, uint64_t expect) noexcept {
  using detail::when_full;
  net::network& net = *net_;
  net::message_header m = header_of(msg, from.slot, from.generation, to, shm::generation_of(expect));
  // Relaxed: our own endpoint's tag, written by this process.
  m.src_tag = from.own.header->tag.load(std::memory_order_relaxed);
  uint32_t done = 0;
  // A big payload of a blocking send is lent to the network rather than
  // copied into its retransmission buffers; the call then returns once the
  // destination acknowledged it all (or is found unreachable). Not where the
  // network would rather copy (see network::lends_payloads).
  const size_t lend = core::settings().net_lend;
  const bool lent = lend && msg.length >= lend && policy != when_full::give_up && msg.data && net.lends_payloads();
  // A payload its destination is to read (network::reads_from) and
  // that is not lent is copied, and the copy kept until it is read: the call
  // returns at once, as a copying send does.
  // (Up to copies_most bytes of them at once, which bounds that memory as
  // the window bounds datagrams: beyond, in datagrams.)
  std::vector<std::byte> copy;
  if (!lent && net::carries_payload(static_cast<msg_kind>(m.kind)) && msg.data && msg.length >= net.reads_from() &&
      copies_bytes_.load(std::memory_order_relaxed) + msg.length <= copies_most) try {
      copy.assign(static_cast<const std::byte*>(msg.data), static_cast<const std::byte*>(msg.data) + msg.length);
    } catch (...) {  // no memory: in datagrams
    }
  const void* data = copy.empty() ? msg.data : copy.data();
  uint32_t until = 0;
  for (unsigned round = 0;; ++round) {
    const status s = net.send(to.rank, m, msg.args, data, done, lent || !copy.empty() ? &until : nullptr, lent,
                              detail::unhurried_depth > 0);
    if (s == status::ok) {
      if (!copy.empty()) keep_until_read(to.rank, m, until, std::move(copy));
      if (!lent) return s;
      for (unsigned wait = 0; !net.settled(to.rank, m, until); ++wait) {
        net.poll();
        detail::wait_for_room(from, policy, round + wait);
      }
      return s;
    }
    if (s == status::resource) {
      // Relaxed: a hint shared by this process's threads (see remote_endpoint::gone).
      to.gone.store(true, std::memory_order_relaxed);
      return s;
    }
    if (policy == when_full::give_up && done == 0) return status::in_use;
    // The window is full: acknowledgements come in through the network poll.
    net.poll();
    detail::wait_for_room(from, policy == when_full::give_up ? when_full::poll_bundle : policy, round);
  }
}

sent net_transport::send(detail::endpoint_impl& from, remote_endpoint& to, const message& m,
                         detail::when_full policy, uint64_t expect) noexcept {
  // The destination checks the segment, its tag and its own limits on
  // arrival, before any fragment lands.
  return sent::of(send_net(from, to, m, policy, expect));
}

returned_sent net_transport::send_returned(detail::endpoint_impl* from, uint32_t from_id, uint64_t from_gen,
                                           remote_endpoint& to, const message& m, uint32_t to_gen) noexcept {
  // Relaxed: what the sender told us of itself.
  const uint64_t gen = to.peer_gen.load(std::memory_order_relaxed);
  if (shm::gen32(gen) != to_gen) return returned_sent::sender_gone;
  status s;
  if (from) {
    s = send_net(*from, to, m, detail::when_full::give_up, shm::alive_state(gen));
  } else {
    // Its endpoint was freed since: sent as it, without it.
    net::message_header h = header_of(m, source_slot(from_id), from_gen, to, gen);
    uint32_t done = 0;
    s = net_->send(to.rank, h, m.args, nullptr, done);
  }
  if (s == status::resource) return returned_sent::unreachable;
  return s == status::in_use ? returned_sent::full : returned_sent::sent;
}

// send-stage: netpoll, callees too
unsigned net_transport::progress(adaptive_poller& poller) noexcept {
  const unsigned found = poll();
  const bool expecting = !found && net_->expecting();
  poller.found(found, expecting);
  if (found || expecting)
    net_->unwatch();
  else if (poller.quiet() && (!net_->watching() || net_->rung()))
    net_->watch();  // (again, after a ring that found nothing)
  return found;
}

unsigned net_transport::poll() noexcept { return net_->poll(); }
// send-stage: end

void net_transport::segment_changed(uint32_t slot, std::byte* base, size_t length) noexcept {
  const auto start = std::chrono::steady_clock::now();
  for (unsigned round = 0;; ++round) {
    {
      std::lock_guard lock(segments_mutex_);
      if (slot >= slot_segments_.size()) return;
      slot_segment& s = slot_segments_[slot];
      if (s.reading == 0) {
        s.base = base;
        s.length = length;
        return;
      }
    }
    // A long message is being read into the old segment (by the fabric, not
    // by us): it must end before that memory goes. It ends when its sender
    // answers, or fails when the sender's connection does. A sender stopped
    // for longer than the network's timeout (it cannot be made to fail) is
    // given up on: if it ever answers, the fabric writes into this memory.
    const uint32_t timeout_ms = core::settings().net_timeout_ms;
    if (timeout_ms && std::chrono::steady_clock::now() - start > std::chrono::milliseconds(2 * timeout_ms)) {
      core::log_error("endpoint %u changed its segment while a long message from the network was still being read "
                      "into it, for %u ms: its sender does not answer. Given up on; that memory may still be "
                      "written if the sender wakes",
                      slot, 2 * timeout_ms);
      std::lock_guard lock(segments_mutex_);
      slot_segments_[slot] = {base, length, 0};
      return;
    }
    net_->poll();
    if (round > 64) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

std::byte* net_transport::hold_segment(uint32_t slot, uint64_t offset, size_t n) noexcept {
  std::lock_guard lock(segments_mutex_);
  if (slot >= slot_segments_.size()) return nullptr;
  slot_segment& s = slot_segments_[slot];
  if (!s.base || offset > s.length || n > s.length - offset) return nullptr;
  ++s.reading;
  return s.base + offset;
}

void net_transport::release_segment(uint32_t slot) noexcept {
  std::lock_guard lock(segments_mutex_);
  if (slot < slot_segments_.size() && slot_segments_[slot].reading) --slot_segments_[slot].reading;
}

bool net_transport::write_segment(uint32_t slot, uint64_t offset, size_t whole, size_t at, const std::byte* data,
                                  size_t n) noexcept {
  std::lock_guard lock(segments_mutex_);  // held over the copy: the endpoint cannot drop its segment meanwhile
  if (slot >= slot_segments_.size()) return false;
  const slot_segment& s = slot_segments_[slot];
  if (!s.base || offset > s.length || whole > s.length - offset || at > whole || n > whole - at) return false;
  std::memcpy(s.base + offset + at, data, n);
  return true;
}

void net_transport::defer(int peer, const net::message_header& m, const uint32_t* args,
                          std::vector<std::byte> data) noexcept {
  deferred d{};
  d.peer = peer;
  d.m = m;
  std::memcpy(d.args, args, 4u * std::min<unsigned>(m.nargs, net::max_args));
  d.data = std::move(data);
  std::lock_guard lock(deferred_mutex_);
  deferred_.push_back(std::move(d));
  has_deferred_.store(true, std::memory_order_relaxed);
}

bool net_transport::serve_get(int peer, const net::message_header& m, const uint32_t* args) noexcept {
  // The answer of a get is a long reply with the bytes of our segment; the
  // requester's handler runs when it arrives. Copied now (the segment lock
  // cannot be held while sending: the network takes it under its own lock).
  std::vector<std::byte> data;
  {
    std::lock_guard lock(segments_mutex_);
    if (m.dst_slot >= slot_segments_.size()) return false;
    const slot_segment& s = slot_segments_[m.dst_slot];
    if (!s.base || m.offset > s.length || m.length > s.length - m.offset) return false;
    data.assign(s.base + m.offset, s.base + m.offset + m.length);
  }
  net::message_header answer = net::back_to_sender(m, msg_kind::long_reply);
  answer.src_gen = m.dst_gen;
  answer.tag = m.src_tag;
  answer.offset = m.aux;  // where the requester wants the bytes
  defer(peer, answer, args, std::move(data));
  return true;
}

void net_transport::keep_until_read(int peer, const net::message_header& m, uint32_t until,
                                    std::vector<std::byte> data) noexcept {
  deferred d{};
  d.peer = peer;
  d.m = m;
  d.until = until;
  d.data = std::move(data);
  std::lock_guard lock(lent_mutex_);
  try {
    lent_.push_back(std::move(d));
    copies_bytes_.fetch_add(lent_.back().data.size(), std::memory_order_relaxed);
  } catch (...) {  // no memory for the list: kept here, until read
    while (!net_->settled(d.peer, d.m, d.until)) net_->poll();
    return;
  }
  has_lent_.store(true, std::memory_order_relaxed);
}

void net_transport::release_lent() noexcept {
  std::lock_guard lock(lent_mutex_);
  std::erase_if(lent_, [&](const deferred& d) {
    if (!net_->settled(d.peer, d.m, d.until)) return false;
    copies_bytes_.fetch_sub(d.data.size(), std::memory_order_relaxed);
    return true;
  });
  has_lent_.store(!lent_.empty(), std::memory_order_relaxed);
}

void net_transport::send_deferred() noexcept {
  // Relaxed: hints; the lists are read under their mutexes.
  if (has_lent_.load(std::memory_order_relaxed)) release_lent();
  if (!has_deferred_.load(std::memory_order_relaxed)) return;
  // Take the list and send without its mutex: a poll holding the network's
  // lock may be adding to it (lock order: network, then this list).
  std::vector<deferred> work;
  {
    std::lock_guard lock(deferred_mutex_);
    work.swap(deferred_);
    has_deferred_.store(false, std::memory_order_relaxed);
  }
  auto sent = [&](deferred& d) {
    uint32_t done = d.done;
    // A get's answer large enough to be read by its destination is lent to
    // the network (its bytes are already a copy of ours), and kept until read.
    const bool lend = !d.data.empty() && d.data.size() >= net_->reads_from();
    const status s =
        net_->send(d.peer, d.m, d.args, d.data.empty() ? nullptr : d.data.data(), done, lend ? &d.until : nullptr,
                   false);
    d.done = done;
    if (s == status::in_use) return false;
    if (s == status::ok && lend) keep_until_read(d.peer, d.m, d.until, std::move(d.data));
    return true;  // sent, or the peer is unreachable (nobody left to tell)
  };
  work.erase(std::remove_if(work.begin(), work.end(), sent), work.end());
  if (work.empty()) return;
  std::lock_guard lock(deferred_mutex_);
  // What is left goes first next time: replies keep their order.
  deferred_.insert(deferred_.begin(), std::make_move_iterator(work.begin()), std::make_move_iterator(work.end()));
  has_deferred_.store(true, std::memory_order_relaxed);
}

void net_transport::leave(std::chrono::milliseconds d) noexcept {
  net_->linger(d);
  if (core::settings().verbose < 1) return;
  const net::statistics s = net_->stats();
  uint64_t refused = 0;
  std::string why;
  for (unsigned r = 0; r < net::refusal_count; ++r) {
    refused += s.refused[r];
    if (s.refused[r])
      why += std::string(why.empty() ? " (" : ", ") + std::to_string(s.refused[r]) + " " +
             net::to_string(static_cast<net::refusal>(r));
  }
  if (!why.empty()) why += ")";
  core::log_info("network: %llu messages sent (%llu of them read by their destination, %llu packed with others), "
                 "%llu delivered (%llu read here); datagrams %llu out, %llu in; %llu retransmitted "
                 "(%llu timeouts, %llu tail probes, %llu gaps, %llu replies again), "
                 "%llu duplicates, %llu out of order, %llu acks, %llu stalls (%llu packed datagrams resumed at a record), "
                 "%llu refused%s; faults: %llu "
                 "dropped, %llu duplicated, %llu reordered, %llu delayed",
                 (unsigned long long)s.messages_sent, (unsigned long long)s.messages_sent_by_read,
                 (unsigned long long)s.messages_packed, (unsigned long long)s.messages_delivered, (unsigned long long)s.messages_read,
                 (unsigned long long)s.datagrams_sent, (unsigned long long)s.datagrams_received,
                 (unsigned long long)s.retransmits, (unsigned long long)s.resent_timeout,
                 (unsigned long long)s.resent_probe, (unsigned long long)s.resent_gap,
                 (unsigned long long)s.resent_reply, (unsigned long long)s.duplicates,
                 (unsigned long long)s.out_of_order, (unsigned long long)s.acks_sent, (unsigned long long)s.stalls, (unsigned long long)s.resumed,
                 (unsigned long long)refused, why.c_str(), (unsigned long long)s.fault_dropped,
                 (unsigned long long)s.fault_duplicated, (unsigned long long)s.fault_reordered,
                 (unsigned long long)s.fault_delayed);
}

std::string net_transport::address_text() const { return net_->address_text(); }

network_stats net_transport::statistics() const noexcept {
  network_stats out{};
  const net::statistics s = net_->stats();
  out.datagrams_sent = s.datagrams_sent;
  out.datagrams_received = s.datagrams_received;
  out.messages_sent = s.messages_sent;
  out.messages_delivered = s.messages_delivered;
  out.retransmits = s.retransmits;
  out.duplicates = s.duplicates;
  out.out_of_order = s.out_of_order;
  out.acks_sent = s.acks_sent;
  out.stalls = s.stalls;
  using net::refusal;
  auto refused = [&](refusal r) { return s.refused[static_cast<unsigned>(r)]; };
  out.refused_truncated = refused(refusal::truncated);
  out.refused_foreign = refused(refusal::not_clump);
  out.refused_version = refused(refusal::wrong_version);
  out.refused_other_job = refused(refusal::other_job);
  out.refused_bad_rank = refused(refusal::bad_rank);
  out.refused_malformed = refused(refusal::malformed);
  out.refused_source = refused(refusal::wrong_source);
  out.refused_unauthenticated = refused(refusal::unauthenticated);
  out.refused_replayed = refused(refusal::replayed);
  out.fault_dropped = s.fault_dropped;
  out.fault_duplicated = s.fault_duplicated;
  out.fault_reordered = s.fault_reordered;
  out.fault_delayed = s.fault_delayed;
  out.peers_unreachable = s.peers_unreachable;
  out.pings_sent = s.pings_sent;
  out.covered = s.covered;
  out.messages_read = s.messages_read;
  out.messages_sent_by_read = s.messages_sent_by_read;
  out.unacknowledged = s.unacknowledged;
  out.partial = s.partial;
  return out;
}

namespace {

bool takes(const core::config& cfg) { return cfg.net == "udp" || cfg.net == "auto" || net::is_link(cfg.net); }

std::unique_ptr<node_transport> open(process& p, const core::config& cfg, int rank_hint) {
  return std::make_unique<net_transport>(p, cfg, rank_hint);
}

[[maybe_unused]] const bool registered = node_transport_maker::add({nullptr, takes, open});

}  // namespace

}  // namespace clump::am
