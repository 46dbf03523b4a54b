#pragma once
// The fingerprint (keys.hpp) of every rank's keys, for the sorting programs' checks.

#include <functional>
#include <span>

#include <clump/gas.hpp>

#include "keys.hpp"

namespace apps::radix {

/// The fingerprint of every rank's keys (collective).
inline fingerprint all_fingerprint(std::span<const uint32_t> keys) {
  fingerprint f;
  for (uint32_t k : keys) f.add(k);
  uint64_t v[2] = {f.sum, f.squares};
  clump::gas::all_reduce(v, 2);
  clump::gas::all_reduce(&f.bits, 1, std::bit_xor<uint64_t>());
  return {v[0], v[1], f.bits};
}

}  // namespace apps::radix
