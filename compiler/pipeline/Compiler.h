//===- Compiler.h - From a model file to a plan -----------------*- C++ -*-===//
//
// The compiler as a library: `compile` turns CompileOptions into a plan
// (import, the training step, sharding and partitioning over the mesh,
// pipelining, plan emission and the plan's explanation), running the
// auto-parallel planner where the options ask for a search (--stages auto,
// --mode auto's memory limit). It prints what it chooses, one "loom: ..."
// line at a time, to the stream it is given, and returns errors as
// messages; it reads no flag and keeps no state between calls.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_PIPELINE_COMPILER_H
#define LOOM_COMPILER_PIPELINE_COMPILER_H

#include "common/plan/plan.pb.h"
#include "compiler/pipeline/CompileOptions.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>

namespace loom::pipeline {

/// A compiled plan and the parallel configuration it was compiled with
/// (the options', or what the planner chose).
struct CompileResult {
  plan::Plan plan;
  ParallelConfig parallel;
};

/// Checks the options against each other (what needs --train, --mesh,
/// --batch); an error message naming the flags, or nullopt.
std::optional<std::string> verifyOptions(const CompileOptions &options);

/// Compiles `options.model` into a plan; nullopt with `error` set (a
/// message for the user, naming the model, the flag or the ONNX node).
std::optional<CompileResult> compile(const CompileOptions &options,
                                     llvm::raw_ostream &log,
                                     std::string &error);

/// Imports an ONNX model with its bindings: with its parameters' data
/// (`withWeights`), or without but keeping its buffers' (`withBuffers`);
/// nullptr with `error` set. What the import undid of the exporter's work
/// (parameters it shared or folded) goes to `log` as "loom: import: ..."
/// lines, when one is given.
mlir::OwningOpRef<mlir::ModuleOp>
importModel(mlir::MLIRContext &context, const ModelInput &model,
            bool withWeights, bool withBuffers, std::string &error,
            llvm::raw_ostream *log = nullptr);

/// The clean-up after import: decomposed layer norms fused, CSE.
mlir::LogicalResult runImportCleanup(mlir::ModuleOp module);

/// The memory a plan's largest program needs per device (state + arena).
int64_t peakBytes(const plan::Plan &plan);

} // namespace loom::pipeline

#endif // LOOM_COMPILER_PIPELINE_COMPILER_H
