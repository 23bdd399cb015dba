//===- ShapeInference.cpp - Shape helpers over MLIR's shape arrays --------===//

#include "dialects/ShapeInference.h"

#include "common/ops/OpRules.h"

namespace loom {

std::string formatShape(llvm::ArrayRef<int64_t> shape) {
  return ops::formatShape(ops::Shape(shape.begin(), shape.end()));
}

std::optional<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b) {
  ops::Shape out;
  if (!ops::broadcastShapes(ops::Shape(a.begin(), a.end()),
                            ops::Shape(b.begin(), b.end()), out))
    return std::nullopt;
  return llvm::SmallVector<int64_t>(out.begin(), out.end());
}

} // namespace loom
