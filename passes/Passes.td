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

def BuildTrainingGraph : Pass<"loom-build-training-graph", "mlir::ModuleOp"> {
  let summary = "Turns @main's forward graph into one training step";
  let description = [{
    Adds a loss on @main's first result, differentiates the graph in reverse
    through each op's GradientOpInterface, and appends one optimizer update
    per parameter (`loom.param` argument). The function then returns the
    loss (`loom.output = "loss"`) and every updated tensor, marked
    `loom.updates = N` with the index of the argument it replaces in place.

    New arguments:
    - `labels` (`loom.input`). For `cross_entropy`, integer class ids with
      the logits' shape minus the last dimension; the loss is the mean
      softmax cross-entropy over every label that is not `ignore-index`. For
      `mse`, the prediction's type; the loss is the mean squared error.
    - `lr` and `step` (`loom.hyper`), scalars the runtime sets each step.
    - Optimizer state (`loom.state`, starting at zero): `<param>::velocity`
      for momentum, and `<param>::m` and `<param>::v` for Adam and AdamW.

    With `micro-batches=M`, @main is taken to hold one micro-batch: the step's
    inputs are M times larger in dimension 0, and each micro-batch's forward,
    loss and backward run before the next (so only one micro-batch's
    activations are live), the gradients adding up; the loss is the mean of
    the micro-batch losses.

    Before:
    ```mlir
    func.func @main(%x: tensor<4x8xf32> {loom.input = "x"},
                    %w: tensor<8x3xf32> {loom.param = "w"}) -> tensor<4x3xf32> {
      %y = loom.matmul %x, %w : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
      return %y : tensor<4x3xf32>
    }
    ```
    After (`loss=cross_entropy optimizer=sgd`), in outline:
    ```mlir
    func.func @main(%x, %w, %labels: tensor<4xi64>, %lr: tensor<f32>, %step: tensor<f32>)
        -> (tensor<f32> {loom.output = "loss"}, tensor<8x3xf32> {loom.updates = 1 : i64}) {
      %y = loom.matmul %x, %w
      %loss = loom.softmax_cross_entropy %y, %labels
      %dy = loom.softmax_cross_entropy_grad %y, %labels, %one
      %dw = loom.matmul %x, %dy {transpose_lhs}
      %w2 = loom.sgd_update %w, %dw, %lr
      return %loss, %w2
    }
    ```
  }];
  let options = [
    Option<"loss", "loss", "std::string", "\"cross_entropy\"",
           "The loss: cross_entropy or mse">,
    Option<"optimizer", "optimizer", "std::string", "\"sgd\"",
           "The optimizer: sgd, momentum, adam or adamw">,
    Option<"momentum", "momentum", "double", "0.9",
           "Momentum of the momentum optimizer">,
    Option<"nesterov", "nesterov", "bool", "false",
           "Nesterov momentum">,
    Option<"beta1", "beta1", "double", "0.9", "Adam's first-moment decay">,
    Option<"beta2", "beta2", "double", "0.999", "Adam's second-moment decay">,
    Option<"epsilon", "epsilon", "double", "1e-8", "Adam's epsilon">,
    Option<"weightDecay", "weight-decay", "double", "0.0",
           "Weight decay (decoupled for adamw, L2 otherwise)">,
    Option<"ignoreIndex", "ignore-index", "int64_t", "-100",
           "Labels that do not count in cross_entropy">,
    Option<"microBatches", "micro-batches", "int64_t", "1",
           "Micro-batches per step: @main holds one; the step takes this many "
           "times its batch and accumulates their gradients">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

#endif // LOOM_PASSES_TD
