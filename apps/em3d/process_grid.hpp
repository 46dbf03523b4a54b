#pragma once
// Processes as a grid of blocks of space, shared by em3d and con: P split
// into 2 or 3 factors as near a square or a cube as P allows.

#include <array>
#include <cstddef>

namespace apps {

/// A grid of x * y * z cells, x fastest: cell (cx, cy, cz) is number
/// cx + x * (cy + y * cz).
struct process_grid {
  int x = 1, y = 1, z = 1;

  int cells() const noexcept { return x * y * z; }
  int index(int cx, int cy, int cz) const noexcept { return cx + x * (cy + y * cz); }
  std::array<int, 3> coords(int cell) const noexcept { return {cell % x, cell / x % y, cell / (x * y)}; }
  bool inside(int cx, int cy, int cz) const noexcept {
    return cx >= 0 && cx < x && cy >= 0 && cy < y && cz >= 0 && cz < z;
  }
};

/// `p` as `dims` (2 or 3) factors, largest first, with the smallest largest
/// factor and then the smallest second one: 4 -> 2x2x1, 8 -> 2x2x2,
/// 32 -> 4x4x2 (the SC97 paper's grid), 3 -> 3x1x1; dims 2 leaves z = 1.
inline process_grid balanced_grid(int p, int dims) {
  process_grid best{p, 1, 1};
  for (int a = 1; a <= p; ++a) {
    if (p % a) continue;
    for (int b = 1; b <= a; ++b) {
      if ((p / a) % b) continue;
      const int c = p / a / b;
      if (c > b || (dims == 2 && c != 1)) continue;
      if (a < best.x || (a == best.x && b < best.y)) best = {a, b, c};
    }
  }
  return best;
}

}  // namespace apps
