#include <gtest/gtest.h>

#include <cstring>

#include "core/settings.hpp"

using namespace clump::core;

TEST(settings, parse_size_accepts_suffixes) {
  size_t v = 0;
  EXPECT_TRUE(parse_size("4096", v));
  EXPECT_EQ(v, 4096u);
  EXPECT_TRUE(parse_size("64K", v));
  EXPECT_EQ(v, 64u << 10);
  EXPECT_TRUE(parse_size("2MiB", v));
  EXPECT_EQ(v, 2u << 20);
  EXPECT_TRUE(parse_size("1g", v));
  EXPECT_EQ(v, 1ull << 30);
}

TEST(settings, parse_size_rejects_garbage) {
  size_t v = 0;
  EXPECT_FALSE(parse_size("", v));
  EXPECT_FALSE(parse_size("lots", v));
  EXPECT_FALSE(parse_size("12Q", v));
  EXPECT_FALSE(parse_size("99999999999999999999T", v));
}

TEST(settings, every_setting_is_named_clump_and_documented) {
  for (const auto& d : all_settings()) {
    EXPECT_EQ(std::strncmp(d.name, "CLUMP_", 6), 0) << d.name;
    EXPECT_GT(std::strlen(d.help), 10u) << d.name;
  }
}

TEST(settings, nearest_name_suggests_the_misspelt_setting) {
  EXPECT_STREQ(nearest_setting("CLUMP_SHM_QUEUE_DEPHT"), "CLUMP_SHM_QUEUE_DEPTH");
  EXPECT_STREQ(nearest_setting("CLUMP_MAX_MEDUIM"), "CLUMP_MAX_MEDIUM");
}

TEST(settings, defaults_are_consistent) {
  const config& c = settings();
  EXPECT_GE(c.max_medium, 8192u);
  EXPECT_GE(c.shm_medium_ring, 2 * c.max_medium);
  EXPECT_EQ(c.shm_queue_depth & (c.shm_queue_depth - 1), 0u);
  EXPECT_EQ(c.shm_medium_ring & (c.shm_medium_ring - 1), 0u);
}
