#pragma once
// A job started by a PMIx server (srun --mpi=pmix, mpirun): what this build
// has, how to tell, and joining it (boot/pmix_job.cpp;
// docs/notes/pmix-bootstrap.md has the research behind it).

#include <memory>
#include <span>

#include "boot/job.hpp"

namespace clump::boot {

/// The PMIx library's version text when this build can join jobs through a PMIx server
/// (libpmix-dev found by CMake); else "".
const char* pmix_library() noexcept;

/// True when this process was started by a PMIx server: PMIX_NAMESPACE,
/// PMIX_RANK and a PMIX_SERVER_URI* variable are all set (PMIx_Init is
/// not called to find out: without a server it would make a singleton).
bool started_by_pmix() noexcept;

/// Joins the job of the PMIx server that started this process (see
/// started_by_pmix), handing over `region_fd` (to the ranks of this node,
/// through a socket of the node: PMIx carries no descriptors) and
/// `net_address`. Throws clump::error naming the rank, host and PMIx call
/// that failed, or not_init when this build has no PMIx.
std::unique_ptr<job> join_pmix(int region_fd, std::span<const std::byte> net_address);

}  // namespace clump::boot
