#pragma once
// The shared-memory transport: active messages to the processes of this node,
// straight into the destination endpoint's queues (src/shm), with long
// payloads copied once into its segment (mapped here), or by cross-memory
// attach into a segment in its process's own memory (cma.hpp).

#include "am/transport.hpp"

namespace clump::am {

class process;

class shm_transport final : public transport {
 public:
  explicit shm_transport(process& p) noexcept : transport(transport_kind::shm), p_(p) {}

  bool may_exist(int rank, uint32_t slot) const noexcept override;
  std::unique_ptr<remote_endpoint> reach(int rank, uint32_t slot) noexcept override;
  void describe(const remote_endpoint& to, tag_t& tag, uint64_t& state) const noexcept override;
  std::span<std::byte> mapped_segment(const remote_endpoint& to) const noexcept override;
  void wake(const remote_endpoint& to) noexcept override;
  sent send(detail::endpoint_impl& from, remote_endpoint& to, const message& m, detail::when_full policy,
            uint64_t expect) noexcept override;
  returned_sent send_returned(detail::endpoint_impl* from, uint32_t from_id, uint64_t from_gen, remote_endpoint& to,
                              const message& m, uint32_t to_gen) noexcept override;

 private:
  process& p_;
};

}  // namespace clump::am
