#include "net/link.hpp"

#include <clump/status.hpp>

#include "core/log.hpp"

namespace clump::net {

namespace {

std::vector<link_maker>& makers() noexcept {
  static std::vector<link_maker> list;  // filled by static initialisers, before main; read after
  return list;
}

}  // namespace

bool link_maker::add(const link_maker& m) noexcept {
  makers().push_back(m);
  core::link_names().emplace_back(m.name);
  return true;
}

std::unique_ptr<link> open_link(const core::config& cfg) {
  if (cfg.net == "udp") return nullptr;
  for (const link_maker& m : makers()) {
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

}  // namespace clump::net
