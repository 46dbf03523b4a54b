#pragma once
// The network transport: active messages to ranks on other nodes, through
// the network protocol (src/net: windows, acknowledgements, retransmission,
// liveness, authentication) over any datagram link (UDP, libfabric). What
// arrives is put into the receiving endpoint's queues (detail::inject), so
// one dispatch serves both transports, and the protocol never runs a handler.

#include <atomic>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "am/transport.hpp"
#include "core/settings.hpp"
#include "net/network.hpp"

namespace clump::am {

class process;

class net_transport final : public node_transport {
 public:
  /// Opens the network's link (before the job is joined: its address travels
  /// with the rendezvous). Throws clump::error.
  net_transport(process& p, const core::config& cfg, int rank_hint);
  ~net_transport() override;

  std::vector<std::byte> address_blob() const override { return net_->address_blob(); }
  void start(uint64_t job, int rank, std::span<const std::vector<std::byte>> addresses,
             std::span<const std::byte> key) override;
  std::string address_text() const override;
  network_stats statistics() const noexcept override;

  bool may_exist(int rank, uint32_t slot) const noexcept override;
  std::unique_ptr<remote_endpoint> reach(int rank, uint32_t slot) noexcept override;
  void describe(const remote_endpoint& to, tag_t& tag, uint64_t& state) const noexcept override;
  sent send(detail::endpoint_impl& from, remote_endpoint& to, const message& m, detail::when_full policy,
            uint64_t expect) noexcept override;
  returned_sent send_returned(detail::endpoint_impl* from, uint32_t from_id, uint64_t from_gen, remote_endpoint& to,
                              const message& m, uint32_t to_gen) noexcept override;
  unsigned progress(adaptive_poller& poller) noexcept override;
  unsigned poll() noexcept override;
  void flush() noexcept override { net_->flush(); }
  void before_sleep() noexcept override { net_->arm(); }
  void after_sleep() noexcept override { net_->disarm(); }
  void segment_changed(uint32_t slot, std::byte* base, size_t length) noexcept override;
  void peer_gone(int rank) noexcept override { net_->peer_gone(rank); }
  void leave(std::chrono::milliseconds d) noexcept override;

 private:
  class sink;
  /// Copies into slot's segment at [offset, offset + n) when [offset, offset +
  /// whole) lies inside it; false otherwise.
  bool write_segment(uint32_t slot, uint64_t offset, size_t whole, size_t at, const std::byte* data, size_t n) noexcept;
  /// Where a long message of `n` bytes at `offset` of slot's segment is to
  /// be read into, when it fits (null otherwise); the segment then stays
  /// until release_segment(slot) (segment_changed waits for it).
  std::byte* hold_segment(uint32_t slot, uint64_t offset, size_t n) noexcept;
  void release_segment(uint32_t slot) noexcept;
  /// Queues a message back over the network (with `data`, a get's answer),
  /// sent after the poll (the network's lock is held while it delivers).
  void defer(int peer, const net::message_header& m, const uint32_t* args,
             std::vector<std::byte> data = {}) noexcept;
  /// Answers get request `m` at once from our segment, without waiting for a
  /// poll (CLUMP_PROGRESS=thread); false when it does not fit the segment
  /// (it then takes the normal path and comes back).
  bool serve_get(int peer, const net::message_header& m, const uint32_t* args) noexcept;
  /// Sends what the network's deliveries left to send (returns, get answers).
  void send_deferred() noexcept;
  status send_net(detail::endpoint_impl& from, remote_endpoint& to, const message& msg, detail::when_full policy,
                  uint64_t expect) noexcept;
  /// Keeps `data`, a copy the network sent message `m` from, until the
  /// network is done with it (settled(peer, m, until)).
  void keep_until_read(int peer, const net::message_header& m, uint32_t until, std::vector<std::byte> data) noexcept;
  /// Drops the copies the network no longer needs.
  void release_lent() noexcept;

  process& p_;
  struct deferred;
  // Copies the destination reads from `data` (long messages and get answers
  // by reads), kept until the network is done with them (send_deferred, which two
  // threads may run at once: under lent_mutex_). Before net_: they outlive
  // the network, which may still expose them while it closes.
  std::mutex lent_mutex_;
  std::vector<deferred> lent_;
  std::atomic<bool> has_lent_{false};  // relaxed: a hint
  std::atomic<size_t> copies_bytes_{0};  // bytes in lent_ (relaxed: a bound, not a sync)
  static constexpr size_t copies_most = size_t{64} << 20;
  std::unique_ptr<net::network> net_;
  std::unique_ptr<sink> sink_;
  // Where a long message from the network lands: the segment of each local
  // endpoint slot, kept here because the network may deliver from any thread.
  struct slot_segment {
    std::byte* base = nullptr;
    size_t length = 0;
    unsigned reading = 0;  // long messages being read into it (hold_segment)
  };
  std::mutex segments_mutex_;  // guards slot_segments_: written by endpoints, read by any network poller
  std::vector<slot_segment> slot_segments_;
  struct deferred {  // a returned message or a get's answer, to send over the network
    int peer;
    net::message_header m;
    uint32_t args[net::max_args];
    std::vector<std::byte> data;  // a get's answer
    uint32_t done = 0;            // payload bytes handed to the network so far
    uint32_t until = 0;           // lent: the network needs `data` until settled(peer, m, until)
  };
  std::mutex deferred_mutex_;
  std::vector<deferred> deferred_;
  std::atomic<bool> has_deferred_{false};  // relaxed: a hint; the list is read under its mutex
};

}  // namespace clump::am
