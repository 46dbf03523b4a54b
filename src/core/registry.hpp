#pragma once
// What folders register before main (kinds of link, transports between
// nodes): one list per kind of maker, filled by static initialisers of
// the library, read after.

#include <vector>

namespace clump::core {

template <class Maker>
std::vector<Maker>& registered() noexcept {
  static std::vector<Maker> list;
  return list;
}

}  // namespace clump::core
