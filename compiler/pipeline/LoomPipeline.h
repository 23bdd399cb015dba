//===- LoomPipeline.h - `loom compile` as a pass pipeline -------*- C++ -*-===//
//
// The passes `loom compile` runs on an imported model, in order, from
// CompileOptions:
//
//   loom-fuse-layer-norm, cse                  the import's clean-up
//   loom-mixed-precision                       --precision bf16|f16
//   loom-build-training-graph, cse             --train
//   loom-mark-recompute                        --recompute
//   without a mesh:
//     loom-recompute
//   on a mesh:
//     loom-assign-mesh                         --mesh, --zero
//     loom-apply-strategies                    --strategy
//     loom-auto-sharding                       --mode auto (with ZeRO and
//                                              recompute when not given)
//     loom-propagate-sharding
//     loom-shard-optimizer                     --zero, or auto's choice
//     loom-recompute
//     loom-partition, cse
//     loom-split-stages                        --mode auto with pp=P
//     loom-pipeline                            pp=P, --micro-batches
//   loom-fuse-matmul-epilogue                  --fuse
//
// It is registered as `loom-compile-pipeline`, whose options are the
// `loom compile` flags of the same names, so that
//   loom import M.onnx --locations | loom-opt --loom-compile-pipeline="..."
// prints the program `loom compile M.onnx --emit-mlir` writes.
// --stage-meshes is not one pipeline: its plan is assembled from one
// compile per distinct submesh (StageMeshes.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMPILER_PIPELINE_LOOMPIPELINE_H
#define LOOM_COMPILER_PIPELINE_LOOMPIPELINE_H

#include "compiler/pipeline/CompileOptions.h"

#include "mlir/Pass/PassManager.h"

#include <functional>
#include <string>

namespace loom::pipeline {

/// What a compile attempt adds to the passes beyond CompileOptions.
struct PipelineExtras {
  /// The search's progress (phase, done, total).
  std::function<void(llvm::StringRef, int64_t, int64_t)> progress;
  /// Ops record their results' layouts (stages compiled on meshes of
  /// their own).
  bool recordLayouts = false;
  /// A candidate of --stages auto: the passes stop after the stage split.
  bool evaluating = false;
  /// loom-pipeline costs its report's stage times (for the explanation).
  bool stageTimes = false;
};

/// Every pass of `loom compile` for `options`, in the order above.
void buildCompilePipeline(mlir::OpPassManager &pm,
                          const CompileOptions &options,
                          const PipelineExtras &extras = {});

/// The micro-batches loom-pipeline unrolls: all of them, except that a
/// simulation of a 1F1B or interleaved pipeline builds only as many as its
/// memory peak needs (the step is still predicted for all of them).
int64_t builtMicroBatches(const CompileOptions &options);

/// Whether the step of `options` is pipelined (stages, or micro-batches on
/// a mesh).
bool isPipelined(const CompileOptions &options);

/// The pipeline `loom-compile-pipeline` builds; fails with `error` for
/// --stage-meshes, whose plan is assembled from one compile per submesh.
mlir::LogicalResult buildLoomPipeline(mlir::OpPassManager &pm,
                                      const CompileOptions &options,
                                      std::string &error);

/// Registers `loom-compile-pipeline` (loom-opt).
void registerLoomCompilePipeline();

/// loom-opt: mlir-opt with the loom dialect, Loom's passes and
/// `loom-compile-pipeline`.
int optMain(int argc, char **argv);

} // namespace loom::pipeline

#endif // LOOM_COMPILER_PIPELINE_LOOMPIPELINE_H
