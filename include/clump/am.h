#pragma once
/// \file
/// The AM-2 C API (Berkeley Active Messages, version 2) with the "AMX" SPMD
/// extension of AMUDP/AMMPI, over clump's endpoints and bundles. The contract
/// is AM2-API.md; this header compiles as C (C99 and later) and C++ (`extern "C"`).
///
/// A program joins its job with AMX_SPMDStartup(), which returns a bundle and
/// an endpoint whose translation index i names rank i, tags set. It gives the
/// endpoint a segment (AM_SetSeg with its own memory, or AMX_SegmentAlloc for
/// single-copy long messages), registers handlers with AM_SetHandler, sends
/// with AM_RequestN / AM_RequestIN / AM_RequestXferN and runs handlers with
/// AM_Poll:
///
/// \code
///   static void ping(void *token, int32_t v) { AM_Reply1(token, PONG, v + 1); }
///   ...
///   AM_SetHandler(ep, PING, ping);
///   AM_Request1(ep, peer, PING, 41);
///   while (!done) AM_Poll(eb);
/// \endcode
///
/// Every function returns an AM_* code (AM_OK on success) unless said
/// otherwise. NULL pointers and out-of-range values give AM_ERR_BAD_ARG, never
/// a crash; a failure is logged on stderr when AMX_VerboseErrors is set.
/// Requests may not be sent from inside a handler; a request handler may reply
/// at most once; a reply handler may not send.
///
/// Handler shapes (AM_SetHandler casts them to amx_handler_fn_t):
/// - short:  `void h(void *token, int32_t a0, ..., int32_t aN)`
/// - medium and long: `void h(void *token, void *buf, size_t nbytes, int32_t a0, ..., int32_t aN)`
/// - handler 0 (returned messages): `void h(int status, op_t opcode, void *token)`
///
/// A handler is called with exactly the arguments its message carries: it
/// must take as many int32_t as the sender passes.

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Internal: marks functions that do not return, in C++, C11 and GNU C.
#if defined(__cplusplus)
#define AMX_NORETURN_ [[noreturn]]
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define AMX_NORETURN_ _Noreturn
#else
#define AMX_NORETURN_ __attribute__((noreturn))
#endif
/// Internal: lets the compiler check AMX_FatalErr's format string.
#if defined(__GNUC__)
#define AMX_PRINTF_(f, a) __attribute__((format(printf, f, a)))
#else
#define AMX_PRINTF_(f, a)
#endif

/* ---- types ----------------------------------------------------------------- */

/// An endpoint tag: a message is delivered when the tag it is sent with (the
/// one in the sender's translation entry) equals the destination's tag.
typedef uint64_t tag_t;
/// A handler index, 0..AM_MaxNumHandlers()-1; index 0 is the returned-message handler.
typedef uint8_t handler_t;
/// The opcode given to handler 0: which kind of message came back (AM_REQUEST_M ...).
typedef int op_t;

/// An endpoint's global name: a plain value, valid in every process of the
/// job. Compare names with AMX_enEqual(). Same layout as clump::endpoint_name.
typedef struct amx_en {
  uint64_t job;         ///< the job's id
  uint32_t rank;        ///< the owner's rank
  uint32_t slot;        ///< the endpoint's slot in its process
  uint64_t generation;  ///< which of the endpoints that have held the slot (never repeats)
} en_t;

/// An endpoint (opaque): from AM_AllocateEndpoint or AMX_SPMDStartup.
typedef struct amx_endpoint *ep_t;
/// A bundle of endpoints polled together (opaque): from AM_AllocateBundle or AMX_SPMDStartup.
typedef struct amx_bundle *eb_t;

/// The generic handler pointer, Berkeley's unprototyped `void (*)()`.
/// AM_SetHandler and AM_SetHandlerAny cast the function for the caller, so
/// plain handlers need no cast (also under GCC 14, where passing an
/// incompatible pointer is an error). In C before C23 any handler converts
/// to it implicitly; compilers accept casts to and from it without
/// -Wcast-function-type warnings (in C++ and C23 it is `void (*)(void)`).
#if defined(__GNUC__) && !defined(__cplusplus)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#endif
typedef void (*amx_handler_fn_t)();
#if defined(__GNUC__) && !defined(__cplusplus)
#pragma GCC diagnostic pop
#endif

/* ---- constants --------------------------------------------------------------- */

/// Return codes.
///@{
#define AM_OK 0            ///< done
#define AM_ERR_NOT_INIT 1  ///< AM_Init has not been called (or the object is not set up)
#define AM_ERR_BAD_ARG 2   ///< a NULL pointer or an argument out of range
#define AM_ERR_RESOURCE 3  ///< out of a resource that does not come back by waiting
#define AM_ERR_NOT_SENT 4  ///< the message could not be sent
#define AM_ERR_IN_USE 5    ///< busy: an asynchronous call would have had to block, or the entry is taken
///@}

/// Reasons given to handler 0 as `status`: why a message came back.
///@{
#define EBADARGS 1        ///< the destination handler does not take these arguments
#define EBADENTRY 2       ///< the translation entry used is not mapped
#define EBADTAG 3         ///< the destination's tag does not match the tag it was sent with
#define EBADHANDLER 4     ///< no handler at that index at the destination
#define EBADSEGOFF 5      ///< a long payload falls outside the destination's segment
#define EBADLENGTH 6      ///< the payload is too long
#define EBADENDPOINT 7    ///< the destination endpoint no longer exists
#define ECONGESTION 8     ///< congestion (not produced on shared memory)
#define EUNREACHABLE 9    ///< the destination's process is gone
#define EREPLYREJECTED 10 ///< the reply was rejected
///@}

/// Opcodes given to handler 0: which kind of message came back.
///@{
#define AM_REQUEST_M 1       ///< a short request
#define AM_REQUEST_IM 2      ///< a medium request
#define AM_REQUEST_XFER_M 3  ///< a long request or an AM_GetXferM
#define AM_REPLY_M 4         ///< a short reply
#define AM_REPLY_IM 5        ///< a medium reply
#define AM_REPLY_XFER_M 6    ///< a long reply
///@}

/// Event masks for AM_SetEventMask.
///@{
#define AM_NOEVENTS 0  ///< no event: AM_WaitSema would never return
#define AM_NOTEMPTY 1  ///< a message is pending at some endpoint of the bundle
///@}

/// Bundle modes for AM_AllocateBundle.
///@{
#define AM_SEQ 0  ///< one thread at a time uses the bundle and its endpoints
#define AM_PAR 1  ///< several threads may send and poll at once
///@}

/// Tag that accepts nothing: a new endpoint has it until AM_SetTag.
#define AM_NONE ((tag_t)0)
/// Tag that accepts every message, whatever tag it was sent with.
#define AM_ALL ((tag_t)1)

/// Message categories (AMX_GetTokenInfo; the indices of the amx_stats_t arrays).
typedef enum {
  amx_Short = 0,
  amx_Medium = 1,
  amx_Long = 2,
  amx_NumCategories = 3
} amx_category_t;

/// Time in ticks of one microsecond (the latency fields of amx_stats_t).
typedef uint64_t amx_tick_t;

/// Argument words of a message at most. A constant: `int32_t a[AM_MaxShort()]` is valid.
#define AM_MaxShort() 16
/// Largest medium payload in bytes: 65000, Berkeley's value, a constant.
/// Programs size buffers by it; clump accepts mediums up to
/// AMX_LargestMedium() (the CLUMP_MAX_MEDIUM setting, 64 KiB by default), and
/// AM_Init refuses a setting below 65000.
#define AM_MaxMedium() 65000
/// Largest long payload in bytes: 65000, Berkeley's value, a constant, so
/// that programs that allocate AM_MaxLong() bytes allocate what they expect.
/// clump sends longer ones, up to AMX_LargestLong() (4 GiB - 1), to programs
/// that ask (the payload must also fit the destination segment).
#define AM_MaxLong() 65000
/// Handlers per endpoint (the default of AM_GetNumHandlers and its maximum).
#define AM_MaxNumHandlers() 256

/// clump extension: the largest medium payload a send accepts (CLUMP_MAX_MEDIUM, >= AM_MaxMedium()).
size_t AMX_LargestMedium(void);
/// clump extension: the largest long payload a send accepts (4 GiB - 1, >= AM_MaxLong()).
size_t AMX_LargestLong(void);
/// Stores the largest translation table size (65535) in `*ntrans`. AM_ERR_BAD_ARG for NULL.
int AM_MaxNumTranslations(int *ntrans);
/// Stores the largest segment length AM_SetSeg accepts in `*nbytes`. AM_ERR_BAD_ARG for NULL.
int AM_MaxSegLength(uintptr_t *nbytes);

/* ---- the layer --------------------------------------------------------------- */

/// Initialises the layer and joins the job (a job of one when not started by
/// clumprun). Counted: each call needs an AM_Terminate. AM_ERR_RESOURCE when
/// joining the job fails (the cause is logged).
int AM_Init(void);
/// Undoes one AM_Init; the last one frees every bundle and endpoint the C API
/// allocated. AM_ERR_NOT_INIT when the layer is not initialised.
int AM_Terminate(void);

/* ---- bundles and endpoints ------------------------------------------------------- */

/// Allocates a bundle of mode AM_SEQ or AM_PAR into `*eb`. AM_ERR_BAD_ARG for
/// another mode or NULL; AM_ERR_RESOURCE when the process has no wake word left.
int AM_AllocateBundle(int type, eb_t *eb);
/// Allocates an endpoint in `eb`; stores it in `*ep` and its global name in
/// `*name`. Its tag is AM_NONE, it has no segment, no translations and no
/// handlers. AM_ERR_RESOURCE when the process has no endpoint slot left (CLUMP_MAX_ENDPOINTS).
int AM_AllocateEndpoint(eb_t eb, ep_t *ep, en_t *name);
/// Frees a bundle and every endpoint in it. Not from inside a handler.
int AM_FreeBundle(eb_t eb);
/// Frees an endpoint. Messages sent to it afterwards come back to their
/// senders' handler 0 (EBADENDPOINT); messages still queued at it are
/// dropped, so free an endpoint only once its peers have stopped sending
/// (e.g. after AMX_SPMDBarrier). Not from inside a handler.
int AM_FreeEndpoint(ep_t ep);
/// Moves `ep` from bundle `from` to bundle `to`. AM_ERR_BAD_ARG when `ep` is
/// not in `from` or the bundles' modes differ.
int AM_MoveEndpoint(ep_t ep, eb_t from, eb_t to);

/* ---- segment and tag ------------------------------------------------------------- */

/// Makes [addr, addr + nbytes) the endpoint's segment: the memory long
/// messages write into and AM_GetXferM reads from. The memory stays the
/// caller's. Memory from elsewhere than AMX_SegmentAlloc receives long
/// payloads through a bounded staging ring (one extra copy). AM_ERR_BAD_ARG
/// for a NULL address with a non-zero length.
int AM_SetSeg(ep_t ep, void *addr, uintptr_t nbytes);
/// Stores the segment's address and length (NULL and 0 when none).
int AM_GetSeg(ep_t ep, void **addr, uintptr_t *nbytes);
/// clump extension: allocates a segment of `nbytes` in the process's shared
/// region, makes it the endpoint's segment (freeing one allocated before) and
/// returns its address; NULL on failure (bad endpoint, out of memory: logged).
/// Long messages into it, and AM_GetXferM from it, take a single memcpy. The
/// memory belongs to the endpoint and is freed with it.
void *AMX_SegmentAlloc(ep_t ep, uintptr_t nbytes);
/// Sets the endpoint's tag: it receives the messages sent with this tag
/// (AM_ALL: every message; AM_NONE: none).
int AM_SetTag(ep_t ep, tag_t tag);
/// Stores the endpoint's tag in `*tag`.
int AM_GetTag(ep_t ep, tag_t *tag);

/* ---- translation table ----------------------------------------------------------- */

/// Maps translation entry `index` to the endpoint `name`, sending with `tag`.
/// AM_ERR_BAD_ARG for an index outside the table or a name outside this job;
/// AM_ERR_IN_USE when the entry is mapped already.
int AM_Map(ep_t ep, int index, en_t name, tag_t tag);
/// Maps the first free entry and stores its index. AM_ERR_RESOURCE when the table is full.
int AM_MapAny(ep_t ep, int *index, en_t name, tag_t tag);
/// Unmaps an entry. AM_ERR_BAD_ARG when it is not mapped.
int AM_UnMap(ep_t ep, int index);
/// AM_OK when entry `i` is mapped, AM_ERR_RESOURCE when it is free,
/// AM_ERR_BAD_ARG when `i` is outside the table.
int AM_GetTranslationInuse(ep_t ep, int i);
/// Stores entry `i`'s tag. AM_ERR_BAD_ARG when it is not mapped.
int AM_GetTranslationTag(ep_t ep, int i, tag_t *tag);
/// Changes the tag mapped entry `i` sends with (its name stays).
/// AM_ERR_BAD_ARG when `i` is outside the table or not mapped.
int AMX_SetTranslationTag(ep_t ep, int i, tag_t tag);
/// Stores entry `i`'s endpoint name. AM_ERR_BAD_ARG when it is not mapped.
int AM_GetTranslationName(ep_t ep, int i, en_t *name);
/// Stores the table size (256 for a new endpoint; at least NumProcs after AMX_SPMDStartup).
int AM_GetNumTranslations(ep_t ep, int *ntrans);
/// Resizes the table to 1..65535 entries. AM_ERR_IN_USE when an entry that
/// would be cut is mapped.
int AM_SetNumTranslations(ep_t ep, int ntrans);
/// Announces how many endpoints this one will talk to (1..table size) and how
/// many requests it keeps outstanding (>= 1). Validated, then advisory: the
/// shared-memory queues are sized by CLUMP_SHM_QUEUE_DEPTH.
int AM_SetExpectedResources(ep_t ep, int n_endpoints, int n_outstanding_requests);

/* ---- handlers -------------------------------------------------------------------- */

/// Registers `fn` at `handler` (0: the returned-message handler, which has
/// its own shape). Replaces a handler already there. Register handlers
/// before messages for them can arrive, and not while another thread polls
/// the endpoint's bundle. Without a handler 0, an undeliverable message
/// aborts the process with a message saying why. AM_ERR_BAD_ARG for a NULL
/// function or an index >= AM_GetNumHandlers.
int AM_SetHandler(ep_t ep, handler_t handler, amx_handler_fn_t fn);
/// Registers `fn` at the lowest free index from 1 and stores it in
/// `*handler`. AM_ERR_RESOURCE when every index is taken.
int AM_SetHandlerAny(ep_t ep, handler_t *handler, amx_handler_fn_t fn);
/// The calls above through Berkeley's macros, which cast the handler.
///@{
#define AM_SetHandler(ep, handler, fn) AM_SetHandler((ep), (handler), (amx_handler_fn_t)(fn))
#define AM_SetHandlerAny(ep, handler, fn) AM_SetHandlerAny((ep), (handler), (amx_handler_fn_t)(fn))
///@}
/// Stores the number of usable handler indices (AM_MaxNumHandlers() unless lowered).
int AM_GetNumHandlers(ep_t ep, int *n);
/// Sets the number of usable handler indices, 1..AM_MaxNumHandlers().
/// AM_ERR_IN_USE when a handler is registered at an index it would cut.
int AM_SetNumHandlers(ep_t ep, int n);

/* ---- events and polling ---------------------------------------------------------- */

/// Sets the event AM_WaitSema waits for: AM_NOEVENTS or AM_NOTEMPTY. The mask
/// falls back to AM_NOEVENTS once AM_WaitSema has seen its event.
int AM_SetEventMask(eb_t eb, int mask);
/// Stores the bundle's event mask.
int AM_GetEventMask(eb_t eb, int *mask);
/// Sleeps (in the kernel, without spinning) until the mask's event: a message
/// pending at some endpoint of the bundle. Runs no handler: call AM_Poll next.
/// AM_ERR_BAD_ARG when the mask is AM_NOEVENTS (it would never return).
int AM_WaitSema(eb_t eb);
/// Runs the handlers of pending messages of every endpoint of the bundle, a
/// bounded number per queue (CLUMP_POLL_BATCH). Cheap when nothing is
/// pending; does nothing inside a handler.
int AM_Poll(eb_t eb);

/* ---- tokens (valid only inside the handler that received them) -------------------- */

/// The sender's name; in handler 0, the name of the endpoint the message was
/// going to (all zero when it never left, e.g. EBADENTRY).
int AM_GetSourceEndpoint(void *token, en_t *name);
/// The endpoint the message arrived at (in handler 0: the one it came back to).
int AM_GetDestEndpoint(void *token, ep_t *ep);
/// The tag the message was sent with.
int AM_GetMsgTag(void *token, tag_t *tag);
/// The translation index under which the receiving endpoint knows the
/// sender (in handler 0: the destination it was sent to). AM_ERR_RESOURCE,
/// with `*index` = -1, when no entry names it.
int AMX_GetSourceId(void *token, int *index);
/// Which message the token belongs to: its handler index, its category
/// (amx_Short, amx_Medium, amx_Long) and whether it is a request (`*is_req`
/// 1) or a reply (0). In handler 0 they describe the returned message. Any
/// result pointer may be NULL. A clump extension (AMUDP has no such call).
int AMX_GetTokenInfo(void *token, handler_t *handler, amx_category_t *category, int *is_req);
/// In handler 0: the returned message's handler index, its argument count
/// and its arguments (`args` holds AM_MaxShort() words; `*numargs` says how
/// many were stored). AM_ERR_BAD_ARG outside handler 0.
int AMX_GetReturnedArgs(void *token, handler_t *handler, int *numargs, int32_t *args);
/// Non-zero when `a` and `b` name the same endpoint.
int AMX_enEqual(en_t a, en_t b);

/* ---- sending ---------------------------------------------------------------------
 * The AM_RequestN ... macros below call these functions with an array of
 * `nargs` int32_t (each macro argument is converted to int32_t). `dest` is a
 * translation index. A request blocks (running the bundle's handlers) only
 * while the destination's queue is full. Undeliverable messages (unmapped
 * entry, wrong tag, no handler, outside the segment, endpoint gone) return
 * AM_OK here and come back to handler 0. AM_ERR_BAD_ARG: NULL endpoint or
 * token, nargs outside 0..AM_MaxShort(), a translation index outside the
 * table, a payload longer than the limit, a NULL payload with a length, a
 * request from inside a handler, a reply from a reply handler or a second
 * reply. */

/// A short request: AM_Request0 .. AM_Request16.
int AMX_RequestShort(ep_t ep, int dest, handler_t h, int nargs, const int32_t *args);
/// A medium request: the `nbytes` <= AM_MaxMedium() bytes at `src` are copied
/// before it returns; the handler gets them in a temporary buffer.
int AMX_RequestMedium(ep_t ep, int dest, handler_t h, const void *src, size_t nbytes, int nargs,
                      const int32_t *args);
/// A long request: the `nbytes` <= AM_MaxLong() bytes at `src` land at
/// `dest_offset` in the destination's segment before its handler runs there;
/// `src` may be reused when it returns.
int AMX_RequestLong(ep_t ep, int dest, handler_t h, const void *src, size_t nbytes, uintptr_t dest_offset,
                    int nargs, const int32_t *args);
/// As AMX_RequestLong, but AM_ERR_IN_USE (nothing sent) instead of blocking
/// when the destination's queue is full. (Into a segment outside shared
/// memory, a payload longer than AM_MaxMedium() travels in pieces; once the
/// first is sent, the call waits for room for the others.)
int AMX_RequestLongAsync(ep_t ep, int dest, handler_t h, const void *src, size_t nbytes, uintptr_t dest_offset,
                         int nargs, const int32_t *args);
/// A short reply, from a request handler (at most one reply per request).
int AMX_ReplyShort(void *token, handler_t h, int nargs, const int32_t *args);
/// A medium reply.
int AMX_ReplyMedium(void *token, handler_t h, const void *src, size_t nbytes, int nargs, const int32_t *args);
/// A long reply into the requester's segment at `dest_offset`.
int AMX_ReplyLong(void *token, handler_t h, const void *src, size_t nbytes, uintptr_t dest_offset, int nargs,
                  const int32_t *args);
/// Pulls `nbytes` at `src_offset` of entry `dest`'s segment into this
/// endpoint's segment at `dest_offset`; then handler `h` runs here, as a long
/// reply handler, with the data. AM_ERR_BAD_ARG when the local range lies
/// outside this endpoint's segment; a remote range outside the destination's
/// segment comes back to handler 0 (EBADSEGOFF).
int AMX_GetLong(ep_t ep, int dest, handler_t h, uintptr_t src_offset, uintptr_t dest_offset, size_t nbytes,
                int nargs, const int32_t *args);

/// The argument array of the sending macros: a temporary that lives until the
/// end of the call's full expression (C: compound literal; C++: prvalue).
typedef struct amx_args {
  int32_t w[AM_MaxShort()];
} amx_args_t;

/// Internal helpers of the sending macros: AMX_ARGS_ makes the temporary
/// array, AMX_NOARGS_ stands for no arguments, AMX_I32_ converts one argument
/// to int32_t (as a C cast: an out-of-range value keeps its low 32 bits), and
/// AMX_Wn_ converts a list of n arguments.
#ifdef __cplusplus
#define AMX_ARGS_(...) (::amx_args_t{{__VA_ARGS__}}.w)
#define AMX_NOARGS_ nullptr
#else
#define AMX_ARGS_(...) ((amx_args_t){{__VA_ARGS__}}.w)
#define AMX_NOARGS_ ((const int32_t *)0)
#endif
#define AMX_I32_(x) ((int32_t)(x))

/// Internal: AMX_Wn_(a0, ..., an-1) is the list of the n arguments converted to int32_t.
///@{
#define AMX_W1_(a0) AMX_I32_(a0)
#define AMX_W2_(a0, a1) AMX_W1_(a0), AMX_I32_(a1)
#define AMX_W3_(a0, a1, a2) AMX_W2_(a0, a1), AMX_I32_(a2)
#define AMX_W4_(a0, a1, a2, a3) AMX_W3_(a0, a1, a2), AMX_I32_(a3)
#define AMX_W5_(a0, a1, a2, a3, a4) AMX_W4_(a0, a1, a2, a3), AMX_I32_(a4)
#define AMX_W6_(a0, a1, a2, a3, a4, a5) AMX_W5_(a0, a1, a2, a3, a4), AMX_I32_(a5)
#define AMX_W7_(a0, a1, a2, a3, a4, a5, a6) AMX_W6_(a0, a1, a2, a3, a4, a5), AMX_I32_(a6)
#define AMX_W8_(a0, a1, a2, a3, a4, a5, a6, a7) AMX_W7_(a0, a1, a2, a3, a4, a5, a6), AMX_I32_(a7)
#define AMX_W9_(a0, a1, a2, a3, a4, a5, a6, a7, a8) AMX_W8_(a0, a1, a2, a3, a4, a5, a6, a7), AMX_I32_(a8)
#define AMX_W10_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9) AMX_W9_(a0, a1, a2, a3, a4, a5, a6, a7, a8), AMX_I32_(a9)
#define AMX_W11_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10) AMX_W10_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9), AMX_I32_(a10)
#define AMX_W12_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11) AMX_W11_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10), AMX_I32_(a11)
#define AMX_W13_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12) AMX_W12_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11), AMX_I32_(a12)
#define AMX_W14_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13) AMX_W13_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12), AMX_I32_(a13)
#define AMX_W15_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14) AMX_W14_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13), AMX_I32_(a14)
#define AMX_W16_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15) AMX_W15_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14), AMX_I32_(a15)
///@}

/// AM_RequestN(ep, dest, h, a0 ... aN-1), N = 0..16: a short request to translation
/// entry `dest`, handler `h` (AMX_RequestShort).
///@{
#define AM_Request0(ep, dest, h) \
  AMX_RequestShort((ep), (dest), (h), 0, AMX_NOARGS_)
#define AM_Request1(ep, dest, h, a0) \
  AMX_RequestShort((ep), (dest), (h), 1, AMX_ARGS_(AMX_W1_(a0)))
#define AM_Request2(ep, dest, h, a0, a1) \
  AMX_RequestShort((ep), (dest), (h), 2, AMX_ARGS_(AMX_W2_(a0, a1)))
#define AM_Request3(ep, dest, h, a0, a1, a2) \
  AMX_RequestShort((ep), (dest), (h), 3, AMX_ARGS_(AMX_W3_(a0, a1, a2)))
#define AM_Request4(ep, dest, h, a0, a1, a2, a3) \
  AMX_RequestShort((ep), (dest), (h), 4, AMX_ARGS_(AMX_W4_(a0, a1, a2, a3)))
#define AM_Request5(ep, dest, h, a0, a1, a2, a3, a4) \
  AMX_RequestShort((ep), (dest), (h), 5, AMX_ARGS_(AMX_W5_(a0, a1, a2, a3, a4)))
#define AM_Request6(ep, dest, h, a0, a1, a2, a3, a4, a5) \
  AMX_RequestShort((ep), (dest), (h), 6, AMX_ARGS_(AMX_W6_(a0, a1, a2, a3, a4, a5)))
#define AM_Request7(ep, dest, h, a0, a1, a2, a3, a4, a5, a6) \
  AMX_RequestShort((ep), (dest), (h), 7, AMX_ARGS_(AMX_W7_(a0, a1, a2, a3, a4, a5, a6)))
#define AM_Request8(ep, dest, h, a0, a1, a2, a3, a4, a5, a6, a7) \
  AMX_RequestShort((ep), (dest), (h), 8, AMX_ARGS_(AMX_W8_(a0, a1, a2, a3, a4, a5, a6, a7)))
#define AM_Request9(ep, dest, h, a0, a1, a2, a3, a4, a5, a6, a7, a8) \
  AMX_RequestShort((ep), (dest), (h), 9, AMX_ARGS_(AMX_W9_(a0, a1, a2, a3, a4, a5, a6, a7, a8)))
#define AM_Request10(ep, dest, h, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9) \
  AMX_RequestShort((ep), (dest), (h), 10, AMX_ARGS_(AMX_W10_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9)))
#define AM_Request11(ep, dest, h, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10) \
  AMX_RequestShort((ep), (dest), (h), 11, AMX_ARGS_(AMX_W11_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10)))
#define AM_Request12(ep, dest, h, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11) \
  AMX_RequestShort((ep), (dest), (h), 12, AMX_ARGS_(AMX_W12_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11)))
#define AM_Request13(ep, dest, h, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12) \
  AMX_RequestShort((ep), (dest), (h), 13, AMX_ARGS_(AMX_W13_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12)))
#define AM_Request14(ep, dest, h, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13) \
  AMX_RequestShort((ep), (dest), (h), 14, AMX_ARGS_(AMX_W14_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13)))
#define AM_Request15(ep, dest, h, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14) \
  AMX_RequestShort((ep), (dest), (h), 15, AMX_ARGS_(AMX_W15_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14)))
#define AM_Request16(ep, dest, h, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15) \
  AMX_RequestShort((ep), (dest), (h), 16, AMX_ARGS_(AMX_W16_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15)))
///@}

/// AM_RequestIN(ep, dest, h, src, nbytes, a0 ...): a medium request; `src` is copied
/// before it returns (AMX_RequestMedium).
///@{
#define AM_RequestI0(ep, dest, h, src, nbytes) \
  AMX_RequestMedium((ep), (dest), (h), (src), (nbytes), 0, AMX_NOARGS_)
#define AM_RequestI1(ep, dest, h, src, nbytes, a0) \
  AMX_RequestMedium((ep), (dest), (h), (src), (nbytes), 1, AMX_ARGS_(AMX_W1_(a0)))
#define AM_RequestI2(ep, dest, h, src, nbytes, a0, a1) \
  AMX_RequestMedium((ep), (dest), (h), (src), (nbytes), 2, AMX_ARGS_(AMX_W2_(a0, a1)))
#define AM_RequestI3(ep, dest, h, src, nbytes, a0, a1, a2) \
  AMX_RequestMedium((ep), (dest), (h), (src), (nbytes), 3, AMX_ARGS_(AMX_W3_(a0, a1, a2)))
#define AM_RequestI4(ep, dest, h, src, nbytes, a0, a1, a2, a3) \
  AMX_RequestMedium((ep), (dest), (h), (src), (nbytes), 4, AMX_ARGS_(AMX_W4_(a0, a1, a2, a3)))
#define AM_RequestI5(ep, dest, h, src, nbytes, a0, a1, a2, a3, a4) \
  AMX_RequestMedium((ep), (dest), (h), (src), (nbytes), 5, AMX_ARGS_(AMX_W5_(a0, a1, a2, a3, a4)))
#define AM_RequestI6(ep, dest, h, src, nbytes, a0, a1, a2, a3, a4, a5) \
  AMX_RequestMedium((ep), (dest), (h), (src), (nbytes), 6, AMX_ARGS_(AMX_W6_(a0, a1, a2, a3, a4, a5)))
#define AM_RequestI7(ep, dest, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6) \
  AMX_RequestMedium((ep), (dest), (h), (src), (nbytes), 7, AMX_ARGS_(AMX_W7_(a0, a1, a2, a3, a4, a5, a6)))
#define AM_RequestI8(ep, dest, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7) \
  AMX_RequestMedium((ep), (dest), (h), (src), (nbytes), 8, AMX_ARGS_(AMX_W8_(a0, a1, a2, a3, a4, a5, a6, a7)))
#define AM_RequestI9(ep, dest, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8) \
  AMX_RequestMedium((ep), (dest), (h), (src), (nbytes), 9, AMX_ARGS_(AMX_W9_(a0, a1, a2, a3, a4, a5, a6, a7, a8)))
#define AM_RequestI10(ep, dest, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9) \
  AMX_RequestMedium((ep), (dest), (h), (src), (nbytes), 10, AMX_ARGS_(AMX_W10_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9)))
#define AM_RequestI11(ep, dest, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10) \
  AMX_RequestMedium((ep), (dest), (h), (src), (nbytes), 11, AMX_ARGS_(AMX_W11_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10)))
#define AM_RequestI12(ep, dest, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11) \
  AMX_RequestMedium((ep), (dest), (h), (src), (nbytes), 12, AMX_ARGS_(AMX_W12_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11)))
#define AM_RequestI13(ep, dest, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12) \
  AMX_RequestMedium((ep), (dest), (h), (src), (nbytes), 13, AMX_ARGS_(AMX_W13_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12)))
#define AM_RequestI14(ep, dest, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13) \
  AMX_RequestMedium((ep), (dest), (h), (src), (nbytes), 14, AMX_ARGS_(AMX_W14_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13)))
#define AM_RequestI15(ep, dest, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14) \
  AMX_RequestMedium((ep), (dest), (h), (src), (nbytes), 15, AMX_ARGS_(AMX_W15_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14)))
#define AM_RequestI16(ep, dest, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15) \
  AMX_RequestMedium((ep), (dest), (h), (src), (nbytes), 16, AMX_ARGS_(AMX_W16_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15)))
///@}

/// AM_RequestXferN(ep, dest, dest_offset, h, src, nbytes, a0 ...): a long request into
/// the destination's segment at `dest_offset` (AMX_RequestLong). Berkeley's
/// order: the offset comes before the handler in every Xfer macro (the AMX_
/// functions under them take it after `nbytes`, as AMUDP's do).
///@{
#define AM_RequestXfer0(ep, dest, dest_offset, h, src, nbytes) \
  AMX_RequestLong((ep), (dest), (h), (src), (nbytes), (dest_offset), 0, AMX_NOARGS_)
#define AM_RequestXfer1(ep, dest, dest_offset, h, src, nbytes, a0) \
  AMX_RequestLong((ep), (dest), (h), (src), (nbytes), (dest_offset), 1, AMX_ARGS_(AMX_W1_(a0)))
#define AM_RequestXfer2(ep, dest, dest_offset, h, src, nbytes, a0, a1) \
  AMX_RequestLong((ep), (dest), (h), (src), (nbytes), (dest_offset), 2, AMX_ARGS_(AMX_W2_(a0, a1)))
#define AM_RequestXfer3(ep, dest, dest_offset, h, src, nbytes, a0, a1, a2) \
  AMX_RequestLong((ep), (dest), (h), (src), (nbytes), (dest_offset), 3, AMX_ARGS_(AMX_W3_(a0, a1, a2)))
#define AM_RequestXfer4(ep, dest, dest_offset, h, src, nbytes, a0, a1, a2, a3) \
  AMX_RequestLong((ep), (dest), (h), (src), (nbytes), (dest_offset), 4, AMX_ARGS_(AMX_W4_(a0, a1, a2, a3)))
#define AM_RequestXfer5(ep, dest, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4) \
  AMX_RequestLong((ep), (dest), (h), (src), (nbytes), (dest_offset), 5, AMX_ARGS_(AMX_W5_(a0, a1, a2, a3, a4)))
#define AM_RequestXfer6(ep, dest, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4, a5) \
  AMX_RequestLong((ep), (dest), (h), (src), (nbytes), (dest_offset), 6, AMX_ARGS_(AMX_W6_(a0, a1, a2, a3, a4, a5)))
#define AM_RequestXfer7(ep, dest, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6) \
  AMX_RequestLong((ep), (dest), (h), (src), (nbytes), (dest_offset), 7, AMX_ARGS_(AMX_W7_(a0, a1, a2, a3, a4, a5, a6)))
#define AM_RequestXfer8(ep, dest, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7) \
  AMX_RequestLong((ep), (dest), (h), (src), (nbytes), (dest_offset), 8, AMX_ARGS_(AMX_W8_(a0, a1, a2, a3, a4, a5, a6, a7)))
#define AM_RequestXfer9(ep, dest, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8) \
  AMX_RequestLong((ep), (dest), (h), (src), (nbytes), (dest_offset), 9, AMX_ARGS_(AMX_W9_(a0, a1, a2, a3, a4, a5, a6, a7, a8)))
#define AM_RequestXfer10(ep, dest, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9) \
  AMX_RequestLong((ep), (dest), (h), (src), (nbytes), (dest_offset), 10, AMX_ARGS_(AMX_W10_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9)))
#define AM_RequestXfer11(ep, dest, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10) \
  AMX_RequestLong((ep), (dest), (h), (src), (nbytes), (dest_offset), 11, AMX_ARGS_(AMX_W11_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10)))
#define AM_RequestXfer12(ep, dest, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11) \
  AMX_RequestLong((ep), (dest), (h), (src), (nbytes), (dest_offset), 12, AMX_ARGS_(AMX_W12_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11)))
#define AM_RequestXfer13(ep, dest, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12) \
  AMX_RequestLong((ep), (dest), (h), (src), (nbytes), (dest_offset), 13, AMX_ARGS_(AMX_W13_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12)))
#define AM_RequestXfer14(ep, dest, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13) \
  AMX_RequestLong((ep), (dest), (h), (src), (nbytes), (dest_offset), 14, AMX_ARGS_(AMX_W14_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13)))
#define AM_RequestXfer15(ep, dest, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14) \
  AMX_RequestLong((ep), (dest), (h), (src), (nbytes), (dest_offset), 15, AMX_ARGS_(AMX_W15_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14)))
#define AM_RequestXfer16(ep, dest, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15) \
  AMX_RequestLong((ep), (dest), (h), (src), (nbytes), (dest_offset), 16, AMX_ARGS_(AMX_W16_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15)))
///@}

/// AM_RequestXferAsyncN(ep, dest, dest_offset, h, src, nbytes, a0 ...): as AM_RequestXferN, but AM_ERR_IN_USE instead of
/// blocking when the destination's queue is full (AMX_RequestLongAsync).
///@{
#define AM_RequestXferAsync0(ep, dest, dest_offset, h, src, nbytes) \
  AMX_RequestLongAsync((ep), (dest), (h), (src), (nbytes), (dest_offset), 0, AMX_NOARGS_)
#define AM_RequestXferAsync1(ep, dest, dest_offset, h, src, nbytes, a0) \
  AMX_RequestLongAsync((ep), (dest), (h), (src), (nbytes), (dest_offset), 1, AMX_ARGS_(AMX_W1_(a0)))
#define AM_RequestXferAsync2(ep, dest, dest_offset, h, src, nbytes, a0, a1) \
  AMX_RequestLongAsync((ep), (dest), (h), (src), (nbytes), (dest_offset), 2, AMX_ARGS_(AMX_W2_(a0, a1)))
#define AM_RequestXferAsync3(ep, dest, dest_offset, h, src, nbytes, a0, a1, a2) \
  AMX_RequestLongAsync((ep), (dest), (h), (src), (nbytes), (dest_offset), 3, AMX_ARGS_(AMX_W3_(a0, a1, a2)))
#define AM_RequestXferAsync4(ep, dest, dest_offset, h, src, nbytes, a0, a1, a2, a3) \
  AMX_RequestLongAsync((ep), (dest), (h), (src), (nbytes), (dest_offset), 4, AMX_ARGS_(AMX_W4_(a0, a1, a2, a3)))
#define AM_RequestXferAsync5(ep, dest, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4) \
  AMX_RequestLongAsync((ep), (dest), (h), (src), (nbytes), (dest_offset), 5, AMX_ARGS_(AMX_W5_(a0, a1, a2, a3, a4)))
#define AM_RequestXferAsync6(ep, dest, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4, a5) \
  AMX_RequestLongAsync((ep), (dest), (h), (src), (nbytes), (dest_offset), 6, AMX_ARGS_(AMX_W6_(a0, a1, a2, a3, a4, a5)))
#define AM_RequestXferAsync7(ep, dest, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6) \
  AMX_RequestLongAsync((ep), (dest), (h), (src), (nbytes), (dest_offset), 7, AMX_ARGS_(AMX_W7_(a0, a1, a2, a3, a4, a5, a6)))
#define AM_RequestXferAsync8(ep, dest, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7) \
  AMX_RequestLongAsync((ep), (dest), (h), (src), (nbytes), (dest_offset), 8, AMX_ARGS_(AMX_W8_(a0, a1, a2, a3, a4, a5, a6, a7)))
#define AM_RequestXferAsync9(ep, dest, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8) \
  AMX_RequestLongAsync((ep), (dest), (h), (src), (nbytes), (dest_offset), 9, AMX_ARGS_(AMX_W9_(a0, a1, a2, a3, a4, a5, a6, a7, a8)))
#define AM_RequestXferAsync10(ep, dest, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9) \
  AMX_RequestLongAsync((ep), (dest), (h), (src), (nbytes), (dest_offset), 10, AMX_ARGS_(AMX_W10_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9)))
#define AM_RequestXferAsync11(ep, dest, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10) \
  AMX_RequestLongAsync((ep), (dest), (h), (src), (nbytes), (dest_offset), 11, AMX_ARGS_(AMX_W11_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10)))
#define AM_RequestXferAsync12(ep, dest, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11) \
  AMX_RequestLongAsync((ep), (dest), (h), (src), (nbytes), (dest_offset), 12, AMX_ARGS_(AMX_W12_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11)))
#define AM_RequestXferAsync13(ep, dest, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12) \
  AMX_RequestLongAsync((ep), (dest), (h), (src), (nbytes), (dest_offset), 13, AMX_ARGS_(AMX_W13_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12)))
#define AM_RequestXferAsync14(ep, dest, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13) \
  AMX_RequestLongAsync((ep), (dest), (h), (src), (nbytes), (dest_offset), 14, AMX_ARGS_(AMX_W14_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13)))
#define AM_RequestXferAsync15(ep, dest, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14) \
  AMX_RequestLongAsync((ep), (dest), (h), (src), (nbytes), (dest_offset), 15, AMX_ARGS_(AMX_W15_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14)))
#define AM_RequestXferAsync16(ep, dest, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15) \
  AMX_RequestLongAsync((ep), (dest), (h), (src), (nbytes), (dest_offset), 16, AMX_ARGS_(AMX_W16_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15)))
///@}

/// AM_ReplyN(token, h, a0 ...): a short reply from a request handler (AMX_ReplyShort).
///@{
#define AM_Reply0(token, h) \
  AMX_ReplyShort((token), (h), 0, AMX_NOARGS_)
#define AM_Reply1(token, h, a0) \
  AMX_ReplyShort((token), (h), 1, AMX_ARGS_(AMX_W1_(a0)))
#define AM_Reply2(token, h, a0, a1) \
  AMX_ReplyShort((token), (h), 2, AMX_ARGS_(AMX_W2_(a0, a1)))
#define AM_Reply3(token, h, a0, a1, a2) \
  AMX_ReplyShort((token), (h), 3, AMX_ARGS_(AMX_W3_(a0, a1, a2)))
#define AM_Reply4(token, h, a0, a1, a2, a3) \
  AMX_ReplyShort((token), (h), 4, AMX_ARGS_(AMX_W4_(a0, a1, a2, a3)))
#define AM_Reply5(token, h, a0, a1, a2, a3, a4) \
  AMX_ReplyShort((token), (h), 5, AMX_ARGS_(AMX_W5_(a0, a1, a2, a3, a4)))
#define AM_Reply6(token, h, a0, a1, a2, a3, a4, a5) \
  AMX_ReplyShort((token), (h), 6, AMX_ARGS_(AMX_W6_(a0, a1, a2, a3, a4, a5)))
#define AM_Reply7(token, h, a0, a1, a2, a3, a4, a5, a6) \
  AMX_ReplyShort((token), (h), 7, AMX_ARGS_(AMX_W7_(a0, a1, a2, a3, a4, a5, a6)))
#define AM_Reply8(token, h, a0, a1, a2, a3, a4, a5, a6, a7) \
  AMX_ReplyShort((token), (h), 8, AMX_ARGS_(AMX_W8_(a0, a1, a2, a3, a4, a5, a6, a7)))
#define AM_Reply9(token, h, a0, a1, a2, a3, a4, a5, a6, a7, a8) \
  AMX_ReplyShort((token), (h), 9, AMX_ARGS_(AMX_W9_(a0, a1, a2, a3, a4, a5, a6, a7, a8)))
#define AM_Reply10(token, h, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9) \
  AMX_ReplyShort((token), (h), 10, AMX_ARGS_(AMX_W10_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9)))
#define AM_Reply11(token, h, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10) \
  AMX_ReplyShort((token), (h), 11, AMX_ARGS_(AMX_W11_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10)))
#define AM_Reply12(token, h, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11) \
  AMX_ReplyShort((token), (h), 12, AMX_ARGS_(AMX_W12_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11)))
#define AM_Reply13(token, h, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12) \
  AMX_ReplyShort((token), (h), 13, AMX_ARGS_(AMX_W13_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12)))
#define AM_Reply14(token, h, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13) \
  AMX_ReplyShort((token), (h), 14, AMX_ARGS_(AMX_W14_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13)))
#define AM_Reply15(token, h, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14) \
  AMX_ReplyShort((token), (h), 15, AMX_ARGS_(AMX_W15_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14)))
#define AM_Reply16(token, h, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15) \
  AMX_ReplyShort((token), (h), 16, AMX_ARGS_(AMX_W16_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15)))
///@}

/// AM_ReplyIN(token, h, src, nbytes, a0 ...): a medium reply (AMX_ReplyMedium).
///@{
#define AM_ReplyI0(token, h, src, nbytes) \
  AMX_ReplyMedium((token), (h), (src), (nbytes), 0, AMX_NOARGS_)
#define AM_ReplyI1(token, h, src, nbytes, a0) \
  AMX_ReplyMedium((token), (h), (src), (nbytes), 1, AMX_ARGS_(AMX_W1_(a0)))
#define AM_ReplyI2(token, h, src, nbytes, a0, a1) \
  AMX_ReplyMedium((token), (h), (src), (nbytes), 2, AMX_ARGS_(AMX_W2_(a0, a1)))
#define AM_ReplyI3(token, h, src, nbytes, a0, a1, a2) \
  AMX_ReplyMedium((token), (h), (src), (nbytes), 3, AMX_ARGS_(AMX_W3_(a0, a1, a2)))
#define AM_ReplyI4(token, h, src, nbytes, a0, a1, a2, a3) \
  AMX_ReplyMedium((token), (h), (src), (nbytes), 4, AMX_ARGS_(AMX_W4_(a0, a1, a2, a3)))
#define AM_ReplyI5(token, h, src, nbytes, a0, a1, a2, a3, a4) \
  AMX_ReplyMedium((token), (h), (src), (nbytes), 5, AMX_ARGS_(AMX_W5_(a0, a1, a2, a3, a4)))
#define AM_ReplyI6(token, h, src, nbytes, a0, a1, a2, a3, a4, a5) \
  AMX_ReplyMedium((token), (h), (src), (nbytes), 6, AMX_ARGS_(AMX_W6_(a0, a1, a2, a3, a4, a5)))
#define AM_ReplyI7(token, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6) \
  AMX_ReplyMedium((token), (h), (src), (nbytes), 7, AMX_ARGS_(AMX_W7_(a0, a1, a2, a3, a4, a5, a6)))
#define AM_ReplyI8(token, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7) \
  AMX_ReplyMedium((token), (h), (src), (nbytes), 8, AMX_ARGS_(AMX_W8_(a0, a1, a2, a3, a4, a5, a6, a7)))
#define AM_ReplyI9(token, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8) \
  AMX_ReplyMedium((token), (h), (src), (nbytes), 9, AMX_ARGS_(AMX_W9_(a0, a1, a2, a3, a4, a5, a6, a7, a8)))
#define AM_ReplyI10(token, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9) \
  AMX_ReplyMedium((token), (h), (src), (nbytes), 10, AMX_ARGS_(AMX_W10_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9)))
#define AM_ReplyI11(token, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10) \
  AMX_ReplyMedium((token), (h), (src), (nbytes), 11, AMX_ARGS_(AMX_W11_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10)))
#define AM_ReplyI12(token, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11) \
  AMX_ReplyMedium((token), (h), (src), (nbytes), 12, AMX_ARGS_(AMX_W12_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11)))
#define AM_ReplyI13(token, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12) \
  AMX_ReplyMedium((token), (h), (src), (nbytes), 13, AMX_ARGS_(AMX_W13_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12)))
#define AM_ReplyI14(token, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13) \
  AMX_ReplyMedium((token), (h), (src), (nbytes), 14, AMX_ARGS_(AMX_W14_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13)))
#define AM_ReplyI15(token, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14) \
  AMX_ReplyMedium((token), (h), (src), (nbytes), 15, AMX_ARGS_(AMX_W15_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14)))
#define AM_ReplyI16(token, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15) \
  AMX_ReplyMedium((token), (h), (src), (nbytes), 16, AMX_ARGS_(AMX_W16_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15)))
///@}

/// AM_ReplyXferN(token, dest_offset, h, src, nbytes, a0 ...): a long reply into the
/// requester's segment (AMX_ReplyLong).
///@{
#define AM_ReplyXfer0(token, dest_offset, h, src, nbytes) \
  AMX_ReplyLong((token), (h), (src), (nbytes), (dest_offset), 0, AMX_NOARGS_)
#define AM_ReplyXfer1(token, dest_offset, h, src, nbytes, a0) \
  AMX_ReplyLong((token), (h), (src), (nbytes), (dest_offset), 1, AMX_ARGS_(AMX_W1_(a0)))
#define AM_ReplyXfer2(token, dest_offset, h, src, nbytes, a0, a1) \
  AMX_ReplyLong((token), (h), (src), (nbytes), (dest_offset), 2, AMX_ARGS_(AMX_W2_(a0, a1)))
#define AM_ReplyXfer3(token, dest_offset, h, src, nbytes, a0, a1, a2) \
  AMX_ReplyLong((token), (h), (src), (nbytes), (dest_offset), 3, AMX_ARGS_(AMX_W3_(a0, a1, a2)))
#define AM_ReplyXfer4(token, dest_offset, h, src, nbytes, a0, a1, a2, a3) \
  AMX_ReplyLong((token), (h), (src), (nbytes), (dest_offset), 4, AMX_ARGS_(AMX_W4_(a0, a1, a2, a3)))
#define AM_ReplyXfer5(token, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4) \
  AMX_ReplyLong((token), (h), (src), (nbytes), (dest_offset), 5, AMX_ARGS_(AMX_W5_(a0, a1, a2, a3, a4)))
#define AM_ReplyXfer6(token, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4, a5) \
  AMX_ReplyLong((token), (h), (src), (nbytes), (dest_offset), 6, AMX_ARGS_(AMX_W6_(a0, a1, a2, a3, a4, a5)))
#define AM_ReplyXfer7(token, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6) \
  AMX_ReplyLong((token), (h), (src), (nbytes), (dest_offset), 7, AMX_ARGS_(AMX_W7_(a0, a1, a2, a3, a4, a5, a6)))
#define AM_ReplyXfer8(token, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7) \
  AMX_ReplyLong((token), (h), (src), (nbytes), (dest_offset), 8, AMX_ARGS_(AMX_W8_(a0, a1, a2, a3, a4, a5, a6, a7)))
#define AM_ReplyXfer9(token, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8) \
  AMX_ReplyLong((token), (h), (src), (nbytes), (dest_offset), 9, AMX_ARGS_(AMX_W9_(a0, a1, a2, a3, a4, a5, a6, a7, a8)))
#define AM_ReplyXfer10(token, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9) \
  AMX_ReplyLong((token), (h), (src), (nbytes), (dest_offset), 10, AMX_ARGS_(AMX_W10_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9)))
#define AM_ReplyXfer11(token, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10) \
  AMX_ReplyLong((token), (h), (src), (nbytes), (dest_offset), 11, AMX_ARGS_(AMX_W11_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10)))
#define AM_ReplyXfer12(token, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11) \
  AMX_ReplyLong((token), (h), (src), (nbytes), (dest_offset), 12, AMX_ARGS_(AMX_W12_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11)))
#define AM_ReplyXfer13(token, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12) \
  AMX_ReplyLong((token), (h), (src), (nbytes), (dest_offset), 13, AMX_ARGS_(AMX_W13_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12)))
#define AM_ReplyXfer14(token, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13) \
  AMX_ReplyLong((token), (h), (src), (nbytes), (dest_offset), 14, AMX_ARGS_(AMX_W14_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13)))
#define AM_ReplyXfer15(token, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14) \
  AMX_ReplyLong((token), (h), (src), (nbytes), (dest_offset), 15, AMX_ARGS_(AMX_W15_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14)))
#define AM_ReplyXfer16(token, dest_offset, h, src, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15) \
  AMX_ReplyLong((token), (h), (src), (nbytes), (dest_offset), 16, AMX_ARGS_(AMX_W16_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15)))
///@}

/// AM_GetXferM(ep, dest, src_offset, h, dest_offset, nbytes, a0 ...), the AM-2
/// specification's order (AMUDP and AMMPI have no get): pulls from the
/// destination's segment; `h` runs here with the data (AMX_GetLong).
///@{
#define AM_GetXfer0(ep, dest, src_offset, h, dest_offset, nbytes) \
  AMX_GetLong((ep), (dest), (h), (src_offset), (dest_offset), (nbytes), 0, AMX_NOARGS_)
#define AM_GetXfer1(ep, dest, src_offset, h, dest_offset, nbytes, a0) \
  AMX_GetLong((ep), (dest), (h), (src_offset), (dest_offset), (nbytes), 1, AMX_ARGS_(AMX_W1_(a0)))
#define AM_GetXfer2(ep, dest, src_offset, h, dest_offset, nbytes, a0, a1) \
  AMX_GetLong((ep), (dest), (h), (src_offset), (dest_offset), (nbytes), 2, AMX_ARGS_(AMX_W2_(a0, a1)))
#define AM_GetXfer3(ep, dest, src_offset, h, dest_offset, nbytes, a0, a1, a2) \
  AMX_GetLong((ep), (dest), (h), (src_offset), (dest_offset), (nbytes), 3, AMX_ARGS_(AMX_W3_(a0, a1, a2)))
#define AM_GetXfer4(ep, dest, src_offset, h, dest_offset, nbytes, a0, a1, a2, a3) \
  AMX_GetLong((ep), (dest), (h), (src_offset), (dest_offset), (nbytes), 4, AMX_ARGS_(AMX_W4_(a0, a1, a2, a3)))
#define AM_GetXfer5(ep, dest, src_offset, h, dest_offset, nbytes, a0, a1, a2, a3, a4) \
  AMX_GetLong((ep), (dest), (h), (src_offset), (dest_offset), (nbytes), 5, AMX_ARGS_(AMX_W5_(a0, a1, a2, a3, a4)))
#define AM_GetXfer6(ep, dest, src_offset, h, dest_offset, nbytes, a0, a1, a2, a3, a4, a5) \
  AMX_GetLong((ep), (dest), (h), (src_offset), (dest_offset), (nbytes), 6, AMX_ARGS_(AMX_W6_(a0, a1, a2, a3, a4, a5)))
#define AM_GetXfer7(ep, dest, src_offset, h, dest_offset, nbytes, a0, a1, a2, a3, a4, a5, a6) \
  AMX_GetLong((ep), (dest), (h), (src_offset), (dest_offset), (nbytes), 7, AMX_ARGS_(AMX_W7_(a0, a1, a2, a3, a4, a5, a6)))
#define AM_GetXfer8(ep, dest, src_offset, h, dest_offset, nbytes, a0, a1, a2, a3, a4, a5, a6, a7) \
  AMX_GetLong((ep), (dest), (h), (src_offset), (dest_offset), (nbytes), 8, AMX_ARGS_(AMX_W8_(a0, a1, a2, a3, a4, a5, a6, a7)))
#define AM_GetXfer9(ep, dest, src_offset, h, dest_offset, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8) \
  AMX_GetLong((ep), (dest), (h), (src_offset), (dest_offset), (nbytes), 9, AMX_ARGS_(AMX_W9_(a0, a1, a2, a3, a4, a5, a6, a7, a8)))
#define AM_GetXfer10(ep, dest, src_offset, h, dest_offset, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9) \
  AMX_GetLong((ep), (dest), (h), (src_offset), (dest_offset), (nbytes), 10, AMX_ARGS_(AMX_W10_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9)))
#define AM_GetXfer11(ep, dest, src_offset, h, dest_offset, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10) \
  AMX_GetLong((ep), (dest), (h), (src_offset), (dest_offset), (nbytes), 11, AMX_ARGS_(AMX_W11_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10)))
#define AM_GetXfer12(ep, dest, src_offset, h, dest_offset, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11) \
  AMX_GetLong((ep), (dest), (h), (src_offset), (dest_offset), (nbytes), 12, AMX_ARGS_(AMX_W12_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11)))
#define AM_GetXfer13(ep, dest, src_offset, h, dest_offset, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12) \
  AMX_GetLong((ep), (dest), (h), (src_offset), (dest_offset), (nbytes), 13, AMX_ARGS_(AMX_W13_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12)))
#define AM_GetXfer14(ep, dest, src_offset, h, dest_offset, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13) \
  AMX_GetLong((ep), (dest), (h), (src_offset), (dest_offset), (nbytes), 14, AMX_ARGS_(AMX_W14_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13)))
#define AM_GetXfer15(ep, dest, src_offset, h, dest_offset, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14) \
  AMX_GetLong((ep), (dest), (h), (src_offset), (dest_offset), (nbytes), 15, AMX_ARGS_(AMX_W15_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14)))
#define AM_GetXfer16(ep, dest, src_offset, h, dest_offset, nbytes, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15) \
  AMX_GetLong((ep), (dest), (h), (src_offset), (dest_offset), (nbytes), 16, AMX_ARGS_(AMX_W16_(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15)))
///@}

/* ---- the AMX SPMD extension ------------------------------------------------------ */

/// Non-zero: a clump program may always start as a worker (alone, it is a job of one).
int AMX_SPMDIsWorker(char **argv);
/// Joins the job (AM_Init included) and returns in `*eb` an AM_SEQ bundle and
/// in `*ep` an endpoint whose translation entry i names rank i's endpoint,
/// tags set, ready to send once handlers and a segment are set (there is no
/// segment: call AM_SetSeg or AMX_SegmentAlloc). Ends with a barrier, so every
/// rank's endpoint exists before anyone sends; register handlers and the
/// segment, then call AMX_SPMDBarrier before the first message. `network_depth`
/// (>= 0) is advisory; `job_id` may be NULL. clump leaves argc and argv alone.
/// AM_ERR_BAD_ARG for NULL `eb`/`ep` or a negative depth; AM_ERR_RESOURCE when
/// joining fails or when called twice.
int AMX_SPMDStartup(int *argc, char ***argv, int network_depth, uint64_t *job_id, eb_t *eb, ep_t *ep);
/// The number of ranks, or -1 before AMX_SPMDStartup.
int AMX_SPMDNumProcs(void);
/// This process's rank, or -1 before AMX_SPMDStartup.
int AMX_SPMDMyProc(void);
/// Waits until every rank has called it, running handlers meanwhile.
/// AM_ERR_NOT_INIT before AMX_SPMDStartup; AM_ERR_RESOURCE when the launcher is lost.
int AMX_SPMDBarrier(void);
/// `dst` receives NumProcs x `len` bytes: each rank's `src`, in rank order.
/// `len` must be the same on every rank. Runs handlers while it waits.
int AMX_SPMDAllGather(void *src, void *dst, size_t len);
/// Copies `len` bytes of `buf` on rank `root` into `buf` on every rank.
/// AM_ERR_BAD_ARG for a root outside the job.
int AMX_SPMDBroadcast(void *buf, size_t len, int root);
/// Runs the exit callback, tells clumprun to end the whole job with `code`
/// (it stops the other ranks and exits with it), flushes stdio and ends this
/// process through AMX_SPMDkillmyprocess(code). Does not return. Ranks that
/// should finish their own work first meet in AMX_SPMDBarrier before.
AMX_NORETURN_ int AMX_SPMDExit(int code);
/// The function AMX_SPMDExit ends the process with: the C library's `exit`
/// by default (atexit handlers run; AMUDP's default is `_exit`). A program
/// may set its own; it must not return (if it does, `_exit` follows).
extern void (*AMX_SPMDkillmyprocess)(int);
/// Sets the function AMX_SPMDExit calls (with the code) before ending the job.
/// It does not run in ranks stopped because another rank ended the job.
int AMX_SPMDSetExitCallback(void (*fn)(int));
/// The value of `name` in the environment of the job's master, as AMUDP's
/// is: clumprun's environment, the one the user started the job from
/// (also for ranks on other hosts, which ssh starts with an environment of
/// their own), or NULL when unset there. `name` matches whole names only
/// ("A" does not find "ABC"). The string is owned by the library and lives
/// until the program exits; do not free or modify it.
const char *AMX_SPMDgetenvMaster(const char *name);

/// Prints "clump[<rank>]: fatal: AMX_FatalErr: <message>" on stderr and
/// aborts the process; clumprun then ends the job (exit code 134).
AMX_NORETURN_ void AMX_FatalErr(const char *fmt, ...) AMX_PRINTF_(1, 2);
/// Non-zero: every call that fails logs why on stderr (default 0).
extern int AMX_VerboseErrors;
/// Non-zero: the C layer prints no diagnostics of its own, whatever
/// AMX_VerboseErrors says (fatal errors are still printed). Default 0.
extern int AMX_SilentMode;
/// A human-readable name of this process: "Node <rank>" once
/// AMX_SPMDStartup has run (NULL before). A program may point it elsewhere.
extern const char *AMX_ProcessLabel;

/* ---- statistics ------------------------------------------------------------------ */

/// Indices of the per-category counters of amx_stats_t (the values of amx_category_t).
///@{
#define AMX_STAT_SHORT amx_Short
#define AMX_STAT_MEDIUM amx_Medium
#define AMX_STAT_LONG amx_Long
///@}

/// Message counters of an endpoint (or a sum of several), with AMUDP's field
/// names. Process-local and cheap to keep. AM_GetXferM counts as a long
/// request sent by the puller; the data comes back as a long reply. Fields
/// AMUDP fills that clump does not keep stay at their AMX_initial_stats
/// values: the retransmission and reordering counters (the network's are
/// per datagram, in clump-info --net and clump::network_statistics) and
/// the request latencies.
typedef struct amx_stats {
  uint64_t RequestsSent[amx_NumCategories];           ///< by category: [amx_Short], [amx_Medium], [amx_Long]
  uint64_t RepliesSent[amx_NumCategories];            ///< by category
  uint64_t RequestsRetransmitted[amx_NumCategories];  ///< not kept (0)
  uint64_t RepliesRetransmitted[amx_NumCategories];   ///< not kept (0)
  uint64_t RepliesSquashed[amx_NumCategories];        ///< not kept (0)
  uint64_t RequestsReceived[amx_NumCategories];       ///< by category (handlers run)
  uint64_t RepliesReceived[amx_NumCategories];        ///< by category (handlers run)
  uint64_t ReturnedMessages;                          ///< messages that came back to handler 0
  uint64_t OutOfOrderRequests;                        ///< not kept (0)
  uint64_t OutOfOrderReplies;                         ///< not kept (0)
  amx_tick_t RequestMinLatency;                       ///< not kept (AMX_initial_stats: all ones)
  amx_tick_t RequestMaxLatency;                       ///< not kept (0)
  amx_tick_t RequestSumLatency;                       ///< not kept (0)
  uint64_t RequestDataBytesSent[amx_NumCategories];   ///< payload bytes of requests sent, by category
  uint64_t ReplyDataBytesSent[amx_NumCategories];     ///< payload bytes of replies sent, by category
  uint64_t RequestTotalBytesSent[amx_NumCategories];  ///< as RequestDataBytesSent (arguments and headers not counted)
  uint64_t ReplyTotalBytesSent[amx_NumCategories];    ///< as ReplyDataBytesSent
  uint64_t TotalBytesSent;                            ///< the sum of the two above over every category
  // clump's own, after AMUDP's fields:
  uint64_t DataBytesReceived;  ///< payload bytes of medium and long messages received
  uint64_t SendWaits;          ///< sends that found the destination's queue full and waited
  uint64_t Endpoints;          ///< endpoints summed into this record
} amx_stats_t;

/// The starting value of a sum: every counter 0, RequestMinLatency all ones.
extern const amx_stats_t AMX_initial_stats;
/// Stores the endpoint's counters in `*stats` (Endpoints = 1).
int AMX_GetEndpointStatistics(ep_t ep, amx_stats_t *stats);
/// Sets the endpoint's counters to zero.
int AMX_ResetEndpointStatistics(ep_t ep);
/// Adds `*add` into `*sum`, field by field (the minimum latency by minimum).
int AMX_AggregateStatistics(amx_stats_t *sum, amx_stats_t *add);
/// Formats `*stats` as a readable table, prints it to `fp` (a `FILE *`,
/// unless NULL) and returns it. `global` non-zero titles it as a job-wide
/// sum. The string is overwritten by the next call in the same thread; NULL
/// for NULL `stats`.
const char *AMX_DumpStatistics(void *fp, amx_stats_t *stats, int global);

#ifdef __cplusplus
}  // extern "C"
#endif

