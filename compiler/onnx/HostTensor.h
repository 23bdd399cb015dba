//===- HostTensor.h - Constant tensors folded during ONNX import -*- C++
//-*-===//
//
// A HostTensor is a tensor whose value the importer knows: an ONNX Constant,
// an integer initializer, or the result of the shape arithmetic exporters
// emit (Shape -> Gather -> Unsqueeze -> Concat -> Reshape). The importer folds
// such chains on the host so that the graph it emits has static shapes.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_ONNX_HOSTTENSOR_H
#define LOOM_COMPILER_ONNX_HOSTTENSOR_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace onnx {
class TensorProto;
} // namespace onnx

namespace loom::onnx_import {

/// ONNX element types Loom handles (TensorProto::DataType values).
enum class DType : int32_t {
  F32 = 1,
  I32 = 6,
  I64 = 7,
  Bool = 9,
  F16 = 10,
  BF16 = 16,
};

/// The Loom element type for an ONNX data type, if Loom supports it.
std::optional<DType> toDType(int32_t onnxType);
/// The ONNX name of a data type ("FLOAT", "DOUBLE", ...), for messages.
std::string onnxTypeName(int32_t onnxType);
mlir::Type toMlirType(DType dtype, mlir::MLIRContext *ctx);
std::optional<DType> fromMlirType(mlir::Type type);
bool isFloat(DType dtype);
/// Bytes per element in ONNX raw data.
size_t elementSize(DType dtype);

/// The number of elements of `shape`, or std::nullopt if a dimension is
/// negative or the count exceeds `kMaxElements`.
std::optional<int64_t> checkedNumElements(llvm::ArrayRef<int64_t> shape);
/// The tensors are global, before partitioning: a 530B-parameter GPT at a
/// batch of 2560 has attention scores of 1.4e12 elements. At 2^48 elements
/// a tensor's bytes stay far inside int64 and exact in a double.
inline constexpr int64_t kMaxElements = int64_t(1) << 48;
/// Host tensors larger than this are not folded.
inline constexpr int64_t kMaxFoldElements = int64_t(1) << 24;

/// "" if the external-data `location` of a tensor of a model in `baseDir`
/// stays inside that directory (a relative path without "..", whose real
/// path, symbolic links resolved, lies there), else why not.
std::string externalDataPathError(llvm::StringRef location,
                                  llvm::StringRef baseDir);

/// The little-endian bytes of a TensorProto's elements, from raw_data, the
/// typed fields, or external data next to the model in `baseDir` (only
/// there: see externalDataPathError). Fails with `error` set if the data is
/// missing, of the wrong size, outside the directory, or unreadable.
std::optional<std::string> tensorBytes(const onnx::TensorProto &tensor,
                                       DType dtype, llvm::StringRef baseDir,
                                       std::string &error);

/// A constant tensor held on the host. Integer and bool elements are kept as
/// int64, floating-point elements as double.
struct HostTensor {
  DType dtype = DType::I64;
  llvm::SmallVector<int64_t> shape;
  std::vector<int64_t> ints;
  std::vector<double> floats;

  bool isFloat() const { return onnx_import::isFloat(dtype); }
  int64_t numElements() const;
  /// Element `i` as a double, whatever the storage.
  double asDouble(int64_t i) const { return isFloat() ? floats[i] : ints[i]; }
  /// Element `i` as an int64, whatever the storage (floats truncate).
  int64_t asInt(int64_t i) const {
    return isFloat() ? static_cast<int64_t>(floats[i]) : ints[i];
  }

  static HostTensor ofInts(DType dtype, llvm::ArrayRef<int64_t> shape,
                           std::vector<int64_t> values);
  static HostTensor ofFloats(DType dtype, llvm::ArrayRef<int64_t> shape,
                             std::vector<double> values);
  /// Decodes little-endian element bytes.
  static HostTensor fromBytes(DType dtype, llvm::ArrayRef<int64_t> shape,
                              llvm::StringRef bytes);

  /// The value converted to `to` (ONNX Cast semantics).
  HostTensor castTo(DType to) const;
  /// The same elements with another shape.
  HostTensor reshaped(llvm::ArrayRef<int64_t> newShape) const;

  mlir::RankedTensorType getType(mlir::MLIRContext *ctx) const;
  mlir::DenseElementsAttr toAttr(mlir::MLIRContext *ctx) const;
};

/// Row-major strides of a shape.
llvm::SmallVector<int64_t> stridesOf(llvm::ArrayRef<int64_t> shape);

/// Host implementations of the ops the importer folds. Each assumes its
/// operands were validated by the caller.
HostTensor hostBroadcast(const HostTensor &t, llvm::ArrayRef<int64_t> shape);
HostTensor hostTranspose(const HostTensor &t, llvm::ArrayRef<int64_t> perm);
HostTensor hostGather(const HostTensor &data, const HostTensor &indices,
                      int64_t axis);
HostTensor hostConcat(llvm::ArrayRef<const HostTensor *> inputs, int64_t axis);
HostTensor hostSlice(const HostTensor &t, llvm::ArrayRef<int64_t> starts,
                     llvm::ArrayRef<int64_t> sizes,
                     llvm::ArrayRef<int64_t> strides);

} // namespace loom::onnx_import

#endif // LOOM_COMPILER_ONNX_HOSTTENSOR_H
