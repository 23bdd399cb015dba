//===- Initializer.h - Seeded initial values of global tensors --*- C++ -*-===//
//
// A seeded initializer defines a tensor's value element by element from the
// element's index in the GLOBAL tensor, so that every rank of a partitioned
// plan produces exactly its own shard, and a partitioned run starts from the
// same weights as a single-device run of the same model.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_INITIALIZER_H
#define LOOM_RUNTIME_INITIALIZER_H

#include "runtime/Tensor.h"
#include "common/plan/plan.pb.h"

#include <string>
#include <vector>

namespace loom::rt {

/// A uniform number in [0, 1) that depends only on (seed, name, index): the
/// same for a tensor's global element whichever rank computes it.
double seededUniform(uint64_t seed, const std::string &name, uint64_t index);

/// Fills `out` (the whole tensor) from `init`; false and `error` if the
/// initializer is not one this runtime knows.
bool fillFromInitializer(const plan::Initializer &init, const std::string &name,
                         const TensorView &out, std::string &error);

/// Fills `out` with the block at `offsets` (one per dimension) of the tensor
/// of `globalShape` that `init` defines: each element is computed from its
/// global row-major index, and only the block's elements are computed.
bool fillShardFromInitializer(const plan::Initializer &init,
                              const std::string &name, const Shape &globalShape,
                              const std::vector<int64_t> &offsets,
                              const TensorView &out, std::string &error);

} // namespace loom::rt

#endif // LOOM_RUNTIME_INITIALIZER_H
