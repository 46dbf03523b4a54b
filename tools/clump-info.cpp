// clump-info: what this clump is and what it will do here.
//
//   clump-info              everything
//   clump-info --settings   every CLUMP_* setting, its value and where it came from
//   clump-info --limits     message sizes, handler and translation counts, queue sizes
//   clump-info --capacity   this node's shared-memory capacity and how many ranks fit

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <cstdlib>

#include <clump/am.hpp>

#include "boot/capacity.hpp"
#include "core/settings.hpp"
#include "shm/queue_block.hpp"

namespace {

void print_settings() {
  fmt::print("settings (environment variables; clump reads no others):\n");
  for (const auto& d : clump::core::all_settings()) {
    const char* env = std::getenv(d.name);
    const bool set = env && *env;
    fmt::print("  {:<28} {:<10} {}{}\n", d.name, clump::core::setting_value(d), set ? "(from environment) " : "",
               d.internal ? "(set by clumprun)" : "");
    fmt::print("  {:<28} {}\n", "", d.help);
  }
}

void print_limits() {
  const auto& c = clump::core::settings();
  fmt::print("limits:\n");
  fmt::print("  {:<34} {}\n", "short arguments (AM_MaxShort)", "16 in C (AM-2), 20 words in C++");
  fmt::print("  {:<34} {} bytes\n", "medium payload (AM_MaxMedium)", clump::max_medium());
  fmt::print("  {:<34} {} bytes (and the destination segment)\n", "long payload (AM_MaxLong)", clump::max_long);
  fmt::print("  {:<34} {}\n", "handlers per endpoint", clump::max_handlers);
  fmt::print("  {:<34} {}\n", "translations per endpoint", "256 by default, up to 65535");
  fmt::print("  {:<34} {}\n", "endpoints per process", c.max_endpoints);
  fmt::print("  {:<34} {} packets of 64 bytes\n", "request / reply queue depth", c.shm_queue_depth);
  fmt::print("  {:<34} {}\n", "medium ring per queue", clump::boot::format_bytes(c.shm_medium_ring));
  fmt::print("  {:<34} {}\n", "shared memory per endpoint",
             clump::boot::format_bytes(clump::shm::queue_block_bytes(c.shm_queue_depth, c.shm_medium_ring)));
  fmt::print("  {:<34} {}\n", "runtime segment (CLUMP_SEGMENT_SIZE)", clump::boot::format_bytes(c.segment_size));
}

void print_capacity() { fmt::print("shared memory on this node:\n{}", clump::boot::shm_capacity_report()); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"clump-info: version, settings, limits and shared-memory capacity of clump on this machine"};
  bool settings = false, limits = false, capacity = false, version = false;
  app.add_flag("--settings", settings, "every CLUMP_* setting with its value and help");
  app.add_flag("--limits", limits, "message sizes and table sizes");
  app.add_flag("--capacity", capacity, "shared memory available and how many ranks fit");
  app.add_flag("--version", version, "the version only");
  CLI11_PARSE(app, argc, argv);
  if (version) {
    fmt::print("clump {}\n", CLUMP_VERSION);
    return 0;
  }
  const bool all = !settings && !limits && !capacity;
  if (all) fmt::print("clump {}\n\n", CLUMP_VERSION);
  if (all || settings) print_settings();
  if (all) fmt::print("\n");
  if (all || limits) print_limits();
  if (all) fmt::print("\n");
  if (all || capacity) print_capacity();
  return 0;
}
