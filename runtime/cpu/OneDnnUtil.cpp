//===- OneDnnUtil.cpp - oneDNN engine, descriptors and primitive cache ----===//

#include "runtime/cpu/OneDnnUtil.h"

#include <omp.h>

#include <cstring>

namespace loom::rt::cpu {

const dnnl::engine &cpuEngine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::memory::dims toDims(const Shape &shape) {
  if (shape.empty())
    return {1};
  return dnnl::memory::dims(shape.begin(), shape.end());
}

dnnl::memory::desc plainDesc(const Shape &shape) {
  dnnl::memory::dims dims = toDims(shape);
  dnnl::memory::dims strides(dims.size(), 1);
  for (size_t i = dims.size() - 1; i > 0; --i)
    strides[i - 1] = strides[i] * dims[i];
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, strides);
}

dnnl::memory::desc stridedDesc(const Shape &shape,
                               const std::vector<int64_t> &strides) {
  return dnnl::memory::desc(dnnl::memory::dims(shape.begin(), shape.end()),
                            dnnl::memory::data_type::f32,
                            dnnl::memory::dims(strides.begin(), strides.end()));
}

dnnl::primitive_attr userScratchpadAttr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

CacheKey &CacheKey::add(int64_t value) {
  text += ':';
  text += std::to_string(value);
  return *this;
}

CacheKey &CacheKey::add(const std::vector<int64_t> &values) {
  text += ":[";
  for (int64_t v : values) {
    text += std::to_string(v);
    text += ',';
  }
  text += ']';
  return *this;
}

CacheKey &CacheKey::addFloat(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return add(bits);
}

std::string PrimitiveCache::withThreads(const CacheKey &key) {
  return key.str() + "|t" + std::to_string(omp_get_max_threads());
}

std::shared_ptr<const CachedPrimitive>
PrimitiveCache::lookup(const std::string &key) {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = entries.find(key);
  return it == entries.end() ? nullptr : it->second;
}

std::shared_ptr<const CachedPrimitive>
PrimitiveCache::insert(std::string key, CachedPrimitive primitive) {
  auto entry = std::make_shared<const CachedPrimitive>(std::move(primitive));
  std::lock_guard<std::mutex> lock(mutex);
  ++created;
  if (entries.size() >= kCapacity)
    entries.clear();
  // A concurrent miss may have inserted first; either primitive is fine.
  return entries.emplace(std::move(key), std::move(entry)).first->second;
}

size_t PrimitiveCache::size() const {
  std::lock_guard<std::mutex> lock(mutex);
  return entries.size();
}

size_t PrimitiveCache::creations() const {
  std::lock_guard<std::mutex> lock(mutex);
  return created;
}

void PrimitiveCache::clear() {
  std::lock_guard<std::mutex> lock(mutex);
  entries.clear();
}

dnnl::memory wrapMemory(const dnnl::memory::desc &md, const void *data) {
  // oneDNN takes a non-const handle for inputs as well; it does not write
  // to memory passed as a source.
  return dnnl::memory(md, cpuEngine(), const_cast<void *>(data));
}

void execute(const CachedPrimitive &p,
             std::unordered_map<int, dnnl::memory> args) {
  size_t bytes = p.scratchpad.get_size();
  if (bytes > 0) {
    constexpr size_t kAlign = 64;
    thread_local std::vector<unsigned char> scratch;
    if (scratch.size() < bytes + kAlign)
      scratch.resize(bytes + kAlign);
    auto address = reinterpret_cast<uintptr_t>(scratch.data());
    void *aligned = scratch.data() + (kAlign - address % kAlign) % kAlign;
    args.emplace(DNNL_ARG_SCRATCHPAD, wrapMemory(p.scratchpad, aligned));
  }
  dnnl::stream stream(cpuEngine());
  p.primitive.execute(stream, args);
  stream.wait();
}

} // namespace loom::rt::cpu
