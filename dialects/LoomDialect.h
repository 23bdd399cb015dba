//===- LoomDialect.h - The loom dialect, its attributes and ops -*- C++ -*-===//

#ifndef LOOM_DIALECTS_LOOMDIALECT_H
#define LOOM_DIALECTS_LOOMDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/LoomDialect.h.inc"
#include "dialects/LoomEnums.h"

#define GET_ATTRDEF_CLASSES
#include "dialects/LoomAttrs.h.inc"

#include "dialects/ShapeInference.h"
#include "dialects/ShardingRule.h"

#include "dialects/LoomInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialects/LoomOps.h.inc"

namespace loom {
/// Whether `op` is one of the redistribution steps of LoomCommOps.td
/// (all_reduce, reduce_scatter, all_gather, all_to_all, local_split,
/// make_partial).
bool isCollective(mlir::Operation *op);

/// Whether a reshape of `input` moves no bytes: `input` is a temporary (the
/// result of an op other than a constant), whose bytes the memory plan
/// gives the reshape's result (compiler/plan/MemoryPlan.cpp). A reshape of
/// an input, a parameter or a constant copies.
bool reshapeIsFree(mlir::Value input);

/// The rules of loom-fuse-matmul-epilogue as the IR sees them, for the pass
/// and for the cost model (which costs the plan as it runs, fused).
///
/// The input of `v`'s defining transpose if that transpose swaps exactly
/// the last two dimensions (a GEMM takes it as a flag), else null.
mlir::Value swappedTransposeInput(mlir::Value v);
/// Whether `op` is a transpose the fusion folds into the matmuls using it
/// (it swaps the last two dimensions and only matmuls use it).
bool isFoldedTranspose(mlir::Operation *op);
/// The `add` of a bias to `matmul`'s result (its only user) that a GEMM
/// epilogue applies: a vector of the result's last dimension and element
/// type, so that the sum has the product's type; null if there is none.
/// Sets `bias`.
mlir::Operation *matmulBiasAdd(mlir::Operation *matmul, mlir::Value &bias);
/// Whether `op` is the bias add of a matmul the fusion folds into the
/// GEMM's epilogue (matmulBiasAdd).
bool isFusedBiasAdd(mlir::Operation *op);
} // namespace loom

#endif // LOOM_DIALECTS_LOOMDIALECT_H
