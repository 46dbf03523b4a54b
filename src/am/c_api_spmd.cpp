// The AMX SPMD extension of the AM-2 C API (include/clump/am.h): joining the
// job, collectives through the launcher, job exit, the launcher's
// environment, AMX_FatalErr, and adding and printing statistics.
//
// Startup builds its bundle and endpoint with the public C calls (c_api.cpp),
// exactly as clump::runtime does with the C++ ones: tag = the job's tag for
// this rank, translation i = rank i's endpoint (names exchanged with an
// allgather, since the program may own other endpoints), then a barrier.
// Collectives go through boot::job and keep running handlers while they
// wait (process::progress), so a rank in a barrier still serves requests.

#include "am/c_api_impl.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "am/process.hpp"
#include "core/log.hpp"

namespace {

namespace am = clump::am;
using namespace clump::capi;

// What AMX_SPMDStartup set up. Written once under `spmd_mutex`; `started` is
// read without it (acquire: whoever sees true sees the rest).
std::mutex spmd_mutex;
std::atomic<bool> started{false};
eb_t spmd_bundle = nullptr;  // the job's bundle; collectives poll it while they wait
void (*exit_callback)(int) = nullptr;  // guarded by spmd_mutex
std::atomic<bool> exiting{false};

/// A collective may not start inside a handler (it would wait for ranks
/// that wait for this handler's reply) nor before startup.
int check_collective(const char* fn) noexcept {
  if (!started.load(std::memory_order_acquire))
    return fail(fn, AM_ERR_NOT_INIT, "AMX_SPMDStartup has not been called");
  if (in_handler()) return fail(fn, AM_ERR_BAD_ARG, "called from inside a handler");
  return -1;
}

/// Builds the job's bundle and endpoint into `eb` and `ep` (left set on
/// failure, for the caller to free).
int start(am::process& p, eb_t& eb, ep_t& ep) {
  en_t mine{};
  int rc = AM_AllocateBundle(AM_SEQ, &eb);
  if (rc == AM_OK) rc = AM_AllocateEndpoint(eb, &ep, &mine);
  if (rc == AM_OK) rc = AM_SetTag(ep, p.job().tag(p.rank()));
  int ntrans = 0;
  if (rc == AM_OK) rc = AM_GetNumTranslations(ep, &ntrans);
  if (rc == AM_OK && ntrans < p.size()) rc = AM_SetNumTranslations(ep, std::min(p.size(), 65535));
  if (rc != AM_OK) return rc;
  std::vector<en_t> names(static_cast<size_t>(p.size()));
  p.job().allgather(&mine, names.data(), sizeof mine, am::process::progress_fn(eb->b));
  for (int r = 0; r < p.size() && r < 65535; ++r)
    if ((rc = AM_Map(ep, r, names[static_cast<size_t>(r)], p.job().tag(r))) != AM_OK) return rc;
  // Every rank's endpoint exists before anyone sends.
  p.job().barrier(am::process::progress_fn(eb->b));
  return AM_OK;
}

}  // namespace

extern "C" {

const char* AMX_ProcessLabel = nullptr;
void (*AMX_SPMDkillmyprocess)(int) = [](int code) { std::exit(code); };

int AMX_SPMDIsWorker(char** argv) {
  (void)argv;  // clumprun passes the program's arguments unchanged
  return 1;
}

int AMX_SPMDStartup(int* argc, char*** argv, int network_depth, uint64_t* job_id, eb_t* eb, ep_t* ep) {
  (void)argc;
  (void)argv;
  constexpr const char* fn = "AMX_SPMDStartup";
  if (!eb || !ep || network_depth < 0)
    return fail(fn, AM_ERR_BAD_ARG, "NULL bundle or endpoint pointer, or a negative network depth");
  std::lock_guard lock(spmd_mutex);
  if (started.load(std::memory_order_relaxed))
    return fail(fn, AM_ERR_RESOURCE, "the job has been joined already (AMX_SPMDStartup called twice)");
  int rc = AM_Init();
  if (rc != AM_OK) return rc;
  eb_t b = nullptr;
  ep_t e = nullptr;
  rc = guarded(fn, [&] {
    am::process& p = am::process::get();
    int r = start(p, b, e);
    if (r == AM_OK && job_id) *job_id = p.job_id();
    return r;
  });
  if (rc != AM_OK) {
    if (b) AM_FreeBundle(b);  // and its endpoint
    AM_Terminate();
    return rc;
  }
  *eb = b;
  *ep = e;
  spmd_bundle = b;
  if (!AMX_ProcessLabel) {
    static char label[32];
    std::snprintf(label, sizeof label, "Node %d", am::process::existing()->rank());
    AMX_ProcessLabel = label;
  }
  started.store(true, std::memory_order_release);
  return AM_OK;
}

int AMX_SPMDNumProcs(void) {
  return started.load(std::memory_order_acquire) ? am::process::existing()->size() : -1;
}

int AMX_SPMDMyProc(void) {
  return started.load(std::memory_order_acquire) ? am::process::existing()->rank() : -1;
}

int AMX_SPMDBarrier(void) {
  if (int rc = check_collective("AMX_SPMDBarrier"); rc >= 0) return rc;
  return guarded("AMX_SPMDBarrier", [] {
    am::process& p = *am::process::existing();
    p.job().barrier(am::process::progress_fn(spmd_bundle->b));
    return AM_OK;
  });
}

int AMX_SPMDAllGather(void* src, void* dst, size_t len) {
  if (int rc = check_collective("AMX_SPMDAllGather"); rc >= 0) return rc;
  return guarded("AMX_SPMDAllGather", [&] {
    am::process& p = *am::process::existing();
    p.job().allgather(src, dst, len, am::process::progress_fn(spmd_bundle->b));  // throws bad_arg for NULL buffers
    return AM_OK;
  });
}

int AMX_SPMDBroadcast(void* buf, size_t len, int root) {
  if (int rc = check_collective("AMX_SPMDBroadcast"); rc >= 0) return rc;
  return guarded("AMX_SPMDBroadcast", [&] {
    am::process& p = *am::process::existing();
    p.job().broadcast(buf, len, root, am::process::progress_fn(spmd_bundle->b));  // throws bad_arg for a bad root
    return AM_OK;
  });
}

int AMX_SPMDSetExitCallback(void (*fn)(int)) {
  std::lock_guard lock(spmd_mutex);
  exit_callback = fn;
  return AM_OK;
}

int AMX_SPMDExit(int code) {
  void (*cb)(int) = nullptr;
  {
    std::lock_guard lock(spmd_mutex);
    cb = exit_callback;
  }
  // Once: a callback that calls AMX_SPMDExit itself goes straight to the exit.
  if (cb && !exiting.exchange(true, std::memory_order_acq_rel)) cb(code);
  // Tell clumprun to end the job (a process that never joined has nobody else to stop).
  if (am::process* p = am::process::existing()) p->job().exit_job(code);
  std::fflush(nullptr);
  if (void (*kill)(int) = AMX_SPMDkillmyprocess) kill(code);
  ::_exit(code);  // a killmyprocess that returned
}

const char* AMX_SPMDgetenvMaster(const char* name) {
  if (!name) {
    fail("AMX_SPMDgetenvMaster", AM_ERR_BAD_ARG, "NULL name");
    return nullptr;
  }
  // One copy per name for the program's life: callers keep the pointer.
  static auto* cache = new std::map<std::string, std::unique_ptr<char[]>>;
  static std::mutex cache_mutex;
  char* out = nullptr;
  guarded("AMX_SPMDgetenvMaster", [&] {
    std::lock_guard lock(cache_mutex);
    auto it = cache->find(name);
    if (it == cache->end()) {
      std::optional<std::string> v = am::process::get().job().getenv_master(name);
      std::unique_ptr<char[]> copy;
      if (v) {
        copy = std::make_unique<char[]>(v->size() + 1);
        std::memcpy(copy.get(), v->c_str(), v->size() + 1);
      }
      it = cache->emplace(name, std::move(copy)).first;
    }
    out = it->second.get();
    return AM_OK;
  });
  return out;
}

void AMX_FatalErr(const char* fmt, ...) {
  char message[1024] = "(no message)";
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
  }
  clump::core::fatal("AMX_FatalErr: %s", message);
}

// ---- statistics ----------------------------------------------------------------------------

const amx_stats_t AMX_initial_stats = [] {
  amx_stats_t s{};
  s.RequestMinLatency = ~amx_tick_t{0};
  return s;
}();

int AMX_AggregateStatistics(amx_stats_t* sum, amx_stats_t* add) {
  if (!sum || !add) return fail("AMX_AggregateStatistics", AM_ERR_BAD_ARG, "NULL statistics");
  amx_stats_t& s = *sum;
  const amx_stats_t& a = *add;
  for (int k = 0; k < amx_NumCategories; ++k) {
    for (auto f : {&amx_stats_t::RequestsSent, &amx_stats_t::RepliesSent, &amx_stats_t::RequestsRetransmitted,
                   &amx_stats_t::RepliesRetransmitted, &amx_stats_t::RepliesSquashed, &amx_stats_t::RequestsReceived,
                   &amx_stats_t::RepliesReceived, &amx_stats_t::RequestDataBytesSent,
                   &amx_stats_t::ReplyDataBytesSent, &amx_stats_t::RequestTotalBytesSent,
                   &amx_stats_t::ReplyTotalBytesSent})
      (s.*f)[k] += (a.*f)[k];
  }
  for (auto f : {&amx_stats_t::ReturnedMessages, &amx_stats_t::OutOfOrderRequests, &amx_stats_t::OutOfOrderReplies,
                 &amx_stats_t::RequestSumLatency, &amx_stats_t::TotalBytesSent, &amx_stats_t::DataBytesReceived,
                 &amx_stats_t::SendWaits, &amx_stats_t::Endpoints})
    s.*f += a.*f;
  s.RequestMinLatency = std::min(s.RequestMinLatency, a.RequestMinLatency);
  s.RequestMaxLatency = std::max(s.RequestMaxLatency, a.RequestMaxLatency);
  return AM_OK;
}

const char* AMX_DumpStatistics(void* fp, amx_stats_t* stats, int global) {
  FILE* out = static_cast<FILE*>(fp);
  if (!stats) {
    fail("AMX_DumpStatistics", AM_ERR_BAD_ARG, "NULL statistics");
    return nullptr;
  }
  thread_local std::string text;
  const amx_stats_t& s = *stats;
  char line[256];
  auto add = [&](const char* fmt, auto... v) {
    std::snprintf(line, sizeof line, fmt, v...);
    text += line;
  };
  auto row = [&](const char* what, const uint64_t (&n)[3]) {
    add("  %-20s %14" PRIu64 " %14" PRIu64 " %14" PRIu64 " %14" PRIu64 "\n", what, n[0], n[1], n[2],
        n[0] + n[1] + n[2]);
  };
  text.clear();
  add("AM statistics (%s, %" PRIu64 " endpoint%s)\n", global ? "all ranks" : "this rank", s.Endpoints,
      s.Endpoints == 1 ? "" : "s");
  add("  %-20s %14s %14s %14s %14s\n", "messages", "short", "medium", "long", "total");
  row("requests sent", s.RequestsSent);
  row("requests received", s.RequestsReceived);
  row("replies sent", s.RepliesSent);
  row("replies received", s.RepliesReceived);
  row("request bytes sent", s.RequestDataBytesSent);
  row("reply bytes sent", s.ReplyDataBytesSent);
  add("  %-20s %14" PRIu64 "\n", "returned (handler 0)", s.ReturnedMessages);
  add("  %-20s %14" PRIu64 "\n", "payload bytes sent", s.TotalBytesSent);
  add("  %-20s %14" PRIu64 "\n", "payload bytes recvd", s.DataBytesReceived);
  add("  %-20s %14" PRIu64 "\n", "sends that waited", s.SendWaits);
  if (out) {
    std::fputs(text.c_str(), out);
    std::fflush(out);
  }
  return text.c_str();
}

}  // extern "C"
