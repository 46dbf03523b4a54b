#pragma once
// Cross-memory attach (process_vm_writev/readv): one copy, by the kernel,
// between this process and another one of the node. Long messages into a
// segment in a process's own memory (AM_SetSeg with malloc'd memory) use it;
// the send and dispatch paths both do (via_shm/send.cpp, dispatch.cpp).

#include <sys/types.h>

#include <cstddef>

namespace clump::detail::cma {

enum class result {
  done,     // every byte moved
  refused,  // the kernel does not allow it (permissions, no such system call)
  gone,     // the other process has exited
  fault,    // the range is not mapped there (bytes may have moved in part)
};

/// Writes `n` bytes at `data` to `address` in process `pid`.
result write_into(pid_t pid, std::byte* address, const void* data, size_t n) noexcept;

/// Reads `n` bytes at `address` in process `pid` into `data`.
result read_from(pid_t pid, const std::byte* address, void* data, size_t n) noexcept;

/// Whether the kernel lets us reach `address` in process `pid`, without
/// writing: reads its first byte.
result probe(pid_t pid, const std::byte* address) noexcept;

}  // namespace clump::detail::cma
