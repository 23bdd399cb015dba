//===- CachingAllocatorTest.cpp - The caching device allocator's logic ----===//
//
// Proves, on the host with a fake underlying allocator that records every
// call, that the caching allocator rounds requests to size classes, serves
// a freed block's class from the cache without calling the underlying
// allocator, keeps exact statistics (in use, high-water mark, cached,
// reserved), releases the cache and retries once when the underlying
// allocator runs out, rejects foreign pointers, and frees everything it
// holds when destroyed.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CachingAllocator.h"

#include "gtest/gtest.h"

#include <cstdlib>
#include <map>
#include <set>
#include <thread>
#include <vector>

using loom::rt::CachingAllocator;

namespace {

/// An underlying allocator with a byte budget that records its calls.
struct FakeDevice {
  size_t budget = SIZE_MAX, used = 0;
  int allocations = 0, frees = 0;
  std::set<void *> live;
  std::map<void *, size_t> sizes;

  CachingAllocator make() {
    return CachingAllocator(
        [this](size_t bytes) -> void * {
          if (used + bytes > budget)
            return nullptr;
          void *p = std::malloc(bytes);
          used += bytes;
          ++allocations;
          live.insert(p);
          sizes[p] = bytes;
          return p;
        },
        [this](void *p) {
          ASSERT_TRUE(live.count(p)) << "freed a block it did not allocate";
          live.erase(p);
          used -= sizes[p];
          sizes.erase(p);
          ++frees;
          std::free(p);
        });
  }
};

TEST(CachingAllocator, SizeClasses) {
  EXPECT_EQ(CachingAllocator::sizeClass(0), 512u);
  EXPECT_EQ(CachingAllocator::sizeClass(1), 512u);
  EXPECT_EQ(CachingAllocator::sizeClass(512), 512u);
  EXPECT_EQ(CachingAllocator::sizeClass(513), 1024u);
  EXPECT_EQ(CachingAllocator::sizeClass(1 << 20), size_t(1) << 20);
  // Above 1 MiB: four classes per power of two.
  EXPECT_EQ(CachingAllocator::sizeClass((1 << 20) + 1), (size_t(5) << 20) / 4);
  EXPECT_EQ(CachingAllocator::sizeClass(size_t(3) << 20), size_t(3) << 20);
  EXPECT_EQ(CachingAllocator::sizeClass((size_t(3) << 20) + 1),
            (size_t(7) << 20) / 2);
  for (size_t bytes : {size_t(1000), size_t(123456), size_t(7) << 22,
                       (size_t(1) << 33) + 17}) {
    size_t c = CachingAllocator::sizeClass(bytes);
    EXPECT_GE(c, bytes);
    EXPECT_LE(static_cast<double>(c), 1.25 * static_cast<double>(bytes) + 512);
  }
}

TEST(CachingAllocator, ReusesFreedBlocksOfTheSameClass) {
  FakeDevice dev;
  CachingAllocator a = dev.make();
  void *p = a.allocate(1000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(a.blockSize(p), 1024u);
  EXPECT_TRUE(a.deallocate(p));
  void *q = a.allocate(1020); // same class
  EXPECT_EQ(q, p);
  EXPECT_EQ(dev.allocations, 1);
  void *r = a.allocate(5000); // another class
  EXPECT_NE(r, p);
  EXPECT_EQ(dev.allocations, 2);
  CachingAllocator::Stats s = a.stats();
  EXPECT_EQ(s.allocations, 3);
  EXPECT_EQ(s.cacheHits, 1);
  EXPECT_EQ(s.underlyingAllocations, 2);
}

TEST(CachingAllocator, Statistics) {
  FakeDevice dev;
  CachingAllocator a = dev.make();
  void *p = a.allocate(512);
  void *q = a.allocate(2048);
  CachingAllocator::Stats s = a.stats();
  EXPECT_EQ(s.bytesInUse, 2560);
  EXPECT_EQ(s.peakBytesInUse, 2560);
  EXPECT_EQ(s.bytesCached, 0);
  a.deallocate(q);
  s = a.stats();
  EXPECT_EQ(s.bytesInUse, 512);
  EXPECT_EQ(s.peakBytesInUse, 2560);
  EXPECT_EQ(s.bytesCached, 2048);
  EXPECT_EQ(s.bytesReserved, 2560);
  EXPECT_EQ(static_cast<size_t>(s.bytesReserved), dev.used);
  a.deallocate(p);
  a.releaseCached();
  s = a.stats();
  EXPECT_EQ(s.bytesInUse, 0);
  EXPECT_EQ(s.bytesCached, 0);
  EXPECT_EQ(s.underlyingFrees, 2);
  EXPECT_EQ(dev.used, 0u);
  EXPECT_EQ(s.peakBytesInUse, 2560);
}

TEST(CachingAllocator, ReleasesTheCacheWhenTheDeviceIsFull) {
  FakeDevice dev;
  dev.budget = 4096;
  CachingAllocator a = dev.make();
  void *p = a.allocate(3000); // 3072
  a.deallocate(p);
  // 2048 does not fit next to the cached 3072: the cache goes, then it fits.
  void *q = a.allocate(2048);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(dev.frees, 1);
  EXPECT_EQ(a.stats().bytesCached, 0);
  // Nothing cached and no room: nullptr, and the allocator stays usable.
  EXPECT_EQ(a.allocate(4096), nullptr);
  EXPECT_EQ(a.stats().bytesInUse, 2048);
  a.deallocate(q);
  EXPECT_NE(a.allocate(4096), nullptr);
}

TEST(CachingAllocator, RejectsForeignPointersAndIgnoresNull) {
  FakeDevice dev;
  CachingAllocator a = dev.make();
  int local = 0;
  EXPECT_FALSE(a.deallocate(&local));
  EXPECT_TRUE(a.deallocate(nullptr));
  void *p = a.allocate(10);
  EXPECT_TRUE(a.deallocate(p));
  EXPECT_FALSE(a.deallocate(p)) << "a double free must be rejected";
  EXPECT_EQ(a.blockSize(p), 0u);
}

TEST(CachingAllocator, FreesEverythingWhenDestroyed) {
  FakeDevice dev;
  {
    CachingAllocator a = dev.make();
    void *p = a.allocate(100);
    (void)a.allocate(1 << 21); // still in use at destruction
    a.deallocate(p);
  }
  EXPECT_TRUE(dev.live.empty());
  EXPECT_EQ(dev.allocations, dev.frees);
}

TEST(CachingAllocator, ThreadsShareOneAllocator) {
  CachingAllocator a([](size_t bytes) { return std::malloc(bytes); },
                     [](void *p) { std::free(p); });
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&a, t] {
      for (int i = 0; i < 500; ++i) {
        void *p = a.allocate(512 * (1 + (i + t) % 7));
        ASSERT_NE(p, nullptr);
        a.deallocate(p);
      }
    });
  for (std::thread &t : threads)
    t.join();
  CachingAllocator::Stats s = a.stats();
  EXPECT_EQ(s.bytesInUse, 0);
  EXPECT_EQ(s.allocations, 2000);
  EXPECT_LE(s.underlyingAllocations, 4 * 7);
}

} // namespace
