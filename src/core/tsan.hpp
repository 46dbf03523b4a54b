#pragma once
// ThreadSanitizer sees one process. Causality that runs through other
// processes (a thread writes its segment, then a barrier or a datagram goes
// out; a peer answers; another thread of ours acts on the answer, e.g. the
// progress thread reading that segment for a get) is invisible to it. These
// hooks model "the outside world" as one synchronisation object: whatever a
// thread did before something left the process happens before whatever a
// thread does after something arrived. No-ops outside TSan builds.

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
namespace clump::core {
inline char outside_world;
inline void sent_outside() noexcept { __tsan_release(&outside_world); }
inline void heard_from_outside() noexcept { __tsan_acquire(&outside_world); }
}  // namespace clump::core
#else
namespace clump::core {
inline void sent_outside() noexcept {}
inline void heard_from_outside() noexcept {}
}  // namespace clump::core
#endif
