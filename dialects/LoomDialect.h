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
} // namespace loom

#endif // LOOM_DIALECTS_LOOMDIALECT_H
