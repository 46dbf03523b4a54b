#pragma once
// CHECK for the conformance programs run under clumprun: a failed check
// prints the rank, the place, the condition and a formatted explanation, and
// counts; the program exits non-zero when `failures` is not 0.

#include <cstdio>

namespace clump::test {
inline int failures = 0;
inline int my_rank = -1;
}  // namespace clump::test

#define CHECK(cond, ...)                                                                                      \
  do {                                                                                                        \
    if (!(cond)) {                                                                                            \
      std::fprintf(stderr, "rank %d: %s:%d: check failed: %s: ", clump::test::my_rank, __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                                                      \
      std::fprintf(stderr, "\n");                                                                             \
      ++clump::test::failures;                                                                                \
    }                                                                                                         \
  } while (0)
