//===- ShapeInference.h - Result types shared by several loom ops -*- C++
//-*-===//
//
// Shape rules that more than one op uses (numpy broadcasting, reductions,
// pooling windows). They report problems through `emitOptionalError` on the
// given location, so an op's verifier and a builder's caller see the same
// message, and they never assert on bad input.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECTS_SHAPEINFERENCE_H
#define LOOM_DIALECTS_SHAPEINFERENCE_H

#include "mlir/IR/Location.h"
#include "mlir/IR/Types.h"
#include "mlir/IR/Value.h"
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

/// Whether `from` broadcasts to exactly `to`.
bool broadcastsTo(llvm::ArrayRef<int64_t> from, llvm::ArrayRef<int64_t> to);

/// The result of an elementwise op: the operands' common element type and the
/// broadcast of their shapes.
llvm::LogicalResult
inferElementwiseResult(std::optional<mlir::Location> loc,
                       llvm::ArrayRef<mlir::Value> operands,
                       llvm::SmallVectorImpl<mlir::Type> &results);

/// The result of a reduction over strictly increasing `axes`.
llvm::LogicalResult
inferReduceResult(std::optional<mlir::Location> loc, mlir::Value input,
                  llvm::ArrayRef<int64_t> axes, bool keepDims,
                  llvm::SmallVectorImpl<mlir::Type> &results);

/// Output size of one spatial dimension of a convolution or pooling window.
/// Returns a value below 1 when the window does not fit.
int64_t windowOutputSize(int64_t in, int64_t kernel, int64_t stride,
                         int64_t padBegin, int64_t padEnd, int64_t dilation,
                         bool ceilMode);

/// The result of a 2-D pooling op over an NCHW input.
llvm::LogicalResult inferPool2DResult(
    std::optional<mlir::Location> loc, mlir::Value input,
    llvm::ArrayRef<int64_t> kernel, llvm::ArrayRef<int64_t> strides,
    llvm::ArrayRef<int64_t> padding, llvm::ArrayRef<int64_t> dilations,
    bool ceilMode, llvm::SmallVectorImpl<mlir::Type> &results);

} // namespace loom

#endif // LOOM_DIALECTS_SHAPEINFERENCE_H
