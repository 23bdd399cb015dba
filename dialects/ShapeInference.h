//===- ShapeInference.h - Shape helpers over MLIR shapes --------*- C++ -*-===//
//
// Formatting and numpy broadcasting of `ArrayRef<int64_t>` shapes for the
// importer and the passes. The rule itself is the op rules'
// (common/ops/OpRules.h), which the ops' type inference runs.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECTS_SHAPEINFERENCE_H
#define LOOM_DIALECTS_SHAPEINFERENCE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

namespace loom {

/// Formats a shape as "[2, 3]" for messages.
std::string formatShape(llvm::ArrayRef<int64_t> shape);

/// The numpy broadcast of two shapes, or std::nullopt if they do not
/// broadcast.
std::optional<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);

} // namespace loom

#endif // LOOM_DIALECTS_SHAPEINFERENCE_H
