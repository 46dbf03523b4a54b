// The AM-2 C API (include/clump/am.h) over clump::bundle and clump::endpoint:
// the layer's reference count, the opaque bundle and endpoint objects,
// segments, tags, translations, handlers (and the trampolines that call C
// handlers), events and per-endpoint statistics. Tokens and sending are in
// c_api_send.cpp; the AMX SPMD calls, statistics formatting and AMX_FatalErr
// in c_api_spmd.cpp; what they share in c_api_impl.hpp.

#include "am/c_api_impl.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "am/process.hpp"
#include "core/log.hpp"

// en_t is clump::endpoint_name, field for field.
static_assert(sizeof(en_t) == sizeof(clump::endpoint_name) && alignof(en_t) == alignof(clump::endpoint_name));
static_assert(offsetof(en_t, job) == offsetof(clump::endpoint_name, job));
static_assert(offsetof(en_t, rank) == offsetof(clump::endpoint_name, rank));
static_assert(offsetof(en_t, slot) == offsetof(clump::endpoint_name, slot));
static_assert(offsetof(en_t, generation) == offsetof(clump::endpoint_name, generation));
// The AM-2 codes are clump's own values.
static_assert(AM_OK == static_cast<int>(clump::status::ok) &&
              AM_ERR_NOT_INIT == static_cast<int>(clump::status::not_init) &&
              AM_ERR_BAD_ARG == static_cast<int>(clump::status::bad_arg) &&
              AM_ERR_RESOURCE == static_cast<int>(clump::status::resource) &&
              AM_ERR_NOT_SENT == static_cast<int>(clump::status::not_sent) &&
              AM_ERR_IN_USE == static_cast<int>(clump::status::in_use));
static_assert(EBADTAG == static_cast<int>(clump::return_reason::bad_tag) &&
              EREPLYREJECTED == static_cast<int>(clump::return_reason::reply_rejected));
static_assert(AM_REQUEST_M == static_cast<int>(clump::message_op::request) &&
              AM_REPLY_XFER_M == static_cast<int>(clump::message_op::reply_long));
static_assert(AM_NOTEMPTY == static_cast<int>(clump::event_mask::not_empty) &&
              AM_NOEVENTS == static_cast<int>(clump::event_mask::none));
static_assert(unsigned{AM_MaxShort()} <= clump::max_args && unsigned{AM_MaxNumHandlers()} == clump::max_handlers);

extern "C" {
int AMX_VerboseErrors = 0;
int AMX_SilentMode = 0;
}

namespace clump::capi {

std::atomic<int> init_count{0};

int fail(const char* fn, int code, const char* why) noexcept {
  if (AMX_VerboseErrors && !AMX_SilentMode)
    core::log_error("%s returned %s: %s", fn, to_string(static_cast<status>(code)), why);
  return code;
}

}  // namespace clump::capi

namespace {

using namespace clump::capi;

constexpr int max_translations = 65535;

// Guards the reference count and the object lists (setup paths only).
std::mutex& setup_mutex() {
  static auto* m = new std::mutex;  // never destroyed: C calls may come from atexit handlers
  return *m;
}
std::vector<amx_bundle*>& all_bundles() {
  static auto* v = new std::vector<amx_bundle*>;
  return *v;
}

/// Frees an endpoint; the caller holds setup_mutex() and has removed it from its bundle's list.
void destroy(amx_endpoint* e) noexcept {
  e->magic = 0;
  delete e;
}
void destroy(amx_bundle* b) noexcept {
  for (amx_endpoint* e : b->eps) destroy(e);
  b->eps.clear();
  b->magic = 0;
  auto& all = all_bundles();
  all.erase(std::remove(all.begin(), all.end(), b), all.end());
  delete b;
}

// ---- handler trampolines ------------------------------------------------------------
//
// clump calls every handler as a raw_handler with the argument words in an
// array; a C handler takes them as separate int32_t parameters. One
// instantiation per argument count calls the C function through its exact
// type; a table indexed by the count picks it. The message kind in the token
// tells the short shape from the payload one.

struct c_handler final : clump::detail::holder_base {
  explicit c_handler(amx_handler_fn_t f) : fn(f) {}
  amx_handler_fn_t fn;
};

template <size_t>
using word = int32_t;

// static_cast<int32_t> of a uint32_t is the same bits (C++20: modular).
template <size_t... I>
void call_short(amx_handler_fn_t fn, void* token, const uint32_t* a, std::index_sequence<I...>) {
  reinterpret_cast<void (*)(void*, word<I>...)>(fn)(token, static_cast<int32_t>(a[I])...);
}
template <size_t... I>
void call_payload(amx_handler_fn_t fn, void* token, void* buf, size_t n, const uint32_t* a,
                  std::index_sequence<I...>) {
  reinterpret_cast<void (*)(void*, void*, size_t, word<I>...)>(fn)(token, buf, n, static_cast<int32_t>(a[I])...);
}

using short_call = void (*)(amx_handler_fn_t, void*, const uint32_t*);
using payload_call = void (*)(amx_handler_fn_t, void*, void*, size_t, const uint32_t*);

template <size_t N>
void short_n(amx_handler_fn_t fn, void* token, const uint32_t* a) {
  call_short(fn, token, a, std::make_index_sequence<N>{});
}
template <size_t N>
void payload_n(amx_handler_fn_t fn, void* token, void* buf, size_t n, const uint32_t* a) {
  call_payload(fn, token, buf, n, a, std::make_index_sequence<N>{});
}
template <size_t... N>
constexpr std::array<short_call, sizeof...(N)> short_table(std::index_sequence<N...>) {
  return {&short_n<N>...};
}
template <size_t... N>
constexpr std::array<payload_call, sizeof...(N)> payload_table(std::index_sequence<N...>) {
  return {&payload_n<N>...};
}
// Up to the core's 20 words: a C++ sender may pass more than AM_MaxShort().
constexpr auto short_calls = short_table(std::make_index_sequence<clump::max_args + 1>{});
constexpr auto payload_calls = payload_table(std::make_index_sequence<clump::max_args + 1>{});

void run_c_handler(void* ctx, clump::token_base& t, const uint32_t* args, unsigned nargs, std::byte* data,
                   size_t length) {
  const amx_handler_fn_t fn = static_cast<c_handler*>(ctx)->fn;
  if (nargs > clump::max_args) [[unlikely]]
    return;  // the dispatcher clamps; never taken
  if (t.kind_ == clump::message_kind::short_message)
    short_calls[nargs](fn, &t, args);
  else
    payload_calls[nargs](fn, &t, data, length, args);
}

void run_c_returned(void* ctx, clump::token_base& t, const uint32_t*, unsigned, std::byte*, size_t) {
  const clump::returned_message* m = t.returned();
  if (!m) [[unlikely]]
    return;  // handler 0 only ever runs for returned messages
  reinterpret_cast<void (*)(int, op_t, void*)>(static_cast<c_handler*>(ctx)->fn)(static_cast<int>(m->reason),
                                                                                 static_cast<op_t>(m->op), &t);
}

void install(amx_endpoint& e, handler_t index, amx_handler_fn_t fn) {
  auto owner = std::make_unique<c_handler>(fn);
  void* ctx = owner.get();
  // Any role, any argument count, any payload: AM-2 handlers declare none of
  // them, so the C program is trusted to register the shape its senders use.
  e.ep.set_raw_handler(index, index == 0 ? &run_c_returned : &run_c_handler, ctx, clump::detail::role::any, -1, -1,
                       std::move(owner));
}

}  // namespace

extern "C" {

// ---- limits ------------------------------------------------------------------------------

size_t AMX_LargestMedium(void) { return clump::max_medium(); }
size_t AMX_LargestLong(void) { return clump::max_long; }

int AM_MaxNumTranslations(int* ntrans) {
  if (!ntrans) return fail("AM_MaxNumTranslations", AM_ERR_BAD_ARG, "NULL pointer");
  *ntrans = max_translations;
  return AM_OK;
}

int AM_MaxSegLength(uintptr_t* nbytes) {
  if (!nbytes) return fail("AM_MaxSegLength", AM_ERR_BAD_ARG, "NULL pointer");
  *nbytes = UINTPTR_MAX;  // AM_SetSeg takes the caller's memory, whatever its size
  return AM_OK;
}

// ---- the layer ---------------------------------------------------------------------------

int AM_Init(void) {
  return guarded("AM_Init", [] {
    // AM_MaxMedium() is Berkeley's constant: every medium of that size must go.
    if (clump::max_medium() < size_t{AM_MaxMedium()})
      return fail("AM_Init", AM_ERR_RESOURCE,
                  "CLUMP_MAX_MEDIUM is below AM_MaxMedium() (65000), which AM-2 programs may send: raise it to "
                  "at least 64K (the default)");
    std::lock_guard lock(setup_mutex());
    if (init_count.load(std::memory_order_relaxed) == 0) {
      try {
        clump::am::process::get();  // joins the job
      } catch (const clump::error& e) {
        // Why the job could not be joined is said even without
        // AMX_VerboseErrors: the return code alone cannot tell it.
        if (!AMX_VerboseErrors && !AMX_SilentMode) clump::core::log_error("AM_Init: %s", e.what());
        throw;
      }
    }
    init_count.fetch_add(1, std::memory_order_release);
    return AM_OK;
  });
}

int AM_Terminate(void) {
  if (in_handler()) return fail("AM_Terminate", AM_ERR_BAD_ARG, "called from inside a handler");
  std::lock_guard lock(setup_mutex());
  const int n = init_count.load(std::memory_order_relaxed);
  if (n == 0) return fail("AM_Terminate", AM_ERR_NOT_INIT, "AM_Init has not been called");
  if (n == 1) {
    std::vector<amx_bundle*> all = all_bundles();
    for (amx_bundle* b : all) destroy(b);
  }
  init_count.store(n - 1, std::memory_order_release);
  return AM_OK;
}

// ---- bundles and endpoints ---------------------------------------------------------------

int AM_AllocateBundle(int type, eb_t* eb) {
  return guarded("AM_AllocateBundle", [&] {
    if (!initialized()) return fail("AM_AllocateBundle", AM_ERR_NOT_INIT, "AM_Init has not been called");
    if (!eb || (type != AM_SEQ && type != AM_PAR))
      return fail("AM_AllocateBundle", AM_ERR_BAD_ARG, "NULL result pointer or a mode other than AM_SEQ/AM_PAR");
    auto b = std::make_unique<amx_bundle>(type == AM_PAR ? clump::bundle_mode::parallel
                                                         : clump::bundle_mode::sequential);
    b->magic = bundle_magic;
    std::lock_guard lock(setup_mutex());
    all_bundles().push_back(b.get());
    *eb = b.release();
    return AM_OK;
  });
}

int AM_AllocateEndpoint(eb_t eb, ep_t* ep, en_t* name) {
  return guarded("AM_AllocateEndpoint", [&] {
    if (int rc = check("AM_AllocateEndpoint", eb); rc >= 0) return rc;
    if (!ep || !name) return fail("AM_AllocateEndpoint", AM_ERR_BAD_ARG, "NULL result pointer");
    auto e = std::make_unique<amx_endpoint>(eb->b);
    e->magic = endpoint_magic;
    e->owner = eb;
    std::lock_guard lock(setup_mutex());
    eb->eps.push_back(e.get());
    *name = to_c(e->ep.name());
    *ep = e.release();
    return AM_OK;
  });
}

int AM_FreeBundle(eb_t eb) {
  if (int rc = check("AM_FreeBundle", eb); rc >= 0) return rc;
  if (in_handler()) return fail("AM_FreeBundle", AM_ERR_BAD_ARG, "called from inside a handler");
  std::lock_guard lock(setup_mutex());
  destroy(eb);
  return AM_OK;
}

int AM_FreeEndpoint(ep_t ep) {
  if (int rc = check("AM_FreeEndpoint", ep); rc >= 0) return rc;
  if (in_handler()) return fail("AM_FreeEndpoint", AM_ERR_BAD_ARG, "called from inside a handler");
  std::lock_guard lock(setup_mutex());
  auto& eps = ep->owner->eps;
  eps.erase(std::remove(eps.begin(), eps.end(), ep), eps.end());
  destroy(ep);
  return AM_OK;
}

int AM_MoveEndpoint(ep_t ep, eb_t from, eb_t to) {
  return guarded("AM_MoveEndpoint", [&] {
    if (int rc = check("AM_MoveEndpoint", ep); rc >= 0) return rc;
    if (!live(from) || !live(to) || ep->owner != from)
      return fail("AM_MoveEndpoint", AM_ERR_BAD_ARG, "a bundle is not live or the endpoint is not in `from`");
    std::lock_guard lock(setup_mutex());
    ep->ep.move_to(to->b);  // throws for bundles of different modes
    from->eps.erase(std::remove(from->eps.begin(), from->eps.end(), ep), from->eps.end());
    to->eps.push_back(ep);
    ep->owner = to;
    return AM_OK;
  });
}

// ---- segment and tag ---------------------------------------------------------------------

int AM_SetSeg(ep_t ep, void* addr, uintptr_t nbytes) {
  return guarded("AM_SetSeg", [&] {
    if (int rc = check("AM_SetSeg", ep); rc >= 0) return rc;
    ep->ep.set_segment(addr, nbytes);  // throws bad_arg for NULL with a length
    return AM_OK;
  });
}

int AM_GetSeg(ep_t ep, void** addr, uintptr_t* nbytes) {
  if (int rc = check("AM_GetSeg", ep); rc >= 0) return rc;
  if (!addr || !nbytes) return fail("AM_GetSeg", AM_ERR_BAD_ARG, "NULL result pointer");
  std::span<std::byte> s = ep->ep.segment();
  *addr = s.data();
  *nbytes = s.size();
  return AM_OK;
}

void* AMX_SegmentAlloc(ep_t ep, uintptr_t nbytes) {
  void* p = nullptr;
  int rc = guarded("AMX_SegmentAlloc", [&] {
    if (int c = check("AMX_SegmentAlloc", ep); c >= 0) return c;
    if (nbytes == 0) return fail("AMX_SegmentAlloc", AM_ERR_BAD_ARG, "a segment of 0 bytes");
    p = ep->ep.allocate_segment(nbytes).data();
    return AM_OK;
  });
  return rc == AM_OK ? p : nullptr;
}

int AM_SetTag(ep_t ep, tag_t tag) {
  if (int rc = check("AM_SetTag", ep); rc >= 0) return rc;
  ep->ep.set_tag(tag);
  return AM_OK;
}

int AM_GetTag(ep_t ep, tag_t* tag) {
  if (int rc = check("AM_GetTag", ep); rc >= 0) return rc;
  if (!tag) return fail("AM_GetTag", AM_ERR_BAD_ARG, "NULL result pointer");
  *tag = ep->ep.tag();
  return AM_OK;
}

// ---- translation table -------------------------------------------------------------------

int AM_Map(ep_t ep, int index, en_t name, tag_t tag) {
  return guarded("AM_Map", [&] {
    if (int rc = check("AM_Map", ep); rc >= 0) return rc;
    ep->ep.map(index, to_cpp(name), tag);
    return AM_OK;
  });
}

int AM_MapAny(ep_t ep, int* index, en_t name, tag_t tag) {
  return guarded("AM_MapAny", [&] {
    if (int rc = check("AM_MapAny", ep); rc >= 0) return rc;
    if (!index) return fail("AM_MapAny", AM_ERR_BAD_ARG, "NULL result pointer");
    *index = ep->ep.map_any(to_cpp(name), tag);
    return AM_OK;
  });
}

int AM_UnMap(ep_t ep, int index) {
  return guarded("AM_UnMap", [&] {
    if (int rc = check("AM_UnMap", ep); rc >= 0) return rc;
    ep->ep.unmap(index);
    return AM_OK;
  });
}

int AM_GetTranslationInuse(ep_t ep, int i) {
  if (int rc = check("AM_GetTranslationInuse", ep); rc >= 0) return rc;
  if (i < 0 || i >= ep->ep.translation_count())
    return fail("AM_GetTranslationInuse", AM_ERR_BAD_ARG, "the index is outside the table");
  // Not a failure: "free" is an answer, so it is not logged.
  return ep->ep.is_mapped(i) ? AM_OK : AM_ERR_RESOURCE;
}

int AM_GetTranslationTag(ep_t ep, int i, tag_t* tag) {
  return guarded("AM_GetTranslationTag", [&] {
    if (int rc = check("AM_GetTranslationTag", ep); rc >= 0) return rc;
    if (!tag) return fail("AM_GetTranslationTag", AM_ERR_BAD_ARG, "NULL result pointer");
    *tag = ep->ep.translation_tag(i);
    return AM_OK;
  });
}

int AMX_SetTranslationTag(ep_t ep, int i, tag_t tag) {
  return guarded("AMX_SetTranslationTag", [&] {
    if (int rc = check("AMX_SetTranslationTag", ep); rc >= 0) return rc;
    ep->ep.set_translation_tag(i, tag);
    return AM_OK;
  });
}

int AM_GetTranslationName(ep_t ep, int i, en_t* name) {
  return guarded("AM_GetTranslationName", [&] {
    if (int rc = check("AM_GetTranslationName", ep); rc >= 0) return rc;
    if (!name) return fail("AM_GetTranslationName", AM_ERR_BAD_ARG, "NULL result pointer");
    *name = to_c(ep->ep.translation_name(i));
    return AM_OK;
  });
}

int AM_GetNumTranslations(ep_t ep, int* ntrans) {
  if (int rc = check("AM_GetNumTranslations", ep); rc >= 0) return rc;
  if (!ntrans) return fail("AM_GetNumTranslations", AM_ERR_BAD_ARG, "NULL result pointer");
  *ntrans = ep->ep.translation_count();
  return AM_OK;
}

int AM_SetNumTranslations(ep_t ep, int ntrans) {
  return guarded("AM_SetNumTranslations", [&] {
    if (int rc = check("AM_SetNumTranslations", ep); rc >= 0) return rc;
    ep->ep.set_translation_count(ntrans);
    return AM_OK;
  });
}

int AM_SetExpectedResources(ep_t ep, int n_endpoints, int n_outstanding_requests) {
  if (int rc = check("AM_SetExpectedResources", ep); rc >= 0) return rc;
  if (n_endpoints < 1 || n_endpoints > ep->ep.translation_count() || n_outstanding_requests < 1)
    return fail("AM_SetExpectedResources", AM_ERR_BAD_ARG,
                "n_endpoints must be 1..AM_GetNumTranslations and n_outstanding_requests at least 1");
  return AM_OK;  // the shared-memory queues are sized already (CLUMP_SHM_QUEUE_DEPTH)
}

// ---- handlers ----------------------------------------------------------------------------

// am.h's macros of the same names cast the caller's function; these are the functions under them.
#undef AM_SetHandler
#undef AM_SetHandlerAny

int AM_SetHandler(ep_t ep, handler_t handler, amx_handler_fn_t fn) {
  return guarded("AM_SetHandler", [&] {
    if (int rc = check("AM_SetHandler", ep); rc >= 0) return rc;
    if (!fn || handler >= ep->num_handlers)
      return fail("AM_SetHandler", AM_ERR_BAD_ARG, "NULL function or an index >= AM_GetNumHandlers");
    install(*ep, handler, fn);
    return AM_OK;
  });
}

int AM_SetHandlerAny(ep_t ep, handler_t* handler, amx_handler_fn_t fn) {
  return guarded("AM_SetHandlerAny", [&] {
    if (int rc = check("AM_SetHandlerAny", ep); rc >= 0) return rc;
    if (!fn || !handler) return fail("AM_SetHandlerAny", AM_ERR_BAD_ARG, "NULL function or result pointer");
    for (int i = 1; i < ep->num_handlers; ++i) {
      const auto h = static_cast<handler_t>(i);
      if (!ep->ep.has_handler(h)) {
        install(*ep, h, fn);
        *handler = h;
        return AM_OK;
      }
    }
    return fail("AM_SetHandlerAny", AM_ERR_RESOURCE, "every handler index is taken");
  });
}

int AM_GetNumHandlers(ep_t ep, int* n) {
  if (int rc = check("AM_GetNumHandlers", ep); rc >= 0) return rc;
  if (!n) return fail("AM_GetNumHandlers", AM_ERR_BAD_ARG, "NULL result pointer");
  *n = ep->num_handlers;
  return AM_OK;
}

int AM_SetNumHandlers(ep_t ep, int n) {
  if (int rc = check("AM_SetNumHandlers", ep); rc >= 0) return rc;
  if (n < 1 || n > AM_MaxNumHandlers())
    return fail("AM_SetNumHandlers", AM_ERR_BAD_ARG, "the count is outside 1..AM_MaxNumHandlers()");
  for (int i = n; i < AM_MaxNumHandlers(); ++i)
    if (ep->ep.has_handler(static_cast<handler_t>(i)))
      return fail("AM_SetNumHandlers", AM_ERR_IN_USE, "a handler is registered at an index the count would cut");
  ep->num_handlers = n;
  return AM_OK;
}

// ---- events and polling ------------------------------------------------------------------

int AM_SetEventMask(eb_t eb, int mask) {
  if (int rc = check("AM_SetEventMask", eb); rc >= 0) return rc;
  if (mask != AM_NOEVENTS && mask != AM_NOTEMPTY)
    return fail("AM_SetEventMask", AM_ERR_BAD_ARG, "the mask is neither AM_NOEVENTS nor AM_NOTEMPTY");
  eb->b.set_event_mask(static_cast<clump::event_mask>(mask));
  return AM_OK;
}

int AM_GetEventMask(eb_t eb, int* mask) {
  if (int rc = check("AM_GetEventMask", eb); rc >= 0) return rc;
  if (!mask) return fail("AM_GetEventMask", AM_ERR_BAD_ARG, "NULL result pointer");
  *mask = static_cast<int>(eb->b.get_event_mask());
  return AM_OK;
}

int AM_WaitSema(eb_t eb) {
  if (int rc = check("AM_WaitSema", eb); rc >= 0) return rc;
  // From a handler it could wait for a message only this thread would handle.
  if (in_handler()) return fail("AM_WaitSema", AM_ERR_BAD_ARG, "called from inside a handler");
  return result("AM_WaitSema", eb->b.wait());
}

int AM_Poll(eb_t eb) {
  if (int rc = check("AM_Poll", eb); rc >= 0) [[unlikely]]
    return rc;
  eb->b.poll();
  return AM_OK;
}

// ---- statistics of one endpoint ----------------------------------------------------------

int AMX_GetEndpointStatistics(ep_t ep, amx_stats_t* stats) {
  if (int rc = check("AMX_GetEndpointStatistics", ep); rc >= 0) return rc;
  if (!stats) return fail("AMX_GetEndpointStatistics", AM_ERR_BAD_ARG, "NULL result pointer");
  const clump::endpoint_stats s = ep->ep.stats();
  amx_stats_t out = AMX_initial_stats;
  for (int k = 0; k < amx_NumCategories; ++k) {
    out.RequestsSent[k] = s.requests_sent[k];
    out.RepliesSent[k] = s.replies_sent[k];
    out.RequestsReceived[k] = s.requests_received[k];
    out.RepliesReceived[k] = s.replies_received[k];
    out.RequestDataBytesSent[k] = out.RequestTotalBytesSent[k] = s.request_bytes_sent[k];
    out.ReplyDataBytesSent[k] = out.ReplyTotalBytesSent[k] = s.reply_bytes_sent[k];
  }
  out.ReturnedMessages = s.returned;
  out.TotalBytesSent = s.bytes_sent;
  out.DataBytesReceived = s.bytes_received;
  out.SendWaits = s.send_waits;
  out.Endpoints = 1;
  *stats = out;
  return AM_OK;
}

int AMX_ResetEndpointStatistics(ep_t ep) {
  if (int rc = check("AMX_ResetEndpointStatistics", ep); rc >= 0) return rc;
  ep->ep.reset_stats();
  return AM_OK;
}

}  // extern "C"
