//===- OnnxImporter.h - ONNX models into the loom dialect ------*- C++ -*-===//
//
// Imports an ONNX model (opsets up to 17; each operator from the oldest
// version its converter reads, Converter::oldestVersion) into a module holding
// one `func.func @main`: graph inputs and trained parameters become arguments
// (`loom.input` / `loom.param` / `loom.buffer`, initial values in
// `loom.init`), graph outputs become results (`loom.output`). Symbolic
// dimensions are bound from options; shape arithmetic is folded, so every
// tensor in the result is statically shaped. Every op's location names the
// ONNX node it came from.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_ONNX_ONNXIMPORTER_H
#define LOOM_COMPILER_ONNX_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>
#include <vector>

namespace loom::onnx_import {

struct ImportOptions {
  /// Binds dimension 0 of every graph input whose dimension 0 is symbolic.
  std::optional<int64_t> batch;
  /// Full shapes for named inputs (`--input-shape x=8x32`).
  llvm::StringMap<llvm::SmallVector<int64_t>> inputShapes;
  /// Values for named symbolic dimensions (`--dim seq=64`).
  llvm::StringMap<int64_t> dims;
  /// Graph inputs given their value at compile time, as serialized ONNX
  /// TensorProtos: each is imported as a constant, as an integer
  /// initializer is, whatever its element type. For inputs that carry
  /// shapes, axes or bounds, which Loom's static shapes need known.
  llvm::StringMap<std::string> inputValues;
  /// Glob patterns (`*`, `?`, `[...]`) of floating-point initializers that
  /// are not trained (`--freeze`): constants the importer folds when small
  /// (at most 65,536 elements), else buffers, loaded and checkpointed but
  /// never updated. Each pattern must match one.
  std::vector<std::string> freeze;
  /// Training-mode BatchNormalization normalizes each of this many equal
  /// groups of the batch (dimension 0) with the group's own statistics:
  /// the data-parallel replicas' local batches, as PyTorch's DDP does; 1
  /// (--sync-batchnorm, or one device) takes them over the whole batch.
  /// The running statistics follow group 0's (DDP keeps rank 0's).
  int64_t batchNormGroups = 1;
  /// Attach initializer data (`loom.init`) to parameter arguments.
  bool withWeights = true;
  /// Without weights, still attach the buffers' data (batch normalization's
  /// running statistics): for seeded initialisation, which draws the
  /// parameters but has no rule for buffers.
  bool withBuffers = false;
};

enum class ImportStatus {
  Ok,
  /// The model uses something Loom does not import (an op, an attribute
  /// value, an element type, an opset).
  Unsupported,
  /// The file is not a valid ONNX model, or its graph is inconsistent.
  InvalidModel,
  /// Loom disagreed with itself or with ONNX shape inference: a Loom bug.
  InternalError,
};

llvm::StringRef statusName(ImportStatus status);

struct ImportResult {
  ImportStatus status = ImportStatus::Ok;
  /// When not Ok: what went wrong, naming the file, the node and what to do.
  std::string message;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  /// What the import undid of the exporter's work, one line each: parameters
  /// it had shared or folded (ExportedParameters.h).
  std::vector<std::string> notes;

  bool ok() const { return status == ImportStatus::Ok; }
};

/// Imports the model in file `path`.
ImportResult importOnnxFile(llvm::StringRef path, const ImportOptions &options,
                            mlir::MLIRContext &context);

/// Imports a serialized model held in memory; `name` stands for the file in
/// messages and locations, and external data is looked up beside it.
ImportResult importOnnxBytes(llvm::StringRef bytes, llvm::StringRef name,
                             const ImportOptions &options,
                             mlir::MLIRContext &context);

/// The ONNX op types the importer converts, sorted.
llvm::SmallVector<llvm::StringRef> supportedOpTypes();

} // namespace loom::onnx_import

#endif // LOOM_COMPILER_ONNX_ONNXIMPORTER_H
