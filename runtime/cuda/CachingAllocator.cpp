//===- CachingAllocator.cpp - Size-class caching of device memory ---------===//

#include "runtime/cuda/CachingAllocator.h"

#include <algorithm>

namespace loom::rt {

CachingAllocator::CachingAllocator(AllocateFn allocate, FreeFn free)
    : underlyingAllocate(std::move(allocate)), underlyingFree(std::move(free)) {
}

CachingAllocator::~CachingAllocator() {
  releaseCachedLocked();
  for (auto &[ptr, size] : inUse)
    underlyingFree(ptr);
}

size_t CachingAllocator::sizeClass(size_t bytes) {
  constexpr size_t kSmallUnit = 512, kSmallLimit = size_t(1) << 20;
  if (bytes <= kSmallLimit)
    return std::max<size_t>(1, (bytes + kSmallUnit - 1) / kSmallUnit) *
           kSmallUnit;
  // The power of two at or below `bytes`, cut into four steps.
  size_t power = kSmallLimit;
  while (power * 2 <= bytes && power * 2 > power)
    power *= 2;
  size_t step = power / 4;
  return (bytes + step - 1) / step * step;
}

void *CachingAllocator::allocate(size_t bytes) {
  size_t size = sizeClass(bytes);
  std::lock_guard<std::mutex> lock(mutex);
  ++counters.allocations;
  void *ptr = nullptr;
  auto list = freeLists.find(size);
  if (list != freeLists.end() && !list->second.empty()) {
    ptr = list->second.back();
    list->second.pop_back();
    counters.bytesCached -= static_cast<int64_t>(size);
    ++counters.cacheHits;
  } else {
    ptr = underlyingAllocate(size);
    if (!ptr && counters.bytesCached > 0) {
      releaseCachedLocked();
      ptr = underlyingAllocate(size);
    }
    if (!ptr)
      return nullptr;
    ++counters.underlyingAllocations;
  }
  inUse.emplace(ptr, size);
  counters.bytesInUse += static_cast<int64_t>(size);
  counters.peakBytesInUse =
      std::max(counters.peakBytesInUse, counters.bytesInUse);
  return ptr;
}

bool CachingAllocator::deallocate(void *ptr) {
  if (!ptr)
    return true;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = inUse.find(ptr);
  if (it == inUse.end())
    return false;
  size_t size = it->second;
  inUse.erase(it);
  freeLists[size].push_back(ptr);
  counters.bytesInUse -= static_cast<int64_t>(size);
  counters.bytesCached += static_cast<int64_t>(size);
  return true;
}

void CachingAllocator::releaseCached() {
  std::lock_guard<std::mutex> lock(mutex);
  releaseCachedLocked();
}

void CachingAllocator::releaseCachedLocked() {
  for (auto &[size, blocks] : freeLists)
    for (void *ptr : blocks) {
      underlyingFree(ptr);
      ++counters.underlyingFrees;
    }
  freeLists.clear();
  counters.bytesCached = 0;
}

size_t CachingAllocator::blockSize(void *ptr) const {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = inUse.find(ptr);
  return it == inUse.end() ? 0 : it->second;
}

CachingAllocator::Stats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex);
  Stats s = counters;
  s.bytesReserved = s.bytesInUse + s.bytesCached;
  return s;
}

} // namespace loom::rt
