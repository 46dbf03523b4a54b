#include "am/net_bridge.hpp"

#include <algorithm>

#include "am/returns.hpp"
#include "core/log.hpp"
#include "core/settings.hpp"
#include "shm/queue.hpp"

namespace clump::am {

using net::msg_kind;

remote_endpoint* meant(process& p, uint8_t slot, uint64_t gen, uint64_t& state) noexcept {
  remote_endpoint* own = p.remote(source_id(p.rank(), slot));
  // Relaxed: see queue_block.hpp (state).
  state = own ? own->view.header->state.load(std::memory_order_relaxed) : 0;
  return own && state == shm::alive_state(gen) ? own : nullptr;
}

void net_sink::write_long(int /*peer*/, const net::message_header& m, const std::byte* data, size_t n) noexcept {
  // The tag and the destination's identity guard every byte: a fragment lands
  // only in the segment of the endpoint the sender meant (not one that took
  // its slot since), and only if that endpoint takes the message's tag.
  // Otherwise nothing lands, and the message is refused when it is delivered.
  uint64_t state = 0;
  remote_endpoint* own = meant(p_, m.dst_slot, m.dst_gen, state);
  // Relaxed: our own tag, written by this process.
  if (!own || !detail::tag_accepts(own->view.header->tag.load(std::memory_order_relaxed), m.tag)) return;
  p_.write_segment(m.dst_slot, m.offset, m.length, m.frag_offset, data, n);
}

bool net_sink::deliver(int peer, const net::message_header& m, const uint32_t* args,
                       const std::byte* payload) noexcept {
  const auto kind = static_cast<msg_kind>(m.kind);
  const bool request = net::is_request(kind);
  uint64_t state = 0;
  remote_endpoint* own = meant(p_, m.dst_slot, m.dst_gen, state);
  auto refuse = [&](return_reason why) {
    detail::refuse_from_network(p_, peer, m, args, why);
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
    if (p_.serve_get(peer, m, args)) return true;
  }
  const shm::queue_ref& q = request ? own->view.request : own->view.reply;
  const bool medium = kind == msg_kind::medium_request || kind == msg_kind::medium_reply;
  if (medium && 2 * shm::lines_for_bytes(m.length) > q.ring_lines) return refuse(return_reason::bad_length);
  const uint32_t source = source_id(peer, m.src_slot);
  if (remote_endpoint* from = p_.remote(source)) {
    // Relaxed: hints for replies and names, read by the same or a later poll.
    if (request) from->peer_tag.store(m.src_tag, std::memory_order_relaxed);
    from->peer_gen.store(m.src_gen, std::memory_order_relaxed);
  }
  const bool offsets = net::is_long(kind) || kind == msg_kind::get_request || kind == msg_kind::returned;
  switch (detail::inject(*own, !request, source, shm::gen32(m.src_gen), static_cast<shm::packet_kind>(m.kind),
                         m.handler, args, m.nargs, m.length, offsets ? m.offset : 0, m.tag,
                         kind == msg_kind::get_request || kind == msg_kind::returned ? m.aux : 0, payload,
                         medium ? m.length : 0, state)) {
    case detail::inject_result::sent: return true;
    case detail::inject_result::full: return false;
    case detail::inject_result::gone: break;  // freed meanwhile
  }
  return refuse(return_reason::bad_endpoint);
}

bool net_sink::give_back(int peer, const net::message_header& m, const uint32_t* args) noexcept {
  return detail::give_back_unreachable(p_, peer, m, args);
}

}  // namespace clump::am

namespace clump::detail {

status send_net(endpoint_impl& from, am::remote_endpoint& to, shm::packet_kind kind, handler_index h,
                const uint32_t* args, unsigned nargs, const void* data, size_t length, uint64_t offset, uint64_t aux,
                tag_t tag, when_full policy, uint64_t expect) noexcept {
  net::network* net = from.proc->net();
  if (!net) return status::resource;
  net::message_header m{};
  m.kind = static_cast<uint8_t>(kind);
  m.handler = h;
  m.nargs = static_cast<uint8_t>(nargs);
  m.src_slot = static_cast<uint8_t>(from.slot);
  m.dst_slot = static_cast<uint8_t>(to.slot);
  m.dst_gen = shm::generation_of(expect);
  m.src_gen = from.generation;
  // Relaxed: our own endpoint's tag, written by this process.
  m.src_tag = from.own.header->tag.load(std::memory_order_relaxed);
  m.tag = tag;
  m.length = static_cast<uint32_t>(length);
  m.offset = offset;
  m.aux = aux;
  uint32_t done = 0;
  // A big payload of a blocking send is lent to the network rather than
  // copied into its retransmission buffers; the call then returns once the
  // destination acknowledged it all (or is found unreachable). Not where the
  // network would rather copy (see network::lends_payloads).
  const size_t lend = core::settings().net_lend;
  const bool lent = lend && length >= lend && policy != when_full::give_up && data && net->lends_payloads();
  uint32_t until = 0;
  for (unsigned round = 0;; ++round) {
    const status s = net->send(to.rank, m, args, data, done, lent ? &until : nullptr);
    if (s == status::ok) {
      if (!lent) return s;
      for (unsigned wait = 0; !net->settled(to.rank, m, until); ++wait) {
        from.proc->poll_network();
        wait_for_room(from, policy, round + wait);
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
    from.proc->poll_network();
    wait_for_room(from, policy == when_full::give_up ? when_full::poll_bundle : policy, round);
  }
}

}  // namespace clump::detail

namespace clump {

std::string network_address() {
  am::process* p = am::process::existing();
  net::network* net = p ? p->net() : nullptr;
  return net ? net->address_text() : std::string();
}

network_stats network_statistics() noexcept {
  network_stats out{};
  am::process* p = am::process::existing();
  net::network* net = p ? p->net() : nullptr;
  if (!net) return out;
  const net::statistics s = net->stats();
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
  return out;
}

}  // namespace clump
