//===- LoomOps.td - The loom dialect's forward compute ops --*- tablegen -*-===//
//
// Forward compute ops of a global training graph. Every op takes and returns
// statically shaped builtin tensors; symbolic dimensions are bound when a
// model is imported. Result types are inferred from operands and attributes
// wherever they can be, so building an op never needs its result type.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_OPS_TD
#define LOOM_OPS_TD

include "dialects/LoomDialect.td"
include "dialects/LoomAttrs.td"
include "dialects/LoomInterfaces.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def Loom_FloatTensor : StaticShapeTensorOf<[F32, F16, BF16]>;
def Loom_IndexTensor : StaticShapeTensorOf<[I32, I64]>;
def Loom_BoolTensor : StaticShapeTensorOf<[I1]>;
def Loom_NumericTensor : StaticShapeTensorOf<[F32, F16, BF16, I32, I64]>;
def Loom_Tensor : StaticShapeTensorOf<[F32, F16, BF16, I32, I64, I1]>;

class Loom_Op<string mnemonic, list<Trait> traits = []>
    : Op<Loom_Dialect, mnemonic,
         !listconcat([Pure, DeclareOpInterfaceMethods<Loom_ShardingOpInterface>,
                      Loom_CostOpInterface],
                     traits)>;

/// An op whose result types follow from its operands and attributes by the
/// op's rule (common/ops/OpRules.h), which its `inferReturnTypes` runs.
class Loom_InferredOp<string mnemonic, list<Trait> traits = []>
    : Loom_Op<mnemonic, !listconcat([InferTypeOpAdaptor], traits)> {
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  code inferByRule = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *context, std::optional<::mlir::Location> loc,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &results) {
      return ::loom::inferByRule<$cppClass>(context, loc, adaptor, results);
    }
  }];
  let extraClassDefinition = inferByRule;
}

/// An op whose result type is an input of its own (cast, reshape, broadcast,
/// the gradients that write into a given shape): its verifier checks the
/// operands against the results by the op's rule (common/ops/OpRules.h).
class Loom_CheckedOp<string mnemonic, list<Trait> traits = []>
    : Loom_Op<mnemonic, traits> {
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::verify() {
      return ::loom::verifyByRule(getOperation());
    }
  }];
}

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

def Loom_ConstantOp : Loom_InferredOp<"constant", [ConstantLike]> {
  let summary = "a constant tensor";
  let description = [{
    A tensor whose value is known when the graph is compiled: dense or
    resource-backed elements. The result type is the value's type.
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
  // The result type is the value's (LoomOps.cpp), not a rule's.
  let extraClassDefinition = [{}];
}

//===----------------------------------------------------------------------===//
// Elementwise ops (numpy broadcasting)
//===----------------------------------------------------------------------===//

/// The sharding rule of an elementwise op: one factor per result dimension
/// (dialects/Sharding.cpp); a linear op's operands may be partial sums.
class Loom_ElementwiseSharding<bit linear> {
  code elementwiseSharding = !strconcat([{
    ::loom::ShardingRule $cppClass::getShardingRule() {
      return ::loom::ShardingRule::elementwise(getOperation(), }],
      !if(linear, "true", "false"), [{);
    }
  }]);
}

class Loom_BinaryOp<string mnemonic, string what, bit linear = 0>
    : Loom_InferredOp<mnemonic, [DeclareOpInterfaceMethods<Loom_GradientOpInterface>]>,
      Loom_ElementwiseSharding<linear> {
  let extraClassDefinition = inferByRule # elementwiseSharding;
  let summary = "elementwise " # what # " with numpy broadcasting";
  let description = [{
    Both operands have the same element type. Their shapes broadcast as in
    numpy: aligned at the last dimension, each pair of sizes is equal or one
    of them is 1. The result has the broadcast shape.
  }];
  let arguments = (ins Loom_NumericTensor:$lhs, Loom_NumericTensor:$rhs);
  let results = (outs Loom_NumericTensor:$result);
}

def Loom_AddOp : Loom_BinaryOp<"add", "addition", /*linear=*/1>;
def Loom_SubOp : Loom_BinaryOp<"sub", "subtraction", /*linear=*/1>;
def Loom_MulOp : Loom_BinaryOp<"mul", "multiplication">;
def Loom_DivOp : Loom_BinaryOp<"div", "division (integers truncate)">;
def Loom_PowOp : Loom_BinaryOp<"pow", "power">;
def Loom_ModOp
    : Loom_BinaryOp<"mod", "floored remainder, with the divisor's sign">;
def Loom_FModOp
    : Loom_BinaryOp<"fmod", "truncated remainder, with the dividend's sign">;

class Loom_UnaryOp<string mnemonic, string what, Type type = Loom_FloatTensor>
    : Loom_InferredOp<mnemonic, [DeclareOpInterfaceMethods<Loom_GradientOpInterface>]>,
      Loom_ElementwiseSharding<0> {
  let extraClassDefinition = inferByRule # elementwiseSharding;
  let summary = "elementwise " # what;
  let arguments = (ins type:$input);
  let results = (outs type:$result);
}

def Loom_NegOp : Loom_UnaryOp<"neg", "negation", Loom_NumericTensor>;
def Loom_ExpOp : Loom_UnaryOp<"exp", "exponential">;
def Loom_LogOp : Loom_UnaryOp<"log", "natural logarithm">;
def Loom_SqrtOp : Loom_UnaryOp<"sqrt", "square root">;
def Loom_ErfOp : Loom_UnaryOp<"erf", "Gauss error function">;
def Loom_TanhOp : Loom_UnaryOp<"tanh", "hyperbolic tangent">;
def Loom_ReluOp : Loom_UnaryOp<"relu", "rectified linear unit, max(x, 0)">;
def Loom_SigmoidOp : Loom_UnaryOp<"sigmoid", "logistic sigmoid, 1 / (1 + exp(-x))">;

def Loom_GeluOp : Loom_UnaryOp<"gelu", "Gaussian error linear unit"> {
  let description = [{
    `x * Phi(x)` with the normal CDF `Phi`; with `tanh_approximation`, the
    tanh form `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
  }];
  let arguments = (ins Loom_FloatTensor:$input, UnitAttr:$tanh_approximation);
}

def Loom_CosOp : Loom_UnaryOp<"cos", "cosine">;
def Loom_SinOp : Loom_UnaryOp<"sin", "sine">;
def Loom_AbsOp : Loom_UnaryOp<"abs", "absolute value", Loom_NumericTensor>;
def Loom_ReciprocalOp : Loom_UnaryOp<"reciprocal", "reciprocal, 1 / x">;
def Loom_SoftplusOp : Loom_UnaryOp<"softplus", "softplus, log(1 + exp(x))">;
def Loom_MishOp : Loom_UnaryOp<"mish", "mish, x * tanh(softplus(x))">;
def Loom_HardSwishOp
    : Loom_UnaryOp<"hard_swish", "hard swish, x * max(0, min(1, x / 6 + 0.5))">;

def Loom_LeakyReluOp : Loom_UnaryOp<"leaky_relu", "leaky relu"> {
  let description = "`x` where `x > 0`, else `alpha * x`.";
  let arguments = (ins Loom_FloatTensor:$input, F32Attr:$alpha);
}

def Loom_EluOp : Loom_UnaryOp<"elu", "exponential linear unit"> {
  let description = "`x` where `x > 0`, else `alpha * (exp(x) - 1)`.";
  let arguments = (ins Loom_FloatTensor:$input, F32Attr:$alpha);
}

def Loom_SeluOp : Loom_UnaryOp<"selu", "scaled exponential linear unit"> {
  let description = [{
    `gamma * x` where `x > 0`, else `gamma * alpha * (exp(x) - 1)`.
  }];
  let arguments = (ins Loom_FloatTensor:$input, F32Attr:$alpha,
                       F32Attr:$gamma);
}

def Loom_HardSigmoidOp : Loom_UnaryOp<"hard_sigmoid", "hard sigmoid"> {
  let description = "`max(0, min(1, alpha * x + beta))`.";
  let arguments = (ins Loom_FloatTensor:$input, F32Attr:$alpha,
                       F32Attr:$beta);
}

def Loom_ClipOp : Loom_UnaryOp<"clip", "clamp to [min, max]"> {
  let description = [{
    `min(max(x, min), max)`; NaN stays NaN. An absent bound is an infinite
    one (`min` may be -inf, `max` +inf); `min` must not exceed `max`.
  }];
  let arguments = (ins Loom_FloatTensor:$input, F32Attr:$min, F32Attr:$max);
}

def Loom_CastOp : Loom_CheckedOp<"cast", [DeclareOpInterfaceMethods<Loom_GradientOpInterface>]> {
  let summary = "elementwise conversion to another element type";
  let description = [{
    Converts every element to the result's element type; the shape is kept.
    Float to integer rounds toward zero; to `i1`, non-zero is true.
  }];
  let arguments = (ins Loom_Tensor:$input);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Loom_SelectOp : Loom_InferredOp<"select", [DeclareOpInterfaceMethods<Loom_GradientOpInterface>]> {
  let summary = "elementwise choice: condition ? true_value : false_value";
  let description = [{
    The three operands broadcast as in numpy; `true_value` and `false_value`
    have the same element type, which is the result's.
  }];
  let arguments = (ins Loom_BoolTensor:$condition, Loom_Tensor:$true_value,
                       Loom_Tensor:$false_value);
  let results = (outs Loom_Tensor:$result);
}

//===----------------------------------------------------------------------===//
// Maximum, minimum, comparisons and logic (numpy broadcasting)
//===----------------------------------------------------------------------===//

def Loom_MaxOp : Loom_BinaryOp<"max", "maximum">;
def Loom_MinOp : Loom_BinaryOp<"min", "minimum">;

/// An elementwise op with a bool result and no gradient: comparisons and
/// logic. Its operands broadcast as in numpy and have one element type.
class Loom_MaskOp<string mnemonic, string what, Type type>
    : Loom_InferredOp<mnemonic>, Loom_ElementwiseSharding<0> {
  let extraClassDefinition = inferByRule # elementwiseSharding;
  let summary = "elementwise " # what # " with numpy broadcasting";
  let description = [{
    Both operands have the same element type. Their shapes broadcast as in
    numpy: aligned at the last dimension, each pair of sizes is equal or one
    of them is 1. The result is a bool tensor of the broadcast shape. It
    has no gradient.
  }];
  let arguments = (ins type:$lhs, type:$rhs);
  let results = (outs Loom_BoolTensor:$result);
}

def Loom_EqualOp : Loom_MaskOp<"equal", "comparison lhs == rhs", Loom_Tensor>;
def Loom_LessOp : Loom_MaskOp<"less", "comparison lhs < rhs", Loom_NumericTensor>;
def Loom_LessEqualOp
    : Loom_MaskOp<"less_equal", "comparison lhs <= rhs", Loom_NumericTensor>;
def Loom_GreaterOp
    : Loom_MaskOp<"greater", "comparison lhs > rhs", Loom_NumericTensor>;
def Loom_GreaterEqualOp
    : Loom_MaskOp<"greater_equal", "comparison lhs >= rhs", Loom_NumericTensor>;
def Loom_AndOp : Loom_MaskOp<"and", "logical and", Loom_BoolTensor>;
def Loom_OrOp : Loom_MaskOp<"or", "logical or", Loom_BoolTensor>;
def Loom_XorOp : Loom_MaskOp<"xor", "logical exclusive or", Loom_BoolTensor>;

def Loom_NotOp : Loom_InferredOp<"not">, Loom_ElementwiseSharding<0> {
  let extraClassDefinition = inferByRule # elementwiseSharding;
  let summary = "elementwise logical negation";
  let arguments = (ins Loom_BoolTensor:$input);
  let results = (outs Loom_BoolTensor:$result);
}

//===----------------------------------------------------------------------===//
// Triangular masks
//===----------------------------------------------------------------------===//

def Loom_TriluOp : Loom_InferredOp<"trilu", [DeclareOpInterfaceMethods<Loom_GradientOpInterface>]> {
  let summary = "the upper or lower triangle of the last two dimensions";
  let description = [{
    Keeps the elements of every `[..., M, N]` matrix of `input` (rank at
    least 2) on and above the `k`-th diagonal (`upper`: column - row >= k)
    or on and below it (otherwise: column - row <= k), and zeroes the rest.
    The result has the input's type.
  }];
  let arguments = (ins Loom_Tensor:$input, BoolAttr:$upper, I64Attr:$k);
  let results = (outs Loom_Tensor:$result);
}

//===----------------------------------------------------------------------===//
// Linear algebra and normalisation
//===----------------------------------------------------------------------===//

def Loom_MatmulOp : Loom_InferredOp<"matmul", [DeclareOpInterfaceMethods<Loom_GradientOpInterface>]> {
  let summary = "batched matrix multiplication";
  let description = [{
    `lhs` is `[..., M, K]` and `rhs` is `[..., K, N]` (after the optional
    transposition of their last two dimensions); both have rank at least 2
    and the same element type. The batch dimensions broadcast as in numpy.
    The result is `[broadcast batch..., M, N]`.
  }];
  let arguments = (ins Loom_FloatTensor:$lhs, Loom_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Loom_FloatTensor:$result);
}

def Loom_FusedMatmulOp : Loom_InferredOp<"fused_matmul"> {
  let summary = "matmul with a bias and optional relu epilogue";
  let description = [{
    `matmul(lhs, rhs) + bias`, then `max(0, .)` with `relu`: `lhs`, `rhs`
    and the transpositions as in `loom.matmul`, and `bias` a vector of the
    result's last dimension N added to every row. All three share one
    element type. loom-fuse-matmul-epilogue forms it in per-device
    programs, after differentiation, so it has no gradient; a backend runs
    it as one GEMM with an epilogue (cuBLASLt's bias epilogue) instead of a
    GEMM and a pass over its result.
  }];
  let arguments = (ins Loom_FloatTensor:$lhs, Loom_FloatTensor:$rhs,
                       Loom_FloatTensor:$bias, UnitAttr:$transpose_lhs,
                       UnitAttr:$transpose_rhs, UnitAttr:$relu);
  let results = (outs Loom_FloatTensor:$result);
}

def Loom_SoftmaxOp : Loom_InferredOp<"softmax", [DeclareOpInterfaceMethods<Loom_GradientOpInterface>]> {
  let summary = "softmax along one axis";
  let description = "`axis` must be in [0, rank).";
  let arguments = (ins Loom_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Loom_FloatTensor:$result);
}

def Loom_LogSoftmaxOp
    : Loom_InferredOp<"log_softmax", [DeclareOpInterfaceMethods<Loom_GradientOpInterface>]> {
  let summary = "log of softmax along one axis";
  let description = "`axis` must be in [0, rank).";
  let arguments = (ins Loom_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Loom_FloatTensor:$result);
}

def Loom_LayerNormOp : Loom_InferredOp<"layer_norm", [DeclareOpInterfaceMethods<Loom_GradientOpInterface>]> {
  let summary = "layer normalisation over the trailing dimensions";
  let description = [{
    Normalises `input` over dimensions `[axis, rank)` to zero mean and unit
    variance (biased, plus `epsilon`), then multiplies by `scale` and adds
    `bias` if given. `axis` must be in [0, rank); `scale` and `bias` have
    shape `input.shape[axis:]` and the input's element type; `epsilon` is
    not negative.
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$scale,
                       Optional<Loom_FloatTensor>:$bias, I64Attr:$axis,
                       F32Attr:$epsilon);
  let results = (outs Loom_FloatTensor:$result);
}

def Loom_BatchNormOp : Loom_InferredOp<"batch_norm", [DeclareOpInterfaceMethods<Loom_GradientOpInterface>]> {
  let summary = "batch normalisation with given statistics (inference form)";
  let description = [{
    `(input - mean) / sqrt(variance + epsilon) * scale + bias` along the
    channel dimension 1. `input` has rank at least 2; `scale`, `bias`,
    `mean`, `variance` are `[C]` with the input's element type; `epsilon` is
    not negative.
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$scale,
                       Loom_FloatTensor:$bias, Loom_FloatTensor:$mean,
                       Loom_FloatTensor:$variance, F32Attr:$epsilon);
  let results = (outs Loom_FloatTensor:$result);
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class Loom_ReduceOp<string mnemonic, string what>
    : Loom_InferredOp<mnemonic, [DeclareOpInterfaceMethods<Loom_GradientOpInterface>]> {
  let summary = what # " over a set of dimensions";
  let description = [{
    `axes` are strictly increasing and in [0, rank). With `keep_dims` the
    reduced dimensions stay with size 1; otherwise they are removed. Empty
    `axes` leave the tensor unchanged.
  }];
  let arguments = (ins Loom_NumericTensor:$input, DenseI64ArrayAttr:$axes,
                       UnitAttr:$keep_dims);
  let results = (outs Loom_NumericTensor:$result);
}

def Loom_ReduceSumOp : Loom_ReduceOp<"reduce_sum", "sum">;
def Loom_ReduceMeanOp : Loom_ReduceOp<"reduce_mean", "mean">;
def Loom_ReduceMaxOp : Loom_ReduceOp<"reduce_max", "maximum">;
def Loom_ReduceProdOp : Loom_ReduceOp<"reduce_prod", "product">;

class Loom_ArgReduceOp<string mnemonic, string what>
    : Loom_InferredOp<mnemonic> {
  let summary = "index of the " # what # " along an axis";
  let description = [{
    The i64 index along `axis` of each row's extreme value: the result has
    the input's shape without `axis`, or with it 1 under `keep_dims`. Ties
    give the first index, or the last with `select_last_index`; NaN counts
    as the extreme (as numpy's). An integer result: not differentiable.
  }];
  let arguments = (ins Loom_NumericTensor:$input, I64Attr:$axis,
                       UnitAttr:$keep_dims, UnitAttr:$select_last_index);
  let results = (outs Loom_IndexTensor:$result);
}

def Loom_ArgMaxOp : Loom_ArgReduceOp<"arg_max", "maximum">;
def Loom_ArgMinOp : Loom_ArgReduceOp<"arg_min", "minimum">;

def Loom_CumSumOp : Loom_InferredOp<"cumsum", [DeclareOpInterfaceMethods<Loom_GradientOpInterface>]> {
  let summary = "cumulative sum along an axis";
  let description = [{
    `axis` is in [0, rank); the result has the input's type. Element `j`
    along the axis is the sum of elements `0..j` (with `exclusive`:
    `0..j-1`, 0 for the first); `reverse` sums from the end instead.
  }];
  let arguments = (ins Loom_NumericTensor:$input, I64Attr:$axis,
                       UnitAttr:$exclusive, UnitAttr:$reverse);
  let results = (outs Loom_NumericTensor:$result);
}

def Loom_TopKOp : Loom_InferredOp<"top_k", [DeclareOpInterfaceMethods<Loom_GradientOpInterface>]> {
  let summary = "the k largest (or smallest) elements along an axis";
  let description = [{
    `axis` is in [0, rank) and `k` in [0, size of `axis`]. `values` and the
    i64 `indices` have the input's shape with `k` along `axis`, sorted
    (largest first, or smallest first with `smallest`); equal values give
    the lower index first, and NaN ranks above every number. Inference
    only: requesting its gradient is an error.
  }];
  let arguments = (ins Loom_NumericTensor:$input, I64Attr:$k, I64Attr:$axis,
                       UnitAttr:$smallest);
  let results = (outs Loom_NumericTensor:$values, Loom_IndexTensor:$indices);
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def Loom_TransposeOp : Loom_InferredOp<"transpose", [DeclareOpInterfaceMethods<Loom_GradientOpInterface>]> {
  let summary = "permutation of dimensions";
  let description = [{
    `permutation` is a permutation of [0, rank); result dimension `i` is
    input dimension `permutation[i]`.
  }];
  let arguments = (ins Loom_Tensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs Loom_Tensor:$result);
}

def Loom_ReshapeOp : Loom_CheckedOp<"reshape", [DeclareOpInterfaceMethods<Loom_GradientOpInterface>]> {
  let summary = "same elements in row-major order, another shape";
  let description = [{
    The result has the input's element type and number of elements.
  }];
  let arguments = (ins Loom_Tensor:$input);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Loom_BroadcastOp : Loom_CheckedOp<"broadcast", [DeclareOpInterfaceMethods<Loom_GradientOpInterface>]> {
  let summary = "numpy broadcast to a larger shape";
  let description = [{
    The result has the input's element type, rank at least the input's, and
    the input's shape broadcasts to it: aligned at the last dimension, each
    input size equals the result's or is 1.
  }];
  let arguments = (ins Loom_Tensor:$input);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Loom_GatherOp : Loom_InferredOp<"gather", [DeclareOpInterfaceMethods<Loom_GradientOpInterface>]> {
  let summary = "gather slices along an axis (embedding lookup)";
  let description = [{
    `axis` is in [0, rank(input)). The result shape is
    `input.shape[:axis] + indices.shape + input.shape[axis+1:]`. Indices lie
    in [-d, d) for the axis size d; negative ones count from the end.
  }];
  let arguments = (ins Loom_Tensor:$input, Loom_IndexTensor:$indices,
                       I64Attr:$axis);
  let results = (outs Loom_Tensor:$result);
}

def Loom_GatherElementsOp : Loom_InferredOp<"gather_elements", [DeclareOpInterfaceMethods<Loom_GradientOpInterface>]> {
  let summary = "gather single elements along an axis";
  let description = [{
    `axis` is in [0, rank(input)); `indices` has the input's rank and, in
    every dimension but `axis`, at most the input's size. The result has the
    indices' shape: `result[i] = input[i with i[axis] = indices[i]]`.
    Indices lie in [-d, d) for the axis size d; negative ones count from
    the end.
  }];
  let arguments = (ins Loom_Tensor:$input, Loom_IndexTensor:$indices,
                       I64Attr:$axis);
  let results = (outs Loom_Tensor:$result);
}

def Loom_ScatterElementsOp : Loom_InferredOp<"scatter_elements", [DeclareOpInterfaceMethods<Loom_GradientOpInterface>]> {
  let summary = "data with single elements along an axis replaced or added";
  let description = [{
    The reverse of gather_elements: the result is `data` with
    `result[i with i[axis] = indices[i]] = updates[i]` for every position i
    of `indices`, or `+= updates[i]` with `accumulate`. `axis` is in
    [0, rank(data)); `indices` has the data's rank and, outside `axis`, at
    most its sizes; `updates` has the indices' shape and the data's element
    type. Indices lie in [-d, d); negative ones count from the end. Without
    `accumulate`, which of two updates of one position wins is unspecified.
  }];
  let arguments = (ins Loom_Tensor:$data, Loom_IndexTensor:$indices,
                       Loom_Tensor:$updates, I64Attr:$axis,
                       UnitAttr:$accumulate);
  let results = (outs Loom_Tensor:$result);
}

def Loom_ConcatOp : Loom_InferredOp<"concat", [DeclareOpInterfaceMethods<Loom_GradientOpInterface>]> {
  let summary = "concatenation along an axis";
  let description = [{
    At least one input; all have the same element type and rank, `axis` is in
    [0, rank), and all dimensions other than `axis` agree.
  }];
  let arguments = (ins Variadic<Loom_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs Loom_Tensor:$result);
}

def Loom_SliceOp : Loom_InferredOp<"slice", [DeclareOpInterfaceMethods<Loom_GradientOpInterface>]> {
  let summary = "strided slice with static bounds";
  let description = [{
    Per dimension `d`, result dimension `d` has `sizes[d]` elements taken at
    `starts[d] + i * strides[d]`. `starts`, `sizes` and `strides` have one
    entry per dimension; strides are non-zero (negative walks backwards),
    sizes are not negative, and every index read lies inside the input.
  }];
  let arguments = (ins Loom_Tensor:$input, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$sizes, DenseI64ArrayAttr:$strides);
  let results = (outs Loom_Tensor:$result);
}

def Loom_PadOp : Loom_InferredOp<"pad", [DeclareOpInterfaceMethods<Loom_GradientOpInterface>]> {
  let summary = "padding at both ends of every dimension";
  let description = [{
    Result dimension `d` has `low[d] + input.shape[d] + high[d]` elements,
    and input element `i` lands at `low[d] + i`. `low` and `high` have one
    entry per dimension and are not negative. `mode` says what fills the
    border: `constant` writes `value` (converted to the element type),
    `reflect` mirrors the input about its first and last element, which are
    not repeated (each pad smaller than the dimension), and `edge` repeats
    the first and last element (a padded dimension is not empty).
  }];
  let arguments = (ins Loom_Tensor:$input, DenseI64ArrayAttr:$low,
                       DenseI64ArrayAttr:$high, StrAttr:$mode, F32Attr:$value);
  let results = (outs Loom_Tensor:$result);
}

def Loom_ResizeOp : Loom_InferredOp<"resize", [DeclareOpInterfaceMethods<Loom_GradientOpInterface>]> {
  let summary = "nearest, N-linear or cubic resampling of every dimension";
  let description = [{
    Dimension `d` is scaled by `scale_num[d] / scale_den[d]` (positive; one
    entry each per dimension) and has `floor(in * scale_num / scale_den)`
    elements. Output coordinate `x` maps to the input coordinate given by
    `coordinate_transformation_mode` (half_pixel, pytorch_half_pixel,
    align_corners, asymmetric, tf_half_pixel_for_nn), as ONNX Resize. `mode`
    `nearest` takes the element `nearest_mode` rounds to (round_prefer_floor,
    round_prefer_ceil, floor, ceil); `linear` weights the two neighbours of
    every dimension (bilinear, trilinear, ...); `cubic` the four of Keys'
    cubic with coefficient `cubic_coeff_a`, and with `exclude_outside` the
    neighbours outside the input get no weight (the rest renormalised).
    Otherwise neighbours outside the input read its edge. The index math is
    common/ops/ResizeIndex.h.
  }];
  let arguments = (ins Loom_FloatTensor:$input, StrAttr:$mode,
                       StrAttr:$coordinate_transformation_mode,
                       StrAttr:$nearest_mode, DenseI64ArrayAttr:$scale_num,
                       DenseI64ArrayAttr:$scale_den, F32Attr:$cubic_coeff_a,
                       UnitAttr:$exclude_outside);
  let results = (outs Loom_FloatTensor:$result);
}

//===----------------------------------------------------------------------===//
// Convolution and pooling (NCHW)
//===----------------------------------------------------------------------===//

def Loom_Conv2DOp : Loom_InferredOp<"conv2d", [DeclareOpInterfaceMethods<Loom_GradientOpInterface>]> {
  let summary = "2-D convolution, NCHW input and OIHW weight";
  let description = [{
    `input` is `[N, C, H, W]`, `weight` is `[O, C / groups, KH, KW]`, and
    `bias`, if given, is `[O]`; all share one element type. `groups` is at
    least 1 and divides both C and O. `strides` and `dilations` have two
    entries, each at least 1; `padding` is `[top, left, bottom, right]`, not
    negative. Output size per spatial dimension:
    `(in + pad_begin + pad_end - dilation * (kernel - 1) - 1) / stride + 1`,
    which must be at least 1.
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$weight,
                       Optional<Loom_FloatTensor>:$bias,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilations, I64Attr:$groups);
  let results = (outs Loom_FloatTensor:$result);
}

def Loom_ConvTranspose2DOp : Loom_InferredOp<"conv_transpose2d", [DeclareOpInterfaceMethods<Loom_GradientOpInterface>]> {
  let summary = "2-D transposed convolution, NCHW input and IOHW weight";
  let description = [{
    The adjoint of `loom.conv2d`: the input gradient of a convolution whose
    output is `input`. `input` is `[N, C, H, W]`, `weight` is
    `[C, O / groups, KH, KW]`, and `bias`, if given, is `[O]`; all share one
    element type. `groups` is at least 1 and divides C. `strides` and
    `dilations` have two entries, each at least 1; `padding` is
    `[top, left, bottom, right]`, not negative; `output_padding` has two
    entries, each not negative and smaller than its stride. Output size per
    spatial dimension: `(in - 1) * stride - pad_begin - pad_end +
    dilation * (kernel - 1) + 1 + output_padding`, which must be at least
    1. The `output_padding` rows and columns at the end receive only bias.
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$weight,
                       Optional<Loom_FloatTensor>:$bias,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilations, I64Attr:$groups,
                       DenseI64ArrayAttr:$output_padding);
  let results = (outs Loom_FloatTensor:$result);
}

class Loom_Pool2DOp<string mnemonic, string what>
    : Loom_InferredOp<mnemonic, [DeclareOpInterfaceMethods<Loom_GradientOpInterface>]> {
  let summary = "2-D " # what # " pooling, NCHW";
  let results = (outs Loom_FloatTensor:$result);
}

def Loom_MaxPool2DOp : Loom_Pool2DOp<"max_pool2d", "max"> {
  let description = [{
    `input` is `[N, C, H, W]`. `kernel`, `strides` and `dilations` have two
    entries, each at least 1; `padding` is `[top, left, bottom, right]`, not
    negative, and each pad is smaller than the dilated kernel. The output
    size per spatial dimension is
    `(in + pad_begin + pad_end - dilation * (kernel - 1) - 1) / stride + 1`,
    rounded up instead of down with `ceil_mode`, where a last window that
    would start past the input and its leading padding is dropped. Padding
    never wins the max.
  }];
  let arguments = (ins Loom_FloatTensor:$input, DenseI64ArrayAttr:$kernel,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilations, UnitAttr:$ceil_mode);
}

def Loom_AvgPool2DOp : Loom_Pool2DOp<"avg_pool2d", "average"> {
  let description = [{
    As `loom.max_pool2d`, with dilations of 1. With `count_include_pad` the
    divisor counts padded positions inside the padded input; otherwise only
    input positions.
  }];
  let arguments = (ins Loom_FloatTensor:$input, DenseI64ArrayAttr:$kernel,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilations, UnitAttr:$ceil_mode,
                       UnitAttr:$count_include_pad);
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//


def Loom_SoftmaxCrossEntropyOp : Loom_InferredOp<"softmax_cross_entropy", [DeclareOpInterfaceMethods<Loom_GradientOpInterface>]> {
  let summary = "softmax cross-entropy with integer labels";
  let description = [{
    `logits` is `[N, C]` and `labels` is `[N]`. Rows whose label equals
    `ignore_index` do not count; the others need labels in [0, C). The result
    is a scalar of the logits' element type: the mean over counted rows, or
    their sum with `sum`.

    With `lse` (`[N]`, the logits' element type), the op is one class block
    of a vocabulary-parallel loss (loom-partition makes it): `logits` are the
    columns of the global `[N, C]` logits that start at this rank's class
    offset (the logits' block, `KernelArgs::block`), `lse` is each row's
    log-sum-exp over all C classes, and the result is this block's share of
    the loss: `lse - x[label]` where the block holds the label, `-x[label]`
    where the block of offset 0 does not, `lse` where it holds neither but
    starts at class 0, else 0; the sum over the blocks is the loss.
  }];
  let arguments = (ins Loom_FloatTensor:$logits, Loom_IndexTensor:$labels,
                       Optional<Loom_FloatTensor>:$lse,
                       I64Attr:$ignore_index, UnitAttr:$sum);
  let results = (outs Loom_FloatTensor:$result);
}

def Loom_MseLossOp : Loom_InferredOp<"mse_loss", [DeclareOpInterfaceMethods<Loom_GradientOpInterface>]> {
  let summary = "mean squared error";
  let description = [{
    `prediction` and `target` have the same type. The result is a scalar:
    the mean of the squared differences, or their sum with `sum`.
  }];
  let arguments = (ins Loom_FloatTensor:$prediction,
                       Loom_FloatTensor:$target, UnitAttr:$sum);
  let results = (outs Loom_FloatTensor:$result);
}

//===----------------------------------------------------------------------===//
// Random ops: counter-based, defined on the global tensor
//===----------------------------------------------------------------------===//

def Loom_DropoutOp
    : Loom_InferredOp<"dropout", [DeclareOpInterfaceMethods<Loom_GradientOpInterface>]>,
      Loom_ElementwiseSharding<0> {
  let extraClassDefinition = inferByRule # elementwiseSharding;
  let summary = "training-mode dropout with a counter-based mask";
  let description = [{
    With a `step` (the training step's `#loom.hyper<step>` scalar, which
    loom-build-training-graph passes in), element `i` of the result is
    `x[i] / (1 - ratio)` if it is kept and 0 otherwise. Element `i` is kept
    when the Philox4x32-10 draw keyed by `(seed, step)` at counter `i`, as a
    uniform number in [0, 1), is at least `ratio`, where `i` is the
    element's row-major index in the GLOBAL (unpartitioned) tensor: every
    rank of a partitioned step draws exactly its block of the single-device
    mask. `index_offset`, when given, is added to every index: micro-batch
    `k` of a step whose tensors hold `n` elements draws indices
    `[k n, (k + 1) n)`, its rows of the full batch's mask. Without a `step`
    the op is the identity, as dropout is at inference. `ratio` is in
    [0, 1); `step` is a floating-point scalar; `index_offset` is not
    negative.
  }];
  let arguments = (ins Loom_FloatTensor:$input,
                       Optional<Loom_FloatTensor>:$step, F32Attr:$ratio,
                       I64Attr:$seed, OptionalAttr<I64Attr>:$index_offset);
  let results = (outs Loom_FloatTensor:$result);
}

include "dialects/LoomTrainOps.td"
include "dialects/LoomCommOps.td"

#endif // LOOM_OPS_TD
