#pragma once
/// \file
/// Status codes and the exception type shared by every clump API.
///
/// The data path (sends, polls) returns a `clump::status` and never throws; setup
/// calls (creating bundles and endpoints, mapping, joining a job) throw
/// `clump::error`, which carries the status, the operation and the peer.

#include <stdexcept>
#include <string>

namespace clump {

/// Result of a clump call. The numeric values are the AM-2 return codes
/// (AM_OK, AM_ERR_NOT_INIT, ...), so the C API passes them through unchanged.
enum class status : int {
  ok = 0,         ///< done
  not_init = 1,   ///< the layer or the object is not initialised
  bad_arg = 2,    ///< an argument is out of range (handler index, size, translation index)
  resource = 3,   ///< out of a resource that will not come back by waiting
  not_sent = 4,   ///< the message could not be sent
  in_use = 5,     ///< busy now: an asynchronous call would have had to block
};

/// Human-readable name of a status ("ok", "bad argument", ...).
const char* to_string(status s) noexcept;

/// Thrown by the setup API. `what()` names the operation, the peer (when there
/// is one) and the cause, with the fix where clump knows it.
class error : public std::runtime_error {
 public:
  error(status s, const std::string& operation, const std::string& detail, int peer = -1);
  status code() const noexcept { return status_; }
  int peer() const noexcept { return peer_; }

 private:
  status status_;
  int peer_;
};

}  // namespace clump
