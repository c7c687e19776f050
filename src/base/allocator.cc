#include "base/allocator.h"

#include <malloc.h>
#include <unistd.h>

#include <fstream>

#ifdef DSH_JEMALLOC
#include <jemalloc/jemalloc.h>
#elif defined(__SANITIZE_ADDRESS__)
// From the ASan runtime (g++ ships no header for it).
extern "C" size_t __sanitizer_get_current_allocated_bytes();
#endif

namespace dsh {
#ifdef DSH_JEMALLOC
namespace {
#define DSH_STRINGIFY_(x) #x
#define DSH_STRINGIFY(x) DSH_STRINGIFY_(x)
constexpr const char kPurgeAllArenas[] = "arena." DSH_STRINGIFY(MALLCTL_ARENAS_ALL) ".purge";
}  // namespace
#endif

std::string AllocatorName() {
#ifdef DSH_JEMALLOC
  const char* version = nullptr;
  size_t size = sizeof(version);
  if (mallctl("version", &version, &size, nullptr, 0) == 0 && version != nullptr) {
    return std::string("jemalloc ") + version;
  }
  return "jemalloc";
#else
  return "system malloc";
#endif
}

int64_t HeapBytesInUse() {
#ifdef DSH_JEMALLOC
  // The calling thread's cache holds freed blocks that jemalloc still counts
  // as allocated; the statistics are refreshed only when the epoch advances.
  (void)mallctl("thread.tcache.flush", nullptr, nullptr, nullptr, 0);
  uint64_t epoch = 1;
  size_t size = sizeof(epoch);
  (void)mallctl("epoch", &epoch, &size, &epoch, size);
  size_t allocated = 0;
  size = sizeof(allocated);
  if (mallctl("stats.allocated", &allocated, &size, nullptr, 0) != 0) return -1;
  return static_cast<int64_t>(allocated);
#elif defined(__SANITIZE_ADDRESS__)
  return static_cast<int64_t>(__sanitizer_get_current_allocated_bytes());
#else
  struct mallinfo2 mi = ::mallinfo2();
  return static_cast<int64_t>(mi.uordblks + mi.hblkhd);
#endif
}

int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  if (!(statm >> size >> resident)) return -1;
  return resident * ::sysconf(_SC_PAGESIZE);
}

void ReleaseFreeMemory() {
#ifdef DSH_JEMALLOC
  (void)mallctl("thread.tcache.flush", nullptr, nullptr, nullptr, 0);
  (void)mallctl(kPurgeAllArenas, nullptr, nullptr, nullptr, 0);
#elif !defined(__SANITIZE_ADDRESS__)
  ::malloc_trim(0);
#endif
}

}  // namespace dsh
