//===- CachingAllocator.h - Size-class caching of device memory -*- C++ -*-===//
//
// cudaMalloc and cudaFree synchronise the device and cost tens of
// microseconds; a step allocates the same sizes again and again. The caching
// allocator rounds every request up to a size class, keeps freed blocks on
// one free list per class and hands them out again, and goes to the
// underlying allocator only when a class's list is empty (releasing the
// whole cache and retrying once when that fails). Blocks are reused only by
// work ordered after their release: the CUDA backend queues all its work
// on one stream, so a block freed on the host is free on the device once
// the work queued before the free has run.
//
// The underlying allocate and free are injected, so the logic is tested on
// the host without a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_CACHINGALLOCATOR_H
#define LOOM_RUNTIME_CUDA_CACHINGALLOCATOR_H

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace loom::rt {

class CachingAllocator {
public:
  /// The underlying allocator: nullptr when it has no memory left.
  using AllocateFn = std::function<void *(size_t bytes)>;
  using FreeFn = std::function<void(void *ptr)>;

  struct Stats {
    /// Bytes of blocks handed out and not yet returned (size classes).
    int64_t bytesInUse = 0;
    /// The most bytesInUse has been (the high-water mark).
    int64_t peakBytesInUse = 0;
    /// Bytes of free blocks kept for reuse.
    int64_t bytesCached = 0;
    /// bytesInUse + bytesCached: what the underlying allocator holds for us.
    int64_t bytesReserved = 0;
    int64_t allocations = 0;
    /// Allocations served from the cache.
    int64_t cacheHits = 0;
    /// Calls of the underlying allocate and free.
    int64_t underlyingAllocations = 0;
    int64_t underlyingFrees = 0;
  };

  CachingAllocator(AllocateFn allocate, FreeFn free);
  /// Frees every block, cached or still in use.
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator &) = delete;
  CachingAllocator &operator=(const CachingAllocator &) = delete;

  /// A block of at least `bytes` (nullptr if the underlying allocator has
  /// no memory even after the cache is released). A request of 0 bytes
  /// gets the smallest class.
  void *allocate(size_t bytes);
  /// Returns a block from allocate() to the cache; nullptr is ignored.
  /// Returns false for a pointer this allocator did not hand out.
  bool deallocate(void *ptr);
  /// Frees every cached block to the underlying allocator.
  void releaseCached();
  /// The size of the block of `ptr`, or 0 if it is not in use.
  size_t blockSize(void *ptr) const;

  Stats stats() const;

  /// The class of a request: multiples of 512 bytes up to 1 MiB, then four
  /// classes per power of two (at most 25% more than asked).
  static size_t sizeClass(size_t bytes);

private:
  void releaseCachedLocked();

  AllocateFn underlyingAllocate;
  FreeFn underlyingFree;
  mutable std::mutex mutex;
  std::map<size_t, std::vector<void *>> freeLists;
  std::unordered_map<void *, size_t> inUse;
  Stats counters;
};

} // namespace loom::rt

#endif // LOOM_RUNTIME_CUDA_CACHINGALLOCATOR_H
