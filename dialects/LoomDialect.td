//===- LoomDialect.td - The loom dialect definition ---------*- tablegen -*-===//
//
// The `loom` dialect: global (unsharded) training graphs, the device mesh and
// tensor layouts that describe how they are split over devices.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_TD
#define LOOM_DIALECT_TD

include "mlir/IR/OpBase.td"

def Loom_Dialect : Dialect {
  let name = "loom";
  let cppNamespace = "::loom";
  let summary = "Loom's graph dialect for auto-parallel training";
  let description = [{
    The `loom` dialect holds a model's computation as a global graph of
    statically shaped tensor ops, imported from ONNX. The device mesh
    (`#loom.mesh`), tensor layouts (`#loom.layout`) and per-op shard
    strategies (`#loom.strategy`) describe how it is split over devices.

    Discardable attributes the dialect verifies:
      * `loom.mesh` (`#loom.mesh`) on a function: the device matrix.
      * `loom.strategy` (`#loom.strategy`) on a loom op: split counts per
        tensor operand; the counts must match the operands' ranks, divide
        their dimensions, and use no more devices than the mesh has.
      * `loom.layout` (`#loom.layout`) on a function argument: its rank must
        equal the argument's, and every split must divide the dimension.
      * `loom.sharding` (array of arrays of axis names, one per factor of
        the op's sharding rule) on a loom op: the mesh axes of each factor.
      * `loom.search` (dictionary) on a function: the automatic search's
        predicted step cost, memory per device and whether it was exact.
      * `loom.spmd` (unit) on a function: its types are per device, and
        argument layouts say how they relate to the global ones.
      * `loom.stage` (non-negative integer) and `loom.recompute` (unit) on an
        op that is not a function.
      * `loom.layer_stages` (dictionary of non-negative integers) on a
        function: each ONNX layer's pipeline stage, from loom-split-stages.
      * `loom.pipeline` (dictionary) on a stage function: `stage`,
        `stages` and `micro_batches` (non-negative integers), `schedule`
        (a `#loom.schedule`), and optionally `axis` (string),
        `virtual_stages` (at least 1) and `own_mesh` (unit); any other
        entry is refused.
      * `loom.source` (string) and `loom.opset` (integer) on a module: the
        model file and ONNX opset it was imported from.
    On function arguments: `loom.input`, `loom.param`, `loom.buffer` (the
    ONNX name, a string), `loom.init` (elements of the argument's type),
    `loom.hyper` (`#loom.hyper<lr>` or `#loom.hyper<step>`, on a scalar),
    `loom.state` (optimizer state, a string) and `loom.layout`; on function
    results: `loom.output` (string), `loom.updates` (the index of an
    argument of the same type that the result replaces) and `loom.layout`.
    A layout's mesh must be the function's `loom.mesh`, if the function
    has one. Which annotations each phase boundary needs is
    verifyPhaseContract's (PhaseContract.h, loom-verify-phase).
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    static constexpr ::llvm::StringLiteral kMeshAttrName = "loom.mesh";
    static constexpr ::llvm::StringLiteral kStrategyAttrName = "loom.strategy";
    static constexpr ::llvm::StringLiteral kLayoutAttrName = "loom.layout";
    static constexpr ::llvm::StringLiteral kStageAttrName = "loom.stage";
    /// On a forward op: the backward pass recomputes its results instead
    /// of keeping them. Set by the user, --recompute or the search.
    static constexpr ::llvm::StringLiteral kRecomputeAttrName = "loom.recompute";
    /// On the copy of a forward op that recomputes it for the backward
    /// pass (kept apart from the original by CSE).
    static constexpr ::llvm::StringLiteral kRecomputedAttrName = "loom.recomputed";
    /// Set by loom-propagate-sharding on every op: the mesh axes assigned
    /// to each factor of its sharding rule.
    static constexpr ::llvm::StringLiteral kShardingAttrName = "loom.sharding";
    /// Set by loom-build-training-graph: `loom.grad_id` (an integer) on a
    /// forward op it differentiated, and on each op of that op's gradient
    /// `loom.grad_of`, an i64 array: the forward op's id, then per operand
    /// and per result of the gradient op the forward value it stands for
    /// (2i: the forward op's operand i or its gradient; 2j+1: its result j
    /// or its gradient; -1: neither). loom-propagate-sharding gives a
    /// gradient op the layouts of its forward op, which is what the cost
    /// model assumes; loom-partition drops both.
    static constexpr ::llvm::StringLiteral kGradIdAttrName = "loom.grad_id";
    static constexpr ::llvm::StringLiteral kGradOfAttrName = "loom.grad_of";
    /// Set by loom-partition on a function whose types are per device.
    static constexpr ::llvm::StringLiteral kSpmdAttrName = "loom.spmd";
    /// Set by loom-auto-sharding on a function: what the search found
    /// (a dictionary: cost in seconds, memory in bytes per device, exact).
    static constexpr ::llvm::StringLiteral kSearchAttrName = "loom.search";
    /// Optimizer sharding (ZeRO). On a training function: its level, 0 to 3
    /// (optimizer state; + gradients; + parameters). On an argument: the
    /// level its layout was split over the data-parallel axes by.
    static constexpr ::llvm::StringLiteral kZeroAttrName = "loom.zero";
    /// On a parameter or optimizer-state argument that optimizer sharding
    /// padded with zeros so that its ways divide it: the shape the model
    /// sees (each dimension at most the argument's), the argument's leading
    /// block. Its loom.init has this shape.
    static constexpr ::llvm::StringLiteral kLogicalShapeAttrName =
        "loom.logical_shape";
    /// Set by loom-partition on the gathers of a ZeRO-3 parameter made for
    /// the backward pass, so that they are not merged with the forward's
    /// (the point is not to keep the gathered parameter across the step).
    static constexpr ::llvm::StringLiteral kRegatherAttrName = "loom.regather";
    /// Set by loom-partition (record-layouts) on the ops of a partitioned
    /// function: an array with each result's #loom.layout, so that the plan
    /// knows how a temporary is split (what pipeline stages on submeshes of
    /// their own need of the values they exchange).
    static constexpr ::llvm::StringLiteral kResultLayoutsAttrName = "loom.layouts";
    /// On each function of a pipelined step: a dictionary with the
    /// function's `stage`, the number of `stages`, the `schedule` (a
    /// #loom.schedule), the `micro_batches` and the pipeline `axis`,
    /// `virtual_stages` under the interleaved schedule, and `own_mesh` (a
    /// unit) when every stage runs on a submesh of its own (its function's
    /// loom.mesh). On an input argument of such a function: the
    /// micro-batch (an integer) it holds.
    static constexpr ::llvm::StringLiteral kPipelineAttrName = "loom.pipeline";
    /// Set by loom-split-stages on a function: the pipeline stage (chunk)
    /// of each ONNX layer, a dictionary of non-negative integers, which
    /// loom-pipeline follows and removes.
    static constexpr ::llvm::StringLiteral kLayerStagesAttrName = "loom.layer_stages";
    static constexpr ::llvm::StringLiteral kMicroBatchAttrName = "loom.micro_batch";
    /// Function-argument attributes set by the ONNX importer.
    static constexpr ::llvm::StringLiteral kInputAttrName = "loom.input";
    static constexpr ::llvm::StringLiteral kParamAttrName = "loom.param";
    static constexpr ::llvm::StringLiteral kBufferAttrName = "loom.buffer";
    static constexpr ::llvm::StringLiteral kInitAttrName = "loom.init";
    static constexpr ::llvm::StringLiteral kOutputAttrName = "loom.output";
    /// Set by loom-build-training-graph: per-step scalars (#loom.hyper),
    /// optimizer state, and results that replace an argument in place.
    static constexpr ::llvm::StringLiteral kHyperAttrName = "loom.hyper";
    static constexpr ::llvm::StringLiteral kStateAttrName = "loom.state";
    static constexpr ::llvm::StringLiteral kUpdatesAttrName = "loom.updates";
    /// Module attributes set by the ONNX importer.
    static constexpr ::llvm::StringLiteral kSourceAttrName = "loom.source";
    static constexpr ::llvm::StringLiteral kOpsetAttrName = "loom.opset";

    void registerAttributes();
  }];
}

#endif // LOOM_DIALECT_TD
