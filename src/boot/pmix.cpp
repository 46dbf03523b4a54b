#include "boot/pmix.hpp"

#include <cstdlib>
#include <cstring>
#include <string>

#if defined(CLUMP_HAVE_PMIX)
#include <pmix.h>
#endif

extern char** environ;

namespace clump::boot {

const char* pmix_library() noexcept {
#if defined(CLUMP_HAVE_PMIX)
  static const std::string text = PMIx_Get_version();
  return text.c_str();
#else
  return "";
#endif
}

bool started_by_pmix() noexcept {
  if (!std::getenv("PMIX_NAMESPACE") || !std::getenv("PMIX_RANK")) return false;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "PMIX_SERVER_URI", 15) == 0) return true;
  return false;
}

}  // namespace clump::boot
