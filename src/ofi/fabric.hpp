#pragma once
// libfabric (Debian libfabric-dev, optional at build time): what this build
// has and which providers the machine offers. The transport over it is
// issue 16's work in progress; docs/notes/libfabric.md has the research.

#include <string>
#include <vector>

namespace clump::ofi {

/// libfabric's version text ("libfabric 1.17.0") when this build has it; else "".
const char* library() noexcept;

/// The providers that offer reliable datagram endpoints (FI_EP_RDM with
/// FI_MSG) here, each once, as libfabric names them ("tcp;ofi_rxm"), in
/// libfabric's order of preference. Empty without libfabric, or when it
/// finds none; `why` then says which.
std::vector<std::string> rdm_providers(std::string& why);

}  // namespace clump::ofi
