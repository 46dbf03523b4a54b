#pragma once
// Logging for every layer: one line per event on stderr, prefixed with the
// process's rank once it is known. Errors are logged once, where first seen,
// with errno, peer, operation and the fix.

namespace clump::core {

/// Sets the rank shown in the prefix ("clump[3]: ..."); -1 before boot.
void set_log_rank(int rank) noexcept;

[[gnu::format(printf, 1, 2)]] void log_error(const char* fmt, ...) noexcept;
[[gnu::format(printf, 1, 2)]] void log_warning(const char* fmt, ...) noexcept;
/// Printed only when CLUMP_VERBOSE >= 1.
[[gnu::format(printf, 1, 2)]] void log_info(const char* fmt, ...) noexcept;
/// Logs and aborts the process (clumprun then ends the job).
[[noreturn, gnu::format(printf, 1, 2)]] void fatal(const char* fmt, ...) noexcept;

}  // namespace clump::core
