#include "base/allocator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

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

// Many small blocks (how the host allocates), and one large one.
TEST(AllocatorTest, HeapBytesInUseFollowsAllocationsAndFrees) {
  constexpr size_t kBlocks = 20000, kBlockBytes = 1000, kLargeBytes = 8 << 20;
  constexpr int64_t kTotal = kBlocks * kBlockBytes + kLargeBytes;
  const int64_t before = HeapBytesInUse();
  ASSERT_GE(before, 0);
  std::vector<char*> blocks;
  blocks.reserve(kBlocks + 1);
  for (size_t i = 0; i < kBlocks; ++i) blocks.push_back(static_cast<char*>(std::malloc(kBlockBytes)));
  blocks.push_back(static_cast<char*>(std::malloc(kLargeBytes)));
  for (char* b : blocks) {
    ASSERT_NE(b, nullptr);
    b[0] = 1;  // used, so the allocations are kept
  }
  const int64_t held = HeapBytesInUse();
  for (char* b : blocks) std::free(b);
  const int64_t after = HeapBytesInUse();
  EXPECT_GE(held - before, kTotal);
  EXPECT_LT(held - before, kTotal + kTotal / 4);  // size classes round up, and the vector
  EXPECT_GE(held - after, kTotal);
}

#ifndef __SANITIZE_ADDRESS__  // ASan keeps freed memory in quarantine, by design
// Without it, jemalloc keeps freed pages resident for seconds, and a
// benchmark's RSS figure would count them.
TEST(AllocatorTest, ReleaseFreeMemoryReturnsFreedPagesToTheSystem) {
  constexpr size_t kBlocks = 1024, kBlockBytes = 64 << 10;  // 64 MiB in all
  constexpr int64_t kTotal = kBlocks * kBlockBytes;
  ReleaseFreeMemory();
  const int64_t before = ResidentBytes();
  ASSERT_GT(before, 0);
  std::vector<char*> blocks;
  for (size_t i = 0; i < kBlocks; ++i) {
    blocks.push_back(static_cast<char*>(std::malloc(kBlockBytes)));
    ASSERT_NE(blocks.back(), nullptr);
    std::memset(blocks.back(), 1, kBlockBytes);
  }
  const int64_t held = ResidentBytes();
  for (char* b : blocks) std::free(b);
  ReleaseFreeMemory();
  const int64_t after = ResidentBytes();
  EXPECT_GE(held - before, kTotal * 9 / 10);
  EXPECT_LE(after - before, kTotal / 10) << "held " << held << ", after " << after;
}
#endif

}  // namespace
}  // namespace dsh
