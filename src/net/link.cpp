#include "net/link.hpp"

#include <clump/status.hpp>

#include <algorithm>
#include <cstdint>

#include "core/log.hpp"
#include "core/registry.hpp"
#include "net/wire.hpp"

namespace clump::net {

bool link_maker::add(const link_maker& m) noexcept {
  core::registered<link_maker>().push_back(m);
  core::link_names().emplace_back(m.name);
  return true;
}

bool is_link(const std::string& name) noexcept {
  const auto& makers = core::registered<link_maker>();
  return std::any_of(makers.begin(), makers.end(), [&](const link_maker& m) { return name == m.name; });
}

std::unique_ptr<link> open_link(const core::config& cfg) {
  if (cfg.net == "udp") return nullptr;
  for (const link_maker& m : core::registered<link_maker>()) {
    if (cfg.net == m.name) return m.open(cfg);
    if (cfg.net != "auto" || !m.present()) continue;
    try {
      return m.open(cfg);
    } catch (const error& e) {
      core::log_error("CLUMP_NET=auto: this machine has a fabric for %s, but %s; the network goes over UDP", m.name,
                      e.what());
      return nullptr;
    }
  }
  if (cfg.net == "auto") return nullptr;
  // The settings refuse any other name first.
  throw error(status::bad_arg, "opening the network", "CLUMP_NET=" + cfg.net + " names no network of this clump");
}

size_t read_threshold(const link& l, const core::config& cfg, bool authenticated) noexcept {
  if (!cfg.ofi_read_min || authenticated || !l.max_read() || !(l.reads_pay() || cfg.ofi_read_min_chosen))
    return SIZE_MAX;
  return std::max(cfg.ofi_read_min, sizeof(read_source));
}

std::string reads_text(const link& l, const core::config& cfg) {
  if (!l.max_read()) return "payloads in datagrams (the provider offers no RMA reads)";
  if (!cfg.ofi_read_min) return "payloads in datagrams (CLUMP_OFI_RMA_MIN=0)";
  if (read_threshold(l, cfg, false) == SIZE_MAX)
    return "payloads in datagrams (this provider's reads pay only when CLUMP_OFI_RMA_MIN is set)";
  return "medium and long payloads of " + std::to_string(read_threshold(l, cfg, false)) +
         " bytes and more read by their destination (RMA; in datagrams when the job authenticates)";
}

}  // namespace clump::net
