#include "am/transport.hpp"

#include <clump/status.hpp>

#include "am/process.hpp"
#include "core/registry.hpp"
#include "core/settings.hpp"

namespace clump::am {

bool node_transport_maker::add(const node_transport_maker& m) noexcept {
  core::registered<node_transport_maker>().push_back(m);
  if (m.name) core::link_names().emplace_back(m.name);
  return true;
}

std::unique_ptr<node_transport> open_node_transport(process& p, const core::config& cfg, int rank_hint) {
  for (const node_transport_maker& m : core::registered<node_transport_maker>())
    if (m.takes(cfg)) return m.open(p, cfg, rank_hint);
  // The settings refuse a name no folder registered first.
  throw error(status::bad_arg, "opening the network", "CLUMP_NET=" + cfg.net + " names no transport of this clump");
}

}  // namespace clump::am

namespace clump {

std::string network_address() {
  am::process* p = am::process::existing();
  const am::node_transport* t = p ? p->between_nodes() : nullptr;
  return t ? t->address_text() : std::string();
}

network_stats network_statistics() noexcept {
  am::process* p = am::process::existing();
  const am::node_transport* t = p ? p->between_nodes() : nullptr;
  return t ? t->statistics() : network_stats{};
}

}  // namespace clump
