// The AM-2 C API (include/clump/am.h): tokens and sending. The AM_RequestN
// ... macros of am.h land here with their arguments in an array; each call
// checks what the core would refuse with a log line of its own, so that a C
// caller gets AM_ERR_BAD_ARG quietly (logged only under AMX_VerboseErrors),
// then hands the words to endpoint::send_raw / get_raw or
// token_base::reply_raw unchanged.

#include "am/c_api_impl.hpp"

#include <algorithm>
#include <cstddef>

namespace {

using namespace clump::capi;

/// Validates a message's arguments and payload length.
int check_message(const char* fn, int nargs, const int32_t* args, clump::message_kind kind, const void* data,
                  size_t nbytes) noexcept {
  if (nargs < 0 || nargs > AM_MaxShort() || (nargs > 0 && !args)) [[unlikely]]
    return fail(fn, AM_ERR_BAD_ARG, "the argument count is outside 0..AM_MaxShort() (16)");
  if (nbytes > 0 && !data) [[unlikely]]
    return fail(fn, AM_ERR_BAD_ARG, "the payload pointer is NULL but its length is not 0");
  if (kind == clump::message_kind::medium && nbytes > clump::max_medium()) [[unlikely]]
    return fail(fn, AM_ERR_BAD_ARG,
                "medium payload longer than AMX_LargestMedium() (CLUMP_MAX_MEDIUM); send it with AM_RequestXfer");
  if (kind == clump::message_kind::long_message && nbytes > clump::max_long) [[unlikely]]
    return fail(fn, AM_ERR_BAD_ARG, "long payload longer than AMX_LargestLong() (4 GiB - 1)");
  return -1;
}

const uint32_t* words(const int32_t* args) noexcept {
  // int32_t and uint32_t may alias each other: the core reads the same bits.
  return reinterpret_cast<const uint32_t*>(args);
}

int request(const char* fn, ep_t ep, int dest, clump::message_kind kind, handler_t h, const void* data,
            size_t nbytes, uintptr_t offset, bool async, int nargs, const int32_t* args) noexcept {
  if (int rc = check(fn, ep); rc >= 0) [[unlikely]]
    return rc;
  if (int rc = check_message(fn, nargs, args, kind, data, nbytes); rc >= 0) [[unlikely]]
    return rc;
  clump::endpoint& e = ep->ep;
  if (dest < 0 || dest >= e.translation_count()) [[unlikely]]
    return fail(fn, AM_ERR_BAD_ARG, "the translation index is outside the table");
  return result(fn, e.send_raw(dest, kind, h, words(args), static_cast<unsigned>(nargs), data, nbytes, offset, async));
}

int reply(const char* fn, void* token, clump::message_kind kind, handler_t h, const void* data, size_t nbytes,
          uintptr_t offset, int nargs, const int32_t* args) noexcept {
  if (!token) [[unlikely]]
    return fail(fn, AM_ERR_BAD_ARG, "the token is NULL");
  if (int rc = check_message(fn, nargs, args, kind, data, nbytes); rc >= 0) [[unlikely]]
    return rc;
  return result(fn, token_of(token).reply_raw(kind, h, words(args), static_cast<unsigned>(nargs), data, nbytes,
                                              offset));
}

}  // namespace

extern "C" {

// ---- tokens ------------------------------------------------------------------------------

int AM_GetSourceEndpoint(void* token, en_t* name) {
  if (!token || !name) return fail("AM_GetSourceEndpoint", AM_ERR_BAD_ARG, "NULL token or result pointer");
  const clump::token_base& t = token_of(token);
  *name = to_c(t.returned() ? t.returned()->destination : t.source());
  return AM_OK;
}

int AM_GetDestEndpoint(void* token, ep_t* ep) {
  if (!token || !ep) return fail("AM_GetDestEndpoint", AM_ERR_BAD_ARG, "NULL token or result pointer");
  // C handlers are only installed on C endpoints, whose clump::endpoint is
  // the first member of their wrapper.
  *ep = reinterpret_cast<amx_endpoint*>(&token_of(token).destination());
  return AM_OK;
}

int AM_GetMsgTag(void* token, tag_t* tag) {
  if (!token || !tag) return fail("AM_GetMsgTag", AM_ERR_BAD_ARG, "NULL token or result pointer");
  *tag = token_of(token).tag();
  return AM_OK;
}

int AMX_GetSourceId(void* token, int* index) {
  if (!token || !index) return fail("AMX_GetSourceId", AM_ERR_BAD_ARG, "NULL token or result pointer");
  const clump::token_base& t = token_of(token);
  *index = -1;
  const clump::returned_message* m = t.returned();
  if (!m) {
    *index = t.source_index();
    return *index >= 0 ? AM_OK : AM_ERR_RESOURCE;
  }
  // In handler 0: the entry the message was sent through, i.e. the first one
  // naming its destination (rank and slot; the generation may have moved on).
  return guarded("AMX_GetSourceId", [&] {
    const clump::endpoint& e = t.destination();
    const clump::endpoint_name& d = m->destination;
    for (int i = 0; i < e.translation_count() && d.job != 0; ++i) {
      if (!e.is_mapped(i)) continue;
      const clump::endpoint_name n = e.translation_name(i);
      if (n.rank == d.rank && n.slot == d.slot) {
        *index = i;
        return AM_OK;
      }
    }
    return AM_ERR_RESOURCE;
  });
}

int AMX_GetTokenInfo(void* token, handler_t* handler, amx_category_t* category, int* is_req) {
  if (!token) return fail("AMX_GetTokenInfo", AM_ERR_BAD_ARG, "NULL token");
  const clump::token_base& t = token_of(token);
  handler_t h = t.handler();
  auto kind = t.kind();
  bool request = t.is_request();
  if (const clump::returned_message* m = t.returned()) {  // in handler 0: the message that came back
    const int op = static_cast<int>(m->op);
    h = m->handler;
    request = op <= AM_REQUEST_XFER_M;
    kind = static_cast<clump::message_kind>((op - 1) % 3);
  }
  if (handler) *handler = h;
  if (category) *category = static_cast<amx_category_t>(kind);
  if (is_req) *is_req = request ? 1 : 0;
  return AM_OK;
}

int AMX_GetReturnedArgs(void* token, handler_t* handler, int* numargs, int32_t* args) {
  if (!token || !handler || !numargs || !args)
    return fail("AMX_GetReturnedArgs", AM_ERR_BAD_ARG, "NULL token or result pointer");
  const clump::returned_message* m = token_of(token).returned();
  if (!m) return fail("AMX_GetReturnedArgs", AM_ERR_BAD_ARG, "the token is not a returned message's (handler 0)");
  const size_t n = std::min<size_t>(m->args.size(), AM_MaxShort());
  for (size_t i = 0; i < n; ++i) args[i] = static_cast<int32_t>(m->args[i]);
  *handler = m->handler;
  *numargs = static_cast<int>(n);
  return AM_OK;
}

int AMX_enEqual(en_t a, en_t b) {
  return a.job == b.job && a.rank == b.rank && a.slot == b.slot && a.generation == b.generation;
}

// ---- sending -----------------------------------------------------------------------------

int AMX_RequestShort(ep_t ep, int dest, handler_t h, int nargs, const int32_t* args) {
  return request("AM_RequestN", ep, dest, clump::message_kind::short_message, h, nullptr, 0, 0, false, nargs, args);
}

int AMX_RequestMedium(ep_t ep, int dest, handler_t h, const void* src, size_t nbytes, int nargs,
                      const int32_t* args) {
  return request("AM_RequestIN", ep, dest, clump::message_kind::medium, h, src, nbytes, 0, false, nargs, args);
}

int AMX_RequestLong(ep_t ep, int dest, handler_t h, const void* src, size_t nbytes, uintptr_t dest_offset,
                    int nargs, const int32_t* args) {
  return request("AM_RequestXferN", ep, dest, clump::message_kind::long_message, h, src, nbytes, dest_offset, false,
                 nargs, args);
}

int AMX_RequestLongAsync(ep_t ep, int dest, handler_t h, const void* src, size_t nbytes, uintptr_t dest_offset,
                         int nargs, const int32_t* args) {
  return request("AM_RequestXferAsyncN", ep, dest, clump::message_kind::long_message, h, src, nbytes, dest_offset,
                 true, nargs, args);
}

int AMX_ReplyShort(void* token, handler_t h, int nargs, const int32_t* args) {
  return reply("AM_ReplyN", token, clump::message_kind::short_message, h, nullptr, 0, 0, nargs, args);
}

int AMX_ReplyMedium(void* token, handler_t h, const void* src, size_t nbytes, int nargs, const int32_t* args) {
  return reply("AM_ReplyIN", token, clump::message_kind::medium, h, src, nbytes, 0, nargs, args);
}

int AMX_ReplyLong(void* token, handler_t h, const void* src, size_t nbytes, uintptr_t dest_offset, int nargs,
                  const int32_t* args) {
  return reply("AM_ReplyXferN", token, clump::message_kind::long_message, h, src, nbytes, dest_offset, nargs, args);
}

int AMX_GetLong(ep_t ep, int dest, handler_t h, uintptr_t src_offset, uintptr_t dest_offset, size_t nbytes,
                int nargs, const int32_t* args) {
  constexpr const char* fn = "AM_GetXferM";
  if (int rc = check(fn, ep); rc >= 0) return rc;
  if (int rc = check_message(fn, nargs, args, clump::message_kind::long_message, nullptr, 0); rc >= 0) return rc;
  clump::endpoint& e = ep->ep;
  if (dest < 0 || dest >= e.translation_count())
    return fail(fn, AM_ERR_BAD_ARG, "the translation index is outside the table");
  const size_t seg = e.segment().size();
  if (nbytes > clump::max_long || dest_offset > seg || nbytes > seg - dest_offset)
    return fail(fn, AM_ERR_BAD_ARG, "the local range lies outside this endpoint's segment");
  return result(fn, e.get_raw(dest, h, words(args), static_cast<unsigned>(nargs), src_offset, dest_offset, nbytes));
}

}  // extern "C"
