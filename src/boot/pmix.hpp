#pragma once
// boot under a PMIx server (srun --mpi=pmix, mpirun): what this build has.
// The PMIx job itself is issue 15's work in progress (docs/notes/pmix-bootstrap.md).

namespace clump::boot {

/// The PMIx library's version text when this build can join jobs through a PMIx server
/// (libpmix-dev found by CMake); else "".
const char* pmix_library() noexcept;

/// True when this process was started by a PMIx server: PMIX_NAMESPACE,
/// PMIX_RANK and a PMIX_SERVER_URI* variable are all set (PMIx_Init is
/// not called to find out: without a server it would make a singleton).
bool started_by_pmix() noexcept;

}  // namespace clump::boot
