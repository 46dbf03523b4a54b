#pragma once
// The client side of the clumprun boot protocol (see boot/wire.hpp).

#include <memory>

#include "boot/job.hpp"

namespace clump::boot {

/// Joins the job of the clumprun that gave this process `boot_fd` as rank
/// `rank` of `size`, handing over `region_fd`. `job_id_hex` is CLUMP_JOB_ID
/// (checked against what clumprun says; empty skips the check). Throws
/// clump::error when the socket is not clumprun's, the launcher is gone or
/// refuses, or the process cannot hold one descriptor per rank.
std::unique_ptr<job> join_clumprun(int boot_fd, int rank, int size, const std::string& job_id_hex, int region_fd);

}  // namespace clump::boot
