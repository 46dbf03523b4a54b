#pragma once
// The landing area: the part of the rpc engine's segment where big
// arguments and big results arrive, each by one long message (clump/rpc.hpp).
// A place is taken before the message is sent (the callee gives the caller
// one for its arguments; the caller takes one for a result before it asks
// for it) and given back once the call or the answer has been read.
//
// First fit over the free places, in units of 64 bytes, neighbours merged
// when given back. One thread (the engine's).

#include <cstdint>
#include <iterator>
#include <map>
#include <optional>

namespace clump::async_detail {

class landing_area {
 public:
  static constexpr uint64_t unit = 64;

  /// Starts over with `bytes` free (rounded down to the unit), none taken.
  void reset(uint64_t bytes) {
    free_.clear();
    size_ = bytes / unit * unit;
    free_bytes_ = size_;
    if (size_) free_.emplace(0, size_);
  }

  /// A place of at least `bytes` (not 0), or nothing when none is free.
  std::optional<uint64_t> take(uint64_t bytes) {
    if (bytes == 0 || bytes > size_) return std::nullopt;
    const uint64_t need = round_up(bytes);
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < need) continue;
      const uint64_t at = it->first, left = it->second - need;
      free_.erase(it);
      if (left) free_.emplace(at + need, left);
      free_bytes_ -= need;
      return at;
    }
    return std::nullopt;
  }

  /// Gives back the place at `offset` taken for `bytes`.
  void give_back(uint64_t offset, uint64_t bytes) {
    uint64_t at = offset, n = round_up(bytes);
    free_bytes_ += n;
    auto next = free_.lower_bound(at);
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == at) {
        at = prev->first;
        n += prev->second;
        free_.erase(prev);
      }
    }
    if (next != free_.end() && at + n == next->first) {
      n += next->second;
      free_.erase(next);
    }
    free_.emplace(at, n);
  }

  uint64_t size() const noexcept { return size_; }
  uint64_t free_bytes() const noexcept { return free_bytes_; }
  /// Separate free places (1 when nothing is taken).
  size_t pieces() const noexcept { return free_.size(); }

 private:
  static uint64_t round_up(uint64_t bytes) noexcept { return (bytes + unit - 1) / unit * unit; }
  std::map<uint64_t, uint64_t> free_;  // offset -> bytes
  uint64_t size_ = 0, free_bytes_ = 0;
};

}  // namespace clump::async_detail
