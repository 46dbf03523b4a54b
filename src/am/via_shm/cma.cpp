#include "am/via_shm/cma.hpp"

#include <sys/uio.h>

#include <cerrno>

namespace clump::detail::cma {

namespace {

/// What a cross-memory call that failed with `e` (its errno) means.
result failure(int e) noexcept {
  if (e == ESRCH) return result::gone;
  if (e == EPERM || e == ENOSYS || e == EACCES || e == EINVAL) return result::refused;
  return result::fault;
}

/// Moves `n` bytes between `local` here and `remote` in `pid` with `call`
/// (process_vm_writev or process_vm_readv, which take the same arguments).
template <auto Call>
result move(pid_t pid, std::byte* remote, std::byte* local, size_t n) noexcept {
  while (n > 0) {
    iovec l{local, n}, r{remote, n};
    const ssize_t w = Call(pid, &l, 1, &r, 1, 0);
    if (w <= 0) {
      if (w < 0 && errno == EINTR) continue;
      return w < 0 ? failure(errno) : result::fault;
    }
    // A short transfer: the rest of the range is not mapped, or a signal came.
    remote += w;
    local += w;
    n -= static_cast<size_t>(w);
  }
  return result::done;
}

}  // namespace

result write_into(pid_t pid, std::byte* address, const void* data, size_t n) noexcept {
  return move<::process_vm_writev>(pid, address, static_cast<std::byte*>(const_cast<void*>(data)), n);
}

result read_from(pid_t pid, const std::byte* address, void* data, size_t n) noexcept {
  return move<::process_vm_readv>(pid, const_cast<std::byte*>(address), static_cast<std::byte*>(data), n);
}

result probe(pid_t pid, const std::byte* address) noexcept {
  std::byte b{};
  return read_from(pid, address, &b, 1);
}

}  // namespace clump::detail::cma
