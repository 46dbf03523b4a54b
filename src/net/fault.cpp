#include "net/fault.hpp"

#include <utility>

namespace clump::net {

fault_link::fault_link(std::unique_ptr<link> inner, const core::config::fault_plan& plan, uint64_t seed_salt)
    : inner_(std::move(inner)), plan_(plan), random_(plan.seed * 0x100000001b3ull + seed_salt) {}

fault_link::fate fault_link::draw() noexcept {
  if (random_.chance(plan_.drop)) return fate::drop;
  const bool reorder = random_.chance(plan_.reorder);
  const bool delay = random_.chance(plan_.delay);
  if (reorder) return fate::reorder;
  if (delay) return fate::delay;
  return random_.chance(plan_.duplicate) ? fate::duplicate : fate::pass;
}

void fault_link::count(fate f) noexcept {
  switch (f) {
    case fate::drop: faults_.fault_dropped++; break;
    case fate::reorder: faults_.fault_reordered++; break;
    case fate::delay: faults_.fault_delayed++; break;
    case fate::duplicate: faults_.fault_duplicated++; break;
    case fate::pass: break;
  }
}

clock::time_point fault_link::opening(int rank, clock::time_point now) noexcept {
  if (plan_.open_us == 0 || rank < 0) return {};
  try {
    if (opens_.size() <= static_cast<size_t>(rank)) opens_.resize(static_cast<size_t>(rank) + 1);
  } catch (...) {
    return {};  // no memory to remember it: open
  }
  clock::time_point& at = opens_[static_cast<size_t>(rank)];
  if (at == clock::time_point{}) at = now + std::chrono::microseconds(plan_.open_us);
  return at;
}

void fault_link::queue(int rank, const std::byte* data, size_t n, const std::byte* body, size_t body_n,
                       const std::byte* tail, size_t tail_n) noexcept {
  fate f = plan_.outgoing ? draw() : fate::pass;
  // A path that is not open yet (open_us) holds what is not lost, in
  // order, as a provider holds its sends while it connects.
  const auto now = clock::now();
  const clock::time_point opens = opening(rank, now);
  if (opens > now && f != fate::drop) f = fate::delay;
  if (f == fate::reorder || f == fate::delay) {
    // Reordered: sent after the datagrams queued behind it; delayed: after
    // delay_us (or once its path opens).
    try {
      held h{rank, std::vector<std::byte>(data, data + n), false, {},
             opens > now                 ? opens
             : f == fate::delay          ? now + std::chrono::microseconds(plan_.delay_us)
                                         : clock::time_point{}};
      h.bytes.insert(h.bytes.end(), body, body + body_n);
      h.bytes.insert(h.bytes.end(), tail, tail + tail_n);
      held_out_.push_back(std::move(h));
      count(f);
    } catch (...) {
      count(fate::drop);  // no memory to hold it: lost, as a network may lose it
    }
    return;
  }
  count(f);
  if (f == fate::drop) return;
  if (f == fate::duplicate) inner_->queue(rank, data, n, body, body_n, tail, tail_n);
  inner_->queue(rank, data, n, body, body_n, tail, tail_n);
}

void fault_link::flush(clock::time_point now) noexcept {
  // Held datagrams go after this batch (reorder) or once due (delay); their
  // bytes must last until the inner link's flush.
  for (auto it = held_out_.begin(); it != held_out_.end();) {
    if (it->due <= now) {
      leaving_.push_back(std::move(*it));
      it = held_out_.erase(it);
    } else {
      ++it;
    }
  }
  for (const held& h : leaving_) inner_->queue(h.rank, h.bytes.data(), h.bytes.size());
  inner_->flush(now);
  leaving_.clear();
}

void fault_link::arrived(void* context, const std::byte* bytes, size_t n, const origin& from) {
  pass& p = *static_cast<pass*>(context);
  fault_link& self = *p.self;
  const fate f = self.draw();
  if (f == fate::reorder || f == fate::delay) {
    // Reordered: handled after the datagrams behind it (at the next receive).
    try {
      held h{-1, std::vector<std::byte>(bytes, bytes + n), from.addr != nullptr, from.addr ? *from.addr : sockaddr_in{},
             f == fate::delay ? p.now + std::chrono::microseconds(self.plan_.delay_us) : p.now};
      self.held_in_.push_back(std::move(h));
      self.count(f);
    } catch (...) {
      self.count(fate::drop);
    }
    return;
  }
  self.count(f);
  if (f == fate::drop) return;
  if (f == fate::duplicate) p.f(p.context, bytes, n, from);
  p.f(p.context, bytes, n, from);
  ++p.count;
}

unsigned fault_link::receive(clock::time_point now, on_datagram f, void* context) noexcept {
  unsigned count = 0;
  // Held datagrams first, in arrival order, once due.
  while (!held_in_.empty() && held_in_.front().due <= now) {
    const held h = std::move(held_in_.front());
    held_in_.pop_front();
    f(context, h.bytes.data(), h.bytes.size(), origin{h.has_addr ? &h.addr : nullptr});
    ++count;
  }
  if (!plan_.incoming) return count + inner_->receive(now, f, context);
  pass p{this, f, context, now};
  inner_->receive(now, &fault_link::arrived, &p);
  return count + p.count;
}

const link_counters& fault_link::counters() const noexcept {
  merged_ = inner_->counters();
  merged_.fault_dropped = faults_.fault_dropped;
  merged_.fault_duplicated = faults_.fault_duplicated;
  merged_.fault_reordered = faults_.fault_reordered;
  merged_.fault_delayed = faults_.fault_delayed;
  return merged_;
}

}  // namespace clump::net
