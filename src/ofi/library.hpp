#pragma once
// The libfabric calls clump makes through dlopen (see calls() in
// fabric.cpp); the rest of libfabric's API is inline functions that call
// through the objects these return. Only with CLUMP_HAVE_OFI.

#include <rdma/fabric.h>

#include <string>

namespace clump::ofi {

struct library_calls {
  void* handle = nullptr;  // null: not loaded (`why` says why)
  decltype(&::fi_version) version = nullptr;
  decltype(&::fi_getinfo) getinfo = nullptr;
  decltype(&::fi_freeinfo) freeinfo = nullptr;
  decltype(&::fi_dupinfo) dupinfo = nullptr;
  decltype(&::fi_fabric) fabric = nullptr;
  decltype(&::fi_strerror) strerror = nullptr;
  std::string why;
};

/// Loads libfabric on first use; thread-safe.
const library_calls& calls();

}  // namespace clump::ofi
