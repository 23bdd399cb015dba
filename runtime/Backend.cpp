//===- Backend.cpp - The default memory of a backend: host memory ---------===//

#include "runtime/Backend.h"

#include <cstdlib>
#include <cstring>

namespace loom::rt {

void *Backend::allocate(size_t bytes) {
  // A slack line past the end, as kernels may read whole vectors.
  size_t rounded = ((bytes + 63) / 64 + 1) * 64;
  void *ptr = std::aligned_alloc(64, rounded);
  if (ptr)
    std::memset(ptr, 0, rounded);
  return ptr;
}

void Backend::deallocate(void *ptr) { std::free(ptr); }

void Backend::copyToDevice(void *dst, const void *src, size_t bytes) {
  if (bytes)
    std::memcpy(dst, src, bytes);
}

void Backend::copyToHost(void *dst, const void *src, size_t bytes) {
  if (bytes)
    std::memcpy(dst, src, bytes);
}

void Backend::copyOnDevice(void *dst, const void *src, size_t bytes) {
  if (bytes && dst != src)
    std::memmove(dst, src, bytes);
}

void Backend::copy2DOnDevice(void *dst, size_t dstPitch, const void *src,
                             size_t srcPitch, size_t width, size_t height) {
  for (size_t r = 0; r < height; ++r)
    copyOnDevice(static_cast<unsigned char *>(dst) + r * dstPitch,
                 static_cast<const unsigned char *>(src) + r * srcPitch, width);
}

void Backend::zero(void *dst, size_t bytes) {
  if (bytes)
    std::memset(dst, 0, bytes);
}

} // namespace loom::rt
