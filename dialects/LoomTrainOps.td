//===- LoomTrainOps.td - Gradient and optimizer ops ---------*- tablegen -*-===//
//
// Ops that only training graphs contain: the gradients that cannot be
// written with forward ops, and the optimizer updates. Included by
// LoomOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TRAIN_OPS_TD
#define LOOM_TRAIN_OPS_TD

/// Result type given explicitly (the shape of what is differentiated).
class Loom_TypedOp<string mnemonic, list<Trait> traits = []>
    : Loom_CheckedOp<mnemonic, traits> {
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Loom_ReluGradOp : Loom_InferredOp<"relu_grad"> {
  let summary = "gradient of relu: grad where input > 0, else 0";
  let description = "`input` and `grad` have the same type, the result's.";
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$grad);
  let results = (outs Loom_FloatTensor:$result);
}

def Loom_GeluGradOp : Loom_InferredOp<"gelu_grad"> {
  let summary = "gradient of gelu: grad * gelu'(input)";
  let description = "`input` and `grad` have the same type, the result's.";
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$grad,
                       UnitAttr:$tanh_approximation);
  let results = (outs Loom_FloatTensor:$result);
}

def Loom_UnaryGradOp : Loom_InferredOp<"unary_grad">,
                       Loom_ElementwiseSharding<0> {
  let extraClassDefinition = inferByRule # elementwiseSharding;
  let summary = "gradient of an elementwise unary op: grad * fn'(input)";
  let description = [{
    `fn` names the forward op: cos, sin, abs, reciprocal, softplus, mish,
    hard_swish, leaky_relu (`alpha`), elu (`alpha`), selu (`alpha`, and
    `gamma` as `beta`), hard_sigmoid (`alpha`, `beta`) or clip (`min` as
    `alpha`, `max` as `beta`); a parameter the op lacks is 0. The
    derivatives are PyTorch autograd's, also at the kinks (common/ops/
    ElementwiseMath.h). `input` and `grad` have the same type, the result's.
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$grad,
                       StrAttr:$fn, F32Attr:$alpha, F32Attr:$beta);
  let results = (outs Loom_FloatTensor:$result);
}

def Loom_LayerNormGradOp : Loom_InferredOp<"layer_norm_grad"> {
  let summary = "gradients of layer_norm: input, scale and bias";
  let description = [{
    For `layer_norm(input, scale, bias)` with the same `axis` and `epsilon`
    and the gradient `grad` of its result: the gradients of the input (its
    type), the scale and the bias (both `input.shape[axis:]`).
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$scale,
                       Loom_FloatTensor:$grad, I64Attr:$axis, F32Attr:$epsilon);
  let results = (outs Loom_FloatTensor:$input_grad,
                      Loom_FloatTensor:$scale_grad,
                      Loom_FloatTensor:$bias_grad);
}

def Loom_ReduceMaxGradOp : Loom_InferredOp<"reduce_max_grad"> {
  let summary = "gradient of reduce_max: grad shared by the maxima";
  let description = [{
    For `result = reduce_max(input)` with the same `axes` and `keep_dims`
    and its gradient `grad` (the result's type): each reduced position's
    gradient is divided evenly among the input elements equal to its
    maximum. The result has the input's type; the input is floating point.
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$result,
                       Loom_FloatTensor:$grad, DenseI64ArrayAttr:$axes,
                       UnitAttr:$keep_dims);
  let results = (outs Loom_FloatTensor:$input_grad);
}

def Loom_ReduceProdGradOp : Loom_InferredOp<"reduce_prod_grad"> {
  let summary = "gradient of reduce_prod: grad times the product of the others";
  let description = [{
    For `result = reduce_prod(input)` with the same `axes` and `keep_dims`
    and its gradient `grad` (the result's shape and the input's element
    type): each input element's gradient is `grad` times the product of the
    other elements of its reduction, exact where the input has zeros. The
    result has the input's type; the input is floating point.
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$grad,
                       DenseI64ArrayAttr:$axes, UnitAttr:$keep_dims);
  let results = (outs Loom_FloatTensor:$input_grad);
}

def Loom_GatherGradOp : Loom_TypedOp<"gather_grad"> {
  let summary = "gradient of gather: scatter-add of grad into zeros";
  let description = [{
    The result has the gathered tensor's type; `grad` has the shape
    `result.shape[:axis] + indices.shape + result.shape[axis+1:]` and the
    result's element type. Repeated indices accumulate.
  }];
  let arguments = (ins Loom_IndexTensor:$indices, Loom_FloatTensor:$grad,
                       I64Attr:$axis);
  let results = (outs Loom_FloatTensor:$result);
}

def Loom_SliceGradOp : Loom_TypedOp<"slice_grad"> {
  let summary = "gradient of slice: grad placed into zeros";
  let description = [{
    The result has the sliced tensor's type. `grad` has the slice's shape
    (the sizes) and the result's element type; `starts` and `strides` are
    the slice's and every index written lies inside the result.
  }];
  let arguments = (ins Loom_FloatTensor:$grad, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$strides);
  let results = (outs Loom_FloatTensor:$result);
}

def Loom_PadGradOp : Loom_TypedOp<"pad_grad"> {
  let summary = "gradient of pad: each element sums the grad it was padded to";
  let description = [{
    The result has the padded tensor's type; `grad` has the pad's result
    shape and the result's element type, and `low`, `high` and `mode` are
    the pad's. Element `i` of the result is the sum of the grad elements
    that `pad` filled from it: its own place `low + i`, and in `reflect`
    and `edge` mode the border places that mirror or repeat it.
  }];
  let arguments = (ins Loom_FloatTensor:$grad, DenseI64ArrayAttr:$low,
                       DenseI64ArrayAttr:$high, StrAttr:$mode);
  let results = (outs Loom_FloatTensor:$result);
}

def Loom_ResizeGradOp : Loom_TypedOp<"resize_grad"> {
  let summary = "gradient of resize: each element sums the grads it weighted";
  let description = [{
    The result has the resized input's type; `grad` has the resize's result
    shape and the result's element type, and the attributes are the
    resize's. Element `i` of the result is the sum, over the outputs that
    read it, of their grad times the weight they gave it.
  }];
  let arguments = (ins Loom_FloatTensor:$grad, StrAttr:$mode,
                       StrAttr:$coordinate_transformation_mode,
                       StrAttr:$nearest_mode, DenseI64ArrayAttr:$scale_num,
                       DenseI64ArrayAttr:$scale_den, F32Attr:$cubic_coeff_a,
                       UnitAttr:$exclude_outside);
  let results = (outs Loom_FloatTensor:$result);
}

def Loom_LabelCountOp : Loom_TypedOp<"label_count"> {
  let summary = "number of labels not equal to ignore_index";
  let description = [{
    `labels` is `[N]`; the result is a float scalar: how many labels differ
    from `ignore_index`. A mean cross-entropy is built as the summed loss
    divided by this count, so that it splits over the batch as two partial
    sums.
  }];
  let arguments = (ins Loom_IndexTensor:$labels, I64Attr:$ignore_index);
  let results = (outs Loom_FloatTensor:$result);
}

def Loom_SoftmaxCrossEntropyGradOp
    : Loom_InferredOp<"softmax_cross_entropy_grad"> {
  let summary = "gradient of softmax_cross_entropy with respect to logits";
  let description = [{
    `(softmax(logits) - onehot(labels)) * grad / count` per counted row (zero
    rows for ignored labels), with `count` the counted rows, or 1 with
    `sum`. `grad` is a scalar of the logits' element type.

    With `lse` (`[N]`), `logits` and the result are one class block of the
    global `[N, C]` logits (its offset is the result's block,
    `KernelArgs::block`) and `lse` each row's log-sum-exp over all C
    classes: softmax is `exp(x - lse)`, and the one-hot term is subtracted
    only where the block holds the label (vocabulary-parallel loss).
  }];
  let arguments = (ins Loom_FloatTensor:$logits, Loom_IndexTensor:$labels,
                       Loom_FloatTensor:$grad, Optional<Loom_FloatTensor>:$lse,
                       I64Attr:$ignore_index, UnitAttr:$sum);
  let results = (outs Loom_FloatTensor:$result);
}

def Loom_Conv2DGradInputOp : Loom_TypedOp<"conv2d_grad_input"> {
  let summary = "gradient of conv2d with respect to its input";
  let description = [{
    The result has the convolution input's type; `grad` is the convolution
    output's gradient and `weight` its weight, with the same window
    attributes: conv2d(result-shaped input, weight) must give grad's shape.
  }];
  let arguments = (ins Loom_FloatTensor:$grad, Loom_FloatTensor:$weight,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilations, I64Attr:$groups);
  let results = (outs Loom_FloatTensor:$result);
}

def Loom_Conv2DGradWeightOp : Loom_TypedOp<"conv2d_grad_weight"> {
  let summary = "gradient of conv2d with respect to its weight";
  let description = [{
    The result has the weight's type: conv2d(input, result-shaped weight)
    with these attributes must give grad's shape.
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$grad,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilations, I64Attr:$groups);
  let results = (outs Loom_FloatTensor:$result);
}

def Loom_MaxPool2DGradOp : Loom_TypedOp<"max_pool2d_grad"> {
  let summary = "gradient of max_pool2d: grad routed to each window's max";
  let description = [{
    The result has the input's type; max_pool2d(input) with these attributes
    must give grad's shape. Ties go to the first maximum in the window.
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$grad,
                       DenseI64ArrayAttr:$kernel, DenseI64ArrayAttr:$strides,
                       DenseI64ArrayAttr:$padding, DenseI64ArrayAttr:$dilations,
                       UnitAttr:$ceil_mode);
  let results = (outs Loom_FloatTensor:$result);
}

def Loom_AvgPool2DGradOp : Loom_TypedOp<"avg_pool2d_grad"> {
  let summary = "gradient of avg_pool2d: grad spread over each window";
  let description = [{
    The result has the pooled input's type; avg_pool2d of a result-shaped
    input with these attributes must give grad's shape.
  }];
  let arguments = (ins Loom_FloatTensor:$grad, DenseI64ArrayAttr:$kernel,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilations, UnitAttr:$ceil_mode,
                       UnitAttr:$count_include_pad);
  let results = (outs Loom_FloatTensor:$result);
}

//===----------------------------------------------------------------------===//
// Optimizer updates. `lr` and `step` are scalars (rank-0 tensors) the runtime
// sets each step; the updated tensors replace the old ones in place.
//===----------------------------------------------------------------------===//

def Loom_SgdUpdateOp : Loom_InferredOp<"sgd_update"> {
  let summary = "SGD: param - lr * (grad + weight_decay * param)";
  let description = [{
    `param` and `grad` have one type, the result's; `lr` is a scalar of its
    element type.
  }];
  let arguments = (ins Loom_FloatTensor:$param, Loom_FloatTensor:$grad,
                       Loom_FloatTensor:$lr, F32Attr:$weight_decay);
  let results = (outs Loom_FloatTensor:$new_param);
}

def Loom_MomentumUpdateOp : Loom_InferredOp<"momentum_update"> {
  let summary = "SGD with momentum, as PyTorch (dampening 0)";
  let description = [{
    `g = grad + weight_decay * param; v' = momentum * v + g;
    param' = param - lr * (nesterov ? g + momentum * v' : v')`. `param`,
    `grad` and `velocity` have one type, both results'; `lr` is a scalar.
  }];
  let arguments = (ins Loom_FloatTensor:$param, Loom_FloatTensor:$grad,
                       Loom_FloatTensor:$velocity, Loom_FloatTensor:$lr,
                       F32Attr:$momentum, F32Attr:$weight_decay,
                       UnitAttr:$nesterov);
  let results = (outs Loom_FloatTensor:$new_param,
                      Loom_FloatTensor:$new_velocity);
}

def Loom_AdamUpdateOp : Loom_InferredOp<"adam_update"> {
  let summary = "Adam, or AdamW with decoupled weight decay, as PyTorch";
  let description = [{
    With `t = step` (1 for the first update):
    `p = decoupled ? param * (1 - lr * wd) : param`;
    `g = decoupled ? grad : grad + wd * param`;
    `m' = b1 m + (1 - b1) g; v' = b2 v + (1 - b2) g^2`;
    `param' = p - (lr / (1 - b1^t)) * m' / (sqrt(v') / sqrt(1 - b2^t) + eps)`.
    `param`, `grad`, `m`, `v` have one type, the results'; `lr` and `step`
    are scalars of that element type.
  }];
  let arguments = (ins Loom_FloatTensor:$param, Loom_FloatTensor:$grad,
                       Loom_FloatTensor:$m, Loom_FloatTensor:$v,
                       Loom_FloatTensor:$lr, Loom_FloatTensor:$step,
                       F32Attr:$beta1, F32Attr:$beta2, F32Attr:$epsilon,
                       F32Attr:$weight_decay, UnitAttr:$decoupled_weight_decay);
  let results = (outs Loom_FloatTensor:$new_param, Loom_FloatTensor:$new_m,
                      Loom_FloatTensor:$new_v);
}

#endif // LOOM_TRAIN_OPS_TD
