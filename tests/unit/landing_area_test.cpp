// The rpc engine's landing area (src/async/landing.hpp): places taken and
// given back in any order never overlap, and everything comes back whole.

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "async/landing.hpp"

namespace {

using clump::async_detail::landing_area;

TEST(landing_area, takes_first_fit_rounds_to_the_unit_and_refuses_what_does_not_fit) {
  landing_area a;
  a.reset(1000);  // rounded down: 960
  EXPECT_EQ(a.size(), 960u);
  EXPECT_FALSE(a.take(0));
  EXPECT_FALSE(a.take(961));
  EXPECT_FALSE(a.take(UINT64_MAX));  // no wrap-around in the rounding
  auto x = a.take(1);
  ASSERT_TRUE(x);
  EXPECT_EQ(*x, 0u);
  auto y = a.take(65);  // two units
  ASSERT_TRUE(y);
  EXPECT_EQ(*y, 64u);
  EXPECT_EQ(a.free_bytes(), 960u - 192u);
  EXPECT_FALSE(a.take(960 - 191));
  auto z = a.take(960 - 192);
  ASSERT_TRUE(z);
  EXPECT_EQ(*z, 192u);
  EXPECT_EQ(a.free_bytes(), 0u);
  EXPECT_FALSE(a.take(1));
  a.give_back(*y, 65);
  EXPECT_EQ(*a.take(100), 64u);  // the hole it left
}

TEST(landing_area, an_empty_area_takes_nothing) {
  landing_area a;
  a.reset(0);
  EXPECT_FALSE(a.take(1));
  a.reset(63);
  EXPECT_FALSE(a.take(1));
}

TEST(landing_area, places_given_back_in_any_order_merge_into_one_and_never_overlap) {
  std::mt19937_64 rng(5);
  landing_area a;
  a.reset(1 << 20);
  struct place {
    uint64_t at, bytes;
  };
  std::vector<place> taken;
  for (int round = 0; round < 20000; ++round) {
    if (taken.empty() || rng() % 3 != 0) {
      const uint64_t bytes = 1 + rng() % 40000;
      if (auto at = a.take(bytes)) {
        for (const place& p : taken) ASSERT_TRUE(*at + bytes <= p.at || p.at + p.bytes <= *at) << "overlap";
        ASSERT_LE(*at + bytes, a.size());
        taken.push_back({*at, bytes});
      }
    } else {
      const size_t i = rng() % taken.size();
      a.give_back(taken[i].at, taken[i].bytes);
      taken.erase(taken.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  std::shuffle(taken.begin(), taken.end(), rng);
  for (const place& p : taken) a.give_back(p.at, p.bytes);
  EXPECT_EQ(a.free_bytes(), a.size());
  EXPECT_EQ(a.pieces(), 1u);
  EXPECT_EQ(*a.take(a.size()), 0u);
}

}  // namespace
