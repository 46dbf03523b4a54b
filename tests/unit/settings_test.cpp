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

TEST(settings, parse_size_refuses_signs_and_overflow_rather_than_wrap) {
  size_t v = 0;
  EXPECT_FALSE(parse_size("-1", v));       // strtoull alone takes it as 2^64 - 1
  EXPECT_FALSE(parse_size("-4096", v));
  EXPECT_FALSE(parse_size("+64M", v));
  EXPECT_FALSE(parse_size(" 64M", v));
  EXPECT_FALSE(parse_size("18446744073709551616", v));  // 2^64
  EXPECT_FALSE(parse_size("16777216T", v));              // 2^64 bytes
  EXPECT_TRUE(parse_size("16777215T", v));
  EXPECT_EQ(v, 16777215ull << 40);
}

TEST(settings, fault_plan_refuses_negative_and_huge_numbers) {
  config::fault_plan plan;
  std::string why;
  EXPECT_FALSE(parse_fault_plan("delay_us=-1", plan, why));
  EXPECT_FALSE(parse_fault_plan("delay_us=10000001", plan, why));
  EXPECT_FALSE(parse_fault_plan("seed=-7", plan, why));
  EXPECT_FALSE(parse_fault_plan("seed=99999999999999999999999", plan, why));
  EXPECT_TRUE(parse_fault_plan("delay_us=10000000,seed=7", plan, why)) << why;
  EXPECT_FALSE(parse_fault_plan("open_us=-1", plan, why));
  EXPECT_FALSE(parse_fault_plan("open_us=10000001", plan, why));
  EXPECT_NE(why.find("open_us=10000001 is more than 10 s"), std::string::npos) << why;
  EXPECT_TRUE(parse_fault_plan("open_us=300000,drop=0.1", plan, why)) << why;
  EXPECT_EQ(plan.open_us, 300000u);
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
