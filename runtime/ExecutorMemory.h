//===- ExecutorMemory.h - What the executor allocates, charged --*- C++ -*-===//
//
// Private to the executor: included only by its .cpp files. Every byte the
// executor allocates is charged to its MemoryAccount while it lives, so that
// Executor::peakBytes() is a real high-water mark and never undercuts
// plannedBytes(): the state and the step arena (AlignedBuffer, through the
// backend), and the scratch a collective allocates itself, in host memory
// (HostBufferOps) or in the backend's for a device communicator
// (BackendBufferOps). What fills that memory at load time, and the host
// copies of a backend whose memory the host cannot touch, are in
// ExecutorMemory.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_EXECUTORMEMORY_H
#define LOOM_RUNTIME_EXECUTORMEMORY_H

#include "runtime/Backend.h"
#include "runtime/comm/Collectives.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>

namespace loom::rt {

/// What an executor holds: the bytes of its live allocations, and the most
/// it has held at once (Executor::peakBytes).
class MemoryAccount {
public:
  void charge(int64_t bytes) {
    held += bytes;
    peak = std::max(peak, held);
  }
  void release(int64_t bytes) { held -= bytes; }
  /// Charges an allocation of `bytes` at `ptr` until forget(ptr).
  void *remember(void *ptr, size_t bytes) {
    if (ptr) {
      sizes[ptr] = static_cast<int64_t>(bytes);
      charge(static_cast<int64_t>(bytes));
    }
    return ptr;
  }
  void forget(void *ptr) {
    auto it = sizes.find(ptr);
    if (it == sizes.end())
      return;
    release(it->second);
    sizes.erase(it);
  }
  int64_t peakBytes() const { return peak; }

private:
  int64_t held = 0, peak = 0;
  std::map<void *, int64_t> sizes;
};

/// Zero-initialised memory of the backend (host memory for the CPU).
struct AlignedBuffer {
  AlignedBuffer(Backend &backend, MemoryAccount &account, int64_t bytes)
      : backend(backend), account(account), size(bytes),
        data(static_cast<unsigned char *>(
            account.remember(backend.allocate(static_cast<size_t>(bytes)),
                             static_cast<size_t>(bytes)))) {}
  ~AlignedBuffer() {
    if (data) {
      account.forget(data);
      backend.deallocate(data);
    }
  }
  AlignedBuffer(const AlignedBuffer &) = delete;
  AlignedBuffer &operator=(const AlignedBuffer &) = delete;
  Backend &backend;
  MemoryAccount &account;
  int64_t size;
  unsigned char *data;
};

/// A collective's scratch in host memory, charged to the executor.
class HostBufferOps final : public BufferOps {
public:
  explicit HostBufferOps(MemoryAccount &account) : account(account) {}
  void *allocate(size_t bytes) override;
  void deallocate(void *ptr) override;

private:
  MemoryAccount &account;
};

/// A collective's byte moves on the backend's memory (device communicators).
class BackendBufferOps final : public BufferOps {
public:
  BackendBufferOps(Backend &backend, MemoryAccount &account)
      : backend(backend), account(account) {}
  void copy(void *dst, const void *src, size_t bytes) override;
  void copy2D(void *dst, size_t dstPitch, const void *src, size_t srcPitch,
              size_t width, size_t height) override;
  void zero(void *dst, size_t bytes) override;
  void *allocate(size_t bytes) override;
  void deallocate(void *ptr) override;

private:
  Backend &backend;
  MemoryAccount &account;
};

} // namespace loom::rt

#endif // LOOM_RUNTIME_EXECUTORMEMORY_H
