//===- Initializer.cpp - Seeded initial values of global tensors ----------===//

#include "runtime/Initializer.h"

#include "runtime/PlanLayout.h"

#include <cmath>

namespace loom::rt {

namespace {
/// SplitMix64's finaliser: a good 64-bit mixing function.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// FNV-1a of a name, so that tensors draw independent streams.
uint64_t hashName(const std::string &name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name)
    h = (h ^ c) * 0x100000001b3ull;
  return h;
}

/// The stream of (seed, name): computed once per tensor, not per element.
uint64_t streamOf(uint64_t seed, const std::string &name) {
  return mix(seed ^ hashName(name));
}

double uniformAt(uint64_t stream, uint64_t index) {
  uint64_t bits = mix(stream ^ mix(index));
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}
} // namespace

double seededUniform(uint64_t seed, const std::string &name, uint64_t index) {
  return uniformAt(streamOf(seed, name), index);
}

bool fillFromInitializer(const plan::Initializer &init, const std::string &name,
                         const TensorView &out, std::string &error) {
  return fillShardFromInitializer(init, name, out.shape,
                                  std::vector<int64_t>(out.shape.size(), 0),
                                  out, error);
}

bool fillShardFromInitializer(const plan::Initializer &init,
                              const std::string &name, const Shape &globalShape,
                              const std::vector<int64_t> &offsets,
                              const TensorView &out, std::string &error) {
  if (init.distribution() != "uniform" || !std::isfinite(init.low()) ||
      !std::isfinite(init.high()) || init.low() > init.high()) {
    error = "'" + name + "' has an unknown initializer '" +
            init.distribution() + "'";
    return false;
  }
  if (!isFloat(out.dtype)) {
    error = "'" + name + "' must be floating point to initialise";
    return false;
  }
  uint64_t stream = streamOf(init.seed(), name);
  double low = init.low(), range = init.high() - init.low();
  forEachShardRun(
      globalShape, out.shape, offsets,
      [&](int64_t local, int64_t global, int64_t count) {
        for (int64_t i = 0; i < count; ++i) {
          double v = low + range * uniformAt(stream,
                                             static_cast<uint64_t>(global + i));
          float f = static_cast<float>(v);
          if (out.dtype == DType::F32)
            out.as<float>()[local + i] = f;
          else if (out.dtype == DType::F16)
            out.as<uint16_t>()[local + i] = floatToHalf(f);
          else
            out.as<uint16_t>()[local + i] = floatToBf16(f);
        }
      });
  return true;
}

} // namespace loom::rt
