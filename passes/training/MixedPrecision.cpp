//===- MixedPrecision.cpp - Low-precision compute over f32 masters --------===//

#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace loom {
#define GEN_PASS_DEF_MIXEDPRECISION
#include "passes/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

/// `type` with element type `low` when it is an f32 tensor, else null.
RankedTensorType lowered(Type type, Type low) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.getElementType().isF32())
    return nullptr;
  return tensor.clone(low);
}

struct MixedPrecisionPass
    : public loom::impl::MixedPrecisionBase<MixedPrecisionPass> {
  using MixedPrecisionBase::MixedPrecisionBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isDeclaration())
      return;
    MLIRContext *ctx = &getContext();
    Type low;
    if (precision == "bf16")
      low = BFloat16Type::get(ctx);
    else if (precision == "f16")
      low = Float16Type::get(ctx);
    else {
      func.emitError("unknown precision '")
          << precision << "'; use bf16 or f16";
      return signalPassFailure();
    }
    Block &body = func.getBody().front();
    OpBuilder b = OpBuilder::atBlockBegin(&body);

    // Arguments: one cast each, at the top; every use reads the cast.
    llvm::SmallPtrSet<Operation *, 16> inserted;
    for (BlockArgument arg : body.getArguments()) {
      RankedTensorType type = lowered(arg.getType(), low);
      if (!type || arg.use_empty())
        continue;
      // The cast takes its first user's location (its ONNX node), so that
      // it and its gradient, the cast back, belong to that node's layer and
      // pipeline stage.
      Operation *first = nullptr;
      for (Operation *user : arg.getUsers())
        if (!first || user->isBeforeInBlock(first))
          first = user;
      auto cast = CastOp::create(b, first->getLoc(), type, arg);
      arg.replaceAllUsesExcept(cast, cast);
      inserted.insert(cast);
    }

    // Ops: f32 results (and constants' values) become low precision.
    Operation *terminator = body.getTerminator();
    for (Operation &op : body) {
      if (&op == terminator || inserted.contains(&op))
        continue;
      if (auto constant = dyn_cast<ConstantOp>(op)) {
        RankedTensorType type = lowered(constant.getType(), low);
        if (!type)
          continue;
        auto dense = dyn_cast<DenseFPElementsAttr>(constant.getValue());
        if (!dense) {
          // Resource-backed: the blob stays f32; its users read a cast.
          b.setInsertionPointAfter(constant);
          auto cast = CastOp::create(b, constant.getLoc(), type, constant);
          constant.getResult().replaceAllUsesExcept(cast, cast);
          inserted.insert(cast);
          continue;
        }
        const llvm::fltSemantics &semantics =
            cast<FloatType>(low).getFloatSemantics();
        auto converted = dense.mapValues(low, [&](const APFloat &v) {
          APFloat x = v;
          bool lostInfo = false;
          x.convert(semantics, APFloat::rmNearestTiesToEven, &lostInfo);
          return x.bitcastToAPInt();
        });
        constant.setValueAttr(converted);
      }
      for (OpResult r : op.getResults())
        if (RankedTensorType type = lowered(r.getType(), low))
          r.setType(type);
    }

    // Results: back to f32 where the function returns f32.
    b.setInsertionPoint(terminator);
    FunctionType fnType = func.getFunctionType();
    for (OpOperand &operand : terminator->getOpOperands()) {
      Type expected = fnType.getResult(operand.getOperandNumber());
      if (operand.get().getType() != expected)
        operand.set(
            CastOp::create(b, terminator->getLoc(), expected, operand.get()));
    }
  }
};

} // namespace
