//===- LoomOps.cpp - The loom ops' C++ ------------------------------------===//
//
// Every op's shape rule is written once, in common/ops/OpRules.h: the ODS
// base classes `Loom_InferredOp` and `Loom_CheckedOp` run it through
// dialects/OpRuleAdaptor.h, so an op needs no C++ of its own here. The
// constant, whose result type is its value's, is the exception; and
// reshapeIsFree, the memory plan's rule for reshapes as the IR sees it, and
// the matmul epilogue fusion's rules.
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

Value loom::swappedTransposeInput(Value v) {
  auto transpose = v.getDefiningOp<TransposeOp>();
  if (!transpose)
    return {};
  ArrayRef<int64_t> perm = transpose.getPermutation();
  int64_t rank = static_cast<int64_t>(perm.size());
  if (rank < 2)
    return {};
  for (int64_t d = 0; d < rank - 2; ++d)
    if (perm[d] != d)
      return {};
  if (perm[rank - 2] != rank - 1 || perm[rank - 1] != rank - 2)
    return {};
  return transpose.getInput();
}

bool loom::isFoldedTranspose(Operation *op) {
  auto transpose = dyn_cast<TransposeOp>(op);
  return transpose && swappedTransposeInput(transpose.getResult()) &&
         !transpose->use_empty() &&
         llvm::all_of(transpose->getUsers(),
                      [](Operation *user) { return isa<MatmulOp>(user); });
}

Operation *loom::matmulBiasAdd(Operation *matmul, Value &bias) {
  if (!isa<MatmulOp>(matmul) || !matmul->hasOneUse())
    return nullptr;
  auto add = dyn_cast<AddOp>(*matmul->user_begin());
  Value product = matmul->getResult(0);
  if (!add || add.getType() != product.getType())
    return nullptr;
  Value other = add.getLhs() == product ? add.getRhs() : add.getLhs();
  if (other == product)
    return nullptr;
  auto type = cast<RankedTensorType>(other.getType());
  auto result = cast<RankedTensorType>(product.getType());
  if (type.getRank() != 1 || type.getDimSize(0) != result.getShape().back() ||
      type.getElementType() != result.getElementType())
    return nullptr;
  bias = other;
  return add;
}

bool loom::isFusedBiasAdd(Operation *op) {
  if (!isa<AddOp>(op))
    return false;
  Value bias;
  return llvm::any_of(op->getOperands(), [&](Value v) {
    Operation *def = v.getDefiningOp();
    return def && matmulBiasAdd(def, bias) == op;
  });
}

#define GET_OP_CLASSES
#include "dialects/LoomOps.cpp.inc"
