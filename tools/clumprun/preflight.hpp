#pragma once
// Checks clumprun makes before it starts anything, so that a job that cannot
// run is refused with the reason and the fix instead of failing halfway
// through start-up with some ranks already running.

#include <optional>
#include <string>

namespace clumprun {

/// Finds `name` the way execvp would (PATH search when it has no '/').
/// Returns the path to execute, or sets `error` to errno-style
/// ENOENT / EACCES / EISDIR and `why` to a sentence.
std::optional<std::string> resolve_program(const std::string& name, int& error, std::string& why);

/// Checks that `nranks` ranks fit this machine's limits: file descriptors (of
/// clumprun and of every rank; raises clumprun's soft limit to the hard one
/// when that suffices), processes (RLIMIT_NPROC, cgroup pids.max) and shared
/// memory (P x estimate_shm_bytes_per_rank() against shm_capacity_bytes()).
/// Returns the refusal message ("-n 100000 needs ..."), or nothing when the job fits.
std::optional<std::string> check_capacity(int nranks, bool label);

}  // namespace clumprun
