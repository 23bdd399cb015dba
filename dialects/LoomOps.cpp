//===- LoomOps.cpp - The loom ops' C++ ------------------------------------===//
//
// Every op's shape rule is written once, in common/ops/OpRules.h: the ODS
// base classes `Loom_InferredOp` and `Loom_CheckedOp` run it through
// dialects/OpRuleAdaptor.h, so an op needs no C++ of its own here. The
// constant, whose result type is its value's, is the exception; and
// reshapeIsFree, the memory plan's rule for reshapes as the IR sees it.
//
//===----------------------------------------------------------------------===//

#include "dialects/LoomDialect.h"
#include "dialects/OpRuleAdaptor.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace loom;

//===----------------------------------------------------------------------===//
// ConstantOp
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::inferReturnTypes(MLIRContext *,
                                           std::optional<Location>,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &results) {
  results.push_back(adaptor.getValue().getType());
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

bool loom::reshapeIsFree(Value input) {
  Operation *def = input.getDefiningOp();
  return def && !isa<ConstantOp>(def);
}

#define GET_OP_CLASSES
#include "dialects/LoomOps.cpp.inc"
