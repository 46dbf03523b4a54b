#pragma once
// Between the am layer and the network protocol: sending an active message
// over the network, and taking messages from the network into the queues of
// this process's endpoints (so that one dispatch serves both protocols, and a
// protocol never runs a handler itself).

#include <clump/am.hpp>

#include "am/endpoint_impl.hpp"
#include "am/send.hpp"
#include "net/network.hpp"
#include "shm/packet.hpp"

namespace clump::am {

/// Our endpoint in `slot` as it is now, when it is the one a message from
/// the network meant (alive, of generation `gen`); else nullptr.
remote_endpoint* meant(process& p, uint8_t slot, uint64_t gen, uint64_t& state) noexcept;

class net_sink final : public net::sink {
 public:
  explicit net_sink(process& p) : p_(p) {}
  void write_long(int peer, const net::message_header& m, const std::byte* data, size_t n) noexcept override;
  bool deliver(int peer, const net::message_header& m, const uint32_t* args, const std::byte* payload) noexcept override;
  bool give_back(int peer, const net::message_header& m, const uint32_t* args) noexcept override;
  void after_poll() noexcept override { p_.send_deferred(); }
  void lost(int peer) noexcept override { p_.found_dead(peer, "is unreachable over the network", false, true); }

 private:
  process& p_;
};

}  // namespace clump::am

namespace clump::detail {

/// Sends one message of packet kind `kind` to `to` over the network, waiting
/// for window room as `policy` says. ok, in_use (give_up and nothing sent),
/// or resource (the destination's process is unreachable; `to` is marked gone).
status send_net(endpoint_impl& from, am::remote_endpoint& to, shm::packet_kind kind, handler_index h,
                const uint32_t* args, unsigned nargs, const void* data, size_t length, uint64_t offset, uint64_t aux,
                tag_t tag, when_full policy, uint64_t expect) noexcept;

}  // namespace clump::detail
