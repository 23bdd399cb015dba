//===- OneDnnUtil.h - oneDNN engine, descriptors and cache ------*- C++ -*-===//
//-*-===//
//
// The CPU backend runs every oneDNN primitive on one CPU engine, with plain
// row-major (possibly strided) f32 memory, a user-managed per-thread
// scratchpad, and primitives cached by a string signature of the op, its
// shapes, its attributes and the thread count they were created for.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CPU_ONEDNNUTIL_H
#define LOOM_RUNTIME_CPU_ONEDNNUTIL_H

#include "runtime/Tensor.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace loom::rt::cpu {

/// The CPU engine all primitives are created for and run on.
const dnnl::engine &cpuEngine();

/// oneDNN dims of `shape`; rank 0 becomes [1].
dnnl::memory::dims toDims(const Shape &shape);
/// A dense row-major f32 descriptor of `shape` (rank 0 becomes [1]).
dnnl::memory::desc plainDesc(const Shape &shape);
/// An f32 descriptor with explicit element strides.
dnnl::memory::desc stridedDesc(const Shape &shape,
                               const std::vector<int64_t> &strides);
/// Attributes asking for a user-provided scratchpad (see execute()).
dnnl::primitive_attr userScratchpadAttr();

/// A primitive ready to run, with the scratchpad it needs.
struct CachedPrimitive {
  dnnl::primitive primitive;
  dnnl::memory::desc scratchpad;
};

template <typename Prim, typename PrimitiveDesc>
CachedPrimitive makeCached(const PrimitiveDesc &pd) {
  return {Prim(pd), pd.scratchpad_desc()};
}

/// Builds cache keys: an op tag followed by integers and shapes.
class CacheKey {
public:
  explicit CacheKey(const char *tag) : text(tag) {}
  CacheKey &add(int64_t value);
  CacheKey &add(const std::vector<int64_t> &values);
  /// Adds a float by its bit pattern.
  CacheKey &addFloat(float value);
  const std::string &str() const { return text; }

private:
  std::string text;
};

/// Primitives by signature, shared by concurrent kernel calls. The thread
/// count is part of every key: oneDNN specialises primitives for it.
class PrimitiveCache {
public:
  /// The primitive under `key`, created by `make()` (returning a
  /// CachedPrimitive) on a miss.
  template <typename Make>
  std::shared_ptr<const CachedPrimitive> get(const CacheKey &key, Make &&make) {
    std::string full = withThreads(key);
    if (auto hit = lookup(full))
      return hit;
    return insert(std::move(full), make());
  }
  size_t size() const;
  /// Number of primitives created so far (cache misses).
  size_t creations() const;
  void clear();

private:
  static std::string withThreads(const CacheKey &key);
  std::shared_ptr<const CachedPrimitive> lookup(const std::string &key);
  std::shared_ptr<const CachedPrimitive> insert(std::string key,
                                                CachedPrimitive primitive);

  /// Beyond this many entries the cache starts over (shapes are static, so
  /// a plan uses a bounded set).
  static constexpr size_t kCapacity = 1024;
  mutable std::mutex mutex;
  std::unordered_map<std::string, std::shared_ptr<const CachedPrimitive>>
      entries;
  size_t created = 0;
};

/// Wraps existing data (not owned) as memory of descriptor `md`.
dnnl::memory wrapMemory(const dnnl::memory::desc &md, const void *data);

/// Runs `p` on `args` plus a per-thread scratchpad and waits for it.
void execute(const CachedPrimitive &p,
             std::unordered_map<int, dnnl::memory> args);

} // namespace loom::rt::cpu

#endif // LOOM_RUNTIME_CPU_ONEDNNUTIL_H
