#pragma once

#include <cstdint>
#include <string>

namespace dsh {

// The memory allocator this build of dsh uses, for logs and tests:
// "jemalloc 5.3.0-…" when linked with jemalloc (the default build, see
// DSH_JEMALLOC in CMakeLists.txt), else "system malloc" (sanitizer builds,
// whose runtime brings its own, and -DDSH_JEMALLOC=OFF).
std::string AllocatorName();

// Bytes that the program's allocations hold now (handed out by malloc and
// not yet freed), as the allocator in use counts them: jemalloc's
// `stats.allocated`, the sanitizer runtime's count, or glibc's mallinfo2()
// (`uordblks + hblkhd`). For benchmarks and tests that compare two readings:
// it is slow (jemalloc refreshes its statistics), and a reading may still
// count what other threads freed into their allocation caches (tens of KiB
// a thread with jemalloc). Thread-safe.
int64_t HeapBytesInUse();

// The resident set size of this process in bytes (/proc/self/statm), or -1
// if it cannot be read. Call ReleaseFreeMemory() first for a figure of the
// memory in use. Thread-safe.
int64_t ResidentBytes();

// Hands the free memory the allocator keeps back to the operating system, so
// that a resident-set reading right after it counts memory in use, not
// memory the allocator holds for later (jemalloc keeps freed pages for
// seconds). Slow; for benchmarks. Thread-safe.
void ReleaseFreeMemory();

}  // namespace dsh
