#include "base/allocator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>

#ifdef DSH_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif

namespace dsh {
namespace {

#ifdef DSH_JEMALLOC
uint64_t AllocatedByThisThread() {
  uint64_t bytes = 0;
  size_t size = sizeof(bytes);
  EXPECT_EQ(mallctl("thread.allocated", &bytes, &size, nullptr, 0), 0);
  return bytes;
}

// Linking jemalloc is not enough: plain malloc (and so new, SQLite, asio)
// must resolve to it, not to glibc's, or the build gains nothing.
TEST(AllocatorTest, PlainMallocIsJemallocs) {
  EXPECT_EQ(AllocatorName().rfind("jemalloc 5.", 0), 0u) << AllocatorName();
  uint64_t before = AllocatedByThisThread();
  void* p = std::malloc(100000);
  ASSERT_NE(p, nullptr);
  uint64_t after = AllocatedByThisThread();
  std::free(p);
  EXPECT_GE(after - before, 100000u);
}
#else
TEST(AllocatorTest, SanitizerBuildsUseTheSystemAllocator) { EXPECT_EQ(AllocatorName(), "system malloc"); }
#endif

}  // namespace
}  // namespace dsh
