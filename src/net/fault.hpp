#pragma once
// Seeded fault injection for tests (CLUMP_NET_FAULT): a link that wraps any
// other (a UDP socket, a libfabric endpoint) and drops, duplicates,
// reorders and delays datagrams on the way out, on the way in, or both, so
// that the protocol above is proven to deliver exactly once over each.
// Knows nothing about the protocol: the same seed gives the same faults.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/settings.hpp"
#include "net/link.hpp"

namespace clump::net {

/// A seeded random source (splitmix64).
class random_source {
 public:
  explicit random_source(uint64_t seed) : s_(seed) {}
  uint64_t next() noexcept {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// True with probability p.
  bool chance(double p) noexcept { return p > 0 && static_cast<double>(next() >> 11) * 0x1.0p-53 < p; }

 private:
  uint64_t s_;
};

/// True when `plan` injects any fault.
inline bool injects(const core::config::fault_plan& plan) noexcept {
  return plan.drop > 0 || plan.duplicate > 0 || plan.reorder > 0 || plan.delay > 0 || plan.open_us > 0;
}

class fault_link final : public link {
 public:
  /// Wraps `inner`; `seed_salt` (the rank) makes each process's faults its own.
  fault_link(std::unique_ptr<link> inner, const core::config::fault_plan& plan, uint64_t seed_salt);

  std::string kind() const override { return inner_->kind(); }
  std::string agreement() const override { return inner_->agreement(); }
  size_t max_datagram() const noexcept override { return inner_->max_datagram(); }
  std::vector<std::byte> address() const override { return inner_->address(); }
  std::string address_text() const override { return inner_->address_text(); }
  bool add_peer(int rank, std::span<const std::byte> address) override { return inner_->add_peer(rank, address); }
  bool sent_by(int rank, const origin& from) const noexcept override { return inner_->sent_by(rank, from); }
  std::string peer_text(int rank) const override { return inner_->peer_text(rank); }
  std::string origin_text(const origin& from) const override { return inner_->origin_text(from); }

  void queue(int rank, const std::byte* data, size_t n, const std::byte* body, size_t body_n, const std::byte* tail,
             size_t tail_n) noexcept override;
  void flush(clock::time_point now) noexcept override;
  uint64_t flushes() const noexcept override { return inner_->flushes(); }
  bool holding() const noexcept override { return !held_out_.empty() || !held_in_.empty() || inner_->holding(); }
  unsigned receive(clock::time_point now, on_datagram f, void* context) noexcept override;
  int wait_fd() const noexcept override { return inner_->wait_fd(); }
  clock::duration sleep_limit() noexcept override { return inner_->sleep_limit(); }
  bool needs_progress() const noexcept override { return inner_->needs_progress(); }
  bool unfinished() const noexcept override { return inner_->unfinished(); }
  bool overdue(clock::time_point now) const noexcept override { return inner_->overdue(now); }
  // It loses datagrams on purpose: gaps must be repaired as over UDP.
  bool reliable() const noexcept override { return false; }
  const link_counters& counters() const noexcept override;
  // It sends no payload by a read (its faults are the datagrams'), but reads
  // what a peer without faults exposes to it.
  bool expose(const std::byte* p, size_t n, exposure& e) noexcept override { return inner_->expose(p, n, e); }
  void conceal(exposure& e) noexcept override { inner_->conceal(e); }
  status read(int rank, std::byte* to, size_t n, uint64_t addr, uint64_t key, uint64_t id) noexcept override {
    return inner_->read(rank, to, n, addr, key, id);
  }
  unsigned reads_done(on_read f, void* context) noexcept override { return inner_->reads_done(f, context); }

 private:
  struct held {
    int rank;                    // outgoing: the destination
    std::vector<std::byte> bytes;
    bool has_addr = false;       // incoming: where it came from, as the inner link said
    sockaddr_in addr{};
    clock::time_point due;
  };
  struct pass {  // what receive() hands each datagram the inner link gives it
    fault_link* self;
    on_datagram f;
    void* context;
    clock::time_point now;
    unsigned count = 0;
  };
  static void arrived(void* context, const std::byte* bytes, size_t n, const origin& from);
  /// What happens to the next datagram: the same draws for both directions.
  enum class fate { pass, drop, reorder, delay, duplicate };
  fate draw() noexcept;
  void count(fate f) noexcept;
  /// open_us: when the path to `rank` opens (now or earlier: open).
  clock::time_point opening(int rank, clock::time_point now) noexcept;

  std::unique_ptr<link> inner_;
  core::config::fault_plan plan_;
  random_source random_;
  std::deque<held> held_out_;  // reordered (due now: after the batch), delayed, or waiting for its path to open
  std::vector<clock::time_point> opens_;  // open_us: per destination, when its path opens (none yet: the epoch)
  std::deque<held> held_in_;
  std::vector<held> leaving_;  // sent in the current flush: kept until it returns
  link_counters faults_;       // the fault_* counters
  mutable link_counters merged_;
};

}  // namespace clump::net
