#pragma once
// The client side of the clumprun boot protocol (see boot/wire.hpp).

#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "boot/job.hpp"

namespace clump::boot {

/// Joins the job of the clumprun that gave this process `boot_fd` as rank
/// `rank` of `size`, handing over `region_fd` and `net_address` (at most
/// wire::max_net_address bytes; job::join checks). `job_id_hex` is
/// CLUMP_JOB_ID (checked against what clumprun says; empty skips the check).
/// Throws clump::error when the socket is not clumprun's, the launcher is gone
/// or refuses or speaks another protocol version, its job message is
/// malformed, or the process cannot hold one descriptor per rank.
std::unique_ptr<job> join_clumprun(int boot_fd, int rank, int size, const std::string& job_id_hex, int region_fd,
                                   std::span<const std::byte> net_address);

}  // namespace clump::boot
