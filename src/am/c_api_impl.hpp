#pragma once
// What the files of the AM-2 C API (c_api*.cpp, behind include/clump/am.h)
// share: the objects behind the opaque ep_t and eb_t, the layer's reference
// count, and the boundary helpers that turn clump's statuses and exceptions
// into AM codes.
//
// Errors: the C++ setup API throws clump::error, the data path returns a
// clump::status; both carry the AM-2 code as their numeric value, so the
// boundary passes it through. No exception crosses into C (`guarded`).
// Failures are logged only when the program sets AMX_VerboseErrors.

#include <clump/am.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <new>
#include <type_traits>
#include <vector>

#include <clump/am.hpp>
#include <clump/status.hpp>

#include "am/endpoint_impl.hpp"

struct amx_bundle {
  explicit amx_bundle(clump::bundle_mode mode) : b(mode) {}
  uint32_t magic = 0;
  clump::bundle b;
  std::vector<amx_endpoint*> eps;  // its endpoints, guarded by setup_mutex()
};

struct amx_endpoint {
  explicit amx_endpoint(clump::bundle& b) : ep(b) {}
  // First member of a standard-layout struct: the endpoint a token names
  // (token_base::destination) converts back to its wrapper for AM_GetDestEndpoint.
  clump::endpoint ep;
  uint32_t magic = 0;
  amx_bundle* owner = nullptr;
  int num_handlers = AM_MaxNumHandlers();
};
static_assert(std::is_standard_layout_v<amx_endpoint>, "AM_GetDestEndpoint relies on it");

namespace clump::capi {

// Marks live objects, so that a freed or foreign pointer is refused rather
// than followed (best effort: the mark is cleared before freeing, but freed
// memory may be reused).
inline constexpr uint32_t bundle_magic = 0x424d4141u;    // "AAMB"
inline constexpr uint32_t endpoint_magic = 0x454d4141u;  // "AAME"

/// AM_Init calls not yet undone. Acquire/release: a thread that sees the
/// layer initialised sees the process state AM_Init created.
extern std::atomic<int> init_count;

inline bool initialized() noexcept { return init_count.load(std::memory_order_acquire) > 0; }
inline bool in_handler() noexcept { return detail::handler_depth > 0; }

/// Logs a failure when the program asked for it (AMX_VerboseErrors); returns `code`.
[[gnu::cold]] int fail(const char* fn, int code, const char* why) noexcept;

/// The AM code of a data-path status (logged like `fail` when not ok).
inline int result(const char* fn, status s) noexcept {
  if (s == status::ok) [[likely]]
    return AM_OK;
  return fail(fn, static_cast<int>(s), "see the message above, if any");
}

/// Runs a setup call, turning every exception into its AM code.
template <class F>
int guarded(const char* fn, F&& f) noexcept {
  try {
    return f();
  } catch (const error& e) {
    return fail(fn, static_cast<int>(e.code()), e.what());
  } catch (const std::bad_alloc&) {
    return fail(fn, AM_ERR_RESOURCE, "out of memory");
  } catch (const std::exception& e) {
    return fail(fn, AM_ERR_RESOURCE, e.what());
  } catch (...) {
    return fail(fn, AM_ERR_RESOURCE, "unexpected exception");
  }
}

inline amx_bundle* live(eb_t b) noexcept { return b && b->magic == bundle_magic ? b : nullptr; }
inline amx_endpoint* live(ep_t e) noexcept { return e && e->magic == endpoint_magic ? e : nullptr; }

/// Checks the layer and the object; returns an AM code, or -1 when all is well.
inline int check(const char* fn, ep_t ep) noexcept {
  if (!initialized()) [[unlikely]]
    return fail(fn, AM_ERR_NOT_INIT, "AM_Init (or AMX_SPMDStartup) has not been called");
  if (!live(ep)) [[unlikely]]
    return fail(fn, AM_ERR_BAD_ARG, "the endpoint is NULL or not a live endpoint");
  return -1;
}
inline int check(const char* fn, eb_t eb) noexcept {
  if (!initialized()) [[unlikely]]
    return fail(fn, AM_ERR_NOT_INIT, "AM_Init (or AMX_SPMDStartup) has not been called");
  if (!live(eb)) [[unlikely]]
    return fail(fn, AM_ERR_BAD_ARG, "the bundle is NULL or not a live bundle");
  return -1;
}

inline en_t to_c(const endpoint_name& n) noexcept { return en_t{n.job, n.rank, n.slot, n.generation}; }
inline endpoint_name to_cpp(const en_t& n) noexcept { return endpoint_name{n.job, n.rank, n.slot, n.generation}; }

/// The `void *token` of a C handler is the dispatcher's token.
inline token_base& token_of(void* token) noexcept { return *static_cast<token_base*>(token); }

}  // namespace clump::capi
