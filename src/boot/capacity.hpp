#pragma once
// How much shared memory a job needs per rank, and how much this machine (and
// the cgroup we run in) can still give. clumprun checks P x the estimate
// against the capacity before it starts anything, so that a job too big for
// the machine is refused with numbers instead of dying of SIGBUS or the OOM
// killer halfway through start-up.

#include <cstddef>
#include <string>

namespace clump::boot {

/// Bytes of shared memory one rank commits when it starts: the queue block of
/// the one endpoint it touches (two queues of CLUMP_SHM_QUEUE_DEPTH 64-byte
/// packets, two medium rings of CLUMP_SHM_MEDIUM_RING bytes, and 64 KiB of
/// control lines). Segments are not counted: their pages are committed only
/// where the program touches them. Reads clump::core::settings().
size_t estimate_shm_bytes_per_rank();

/// Bytes that processes started from here can still commit: the smaller of
/// MemAvailable (/proc/meminfo) and, when this process's cgroup (v2, or v1
/// memory controller) or one of its ancestors has a memory limit, that limit
/// minus current usage. SIZE_MAX when neither can be read.
size_t shm_capacity_bytes();

/// A few lines for people (clump-info, clumprun -v): MemAvailable, the cgroup
/// limit and usage, /dev/shm size and free space, the per-rank estimate with
/// the settings it comes from, and how many ranks fit.
std::string shm_capacity_report();

/// "704 KiB", "23.3 GiB": bytes in binary units, for messages.
std::string format_bytes(size_t bytes);

}  // namespace clump::boot
