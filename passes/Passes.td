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

def FuseMatmulEpilogue
    : Pass<"loom-fuse-matmul-epilogue", "mlir::func::FuncOp"> {
  let summary = "Folds transpositions and bias epilogues into matmuls";
  let description = [{
    Runs on per-device programs, last before a plan is emitted, so that no
    earlier pass (differentiation, sharding, pipelining) sees its ops. Three
    rewrites of each `loom.matmul`:

    - An operand that is a `loom.transpose` swapping only its last two
      dimensions is replaced by the transpose's input, flipping the
      matmul's `transpose_lhs` or `transpose_rhs`: the GEMM reads the
      storage transposed instead of a kernel copying it (a transpose left
      without users is erased).
    - A matmul whose only user is a `loom.add` of a vector of the result's
      last dimension (the bias of a linear layer) becomes one
      `loom.fused_matmul` with that bias; when the sum's only user is a
      `loom.relu`, the relu joins it too. A backend runs it as one GEMM
      with an epilogue, so the product never makes the round trip through
      memory to an elementwise kernel, and the plan's arena holds one
      buffer instead of two.
    - A `loom.matmul` with `transpose_lhs` of `x: [batch.., m, p]` and
      `y: [batch.., m, q]` whose only user is a `loom.reduce_sum` over the
      batch dimensions (the gradient of a weight every batch shares)
      becomes one matmul of `x` and `y` reshaped to `[batch * m, p]` and
      `[batch * m, q]`: the same multiplications in one GEMM, without the
      batch of `[p, q]` products and the reduction over them. Taken when
      the reshapes' copies (none for a temporary, whose reshape shares its
      bytes) hold less than those products.

    Before:
    ```mlir
    %t = loom.transpose %w {permutation = array<i64: 1, 0>} : ...
    %p = loom.matmul %x, %t : ...
    %y = loom.add %b, %p : ...
    ```
    After:
    ```mlir
    %y = loom.fused_matmul %x, %w, %b {transpose_rhs} : ...
    ```
  }];
  let dependentDialects = ["loom::LoomDialect"];
}

def MixedPrecision : Pass<"loom-mixed-precision", "mlir::func::FuncOp"> {
  let summary = "Runs the forward graph in bf16 or f16 over f32 master weights";
  let description = [{
    Mixed-precision training as in Micikevicius et al. (ICLR 2018): every
    `f32` argument (parameters and inputs) stays `f32` and is cast to the
    low precision once, at the top of the function; every op then computes
    in that precision (its `f32` results, constants included, become
    `bf16` or `f16`), and each `f32` result of the function is cast back to
    `f32` where it is returned. Run before `loom-build-training-graph`, this
    makes the loss `f32`, the backward low-precision (the gradient of a cast
    is the cast back), and each parameter's gradient, its optimizer state
    and its update `f32`: the parameters themselves are the master weights,
    and an update smaller than a low-precision ulp of its parameter is not
    lost. The kernels of the low-precision ops accumulate in `f32`.

    Before (`precision=bf16`):
    ```mlir
    func.func @main(%x: tensor<4x8xf32> {loom.input = "x"},
                    %w: tensor<8x3xf32> {loom.param = "w"}) -> tensor<4x3xf32> {
      %y = loom.matmul %x, %w : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
      return %y : tensor<4x3xf32>
    }
    ```
    After:
    ```mlir
    func.func @main(%x: tensor<4x8xf32> {loom.input = "x"},
                    %w: tensor<8x3xf32> {loom.param = "w"}) -> tensor<4x3xf32> {
      %xl = loom.cast %x : tensor<4x8xf32> -> tensor<4x8xbf16>
      %wl = loom.cast %w : tensor<8x3xf32> -> tensor<8x3xbf16>
      %y = loom.matmul %xl, %wl : (tensor<4x8xbf16>, tensor<8x3xbf16>) -> tensor<4x3xbf16>
      %yf = loom.cast %y : tensor<4x3xbf16> -> tensor<4x3xf32>
      return %yf : tensor<4x3xf32>
    }
    ```
  }];
  let options = [
    Option<"precision", "precision", "std::string", "\"bf16\"",
           "The compute precision: bf16 or f16">,
  ];
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

    With `loss-scale=S` (static loss scaling, for `f16` training after
    `loom-mixed-precision`), the backward starts from `d(loss) = S` and each
    parameter's gradient is multiplied by `1/S` before its update: the
    low-precision gradients are S times larger, clear of `f16`'s underflow,
    and the update sees the true gradient. The loss itself is unscaled.

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
    Option<"lossScale", "loss-scale", "double", "1.0",
           "Static loss scale S: the backward starts from d(loss) = S and "
           "each parameter's gradient is multiplied by 1/S before its update, "
           "so that small low-precision gradients do not flush to zero">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}


def PropagateSharding : Pass<"loom-propagate-sharding", "mlir::func::FuncOp"> {
  let summary = "Chooses a layout for every value of a function on its mesh";
  let description = [{
    For a function with a `loom.mesh`, assigns mesh axes to the factors of
    every op's sharding rule (the `loom.sharding` attribute) and a
    `loom.layout` to every tensor argument. Ops the user fixed keep their
    assignment: a `loom.sharding` already present, or a `loom.strategy`
    (split counts per operand dimension, mapped to mesh axes outermost
    first). The others are chosen in program order, op by op: the
    candidates are the assignments each operand's layout implies, their
    union, and full replication; the one with the fewest bytes of
    redistribution on the op's incoming edges wins (ties: the one that
    splits the work most, then the first). An argument takes the layout its
    first user asks for, so parameters follow the ops that use them; an
    optimizer update also counts the bytes of putting its result back in
    its parameter's layout.

    An op of a gradient linked to its forward op (`loom.grad_of`, from
    `loom-build-training-graph`) takes the assignment the forward op's
    layouts give it instead, so that the backward runs as the forward was
    split (and as the cost model counts it); a weight gradient may add the
    mesh axes its forward op computed redundantly over and its parameter is
    stored split over.

    `mode=data` first splits dimension 0 of every model input over all
    mesh axes and replicates every parameter, so that gradients become
    partial sums that the updates all-reduce.

    The result is deterministic. Errors name the op, its ONNX node and the
    rule a given strategy breaks.

    ```mlir
    // before (mode=data, mesh dp=4)
    func.func @main(%x: tensor<8x16xf32> {loom.input = "x"},
                    %w: tensor<16x10xf32> {loom.param = "w"}) ...
      %y = loom.matmul %x, %w : ...
    // after: the batch split, the parameter replicated
    func.func @main(%x: tensor<8x16xf32> {loom.input = "x",
                      loom.layout = #loom.layout<#mesh, [[dp], []]>},
                    %w: tensor<16x10xf32> {loom.layout =
                      #loom.layout<#mesh, [[], []]>, loom.param = "w"}) ...
      %y = loom.matmul %x, %w {loom.sharding = [["dp"], [], []]} : ...
    ```
  }];
  let options = [
    Option<"mode", "mode", "std::string", "\"semi\"",
           "data (split the batch, replicate parameters) or semi (complete "
           "the given strategies)">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def Partition : Pass<"loom-partition", "mlir::func::FuncOp"> {
  let summary = "Rewrites a sharded function into its per-device program";
  let description = [{
    After `loom-propagate-sharding`: every value gets its local type, every
    op becomes its local form (through the sharding interface), and where a
    value's layout differs from what its user needs, the cheapest
    redistribution is inserted as collectives (`loom.all_reduce`,
    `loom.reduce_scatter`, `loom.all_gather`, `loom.all_to_all`,
    `loom.local_split`, `loom.make_partial`). Ops that compute a mean over a
    split dimension are followed by the scaling that makes their results
    partial sums. Returned values are made replicated, except updates,
    which take the layout of the argument they replace. Arguments keep
    their `loom.layout` (and global `loom.init`), and the function is
    marked `loom.spmd`: one program for every device of the mesh. With
    `record-layouts`, every op it makes carries its results' layouts
    (`loom.layouts`).

    ```mlir
    // before (mesh dp=4): global types, layouts as attributes
    %g = loom.matmul %xt, %dy {loom.sharding = [[], [], ["dp"]]} :
        (tensor<16x8xf32>, tensor<8x10xf32>) -> tensor<16x10xf32>
    // after: local types; the weight gradient is a partial sum over dp,
    // all-reduced where its update needs it whole
    %g = loom.matmul %xt, %dy : (tensor<16x2xf32>, tensor<2x10xf32>)
        -> tensor<16x10xf32>
    %s = loom.all_reduce %g {axes = array<i64: 0>} : tensor<16x10xf32>
    ```
  }];
  let options = [
    Option<"recordLayouts", "record-layouts", "bool", "false",
           "Record each op's result layouts (loom.layouts)">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def BucketGradients : Pass<"loom-bucket-gradients", "mlir::func::FuncOp"> {
  let summary = "Reduces the data-parallel gradients in buckets";
  let description = [{
    Runs on per-device programs, after `loom-partition` and `loom-pipeline`
    (so it also sees a pipeline stage's reductions after the micro-batches'
    accumulation). A gradient reduction is a `loom.all_reduce` whose result
    reaches only optimizer updates (through reshapes, casts and local
    splits). One all-reduce per parameter pays one collective's latency
    per parameter; like the buckets of PyTorch's DDP and Megatron-LM,
    this pass packs the reductions of the same element type over the same
    mesh axes into buckets of at most `bucket-bytes` bytes per device (a
    single larger gradient gets a bucket of its own), filled in the order
    the backward pass makes the gradients, and reduces each bucket with one
    all-reduce placed right after its last gradient is made. `bucket-bytes`
    0 leaves the program unchanged.

    A bucket is a flat buffer: every gradient reshaped to one dimension and
    concatenated, one `loom.all_reduce`, and a slice (reshaped back) per
    gradient. Expressed with existing ops rather than a many-operand
    all-reduce, the runtime, every communicator and the cost model see an
    ordinary all-reduce of the summed bytes (one latency), and the memory
    plan sees the buffer. Each communicator sums every element in member
    order (runtime/comm/Sum.h) wherever it lies in the buffer, so a
    bucketed step is bit-for-bit the unbucketed one.

    ```mlir
    // before: two reductions over dp (axis 0)
    %a = loom.all_reduce %ga {axes = array<i64: 0>} : tensor<4x8xf32> -> tensor<4x8xf32>
    %b = loom.all_reduce %gb {axes = array<i64: 0>} : tensor<8xf32> -> tensor<8xf32>
    // after: one bucket of 40 elements
    %fa = loom.reshape %ga : tensor<4x8xf32> -> tensor<32xf32>
    %c = loom.concat %fa, %gb {axis = 0 : i64} : ...
    %r = loom.all_reduce %c {axes = array<i64: 0>} : tensor<40xf32> -> tensor<40xf32>
    %sa = loom.slice %r {starts = array<i64: 0>, sizes = array<i64: 32>, ...}
    %a = loom.reshape %sa : tensor<32xf32> -> tensor<4x8xf32>
    %b = loom.slice %r {starts = array<i64: 32>, sizes = array<i64: 8>, ...}
    ```
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", "26214400",
           "Bytes per device of a bucket (default 25 MiB, DDP's); 0: no "
           "buckets">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def ShardOptimizer : Pass<"loom-shard-optimizer", "mlir::func::FuncOp"> {
  let summary = "Splits optimizer updates over the data-parallel axes (ZeRO)";
  let description = [{
    After sharding (every op has its `loom.sharding`), before
    `loom-partition`. For each parameter update whose gradient is a partial
    sum over mesh axes the update is replicated over, the update is split
    over those axes on the first dimension they divide. Level 1: the
    optimizer state arguments take the split layout (the gradient is
    reduce-scattered at the update and the new parameter all-gathered).
    Level 2: also the gradient (loom-partition places its reduce-scatter
    where the gradient is complete). Level 3: also the parameter argument
    (gathered before each use, again for the backward pass). Marks the
    function and the split parameters with `loom.zero`. Level 0 takes the
    function's `loom.zero` (set by `loom-assign-mesh` or chosen by
    `loom-auto-sharding`); without one the pass does nothing.

    With `repropagate` (the propagation's mode), the backward ops are then
    propagated again, so that a gradient stays a partial sum up to its
    reduce-scatter instead of being all-reduced on the way; the ops whose
    layouts were given before `loom-propagate-sharding` ran in the same
    pipeline keep them (run alone, every backward layout counts as given).

    ```mlir
    // before (dp=4, level 1): the update and its state replicated
    %p2, %m2, %v2 = loom.adam_update %w, %g, %m, %v, %lr, %t
        {loom.sharding = [[], []]} ...
    // after: split over dp on dimension 0; %m and %v take that layout
    %p2, %m2, %v2 = loom.adam_update %w, %g, %m, %v, %lr, %t
        {loom.sharding = [["dp"], []]} ...
    ```
  }];
  let options = [
    Option<"level", "level", "int", "0",
           "The ZeRO level: 1, 2 or 3 (0: the function's loom.zero)">,
    Option<"repropagate", "repropagate", "std::string", "\"\"",
           "Propagate the backward again in this mode (data or semi); "
           "empty: do not">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def Recompute : Pass<"loom-recompute", "mlir::func::FuncOp"> {
  let summary = "Recomputes marked forward ops in the backward pass";
  let description = [{
    In a training step, the backward pass's uses of the results of forward
    ops marked `loom.recompute` are rewritten to use copies of those ops
    (marked `loom.recomputed`), made just before the first backward op
    that needs them; marked operands are recomputed in turn, unmarked ones
    are kept. Run after sharding (the copies keep their original's
    `loom.sharding`) or on a single-device step. With `spec`, marks ops
    first: `layers` (every op of each layer but its last) or
    comma-separated globs on ONNX node names.

    ```mlir
    // before: the backward reads the forward's result %a
    %a = loom.add %h, %b {loom.recompute} ...
    %r = loom.relu %a ...
    ...
    %da = loom.relu_grad %a, %dr ...
    // after: it reads a copy made just before it
    %a2 = loom.add %h, %b {loom.recomputed} ...
    %da = loom.relu_grad %a2, %dr ...
    ```
  }];
  let options = [
    Option<"spec", "spec", "std::string", "\"\"",
           "Ops to mark first: layers, or ONNX node name globs">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def MarkRecompute : Pass<"loom-mark-recompute", "mlir::func::FuncOp"> {
  let summary = "Marks forward ops of a training step for recompute";
  let description = [{
    Marks the forward ops `spec` names with `loom.recompute`, for
    `loom-recompute` (run after sharding) to recompute in the backward:
    `layers` marks every forward op of each layer (the ONNX node names'
    first path component, e.g. `/blocks.3`) but the layer's last, whose
    result is the checkpoint; otherwise `spec` is comma-separated globs on
    ONNX node names. Marking before sharding lets the search count the
    memory recompute saves. Errors: a bad glob, a glob that matches no
    forward op, a function that is not a training step.

    ```mlir
    // before (spec=layers)
    %h = loom.matmul %x, %w1 ... loc("/blocks.0/fc/MatMul")
    %r = loom.relu %h ...        loc("/blocks.0/act/Relu")
    // after: the layer's last op (relu) is its checkpoint
    %h = loom.matmul %x, %w1 {loom.recompute} ... loc("/blocks.0/fc/MatMul")
    %r = loom.relu %h ...                         loc("/blocks.0/act/Relu")
    ```
  }];
  let options = [
    Option<"spec", "spec", "std::string", "\"\"",
           "layers, or ONNX node name globs">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def AutoSharding : Pass<"loom-auto-sharding", "mlir::func::FuncOp"> {
  let summary = "Chooses the forward ops' shardings by cost (--mode auto)";
  let description = [{
    For a function with a `loom.mesh`: the forward ops of a training step
    (every op of an inference graph) become the nodes of a cost graph whose
    candidates are every valid assignment of mesh axes to the factors of
    the op's sharding rule. A candidate costs its compute on the hardware
    profile (roofline; the backward counted as twice the forward), the
    all-reduce of its parameters' gradients over the axes that split work
    they do not index, and lambda times its per-device memory (parameters,
    gradients, optimizer state, saved activations); an edge costs the
    redistribution of the value and of its gradient (alpha-beta with the
    bus factors, on the slowest link the group spans), and lambda times the
    copy when the consumer's gradient reads it (`loom.grad_of`). The
    largest layer's recomputed results are counted once. The eliminations of
    the cost-graph solver (MindSpore's dynamic programming, exact on
    series-parallel graphs, exhaustive on small remainders) pick the
    cheapest assignment; lambda rises from 0 until the plan fits the
    memory limit, and a clear error says when nothing fits. The chosen
    assignments are set as `loom.sharding`; run loom-propagate-sharding
    next so that the backward and optimizer ops follow them. The function
    gets `loom.search = {cost, memory, exact}`.

    Under a pipeline (`stages` > 1) one stage's share of the state and of
    the micro-batches in flight counts. With `choose-zero` and
    `choose-recompute` (--mode auto when the user fixed neither) the
    ZeRO level and recompute are part of the search when memory binds: the
    lowest level at which the fastest plan fits (level 1 only with
    micro-batches), else the highest; the layers marked for recompute only
    when nothing fits without. The chosen level is set as the function's
    `loom.zero`.

    ```mlir
    // before (mesh dp=2,tp=2): forward ops without layouts
    %h = loom.matmul %x, %w1 : (tensor<4096x4096xf32>, tensor<4096x16384xf32>) ...
    // after: fc1 split by columns over dp*tp
    %h = loom.matmul %x, %w1 {loom.sharding = [[], ["dp", "tp"], []]} ...
    ```
  }];
  let options = [
    Option<"profile", "profile", "std::string", "\"8xH100-80GB\"",
           "A built-in hardware profile's name or a profile JSON file">,
    Option<"memoryLimit", "memory-limit", "int64_t", "0",
           "Bytes per device (0: the profile's device memory)">,
    Option<"stages", "stages", "int64_t", "1",
           "Pipeline stages the step will run on (each holds about 1/P of "
           "the state, and stage 0 the most micro-batches in flight)">,
    Option<"microBatches", "micro-batches", "int64_t", "1",
           "Micro-batches per step">,
    Option<"schedule", "schedule", "::loom::PipelineSchedule",
           "::loom::PipelineSchedule::OneFOneB",
           "The pipeline schedule: gpipe, 1f1b or interleaved",
           "::loom::EnumSpellings<::loom::PipelineSchedule, "
           "::loom::symbolizePipelineSchedule>()">,
    Option<"virtualStages", "virtual-stages", "int64_t", "1",
           "Chunks per stage under the interleaved schedule">,
    Option<"chooseZero", "choose-zero", "bool", "false",
           "Choose the ZeRO level too: the lowest at which the fastest plan "
           "fits (set as the function's loom.zero)">,
    Option<"chooseRecompute", "choose-recompute", "bool", "false",
           "Mark the layers for recompute when no plan fits without">,
    Option<"bucketBytes", "bucket-bytes", "int64_t", "0",
           "The gradient buckets' size (loom-bucket-gradients; 0: none): a "
           "parameter gradient's all-reduce pays its share of its bucket's "
           "latency">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def AssignMesh : Pass<"loom-assign-mesh", "mlir::ModuleOp"> {
  let summary = "Puts @main on a device mesh (and its ZeRO level)";
  let description = [{
    Sets `loom.mesh` on @main from `mesh`, named axes outermost first. A
    pipeline axis `pp=P`, which must come first and needs a training step,
    is left out: each of the P stages runs on the rest of the mesh (a
    one-device `dp = 1` mesh when nothing is left), which is what the ops
    are sharded over. With `zero` > 0, sets @main's `loom.zero`, which the
    cost model and `loom-shard-optimizer` read.

    ```mlir
    // before (mesh="pp=2,dp=2,tp=2" zero=1)
    func.func @main(...) { ... }
    // after
    func.func @main(...) attributes {loom.mesh = #loom.mesh<dp = 2, tp = 2>,
                                     loom.zero = 1 : i64} { ... }
    ```
  }];
  let options = [
    Option<"mesh", "mesh", "std::string", "\"\"",
           "Named axes, e.g. dp=2,tp=4 (pp=P first for pipeline stages)">,
    Option<"zero", "zero", "int", "0", "The ZeRO level, 0 to 3">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def ApplyStrategies : Pass<"loom-apply-strategies", "mlir::func::FuncOp"> {
  let summary = "Applies a JSON strategy file's shardings, stages and marks";
  let description = [{
    Reads the strategy file (docs/partitioning.md) and sets, on the ops of
    the ONNX nodes each entry names, the sharding its strategy implies
    (`loom.sharding`, which propagation keeps), its pipeline stage
    (`loom.stage`) or a recompute mark (`loom.recompute`). Needs the
    function's `loom.mesh`. Errors name the file, the entry, the node and
    what to change.

    ```mlir
    // before, with {"node": "/fc1/MatMul", "strategy": [[1, 1], [1, 4]]}
    %h = loom.matmul %x, %w1 ... loc("/fc1/MatMul")
    // after (mesh tp=4)
    %h = loom.matmul %x, %w1 {loom.sharding = [[], ["tp"], []]} ...
    ```
  }];
  let options = [
    Option<"file", "file", "std::string", "\"\"", "The strategy file">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def SplitStages : Pass<"loom-split-stages", "mlir::ModuleOp"> {
  let summary = "Splits a partitioned step's layers over pipeline stages by cost";
  let description = [{
    After `loom-partition`, before `loom-pipeline` (--mode auto with a
    pipeline axis): Alpa's inter-op split. Each ONNX layer (the node
    names' first path component) of the partitioned `@main` is costed as
    a stage of its own: its compute on the stage's submesh (the hardware
    profile grown to the whole mesh of `stages` times it), its memory, and
    the sends of what crosses to the next stage. A dynamic program over
    consecutive layers then picks the split over `stages` stages
    (`stages` x `virtual-stages` chunks under the interleaved schedule)
    with the least predicted step under `schedule` and `micro-batches`,
    every stage within the memory limit when a split fits (the most
    compact otherwise). The result is set as `@main`'s
    `loom.layer_stages`, which `loom-pipeline` follows. Ops that carry
    `loom.stage` marks (a strategy file's stages) are the user's split:
    the pass leaves them. Errors: a step that is not a training step, a
    parameter used by two layers, fewer layers than stages.

    ```mlir
    // before (stages=2): a partitioned step of four layers
    func.func @main(...) attributes {loom.mesh = #mesh, loom.spmd}
    // after
    func.func @main(...) attributes {loom.layer_stages = {"/blocks.0" = 0 : i64,
        "/blocks.1" = 1 : i64, "/embed" = 0 : i64, "/lm_head" = 1 : i64},
        loom.mesh = #mesh, loom.spmd}
    ```
  }];
  let options = [
    Option<"stages", "stages", "int64_t", "1", "Pipeline stages">,
    Option<"microBatches", "micro-batches", "int64_t", "1",
           "Micro-batches per step">,
    Option<"schedule", "schedule", "::loom::PipelineSchedule",
           "::loom::PipelineSchedule::OneFOneB",
           "gpipe, 1f1b or interleaved",
           "::loom::EnumSpellings<::loom::PipelineSchedule, "
           "::loom::symbolizePipelineSchedule>()">,
    Option<"virtualStages", "virtual-stages", "int64_t", "1",
           "Chunks per stage under the interleaved schedule">,
    Option<"profile", "profile", "std::string", "\"8xH100-80GB\"",
           "A built-in hardware profile's name or a profile JSON file">,
    Option<"memoryLimit", "memory-limit", "int64_t", "0",
           "Bytes per device (0: the profile's device memory)">,
    Option<"ownMeshes", "own-meshes", "bool", "false",
           "The stages run on submeshes of their own (--stage-meshes)">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def PipelineStages : Pass<"loom-pipeline", "mlir::ModuleOp"> {
  let summary = "Splits a partitioned training step into pipeline stages";
  let description = [{
    After `loom-partition`, on a training step whose `@main` is one
    micro-batch's per-device program: the ops go to `stages` stages (by the
    `loom.stage` marks of a strategy file, per ONNX node; else by
    `layer-stages`, or `@main`'s `loom.layer_stages` from
    `loom-split-stages`, per ONNX layer; else the layers balanced by op
    count),
    and `@main` is replaced by one function per stage (`@main_stage0`,
    ...), each running `micro-batches` micro-batches in the order of
    `schedule` (gpipe, 1f1b, or interleaved over `virtual-stages` chunks),
    the values that cross stages sent and received (`loom.send`,
    `loom.recv`), the gradients accumulated over the micro-batches and
    reduced and applied once. Each stage function carries `loom.pipeline`
    (its stage, the stages, the schedule, the micro-batches). With one
    stage and several micro-batches, the step is unrolled over its
    micro-batches. Errors name the op or parameter that cannot be split
    (a parameter used by two stages, fewer layers than stages, a stage
    earlier than its input's).

    ```mlir
    // before (stages=2 micro-batches=4)
    func.func @main(%ids: tensor<2x64xi64>, ...) attributes {loom.spmd, ...}
    // after
    func.func @main_stage0(%ids: tensor<1x64xi64> {loom.micro_batch = 0}, ...)
        attributes {loom.pipeline = {axis = "pp", micro_batches = 4 : i64,
                    schedule = #loom.schedule<"1f1b">, stage = 0 : i64,
                    stages = 2 : i64}}
      ... loom.send %h {peer_stage = 1 : i64, tag = 1 : i64} ...
    func.func @main_stage1(...)
    ```
  }];
  let options = [
    Option<"stages", "stages", "int64_t", "1", "Pipeline stages">,
    Option<"microBatches", "micro-batches", "int64_t", "1",
           "Micro-batches per step">,
    Option<"schedule", "schedule", "::loom::PipelineSchedule",
           "::loom::PipelineSchedule::OneFOneB",
           "gpipe, 1f1b or interleaved",
           "::loom::EnumSpellings<::loom::PipelineSchedule, "
           "::loom::symbolizePipelineSchedule>()">,
    Option<"virtualStages", "virtual-stages", "int64_t", "1",
           "Chunks per stage under the interleaved schedule">,
    Option<"ownMeshes", "own-meshes", "bool", "false",
           "Each stage's function is made for a submesh of its own (the "
           "values that cross stages cross as compute ops made them)">,
    ListOption<"layerStages", "layer-stages", "std::string",
               "The stage of each ONNX layer, as LAYER=STAGE">,
    Option<"profile", "profile", "std::string", "\"\"",
           "The hardware profile the report's stage times are costed on "
           "(empty: none)">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def VerifyPhase : Pass<"loom-verify-phase", "mlir::ModuleOp"> {
  let summary = "Checks the annotations a phase boundary promises";
  let description = [{
    Fails with a diagnostic, and changes nothing, unless the module keeps
    the contract of `phase` (verifyPhaseContract, dialects/PhaseContract.h),
    so that a missing or misspelt annotation is an error where it is made
    rather than a default where it is read:
      * `imported`: a `@main` whose arguments each have one role
        (`loom.input`, `loom.param` or `loom.buffer`), every result a
        `loom.output`; a module's `loom.source` a string;
      * `training-step`: as imported, an argument may also be optimizer
        state (`loom.state`) or a `#loom.hyper`, and `@main` has one
        `#loom.hyper<lr>` and one `#loom.hyper<step>`; a result may
        instead update an argument (`loom.updates`);
      * `sharded`: `@main` has a `loom.mesh` and every op with a sharding
        rule its `loom.sharding`;
      * `partitioned`: `@main` is `loom.spmd` with its `loom.mesh`, and no
        op keeps `loom.sharding` or `loom.strategy`;
      * `pipelined`: stage functions with `loom.pipeline` (no `@main`
        left), stages 0 to P-1 once each, all agreeing on the stages,
        micro-batches, schedule, chunks and axis.
    The dialect's verifier has already checked each annotation's type.

    ```mlir
    // loom-opt -loom-verify-phase=phase=pipelined: passes
    func.func @main_stage0(...) attributes {loom.pipeline = {
        micro_batches = 2 : i64, schedule = #loom.schedule<gpipe>,
        stage = 0 : i64, stages = 2 : i64}, loom.spmd, ...}
    func.func @main_stage1(...) attributes {loom.pipeline = {..., stage = 1}}
    // with @main_stage1 missing:
    // error: 'loom.pipeline' says 2 stages but the module has 1 stage function
    ```
  }];
  let options = [
    Option<"phase", "phase", "::loom::Phase", "::loom::Phase::Imported",
           "imported, training-step, sharded, partitioned or pipelined",
           "::loom::EnumSpellings<::loom::Phase, ::loom::symbolizePhase>()">,
  ];
}

#endif // LOOM_PASSES_TD
