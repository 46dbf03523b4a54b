// Transports between nodes register themselves (src/am/transport.hpp): a
// folder that registers one makes its CLUMP_NET value valid and is opened
// when that value is set, with no edit in the AM layer. This test is such a
// folder: it registers "probe", a transport that carries nothing.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "am/process.hpp"
#include "am/transport.hpp"
#include "core/settings.hpp"

namespace {

using namespace clump;

int opened = 0;

class probe final : public am::node_transport {
 public:
  std::vector<std::byte> address_blob() const override { return {std::byte{7}}; }
  void start(uint64_t, int, std::span<const std::vector<std::byte>>, std::span<const std::byte>) override {}
  std::string address_text() const override { return "probe"; }
  network_stats statistics() const noexcept override { return {}; }
  bool may_exist(int, uint32_t) const noexcept override { return false; }
  std::unique_ptr<am::remote_endpoint> reach(int, uint32_t) noexcept override { return nullptr; }
  void describe(const am::remote_endpoint&, tag_t&, uint64_t&) const noexcept override {}
  am::sent send(detail::endpoint_impl&, am::remote_endpoint&, const am::message&, detail::when_full,
                uint64_t) noexcept override {
    return am::sent::back(return_reason::unreachable);
  }
  am::returned_sent send_returned(detail::endpoint_impl*, uint32_t, uint64_t, am::remote_endpoint&,
                                  const am::message&, uint32_t) noexcept override {
    return am::returned_sent::unreachable;
  }
};

bool takes_probe(const core::config& cfg) { return cfg.net == "probe"; }
std::unique_ptr<am::node_transport> open_probe(am::process&, const core::config&, int) {
  ++opened;
  return std::make_unique<probe>();
}
[[maybe_unused]] const bool registered = am::node_transport_maker::add({"probe", takes_probe, open_probe});

TEST(transport_registry, a_registered_transport_is_a_valid_setting_and_is_opened_when_chosen) {
  const auto& names = core::link_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "probe"), names.end());
  core::config cfg = core::settings();
  cfg.net = "probe";
  auto t = am::open_node_transport(am::process::get(), cfg, 0);
  ASSERT_TRUE(t);
  EXPECT_EQ(opened, 1);
  EXPECT_EQ(t->address_text(), "probe");
  EXPECT_EQ(t->kind(), am::transport_kind::net);
}

TEST(transport_registry, the_network_protocol_still_takes_udp) {
  core::config cfg = core::settings();
  cfg.net = "udp";
  const int before = opened;
  auto t = am::open_node_transport(am::process::get(), cfg, 0);
  ASSERT_TRUE(t);
  EXPECT_EQ(opened, before);
  EXPECT_NE(t->address_text(), "probe");
  EXPECT_FALSE(t->address_blob().empty());
}

TEST(transport_registry, a_name_no_folder_registered_is_an_error) {
  core::config cfg = core::settings();
  cfg.net = "nothing-of-this-name";
  EXPECT_THROW(am::open_node_transport(am::process::get(), cfg, 0), clump::error);
}

}  // namespace
