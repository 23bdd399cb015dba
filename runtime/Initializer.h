//===- Initializer.h - Seeded initial values of global tensors --*- C++ -*-===//

#ifndef LOOM_RUNTIME_INITIALIZER_H
#define LOOM_RUNTIME_INITIALIZER_H

#include "runtime/Tensor.h"
#include "runtime/plan.pb.h"

#include <string>

namespace loom::rt {

/// A uniform number in [0, 1) that depends only on (seed, name, index): the
/// same for a tensor's global element whichever rank computes it.
double seededUniform(uint64_t seed, const std::string &name, uint64_t index);

/// Fills `out` (the whole tensor) from `init`; false and `error` if the
/// initializer is not one this runtime knows.
bool fillFromInitializer(const plan::Initializer &init, const std::string &name,
                         const TensorView &out, std::string &error);

} // namespace loom::rt

#endif // LOOM_RUNTIME_INITIALIZER_H
