#include "ofi/fabric.hpp"

#if defined(CLUMP_HAVE_OFI)

#include "ofi/library.hpp"

#include <dlfcn.h>
#include <rdma/fabric.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>

namespace clump::ofi {

/// libfabric, loaded when first asked for rather than linked: Debian's
/// pulls in libinfinipath, whose constructor takes over SIGABRT, SIGSEGV
/// and the other fatal signals (a process that aborts would print its own
/// backtrace and exit with 1, not die of the signal). The signals'
/// dispositions are put back as they were after loading it.
const library_calls& calls() {
  static const library_calls c = [] {
    library_calls l;
    struct sigaction before[NSIG];
    for (int s = 1; s < NSIG; ++s) ::sigaction(s, nullptr, &before[s]);
    // udp;ofi_rxd sends up to FI_OFI_RXD_MAX_UNACKED packets to each peer at
    // once, 128 by default. A rank with two peers then had hundreds of sends
    // refused by its UDP socket, after which rxd lost track of its own
    // receives: the rank heard nothing more from a live peer (6 of 112 gas
    // bulk jobs here; 0 of 180 at 32, which also ran a third faster).
    // A value the user set stays (docs/net-protocol.md).
    ::setenv("FI_OFI_RXD_MAX_UNACKED", "32", 0);
    l.handle = ::dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
    for (int s = 1; s < NSIG; ++s)
      if (s != SIGKILL && s != SIGSTOP) ::sigaction(s, &before[s], nullptr);
    if (!l.handle) {
      const char* e = ::dlerror();
      l.why = std::string("cannot load libfabric.so.1: ") + (e ? e : "?");
      return l;
    }
    l.version = reinterpret_cast<decltype(l.version)>(::dlsym(l.handle, "fi_version"));
    l.getinfo = reinterpret_cast<decltype(l.getinfo)>(::dlsym(l.handle, "fi_getinfo"));
    l.freeinfo = reinterpret_cast<decltype(l.freeinfo)>(::dlsym(l.handle, "fi_freeinfo"));
    l.dupinfo = reinterpret_cast<decltype(l.dupinfo)>(::dlsym(l.handle, "fi_dupinfo"));
    l.fabric = reinterpret_cast<decltype(l.fabric)>(::dlsym(l.handle, "fi_fabric"));
    l.strerror = reinterpret_cast<decltype(l.strerror)>(::dlsym(l.handle, "fi_strerror"));
    if (!l.version || !l.getinfo || !l.freeinfo || !l.dupinfo || !l.fabric || !l.strerror) {
      l.why = "libfabric.so.1 lacks fi_getinfo or another call clump uses";
      l.handle = nullptr;
    }
    return l;
  }();
  return c;
}

const char* library() noexcept {
  static char text[48];
  if (!text[0]) {
    const library_calls& l = calls();
    if (!l.handle) return "";
    const uint32_t v = l.version();
    std::snprintf(text, sizeof text, "libfabric %u.%u", FI_MAJOR(v), FI_MINOR(v));
  }
  return text;
}

std::vector<std::string> rdm_providers(std::string& why) {
  std::vector<std::string> names;
  const library_calls& l = calls();
  if (!l.handle) {
    why = l.why;
    return names;
  }
  fi_info* hints = l.dupinfo(nullptr);  // fi_allocinfo()
  if (!hints) {
    why = "fi_allocinfo failed";
    return names;
  }
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_MSG;
  fi_info* list = nullptr;
  const int rc = l.getinfo(FI_VERSION(1, 10), nullptr, nullptr, 0, hints, &list);
  l.freeinfo(hints);
  if (rc != 0) {
    why = std::string("fi_getinfo: ") + l.strerror(-rc);
    return names;
  }
  for (const fi_info* i = list; i; i = i->next) {
    const std::string name = i->fabric_attr && i->fabric_attr->prov_name ? i->fabric_attr->prov_name : "?";
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  l.freeinfo(list);
  if (names.empty()) why = "no provider offers reliable datagram endpoints";
  return names;
}

}  // namespace clump::ofi

#else

namespace clump::ofi {
const char* library() noexcept { return ""; }
std::vector<std::string> rdm_providers(std::string& why) {
  why = "built without libfabric: install libfabric-dev and rebuild";
  return {};
}
}  // namespace clump::ofi

#endif
