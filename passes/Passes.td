//===- Passes.td - Loom's passes ----------------------------*- tablegen -*-===//
//
// The single source of truth for every Loom pass: its flag, summary,
// description (with IR before and after) and options. `loom-opt --help` and
// docs/passes.md are generated from it.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PASSES_TD
#define LOOM_PASSES_TD

include "mlir/Pass/PassBase.td"

def FuseLayerNorm : Pass<"loom-fuse-layer-norm", "mlir::func::FuncOp"> {
  let summary = "Fuses the decomposed layer normalisation into loom.layer_norm";
  let description = [{
    Exporters targeting ONNX opsets below 17 spell LayerNorm as arithmetic:
    `(x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) * scale + bias`, with
    the means over the trailing dimensions. This pass finds that pattern and
    replaces it by one `loom.layer_norm`, which later passes shard and
    differentiate as a unit. Without a trailing `* scale`, the scale is ones;
    without `+ bias`, there is no bias. The pattern must use the same `x`
    throughout, reduce over trailing dimensions with `keep_dims`, square
    with exponent 2 and add a scalar epsilon.

    Before:
    ```mlir
    %mean = loom.reduce_mean %x {axes = array<i64: 1>, keep_dims} : ...
    %d = loom.sub %x, %mean : ...
    %sq = loom.pow %d, %two : ...
    %var = loom.reduce_mean %sq {axes = array<i64: 1>, keep_dims} : ...
    %ve = loom.add %var, %eps : ...
    %std = loom.sqrt %ve : ...
    %n = loom.div %d, %std : ...
    %s = loom.mul %n, %scale : ...
    %y = loom.add %s, %bias : ...
    ```
    After:
    ```mlir
    %y = loom.layer_norm %x, %scale, %bias {axis = 1 : i64, epsilon = 1.0e-05 : f32} : ...
    ```
  }];
  let dependentDialects = ["loom::LoomDialect"];
}

#endif // LOOM_PASSES_TD
