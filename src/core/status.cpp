#include <clump/status.hpp>

namespace clump {

const char* to_string(status s) noexcept {
  switch (s) {
    case status::ok: return "ok";
    case status::not_init: return "not initialised";
    case status::bad_arg: return "bad argument";
    case status::resource: return "out of resources";
    case status::not_sent: return "not sent";
    case status::in_use: return "in use";
  }
  return "unknown status";
}

static std::string describe(status s, const std::string& op, const std::string& detail, int peer) {
  std::string m = "clump: " + op;
  if (peer >= 0) m += " (peer " + std::to_string(peer) + ")";
  m += ": ";
  m += to_string(s);
  if (!detail.empty()) m += ": " + detail;
  return m;
}

error::error(status s, const std::string& operation, const std::string& detail, int peer)
    : std::runtime_error(describe(s, operation, detail, peer)), status_(s), peer_(peer) {}

}  // namespace clump
