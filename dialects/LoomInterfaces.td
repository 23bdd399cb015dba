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


def Loom_ShardingOpInterface : OpInterface<"ShardingOpInterface"> {
  let cppNamespace = "::loom";
  let description = [{
    An op that can be split over a device mesh. Its sharding rule names the
    op's iteration factors (one per independent index, as in an einsum),
    says which dimension of every operand and result each factor indexes,
    and how each factor may be split: `parallel` (every device computes its
    block), `reduction` (results that lack the factor become partial sums
    over its axes) or `blocked` (never split). A strategy assigns mesh axes
    to factors; the operand layouts it needs, the result layouts it
    produces and the partial sums it creates all follow from the rule (see
    `dialects/ShardingRule.h`). `loom-propagate-sharding` and
    `loom-partition` work only through this interface, so a new op becomes
    partitionable by implementing it.
  }];
  let methods = [
    InterfaceMethod<[{
        The op's sharding rule for its current (global) operand and result
        types.
      }],
      "::loom::ShardingRule", "getShardingRule", (ins)>,
    InterfaceMethod<[{
        Builds the op's per-device form at the builder's insertion point:
        the same op on local operands, with results of `resultTypes` (the
        local shapes its layouts give). Attributes that restate shapes are
        rewritten to the local ones.
      }],
      "::mlir::Operation *", "buildLocalOp",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::ValueRange":$operands,
           "::mlir::TypeRange":$resultTypes),
      /*methodBody=*/"",
      /*defaultImplementation=*/[{
        return ::loom::buildLocalOpByCloning($_op, builder, operands,
                                             resultTypes);
      }]>
  ];
}


def Loom_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::loom";
  let description = [{
    What running an op costs, for the cost model: its floating-point
    operations and the bytes it reads and writes, given the (local) types of
    its operands and results, and the class of kernel it runs as
    ("matmul", "conv", "elementwise", "reduction", "other"), whose
    efficiency a hardware profile states. The default counts one operation
    per result element and every operand and result byte once; ops whose
    work is not elementwise (matmul, convolutions, normalisations, losses)
    say so in `dialects/Cost.cpp`.
  }];
  let methods = [
    InterfaceMethod<[{
        The work of the op on operands and results of the given types.
      }],
      "::loom::OpWork", "estimateWork",
      (ins "::llvm::ArrayRef<::mlir::RankedTensorType>":$operands,
           "::llvm::ArrayRef<::mlir::RankedTensorType>":$results),
      /*methodBody=*/"",
      /*defaultImplementation=*/[{
        return ::loom::estimateWork($_op, operands, results);
      }]>
  ];
}

#endif // LOOM_INTERFACES_TD
