#pragma once
// The net protocol over libfabric (CLUMP_NET=ofi): its datagrams travel as
// messages of a reliable-datagram endpoint (FI_EP_RDM, FI_MSG) of the
// provider FI_PROVIDER names (tcp;ofi_rxm, udp;ofi_rxd here; verbs;ofi_rxm,
// efa, cxi on cluster fabrics). The protocol above keeps its windows, acks,
// exactly-once delivery, flow control, returned messages and liveness: a
// provider reports no peer's death, and clump's rules must not depend on the
// provider. docs/notes/libfabric.md has what was measured of the providers.

#include <memory>
#include <string>

#include "core/settings.hpp"
#include "net/link.hpp"

namespace clump::ofi {

/// A libfabric endpoint (CLUMP_NET=ofi, registered with net::open_link).
/// Throws clump::error naming the cause when it cannot be had (no
/// libfabric, no provider, no domain).
std::unique_ptr<net::link> open_link(const core::config& cfg);

/// True when libfabric offers a provider other than its socket emulations
/// (what CLUMP_NET=auto takes to mean a fabric is there).
bool fabric_present();

}  // namespace clump::ofi
