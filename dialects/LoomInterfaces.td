//===- LoomInterfaces.td - Op interfaces of the loom dialect -*- tablegen -*-===//

#ifndef LOOM_INTERFACES_TD
#define LOOM_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Loom_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::loom";
  let description = [{
    An op that can be differentiated: given the gradients of its results with
    respect to a scalar loss, it emits the ops that compute the gradients of
    its operands. `loom-build-training-graph` walks the forward graph
    backwards through this interface, so a new op becomes trainable by
    implementing it, without touching the pass.
  }];
  let methods = [
    InterfaceMethod<[{
        Emits, at the builder's insertion point, the gradients of the
        operands whose `needed` flag is set, from `resultGrads` (one per
        result; null where a result has no gradient, which counts as zero).
        Sets `operandGrads` to one value per operand, null where not
        needed or not differentiable. Fails with a diagnostic on the op if a
        needed gradient cannot be built.
      }],
      "::llvm::LogicalResult", "emitGradient",
      (ins "::mlir::OpBuilder &":$builder,
           "::llvm::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::ArrayRef<bool>":$needed,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>
  ];
}

#endif // LOOM_INTERFACES_TD
