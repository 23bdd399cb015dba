#!/usr/bin/python3
"""Every op's gradient rule equals PyTorch autograd.

One case per ONNX op and attribute combination that changes the gradient. A case is a
tiny ONNX model (opset 17): the op under test applied to initializers (and, where a
tensor must not be trained, graph inputs), whose single output is the op's result. Loom
trains every FLOAT initializer, scalars included, but those a case freezes (`--freeze`);
integer and bool initializers are constants; graph inputs get no gradient. For each case:

    loom compile case.onnx --train --loss mse --optimizer sgd --lr 1 -o case.plan
    loom run case.plan --steps 1 --data labels=labels.npy[,INPUT=FILE.npy...] \\
        --metrics metrics.jsonl --save ckpt

With plain SGD at lr 1 the update is param - grad, so Loom's gradient of each parameter
is (initial value) - (checkpointed value), which is exact in float64 up to the rounding
of the update to float32 (half an ulp of the parameter; every case keeps that below
1e-5 of its gradient, and the case line warns where it does not). PyTorch computes the
same loss, mean((y - labels)^2) (or cross entropy), from the same op written by hand with
ONNX semantics, in float32, and autograd gives the reference gradients.

Checked per case: every parameter's gradient, max|loom - torch| <= 1e-4 * max(max|torch|,
1e-6) (normwise relative); the loss, from --metrics to 1e-4 relative and from the
`loom: step 1 loss L` line to 1e-4 relative plus half a unit of its last printed digit;
that the checkpoint holds exactly the expected parameters (kind "parameter") and that
BatchNormalization statistics are kind "buffer" and unchanged. On a mismatch the case is
also compiled for inference and its forward output compared with PyTorch's, to tell a
wrong gradient from a wrong forward.

Prints one line per case (name, worst relative error, ok/MISMATCH/FAILED) and finally
'N passed, M failed'; exits 1 on any failure. --only NAME[,NAME...] (fnmatch patterns)
selects cases, --list lists them, --keep DIR keeps the work files.
"""
import argparse
import fnmatch
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zlib

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "python", "loom"))
from checkpoint import read_checkpoint  # noqa: E402  (numpy alone, loaded by path)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import oracle  # noqa: E402  (test/oracle.py)

TOLERANCE = 1e-4
TINY = 1e-6  # floor of max|torch| in the normwise relative error
RESOLUTION_WARN = 1e-5  # the case line warns when float32 updates blur a gradient more
OPSET = 17
STEP_LINE = re.compile(r"^loom: step (\d+) loss (\S+) lr (\S+)")

torch.set_num_threads(1)
torch.set_grad_enabled(True)

# --------------------------------------------------------------------------------------------
# Case definitions
# --------------------------------------------------------------------------------------------


class Case:
    """nodes: ONNX nodes whose final output is "y"; tensors: {name: numpy array} in graph
    order (names in `inputs` become graph inputs, fed with --data; the rest initializers);
    ref: torch function {name: tensor} -> y, written by hand with ONNX semantics."""

    def __init__(self, name, nodes, tensors, ref, inputs=(), loss="mse", labels=None,
                 ignore_index=-100, buffers=(), frozen=()):
        self.name, self.nodes, self.tensors, self.ref = name, nodes, tensors, ref
        self.inputs, self.loss, self.labels = set(inputs), loss, labels
        self.ignore_index, self.buffers = ignore_index, set(buffers)
        # Frozen initializers (--freeze) are kept as buffers: loaded, never trained.
        self.frozen = set(frozen)

    def params(self):
        """What Loom trains: float initializers, but for BatchNormalization's mean and
        variance (buffers) and the frozen ones."""
        return [n for n, a in self.tensors.items()
                if n not in self.inputs and n not in self.buffers and n not in self.frozen
                and a.dtype == np.float32 and a.size > 0]


CASES = []
_RNG = np.random.default_rng(20240611)


def rn(*shape, lo=None, hi=None, scale=1.0):
    """Random float32: normal(0, scale), or uniform in [lo, hi)."""
    if lo is None:
        return (_RNG.standard_normal(shape) * scale).astype(np.float32)
    return _RNG.uniform(lo, hi, shape).astype(np.float32)


def signed(*shape, lo=0.5, hi=1.5):
    """Magnitude in [lo, hi), random sign: safe divisors."""
    mag = _RNG.uniform(lo, hi, shape)
    return (mag * np.where(_RNG.random(shape) < 0.5, -1.0, 1.0)).astype(np.float32)


def i64(values):
    return np.array(values, dtype=np.int64)


def node(op, inputs, outputs=("y",), **attrs):
    return helper.make_node(op, list(inputs), list(outputs), **attrs)


def add(name, nodes, tensors, ref, **kw):
    if any(c.name == name for c in CASES):
        raise ValueError(f"duplicate case {name}")
    CASES.append(Case(name, nodes if isinstance(nodes, list) else [nodes], tensors, ref, **kw))


# ---- elementwise binary --------------------------------------------------------------------

BINARY = {
    "Add": lambda a, b: a + b,
    "Sub": lambda a, b: a - b,
    "Mul": lambda a, b: a * b,
    "Div": lambda a, b: a / b,
    "Pow": lambda a, b: torch.pow(a, b),
}
# (case suffix, lhs shape, rhs shape): same shape, rhs broadcast (rank and size 1 dims),
# lhs broadcast, and both broadcast against each other.
BROADCASTS = [
    ("same", (3, 4), (3, 4)),
    ("bcast_rhs", (2, 3, 4), (3, 1)),
    ("bcast_lhs", (4,), (2, 3, 4)),
    ("bcast_both", (3, 1), (2, 1, 4)),
]
for op, fn in BINARY.items():
    for suffix, ls, rs in BROADCASTS:
        if op == "Pow":  # positive trainable base, trainable exponent
            a, b = rn(*ls, lo=0.5, hi=2.0), rn(*rs, lo=-1.5, hi=2.0)
        elif op == "Div":
            a, b = rn(*ls), signed(*rs)
        else:
            a, b = rn(*ls), rn(*rs)
        add(f"{op.lower()}_{suffix}", node(op, ["a", "b"]), {"a": a, "b": b},
            lambda t, fn=fn: fn(t["a"], t["b"]))

# Pow with a scalar exponent kept constant (--freeze e, so only the base is trained); the
# base takes both signs for the integral exponents.
for e in (2.0, 3.0):
    add(f"pow_const_exp{int(e)}", node("Pow", ["a", "e"]),
        {"a": rn(3, 4), "e": np.array(e, np.float32)},
        lambda t: torch.pow(t["a"], t["e"]), frozen=["e"])
add("pow_const_exp0.5", node("Pow", ["a", "e"]),
    {"a": rn(3, 4, lo=0.5, hi=2.0), "e": np.array(0.5, np.float32)},
    lambda t: torch.pow(t["a"], t["e"]), frozen=["e"])
# A scalar float initializer is a parameter like any other: the exponent is trained too.
add("pow_trained_scalar_exp", node("Pow", ["a", "e"]),
    {"a": rn(3, 4, lo=0.5, hi=2.0), "e": np.array(1.5, np.float32)},
    lambda t: torch.pow(t["a"], t["e"]))
# A one-element scale (a learned temperature), broadcast over a matrix.
add("mul_trained_one_element_scale", node("Mul", ["a", "s"]),
    {"a": rn(3, 4), "s": np.array([0.7], np.float32)}, lambda t: t["a"] * t["s"])
# An int64 exponent: the importer converts it to the base's type.
add("pow_int64_exp3", node("Pow", ["a", "e"]), {"a": rn(3, 4), "e": np.array(3, np.int64)},
    lambda t: torch.pow(t["a"], 3.0))
# A value used twice (gradient accumulation): y = a * a + a.
add("fanout_accumulate", [node("Mul", ["a", "a"], ["sq"]), node("Add", ["sq", "a"])],
    {"a": rn(3, 4)}, lambda t: t["a"] * t["a"] + t["a"])
# A graph input next to a parameter: only the parameter is trained.
add("mul_input_times_param", node("Mul", ["x", "w"]), {"x": rn(3, 4), "w": rn(3, 4)},
    lambda t: t["x"] * t["w"], inputs=["x"])

# ---- Max, Min, Sum, Mean, masks ------------------------------------------------------------


def tied(*shape):
    """Random float32 on a grid of 0.5, so that equal elements (ties) are common."""
    return (_RNG.integers(-3, 4, shape) * 0.5).astype(np.float32)


# torch.maximum / torch.minimum split the gradient half/half on ties; ONNX's variadic
# Max/Min import as a chain of binary ops, left to right.
EXTREMA = {"Max": torch.maximum, "Min": torch.minimum}
for op, fn in EXTREMA.items():
    for suffix, ls, rs in BROADCASTS:
        add(f"{op.lower()}_{suffix}", node(op, ["a", "b"]), {"a": tied(*ls), "b": tied(*rs)},
            lambda t, fn=fn: fn(t["a"], t["b"]))
    add(f"{op.lower()}_variadic3", node(op, ["a", "b", "c"]),
        {"a": tied(2, 3), "b": tied(3), "c": tied(2, 1)},
        lambda t, fn=fn: fn(fn(t["a"], t["b"]), t["c"]))
add("sum_variadic3", node("Sum", ["a", "b", "c"]), {"a": rn(2, 3), "b": rn(3), "c": rn(2, 1)},
    lambda t: t["a"] + t["b"] + t["c"])
add("mean_variadic3", node("Mean", ["a", "b", "c"]), {"a": rn(2, 3), "b": rn(3), "c": rn(2, 1)},
    lambda t: (t["a"] + t["b"] + t["c"]) / 3)
# A comparison's mask is a constant of the loss: no gradient flows through it, also where it
# is cast to float.
add("where_greater_mask", [node("Greater", ["a", "b"], ["m"]), node("Where", ["m", "a", "b"])],
    {"a": rn(3, 4), "b": rn(3, 4)}, lambda t: torch.where(t["a"] > t["b"], t["a"], t["b"]))
add("mul_cast_less_mask",
    [node("Less", ["a", "z"], ["m"]), node("Cast", ["m"], ["f"], to=TensorProto.FLOAT),
     node("Mul", ["f", "a"])],
    {"a": rn(3, 4), "z": np.array(0.0, np.float32)},
    lambda t: (t["a"] < t["z"]).float() * t["a"])

# ---- Trilu ---------------------------------------------------------------------------------

TRILUS = [  # (suffix, upper, k or None, shape)
    ("upper", 1, None, (4, 5)),
    ("lower", 0, None, (4, 5)),
    ("upper_k1_batched", 1, 1, (2, 3, 4)),
    ("lower_kneg1", 0, -1, (5, 3)),
]
for suffix, upper, k, shape in TRILUS:
    tensors = {"x": rn(*shape)}
    if k is not None:
        tensors["k"] = np.array(k, np.int64)
    add(f"trilu_{suffix}", node("Trilu", list(tensors), upper=upper), tensors,
        lambda t, upper=upper, k=k: (torch.triu if upper else torch.tril)(t["x"], k or 0))

# ---- Einsum: transposes, sums and one batched matmul ---------------------------------------

EINSUMS = [  # (suffix, equation, operand shapes)
    ("matmul", "ij,jk->ik", [(3, 4), (4, 5)]),
    ("batch_matmul", "bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("attention_scores", "bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
    ("two_contracted_transposed_out", "abc,cbd->da", [(2, 3, 4), (4, 3, 5)]),
    ("outer", "i,j->ij", [(3,), (4,)]),
    ("inner", "i,i", [(5,), (5,)]),
    ("ellipsis_broadcast", "...ij,jk->...ik", [(2, 3, 4), (4, 2)]),
    ("batch_broadcast", "bij,bjk->bik", [(1, 3, 4), (2, 4, 5)]),
    ("sum_only_lhs", "ij,jk->k", [(3, 4), (4, 5)]),
    ("transpose", "ijk->kij", [(2, 3, 4)]),
    ("sum", "ij->i", [(3, 4)]),
    ("implicit", "ba,ac", [(3, 4), (4, 2)]),
]
for suffix, eq, shapes in EINSUMS:
    names = ["a", "b"][:len(shapes)]
    add(f"einsum_{suffix}", node("Einsum", names, equation=eq),
        {n: rn(*sh) for n, sh in zip(names, shapes)},
        lambda t, eq=eq, names=names: torch.einsum(eq, *[t[n] for n in names]))

# ---- PRelu and InstanceNormalization (compositions) -----------------------------------------

# The slope per channel (broadcast over [N, C, H, W]) and one shared slope; x holds zeros,
# where PyTorch takes the slope's branch.
for suffix, slope_shape in (("channel", (3, 1, 1)), ("shared", (1,))):
    x = rn(2, 3, 2, 2).ravel()
    x[:3] = 0.0
    add(f"prelu_{suffix}", node("PRelu", ["x", "s"]),
        {"x": x.reshape(2, 3, 2, 2), "s": rn(*slope_shape, lo=0.1, hi=0.5)},
        lambda t: torch.where(t["x"] > 0, t["x"], t["s"] * t["x"]))


def instance_norm_ref(eps):
    def ref(t):
        x = t["x"]
        dims = tuple(range(2, x.dim()))
        mean = x.mean(dims, keepdim=True)
        var = ((x - mean) ** 2).mean(dims, keepdim=True)
        shape = (1, -1) + (1,) * (x.dim() - 2)
        return ((x - mean) / torch.sqrt(var + eps) * t["scale"].view(shape)
                + t["bias"].view(shape))
    return ref


for suffix, shape, eps in (("2d", (2, 3, 4, 5), 1e-5), ("1d_eps0.1", (2, 4, 6), 0.1)):
    add(f"instancenorm_{suffix}",
        node("InstanceNormalization", ["x", "scale", "bias"], epsilon=eps),
        {"x": rn(*shape), "scale": rn(shape[1], lo=0.5, hi=1.5), "bias": rn(shape[1])},
        instance_norm_ref(eps))

# ---- elementwise unary ---------------------------------------------------------------------

UNARY = {
    "Sqrt": (lambda: rn(3, 5, lo=0.3, hi=2.0), torch.sqrt),
    "Erf": (lambda: rn(3, 5), torch.erf),
    "Tanh": (lambda: rn(3, 5), torch.tanh),
    "Relu": (lambda: signed(3, 5, lo=0.05, hi=1.5), torch.relu),
    "Sigmoid": (lambda: rn(3, 5, scale=2.0), torch.sigmoid),
    "Exp": (lambda: rn(3, 5, scale=0.7), torch.exp),
    "Log": (lambda: rn(3, 5, lo=0.3, hi=2.0), torch.log),
    "Neg": (lambda: rn(3, 5), torch.neg),
}
for op, (make, fn) in UNARY.items():
    add(op.lower(), node(op, ["x"]), {"x": make()}, lambda t, fn=fn: fn(t["x"]))

# ---- activations: one loom.unary_grad, derivatives from common/ops/ElementwiseMath.h ----
# x holds the kinks of the piecewise ones, where the rule must be PyTorch's too.


def with_points(*points, scale=2.0):
    """rn(3, 5, scale=scale) whose first elements are `points`."""
    x = rn(3, 5, scale=scale).ravel()
    x[:len(points)] = points
    return x.reshape(3, 5)


def selu_ref(x, alpha, gamma):
    return gamma * torch.where(x > 0, x, alpha * torch.expm1(x))


ACTIVATIONS = [
    # (case, op, x, torch reference of x, ONNX attributes)
    ("cos", "Cos", lambda: rn(3, 5, scale=2.0), torch.cos, {}),
    ("sin", "Sin", lambda: rn(3, 5, scale=2.0), torch.sin, {}),
    ("abs", "Abs", lambda: with_points(0.0), torch.abs, {}),
    ("reciprocal", "Reciprocal", lambda: signed(3, 5), torch.reciprocal, {}),
    ("softplus", "Softplus", lambda: with_points(25.0, -25.0, 0.0, scale=3.0), F.softplus,
     {}),
    ("hardswish", "HardSwish", lambda: with_points(-3.0, 3.0, -4.0, 4.0, 0.0, scale=3.0),
     F.hardswish, {}),
    ("leakyrelu_default", "LeakyRelu", lambda: with_points(0.0),
     lambda x: F.leaky_relu(x, 0.01), {}),
    ("leakyrelu_alpha0.2", "LeakyRelu", lambda: with_points(0.0),
     lambda x: F.leaky_relu(x, 0.2), {"alpha": 0.2}),
    ("elu_default", "Elu", lambda: with_points(0.0), F.elu, {}),
    ("elu_alpha0.5", "Elu", lambda: with_points(0.0), lambda x: F.elu(x, 0.5),
     {"alpha": 0.5}),
    ("selu_default", "Selu", lambda: with_points(0.0), F.selu, {}),
    ("selu_alpha1.5_gamma2", "Selu", lambda: with_points(0.0),
     lambda x: selu_ref(x, 1.5, 2.0), {"alpha": 1.5, "gamma": 2.0}),
    # ONNX's default slope 0.2 is not PyTorch's: by hand, off the clamp's kinks.
    ("hardsigmoid_default", "HardSigmoid", lambda: with_points(2.4, -2.4, 3.0, -3.0),
     lambda x: torch.clamp(0.2 * x + 0.5, 0.0, 1.0), {}),
    # PyTorch's hardsigmoid (as it exports it), kinks included.
    ("hardsigmoid_torch", "HardSigmoid", lambda: with_points(-3.0, 3.0, 0.0, scale=3.0),
     F.hardsigmoid, {"alpha": 1.0 / 6.0}),
]
for name, op, make, fn, attrs in ACTIVATIONS:
    add(name, node(op, ["x"], **attrs), {"x": make()}, lambda t, fn=fn: fn(t["x"]))

# Clip with constant bounds (opset 11+ inputs; float initializers are trained unless
# frozen, as PyTorch's Constant-node bounds are not), an absent one unbounded; x holds
# the bounds themselves, where torch.clamp passes the gradient.
CLIPS = [
    ("clip_relu6", ["x", "lo", "hi"], 0.0, 6.0),
    ("clip_min_only", ["x", "lo"], -0.5, None),
    ("clip_max_only", ["x", "", "hi"], None, 0.5),
]
for name, inputs, lo, hi in CLIPS:
    tensors = {"x": with_points(*[b for b in (lo, hi) if b is not None], -7.0, 7.0,
                                scale=4.0)}
    if lo is not None:
        tensors["lo"] = np.array(lo, np.float32)
    if hi is not None:
        tensors["hi"] = np.array(hi, np.float32)
    add(name, node("Clip", inputs), tensors,
        lambda t, lo=lo, hi=hi: torch.clamp(t["x"], lo, hi),
        frozen=[n for n in ("lo", "hi") if n in tensors])

# ---- MatMul --------------------------------------------------------------------------------

MATMULS = [
    ("2d", (3, 4), (4, 5)),
    ("3d_batched", (2, 3, 4), (2, 4, 5)),
    ("3d_x_2d", (2, 3, 4), (4, 5)),
    ("2d_x_3d", (3, 4), (2, 4, 5)),
    ("bcast_4d_x_3d", (2, 1, 3, 4), (5, 4, 2)),
    ("1d_lhs", (4,), (4, 5)),
    ("1d_rhs", (3, 4), (4,)),
    ("1d_both", (4,), (4,)),
    ("1d_lhs_batched", (4,), (2, 4, 3)),
    ("batched_1d_rhs", (2, 3, 4), (4,)),
]
for suffix, ls, rs in MATMULS:
    add(f"matmul_{suffix}", node("MatMul", ["a", "b"]), {"a": rn(*ls), "b": rn(*rs)},
        lambda t: torch.matmul(t["a"], t["b"]))
add("matmul_same_operand_twice", node("MatMul", ["a", "a"]), {"a": rn(4, 4)},
    lambda t: t["a"] @ t["a"])
add("matmul_input_x_weight", node("MatMul", ["x", "w"]), {"x": rn(3, 4), "w": rn(4, 5)},
    lambda t: t["x"] @ t["w"], inputs=["x"])

# ---- Gemm ----------------------------------------------------------------------------------

GEMMS = [
    # (suffix, transA, transB, alpha, beta, C shape or None)
    ("plain", 0, 0, 1.0, 1.0, None),
    ("c_vector", 0, 0, 1.0, 1.0, (5,)),
    ("transA_c_matrix", 1, 0, 1.0, 1.0, (3, 5)),
    ("transB_alpha_beta_c_col", 0, 1, 0.7, 1.3, (3, 1)),
    ("transAB_alpha", 1, 1, 2.5, 1.0, None),
    ("transAB_alpha_beta_c_row", 1, 1, -0.8, 0.6, (1, 5)),
    ("beta0_c_unused", 0, 0, 1.0, 0.0, (3, 5)),
]
for suffix, ta, tb, alpha, beta, cshape in GEMMS:
    tensors = {"a": rn(*((4, 3) if ta else (3, 4))), "b": rn(*((5, 4) if tb else (4, 5)))}
    if cshape:
        tensors["c"] = rn(*cshape)

    def gemm_ref(t, ta=ta, tb=tb, alpha=alpha, beta=beta, has_c=bool(cshape)):
        a = t["a"].t() if ta else t["a"]
        b = t["b"].t() if tb else t["b"]
        y = alpha * (a @ b)
        return y + beta * t["c"] if has_c else y

    add(f"gemm_{suffix}", node("Gemm", list(tensors), transA=ta, transB=tb, alpha=alpha,
                               beta=beta), tensors, gemm_ref)

# ---- Softmax / LogSoftmax ------------------------------------------------------------------

for op, fn in (("Softmax", torch.softmax), ("LogSoftmax", torch.log_softmax)):
    for axis, shape in ((-1, (3, 4)), (0, (3, 4)), (1, (2, 3, 4))):
        add(f"{op.lower()}_axis{axis}_rank{len(shape)}", node(op, ["x"], axis=axis),
            {"x": rn(*shape, scale=1.5)}, lambda t, fn=fn, axis=axis: fn(t["x"], axis))

# ---- LayerNormalization / BatchNormalization -----------------------------------------------


def layer_norm_ref(axis, eps, has_bias):
    def ref(t):
        x = t["x"]
        dims = tuple(range(axis % x.dim(), x.dim()))
        mean = x.mean(dims, keepdim=True)
        var = ((x - mean) ** 2).mean(dims, keepdim=True)
        y = (x - mean) / torch.sqrt(var + eps) * t["scale"]
        return y + t["bias"] if has_bias else y
    return ref


for axis, eps, has_bias in ((-1, 1e-5, True), (-1, 1e-5, False), (-2, 1e-5, True),
                            (-2, 1e-5, False), (-1, 0.1, True)):
    shape = (2, 3, 4)
    norm = shape[axis:]
    tensors = {"x": rn(*shape), "scale": rn(*norm, lo=0.5, hi=1.5)}
    if has_bias:
        tensors["bias"] = rn(*norm)
    attrs = {"axis": axis} if eps == 1e-5 else {"axis": axis, "epsilon": eps}
    add(f"layernorm_axis{axis}_{'bias' if has_bias else 'nobias'}"
        + ("" if eps == 1e-5 else f"_eps{eps}"),
        node("LayerNormalization", list(tensors), **attrs), tensors,
        layer_norm_ref(axis, eps, has_bias))


def batch_norm_ref(eps):
    def ref(t):
        x = t["w"] * t["inp"]
        shape = (1, -1, 1, 1)
        return ((x - t["mean"].view(shape)) / torch.sqrt(t["var"].view(shape) + eps)
                * t["scale"].view(shape) + t["bias"].view(shape))
    return ref


for eps in (1e-5, 0.1):
    add("batchnorm_inference" + ("" if eps == 1e-5 else f"_eps{eps}"),
        [node("Mul", ["w", "inp"], ["x"]),
         node("BatchNormalization", ["x", "scale", "bias", "mean", "var"],
              **({} if eps == 1e-5 else {"epsilon": eps}))],
        {"w": rn(2, 3, 2, 3), "inp": rn(2, 3, 2, 3), "scale": rn(3, lo=0.5, hi=1.5),
         "bias": rn(3), "mean": rn(3, scale=0.3), "var": rn(3, lo=0.2, hi=1.5)},
        batch_norm_ref(eps), inputs=["inp"], buffers=["mean", "var"])

# LayerNormalization's optional Mean and InvStdDev outputs, built from primitives.
add("layernorm_mean_invstd_outputs",
    [node("LayerNormalization", ["x", "scale", "bias"], ["n", "mean", "inv"], axis=-1),
     node("Mul", ["mean", "inv"], ["mi"]), node("Add", ["n", "mi"])],
    {"x": rn(2, 3, 4), "scale": rn(4, lo=0.5, hi=1.5), "bias": rn(4)},
    lambda t: layer_norm_ref(-1, 1e-5, True)(t)
    + t["x"].mean(-1, keepdim=True) / torch.sqrt(t["x"].var(-1, unbiased=False, keepdim=True)
                                                 + 1e-5))

# ---- Reductions ----------------------------------------------------------------------------

for op in ("ReduceSum", "ReduceMean"):
    for axes, keep in (([1], 1), ([0, 2], 0), ([-1], 1), ([-1], 0), (None, 0), (None, 1)):
        tensors = {"x": rn(2, 3, 4)}
        attrs = {} if keep == 1 else {"keepdims": 0}
        if axes is not None:
            if op == "ReduceSum":  # axes is an input from opset 13
                tensors["axes"] = i64(axes)
            else:
                attrs["axes"] = axes
        dims = tuple(axes) if axes is not None else (0, 1, 2)
        fn = torch.sum if op == "ReduceSum" else torch.mean
        add(f"{op.lower()}_axes{'all' if axes is None else '_'.join(map(str, axes))}"
            f"_keep{keep}", node(op, list(tensors), **attrs), tensors,
            lambda t, fn=fn, dims=dims, keep=keep: fn(t["x"], dims, keepdim=bool(keep)))
# ReduceMax: the gradient is shared evenly by tied maxima, as torch.amax.
for axes, keep in (([1], 1), ([0, 2], 0), ([-1], 0), (None, 1)):
    attrs = {} if keep == 1 else {"keepdims": 0}
    if axes is not None:
        attrs["axes"] = axes
    dims = tuple(axes) if axes is not None else (0, 1, 2)
    add(f"reducemax_axes{'all' if axes is None else '_'.join(map(str, axes))}_keep{keep}",
        node("ReduceMax", ["x"], **attrs), {"x": rn(2, 3, 4)},
        lambda t, dims=dims, keep=keep: torch.amax(t["x"], dims, keepdim=bool(keep)))
# Exact ties (repeated values) split the gradient.
add("reducemax_ties", node("ReduceMax", ["x"], axes=[1]),
    {"x": np.array([[1, 3, 3, 2], [5, 5, 5, 0], [0, 1, 2, 3]], np.float32)},
    lambda t: torch.amax(t["x"], (1,), keepdim=True))

add("reducesum_noop_empty_axes", node("ReduceSum", ["x"], noop_with_empty_axes=1),
    {"x": rn(3, 4)}, lambda t: t["x"])

# The Reduce* ops Loom imports as compositions (sum, max and elementwise ops).
COMPOSED_REDUCE = {
    "ReduceSumSquare": lambda x, d, k: torch.sum(x * x, d, keepdim=k),
    "ReduceL2": lambda x, d, k: torch.sqrt(torch.sum(x * x, d, keepdim=k)),
    "ReduceL1": lambda x, d, k: torch.sum(torch.abs(x), d, keepdim=k),
    "ReduceLogSum": lambda x, d, k: torch.log(torch.sum(x, d, keepdim=k)),
    "ReduceLogSumExp": lambda x, d, k: torch.logsumexp(x, d, keepdim=k),
    "ReduceMin": lambda x, d, k: torch.amin(x, d, keepdim=k),
}
for op, fn in COMPOSED_REDUCE.items():
    for axes, keep in (([1], 1), ([0, 2], 0), (None, 0)):
        attrs = {"keepdims": keep}
        if axes is not None:
            attrs["axes"] = axes
        dims = tuple(axes) if axes is not None else (0, 1, 2)
        x = rn(2, 3, 4, lo=0.5, hi=2.0) if op == "ReduceLogSum" else rn(2, 3, 4)
        add(f"{op.lower()}_axes{'all' if axes is None else '_'.join(map(str, axes))}"
            f"_keep{keep}", node(op, ["x"], **attrs), {"x": x},
            lambda t, fn=fn, dims=dims, keep=keep: fn(t["x"], dims, bool(keep)))

# ---- Data movement -------------------------------------------------------------------------

# Tile (a broadcast between reshapes): every copy's gradient adds up.
add("tile_2x1x3", node("Tile", ["x", "r"]), {"x": rn(2, 3, 4), "r": i64([2, 1, 3])},
    lambda t: t["x"].repeat(2, 1, 3))

add("transpose_perm201", node("Transpose", ["x"], perm=[2, 0, 1]), {"x": rn(2, 3, 4)},
    lambda t: t["x"].permute(2, 0, 1))
add("transpose_default", node("Transpose", ["x"]), {"x": rn(2, 3, 4)},
    lambda t: t["x"].permute(2, 1, 0))
add("reshape_infer", node("Reshape", ["x", "shape"]), {"x": rn(2, 3, 4), "shape": i64([4, -1])},
    lambda t: t["x"].reshape(4, 6))
add("reshape_copy_dim", node("Reshape", ["x", "shape"]),
    {"x": rn(2, 3, 4), "shape": i64([0, 4, 3])}, lambda t: t["x"].reshape(2, 4, 3))
for axis in (0, 1, 2, -1):
    outer = int(np.prod((2, 3, 4)[:axis % 3 if axis < 0 else axis]))
    add(f"flatten_axis{axis}", node("Flatten", ["x"], axis=axis), {"x": rn(2, 3, 4)},
        lambda t, outer=outer: t["x"].reshape(outer, -1))
add("squeeze_axes", node("Squeeze", ["x", "axes"]), {"x": rn(2, 1, 3, 1), "axes": i64([1])},
    lambda t: t["x"].squeeze(1))
add("squeeze_all", node("Squeeze", ["x"]), {"x": rn(2, 1, 3, 1)},
    lambda t: t["x"].reshape(2, 3))
add("unsqueeze", node("Unsqueeze", ["x", "axes"]), {"x": rn(2, 3), "axes": i64([0, -1])},
    lambda t: t["x"].reshape(1, 2, 3, 1))

# Gather: repeated and negative indices, 2-D and scalar indices, both axes.
add("gather_axis0_repeat_negative", node("Gather", ["x", "idx"]),
    {"x": rn(5, 3), "idx": i64([[0, 2], [2, -1], [-5, 2]])},
    lambda t: t["x"][torch.tensor([[0, 2], [2, 4], [0, 2]])])
add("gather_axis1_repeat_negative", node("Gather", ["x", "idx"], axis=1),
    {"x": rn(2, 4, 3), "idx": i64([3, -4, 3, -1])},
    lambda t: t["x"][:, torch.tensor([3, 0, 3, 3])])
add("gather_axis1_2d_indices_rank3", node("Gather", ["x", "idx"], axis=1),
    {"x": rn(2, 3, 2), "idx": i64([[2, -3], [-1, 2]])},
    lambda t: t["x"][:, torch.tensor([[2, 0], [2, 2]])])
add("gather_axis-1_scalar_index", node("Gather", ["x", "idx"], axis=-1),
    {"x": rn(3, 4), "idx": np.array(-2, np.int64)}, lambda t: t["x"][:, 2])
add("gather_axis0_input_indices", node("Gather", ["x", "idx"]),
    {"x": rn(6, 4), "idx": i64([5, 1, 5, 0, 1])},
    lambda t: t["x"][torch.tensor([5, 1, 5, 0, 1])], inputs=["idx"])

add("concat_axis0", node("Concat", ["a", "b", "c"], axis=0),
    {"a": rn(2, 3), "b": rn(1, 3), "c": rn(3, 3)},
    lambda t: torch.cat([t["a"], t["b"], t["c"]], 0))
add("concat_axis1", node("Concat", ["a", "b"], axis=1), {"a": rn(2, 3, 2), "b": rn(2, 1, 2)},
    lambda t: torch.cat([t["a"], t["b"]], 1))
add("concat_axis-1_repeated_operand", node("Concat", ["a", "b", "a"], axis=-1),
    {"a": rn(3, 2), "b": rn(3, 3)}, lambda t: torch.cat([t["a"], t["b"], t["a"]], -1))


def slice_case(name, shape, starts, ends, axes, steps, index):
    tensors = {"x": rn(*shape), "starts": i64(starts), "ends": i64(ends)}
    if axes is not None:
        tensors["axes"] = i64(axes)
    if steps is not None:
        tensors["steps"] = i64(steps)
    add(name, node("Slice", list(tensors)), tensors, lambda t: index(t["x"]))


slice_case("slice_step1", (4, 6), [1], [3], [0], None, lambda x: x[1:3])
slice_case("slice_step1_negative_bounds", (4, 6), [-3, 1], [-1, 100], [1, 0], [1, 1],
           lambda x: x[1:, 3:5])
slice_case("slice_step2", (4, 6), [0], [6], [1], [2], lambda x: x[:, 0:6:2])
slice_case("slice_step2_two_axes", (5, 6), [1, 1], [5, 6], [0, 1], [3, 2],
           lambda x: x[1:5:3, 1:6:2])
slice_case("slice_step-1_reverse", (4, 6), [-1], [-100], [1], [-1], lambda x: x.flip(1))
slice_case("slice_step-1_partial", (4, 6), [2], [0], [0], [-1], lambda x: x[[2, 1]])
slice_case("slice_step-2", (4, 6), [5], [0], [1], [-2], lambda x: x[:, [5, 3, 1]])


def pad_reference(x, pads, mode, value=0.0):
    """ONNX Pad by hand: constant through F.pad (negative pads crop); reflect and edge as
    an index_select per dimension with the indices numpy.pad lays out."""
    rank = x.dim()
    if mode == "constant":
        flat = []
        for d in reversed(range(rank)):
            flat += [pads[d], pads[rank + d]]
        return F.pad(x, flat, value=value)
    for d in range(rank):
        idx = np.pad(np.arange(x.shape[d]), (pads[d], pads[rank + d]), mode=mode)
        x = x.index_select(d, torch.from_numpy(idx))
    return x


def pad_case(name, shape, pads, mode, value=None):
    tensors = {"x": rn(*shape), "pads": i64(pads)}
    if value is not None:
        tensors["value"] = np.array(value, np.float32)
    add(name, node("Pad", list(tensors), mode=mode), tensors,
        lambda t: pad_reference(t["x"], pads, mode, 0.0 if value is None else value),
        frozen=["value"] if value is not None else ())


pad_case("pad_constant", (3, 4), [1, 0, 2, 3], "constant")
pad_case("pad_constant_value", (2, 3, 4), [0, 1, 2, 0, 2, 1], "constant", value=0.75)
pad_case("pad_constant_negative_crop", (4, 5), [-1, 2, 1, -2], "constant")
pad_case("pad_reflect", (3, 5), [2, 1, 1, 4], "reflect")
pad_case("pad_reflect_nchw", (1, 2, 4, 5), [0, 0, 2, 3, 0, 0, 1, 4], "reflect")
pad_case("pad_edge", (2, 3, 4), [0, 2, 1, 1, 0, 3], "edge")
pad_case("pad_edge_wide", (2, 2), [3, 5, 4, 2], "edge")

# Mod with fmod=1 (floating point needs it): d/da = 1, d/db = -trunc(a / b).
add("mod_fmod", node("Mod", ["a", "b"], fmod=1), {"a": rn(3, 4, scale=3.0), "b": signed(3, 4)},
    lambda t: torch.fmod(t["a"], t["b"]))
add("mod_fmod_bcast", node("Mod", ["a", "b"], fmod=1),
    {"a": rn(2, 3, 4, scale=3.0), "b": signed(3, 1)}, lambda t: torch.fmod(t["a"], t["b"]))

# Split: uneven sizes re-concatenated in another order; and only the middle part used.
add("split_uneven_reordered",
    [node("Split", ["x", "split"], ["p0", "p1", "p2"], axis=0),
     node("Concat", ["p2", "p0", "p1"], axis=0)],
    {"x": rn(6, 4), "split": i64([1, 2, 3])},
    lambda t: torch.cat([t["x"][3:], t["x"][:1], t["x"][1:3]], 0))
add("split_equal_axis1_middle_only",
    [node("Split", ["x"], ["p0", "y", "p2"], axis=1)], {"x": rn(2, 6)},
    lambda t: t["x"][:, 2:4])
add("split_axis-1_scaled_parts",
    [node("Split", ["x"], ["p0", "p1"], axis=-1), node("Mul", ["p0", "s"], ["q"]),
     node("Sub", ["q", "p1"])], {"x": rn(3, 4), "s": np.array(-1.5, np.float32)},
    lambda t: t["x"][:, :2] * t["s"] - t["x"][:, 2:])

# Where: both branches trainable, a constant bool condition (same shape, broadcast).
cond = _RNG.random((3, 4)) < 0.5
add("where_both_branches", node("Where", ["c", "a", "b"]),
    {"c": cond, "a": rn(3, 4), "b": rn(3, 4)},
    lambda t: torch.where(t["c"], t["a"], t["b"]))
add("where_broadcast", node("Where", ["c", "a", "b"]),
    {"c": np.array([[True], [False], [True]]), "a": rn(3, 4), "b": rn(4)},
    lambda t: torch.where(t["c"], t["a"], t["b"]))

add("expand_rank_and_ones", node("Expand", ["x", "shape"]),
    {"x": rn(3, 1), "shape": i64([2, 3, 4])}, lambda t: t["x"].expand(2, 3, 4))
add("expand_bidirectional", node("Expand", ["x", "shape"]),
    {"x": rn(4,), "shape": i64([3, 1])}, lambda t: t["x"].expand(3, 4))

add("cast_float_to_float", node("Cast", ["x"], to=TensorProto.FLOAT), {"x": rn(3, 4)},
    lambda t: t["x"])
add("cast_f16_roundtrip",
    [node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16), node("Cast", ["h"], to=TensorProto.FLOAT)],
    {"x": rn(3, 4)}, lambda t: t["x"].half().float())
add("identity", node("Identity", ["x"]), {"x": rn(3, 4)}, lambda t: t["x"])
add("dropout_inference", node("Dropout", ["x"]), {"x": rn(3, 4)}, lambda t: t["x"])
add("dropout_inference_ratio_mask",
    [node("Dropout", ["x", "ratio"], ["d", "mask"]), node("Mul", ["d", "x"])],
    {"x": rn(3, 4), "ratio": np.array(0.5, np.float32)}, lambda t: t["x"] * t["x"],
    frozen=["ratio"])

# ---- GatherElements, ScatterElements, ScatterND -------------------------------------------


def wrapped(idx, dim):
    """ONNX's negative indices, counted from the end, as torch wants them."""
    return torch.tensor(np.where(idx < 0, idx + dim, idx))


# GatherElements: the gradient is a scatter-add, so repeated indices accumulate.
for name, shape, idx, axis in (
        ("axis0_repeat", (3, 4), [[0, -1, 2, 1], [2, 0, 0, -3]], 0),
        ("axis-1_rank3_negative", (2, 3, 4), [[[3, -4], [1, 1], [-1, 0]],
                                              [[2, 2], [0, -2], [3, 1]]], -1),
        ("axis1_smaller_index_dims", (4, 5), [[4, 0, 4], [1, -5, 2]], 1)):
    dim = shape[axis]
    add(f"gatherelements_{name}", node("GatherElements", ["x", "idx"], axis=axis),
        {"x": rn(*shape), "idx": i64(idx)},
        lambda t, idx=i64(idx), dim=dim, axis=axis:
            torch.gather(t["x"], axis, wrapped(idx, dim)))
add("gatherelements_input_indices", node("GatherElements", ["x", "idx"], axis=1),
    {"x": rn(3, 4), "idx": i64([[3, 3], [0, -1], [2, 1]])},
    lambda t: torch.gather(t["x"], 1, wrapped(t["idx"].numpy(), 4)), inputs=["idx"])

# ScatterElements: data's gradient is zero where an update lands (reduction none) or the
# whole gradient (add); the updates' is the gradient gathered at their positions.
for name, shape, idx, ushape, axis in (
        ("axis0", (3, 4), [[2, 0, 1, -1], [0, 1, -1, 1]], (2, 4), 0),
        ("axis1_negative", (2, 5), [[-1, 0, 2], [3, -5, 1]], (2, 3), 1),
        ("axis-1_rank3_smaller", (2, 3, 4), [[[1, 3]], [[-1, 0]]], (2, 1, 2), -1)):
    dim = shape[axis]
    add(f"scatter_elements_none_{name}",
        node("ScatterElements", ["x", "idx", "u"], axis=axis),
        {"x": rn(*shape), "idx": i64(idx), "u": rn(*ushape)},
        lambda t, idx=i64(idx), dim=dim, axis=axis:
            torch.scatter(t["x"], axis, wrapped(idx, dim), t["u"]))
for name, shape, idx, ushape, axis in (
        ("axis1_repeat", (3, 4), [[1, 1, -3], [0, 3, 0], [2, 2, 2]], (3, 3), 1),
        ("axis0_repeat_negative", (3, 2), [[0, -1], [0, 2], [-3, 1]], (3, 2), 0)):
    dim = shape[axis]
    add(f"scatter_elements_add_{name}",
        node("ScatterElements", ["x", "idx", "u"], axis=axis, reduction="add"),
        {"x": rn(*shape), "idx": i64(idx), "u": rn(*ushape)},
        lambda t, idx=i64(idx), dim=dim, axis=axis:
            torch.scatter_add(t["x"], axis, wrapped(idx, dim), t["u"]))


def scatter_nd(x, idx, u, add_):
    """ONNX ScatterND: the slices x[tuple(idx[n])] replaced by (or added) u[n]."""
    y = x.clone()
    k = idx.shape[-1]
    flat = idx.reshape(-1, k)
    rows = u.reshape((flat.shape[0],) + tuple(x.shape[k:]))
    for n in range(flat.shape[0]):
        at = tuple(int(i) % x.shape[j] for j, i in enumerate(flat[n]))
        y[at] = y[at] + rows[n] if add_ else rows[n]
    return y


for name, shape, idx, ushape, reduction in (
        ("none_rows", (4, 3), [[1], [-1]], (2, 3), "none"),
        ("none_elements", (2, 3, 4), [[0, 1, 2], [1, 2, -1]], (2,), "none"),
        ("none_2d_indices", (3, 4, 2), [[[0, 1], [2, 3]], [[1, 0], [-1, -4]]], (2, 2, 2), "none"),
        ("add_repeat", (4, 3), [[1], [1], [-2]], (3, 3), "add"),
        ("add_elements_repeat", (3, 3), [[0, 1], [2, 2], [0, 1]], (3,), "add")):
    attrs = {} if reduction == "none" else {"reduction": reduction}
    add(f"scatternd_{name}", node("ScatterND", ["x", "idx", "u"], **attrs),
        {"x": rn(*shape), "idx": i64(idx), "u": rn(*ushape)},
        lambda t, idx=np.array(idx), r=reduction: scatter_nd(t["x"], idx, t["u"], r == "add"))

# ---- CumSum --------------------------------------------------------------------------------


def cumsum(x, axis, exclusive, reverse):
    if reverse:
        x = x.flip(axis)
    y = torch.cumsum(x, axis)
    if exclusive:
        y = y - x
    return y.flip(axis) if reverse else y


for axis in (1, -2):
    for exclusive in (0, 1):
        for reverse in (0, 1):
            add(f"cumsum_axis{axis}_exclusive{exclusive}_reverse{reverse}",
                node("CumSum", ["x", "axis"], exclusive=exclusive, reverse=reverse),
                {"x": rn(3, 4), "axis": np.array(axis, np.int64)},
                lambda t, a=axis, e=exclusive, r=reverse: cumsum(t["x"], a, e, r))
add("cumsum_rank3_axis_1d", node("CumSum", ["x", "axis"]),
    {"x": rn(2, 3, 4), "axis": i64([1])}, lambda t: torch.cumsum(t["x"], 1))

# ---- ReduceProd: the gradient is the product of the other elements, exact at zeros ---------

for axes, keep in (([1], 1), ([0, 2], 0), ([-1], 0), (None, 1), (None, 0)):
    attrs = {"keepdims": keep}
    if axes is not None:
        attrs["axes"] = axes
    add(f"reduceprod_axes{'all' if axes is None else '_'.join(map(str, axes))}_keep{keep}",
        node("ReduceProd", ["x"], **attrs), {"x": signed(2, 3, 4, lo=0.7, hi=1.3)},
        lambda t, axes=axes, keep=keep: prod_over(t["x"], axes, keep))


def prod_over(x, axes, keep):
    """torch.prod over several dimensions: the reduced ones moved last and flattened."""
    dims = [d % x.dim() for d in (axes if axes is not None else range(x.dim()))]
    kept = [d for d in range(x.dim()) if d not in dims]
    y = x.permute(kept + dims).reshape([x.shape[d] for d in kept] + [-1]).prod(-1)
    if keep:
        y = y.reshape([1 if d in dims else x.shape[d] for d in range(x.dim())])
    return y


# One zero in a row (its gradient is the product of the rest), two zeros (all zero).
add("reduceprod_zeros_axis1", node("ReduceProd", ["x"], axes=[1]),
    {"x": np.array([[1.5, 0, -2, 0.5], [0, 1.2, 0, 2], [0.8, -1.1, 1.3, 0.9]], np.float32)},
    lambda t: torch.prod(t["x"], 1, keepdim=True))
add("reduceprod_zero_axes0_2", node("ReduceProd", ["x"], axes=[0, 2], keepdims=0),
    {"x": np.where(np.arange(24).reshape(2, 3, 4) == 5, 0,
                   signed(2, 3, 4, lo=0.7, hi=1.3)).astype(np.float32)},
    lambda t: prod_over(t["x"], [0, 2], 0))

# ---- Convolution and pooling ---------------------------------------------------------------


def onnx_pad(x, pads, value=0.0):
    """ONNX pads [top, left, bottom, right] on NCHW."""
    top, left, bottom, right = pads
    return F.pad(x, (left, right, top, bottom), value=value)


CONVS = [
    # (suffix, x shape, w shape, bias, attrs)
    ("basic_bias", (2, 2, 5, 5), (3, 2, 3, 3), True, {}),
    ("stride2_pad1_nobias", (1, 2, 6, 6), (3, 2, 3, 3), False, {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("stride2_unreached_edge", (1, 2, 6, 6), (2, 2, 3, 3), True, {"strides": [2, 2]}),
    ("dilation2_pad1", (1, 2, 6, 6), (2, 2, 3, 3), True, {"dilations": [2, 2], "pads": [1, 1, 1, 1]}),
    ("groups2_bias", (1, 4, 5, 5), (4, 2, 3, 3), True, {"group": 2}),
    ("depthwise", (1, 3, 5, 5), (3, 1, 3, 3), False, {"group": 3, "pads": [1, 1, 1, 1]}),
    ("asymmetric_pads", (1, 2, 4, 5), (2, 2, 3, 3), True, {"pads": [0, 1, 2, 0]}),
    ("rect_kernel_stride12", (1, 2, 5, 6), (3, 2, 2, 3), False, {"strides": [1, 2]}),
    ("all_attrs", (2, 4, 7, 7), (2, 2, 3, 2), True,
     {"strides": [2, 1], "pads": [1, 0, 2, 1], "dilations": [1, 2], "group": 2}),
    ("1x1", (2, 3, 3, 3), (2, 3, 1, 1), True, {}),
    ("auto_pad_same_upper", (1, 2, 5, 5), (2, 2, 2, 2), False, {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
]


def conv_ref(attrs, has_bias, in_hw, k_hw):
    strides = attrs.get("strides", [1, 1])
    dil = attrs.get("dilations", [1, 1])
    pads = attrs.get("pads", [0, 0, 0, 0])
    if attrs.get("auto_pad") == "SAME_UPPER":
        pads = [0, 0, 0, 0]
        for i in range(2):
            out = -(-in_hw[i] // strides[i])
            total = max(0, (out - 1) * strides[i] + (k_hw[i] - 1) * dil[i] + 1 - in_hw[i])
            pads[i], pads[i + 2] = total // 2, total - total // 2

    def ref(t):
        return F.conv2d(onnx_pad(t["x"], pads), t["w"], t["b"] if has_bias else None,
                        stride=strides, dilation=dil, groups=attrs.get("group", 1))
    return ref


for suffix, xs, ws, has_bias, attrs in CONVS:
    tensors = {"x": rn(*xs), "w": rn(*ws, scale=0.5)}
    if has_bias:
        tensors["b"] = rn(ws[0])
    add(f"conv_{suffix}", node("Conv", list(tensors), **attrs), tensors,
        conv_ref(attrs, has_bias, xs[2:], ws[2:]))

CONV_TRANSPOSES = [
    # (suffix, x shape, w shape [C, O/group, k...], bias, attrs)
    ("basic_bias", (1, 2, 3, 3), (2, 3, 3, 3), True, {}),
    ("stride2_pads_output_padding", (1, 2, 4, 4), (2, 3, 3, 3), True,
     {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]}),
    ("asymmetric_pads_nobias", (2, 2, 3, 4), (2, 2, 3, 3), False,
     {"strides": [2, 1], "pads": [0, 1, 2, 0]}),
    ("dilation2", (1, 2, 3, 3), (2, 2, 3, 3), True, {"dilations": [2, 2]}),
    ("group2_stride2", (1, 4, 3, 3), (4, 3, 2, 2), True, {"group": 2, "strides": [2, 2]}),
    ("all_attrs", (2, 4, 3, 4), (4, 1, 3, 2), True,
     {"strides": [2, 3], "pads": [1, 0, 0, 1], "dilations": [1, 2], "group": 2,
      "output_padding": [1, 2]}),
    ("output_shape", (1, 1, 3, 3), (1, 2, 3, 3), False,
     {"strides": [3, 2], "output_shape": [10, 8]}),
    ("1d_bias", (2, 2, 5), (2, 3, 3), True,
     {"strides": [2], "pads": [1, 0], "output_padding": [1]}),
    ("1d_nobias", (1, 2, 4), (2, 2, 2), False, {"dilations": [2]}),
]


def conv_transpose_ref(attrs, has_bias, in_sp, k_sp):
    """ONNX ConvTranspose: the full transposed convolution, output_padding zero rows at the
    end, the pads cropped, then the bias."""
    dims = len(in_sp)
    strides = attrs.get("strides", [1] * dims)
    dil = attrs.get("dilations", [1] * dims)
    pads = list(attrs.get("pads", [0] * (2 * dims)))
    extra = list(attrs.get("output_padding", [0] * dims))
    full = [(in_sp[i] - 1) * strides[i] + (k_sp[i] - 1) * dil[i] + 1 for i in range(dims)]
    if "output_shape" in attrs:  # a negative end pad is more output_padding
        for i in range(dims):
            total = full[i] + extra[i] - attrs["output_shape"][i]
            pads[i], pads[i + dims] = total - total // 2, total // 2
            if pads[i + dims] < 0:
                extra[i] -= pads[i + dims]
                pads[i + dims] = 0

    def ref(t):
        x, w = t["x"], t["w"]
        if dims == 1:
            x, w = x.unsqueeze(2), w.unsqueeze(2)
        st, dl = ([1] + strides, [1] + dil) if dims == 1 else (strides, dil)
        y = F.conv_transpose2d(x, w, None, stride=st, dilation=dl, groups=attrs.get("group", 1))
        if dims == 1:
            y = y.squeeze(2)
        # zero rows at the end (output_padding), then crop the pads
        y = F.pad(y, [p for e in reversed(extra) for p in (0, e)])
        for i in range(dims):
            size = full[i] + extra[i] - pads[i] - pads[i + dims]
            y = y.narrow(2 + i, pads[i], size)
        if has_bias:
            y = y + t["b"].reshape([1, -1] + [1] * dims)
        return y
    return ref


for suffix, xs, ws, has_bias, attrs in CONV_TRANSPOSES:
    tensors = {"x": rn(*xs), "w": rn(*ws, scale=0.5)}
    if has_bias:
        tensors["b"] = rn(ws[1] * attrs.get("group", 1))
    add(f"conv_transpose_{suffix}", node("ConvTranspose", list(tensors), **attrs), tensors,
        conv_transpose_ref(attrs, has_bias, xs[2:], ws[2:]))

# A small upsampler: a strided Conv, then ConvTranspose (stride 2, output_padding) and a
# grouped ConvTranspose without bias, as nn.ConvTranspose2d exports them; the gradients flow
# through both transposed convolutions into the Conv.
add("conv_transpose_upsampler",
    [node("Conv", ["x", "w0", "b0"], ["h0"], strides=[2, 2], pads=[1, 1, 1, 1]),
     node("Relu", ["h0"], ["r0"]),
     node("ConvTranspose", ["r0", "w1", "b1"], ["h1"], strides=[2, 2], pads=[1, 1, 1, 1],
          output_padding=[1, 1]),
     node("Tanh", ["h1"], ["t1"]),
     node("ConvTranspose", ["t1", "w2"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1], group=2)],
    {"x": rn(2, 3, 6, 6), "w0": rn(4, 3, 3, 3, scale=0.5), "b0": rn(4),
     "w1": rn(4, 4, 3, 3, scale=0.5), "b1": rn(4), "w2": rn(4, 1, 4, 4, scale=0.5)},
    lambda t: F.conv_transpose2d(
        torch.tanh(F.conv_transpose2d(
            torch.relu(F.conv2d(t["x"], t["w0"], t["b0"], stride=2, padding=1)),
            t["w1"], t["b1"], stride=2, padding=1, output_padding=1)),
        t["w2"], None, stride=2, padding=1, groups=2))

MAXPOOLS = [
    # (suffix, x shape, attrs)
    ("k3_s2_pad1", (1, 2, 5, 5), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("k3_s1_overlap", (1, 2, 5, 5), {"kernel_shape": [3, 3]}),
    ("k2_s2_ceil", (1, 2, 5, 5), {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}),
    ("k3_s2_pad1_ceil", (1, 2, 6, 6), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                       "ceil_mode": 1}),
    ("k2_dilation2", (1, 2, 5, 5), {"kernel_shape": [2, 2], "dilations": [2, 2]}),
    ("asymmetric_pads_rect", (2, 1, 5, 6), {"kernel_shape": [2, 3], "strides": [1, 2],
                                            "pads": [1, 0, 0, 1]}),
]


def pool_args(attrs):
    return (attrs["kernel_shape"], attrs.get("strides", [1, 1]), attrs.get("pads", [0, 0, 0, 0]),
            attrs.get("dilations", [1, 1]), bool(attrs.get("ceil_mode", 0)))


def maxpool_ref(attrs):
    kernel, strides, pads, dil, ceil = pool_args(attrs)

    def ref(t):
        x = onnx_pad(t["x"], pads, value=-math.inf)
        return F.max_pool2d(x, kernel, strides, 0, dil, ceil_mode=ceil)
    return ref


# Tied maxima (values from {-1, 0, 1}): the gradient goes to the window's first maximum in
# row-major order, as in PyTorch.
add("maxpool_k3_s1_pad1_ties", node("MaxPool", ["x"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    {"x": _RNG.integers(-1, 2, (1, 2, 4, 4)).astype(np.float32)},
    maxpool_ref({"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}))
for suffix, xs, attrs in MAXPOOLS:
    add(f"maxpool_{suffix}", node("MaxPool", ["x"], **attrs), {"x": rn(*xs)}, maxpool_ref(attrs))

AVGPOOLS = [
    ("k3_s2_pad1_excl", (1, 2, 5, 5), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("k3_s2_pad1_incl", (1, 2, 5, 5), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                       "count_include_pad": 1}),
    ("k3_s1_overlap", (1, 2, 5, 5), {"kernel_shape": [3, 3]}),
    ("k2_s2_ceil", (1, 2, 5, 5), {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}),
    ("k3_s2_pad1_ceil_excl", (1, 2, 6, 6), {"kernel_shape": [3, 3], "strides": [2, 2],
                                            "pads": [1, 1, 1, 1], "ceil_mode": 1}),
    ("k3_s2_pad1_ceil_incl", (1, 2, 6, 6), {"kernel_shape": [3, 3], "strides": [2, 2],
                                            "pads": [1, 1, 1, 1], "ceil_mode": 1,
                                            "count_include_pad": 1}),
    ("asymmetric_pads_incl", (2, 1, 5, 6), {"kernel_shape": [2, 3], "strides": [1, 2],
                                            "pads": [1, 0, 0, 1], "count_include_pad": 1}),
    ("asymmetric_pads_excl", (2, 1, 5, 6), {"kernel_shape": [2, 3], "strides": [1, 2],
                                            "pads": [1, 0, 0, 1]}),
]


def avgpool_ref(attrs):
    """Window sum over the zero-padded input divided by the window's count: its real input
    positions, or with count_include_pad its positions inside the padded input (positions
    past the end padding in ceil mode never count) -- PyTorch's and ONNX Runtime's rule."""
    kernel, strides, pads, _, ceil = pool_args(attrs)
    include = bool(attrs.get("count_include_pad", 0))

    def window_sum(v):
        return F.avg_pool2d(v, kernel, strides, 0, ceil_mode=ceil, count_include_pad=True,
                            divisor_override=1)

    def ref(t):
        x = t["x"]
        total = window_sum(onnx_pad(x, pads))
        ones = torch.ones_like(x[:1, :1])
        count = window_sum(torch.ones_like(onnx_pad(ones, pads)) if include else onnx_pad(ones, pads))
        return total / count
    return ref


for suffix, xs, attrs in AVGPOOLS:
    add(f"averagepool_{suffix}", node("AveragePool", ["x"], **attrs), {"x": rn(*xs)},
        avgpool_ref(attrs))
add("globalaveragepool", node("GlobalAveragePool", ["x"]), {"x": rn(2, 3, 2, 3)},
    lambda t: t["x"].mean((2, 3), keepdim=True))

# ---- Losses --------------------------------------------------------------------------------

# ONNX's loss operators (compositions: a one-hot pick, gathered class weights, masks),
# against torch.nn.functional with the same weights, ignore_index and reduction. Class
# weights are fixed (frozen; torch does not differentiate them).
import torch.nn.functional as F  # noqa: E402

for op, fn in (("NegativeLogLikelihoodLoss", F.nll_loss),
               ("SoftmaxCrossEntropyLoss", F.cross_entropy)):
    short = "nll" if op.startswith("Neg") else "sce"
    for reduction in ("none", "sum", "mean"):
        for weighted, ii in ((False, None), (True, None), (True, 2), (False, -1)):
            shape, target = ((4, 5), i64([1, 4, 2, 2])) if ii != -1 else \
                ((2, 5, 3), i64([[0, -1, 4], [2, 2, -1]]))
            tensors = {"x": rn(*shape), "t": target}
            inputs = ["x", "t"]
            if weighted:
                tensors["w"] = rn(5, lo=0.5, hi=1.5)
                inputs.append("w")
            attrs = {"reduction": reduction}
            if ii is not None:
                attrs["ignore_index"] = ii
            name = (f"{short}_{reduction}{'_weight' if weighted else ''}"
                    f"{'' if ii is None else f'_ii{ii}'}")
            add(name, node(op, inputs, **attrs), tensors,
                lambda t, fn=fn, reduction=reduction, ii=ii: fn(
                    t["x"], t["t"], weight=t.get("w"), reduction=reduction,
                    ignore_index=-100 if ii is None else ii),
                frozen=["w"] if weighted else [])

add("mse_loss_rank3", node("Identity", ["x"]), {"x": rn(2, 3, 4)}, lambda t: t["x"])
add("cross_entropy_2d", node("Identity", ["x"]), {"x": rn(4, 5, scale=2.0)}, lambda t: t["x"],
    loss="cross_entropy", labels=i64([1, 4, 0, 1]))
add("cross_entropy_3d_ignored", node("Mul", ["x", "s"]),
    {"x": rn(2, 3, 5), "s": np.array(1.7, np.float32)}, lambda t: t["x"] * t["s"],
    loss="cross_entropy", labels=i64([[2, -100, 0], [4, 4, -100]]))

# ---- Dropout (training mode) ---------------------------------------------------------------
# PyTorch's generator is not Loom's, so the reference draws Loom's mask itself: Philox4x32-10
# keyed by the node's seed (FNV-1a of its name, or of its first output's name when it has
# none, with "#seed=S" for a `seed` attribute), counter (element index, 0, step, 0) at step
# 1, kept where (word 0 >> 8) / 2^24 >= ratio, scaled by 1 / (1 - ratio) in float32. The
# gradient then checks that the backward draws the forward's mask again.

_M32 = 0xFFFFFFFF


def fnv1a(text):
    h = 0xCBF29CE484222325
    for c in text.encode():
        h = ((h ^ c) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def philox_word0(index, step, seed):
    c0 = index.astype(np.uint64) & _M32
    c1 = index.astype(np.uint64) >> np.uint64(32)
    c2 = np.full_like(c0, step)
    c3 = np.zeros_like(c0)
    k0, k1 = seed & _M32, seed >> 32
    for r in range(10):
        if r:
            k0, k1 = (k0 + 0x9E3779B9) & _M32, (k1 + 0xBB67AE85) & _M32
        p0 = c0 * np.uint64(0xD2511F53)
        p1 = c2 * np.uint64(0xCD9E8D57)
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ np.uint64(k0), p1 & np.uint64(_M32),
                          (p0 >> np.uint64(32)) ^ c3 ^ np.uint64(k1), p0 & np.uint64(_M32))
    return c0


def dropout_scaled_mask(shape, ratio, name, seed=None, step=1):
    key = fnv1a(name if seed is None else f"{name}#seed={seed}")
    u = (philox_word0(np.arange(int(np.prod(shape))), step, key) >> np.uint64(8)).astype(
        np.float32) * np.float32(2.0 ** -24)
    scale = np.float32(1) / (np.float32(1) - np.float32(ratio))
    return np.where(u >= np.float32(ratio), scale, np.float32(0)).reshape(shape)


def dropout_nodes(ratio, **attrs):
    const = lambda name, a: node("Constant", [], [name], value=numpy_helper.from_array(a, name))
    return [const("ratio", np.array(ratio, np.float32)), const("mode", np.array(True)),
            node("Dropout", ["x", "ratio", "mode"], **attrs)]


for ratio, shape, seed in ((0.5, (4, 6), None), (0.1, (3, 5, 2), 7)):
    mask = dropout_scaled_mask(shape, ratio, "y", seed)
    assert 0 < np.count_nonzero(mask) < mask.size
    add(f"dropout_train_{ratio}" + ("" if seed is None else f"_seed{seed}"),
        dropout_nodes(ratio, **({} if seed is None else {"seed": seed})), {"x": rn(*shape)},
        lambda t, mask=mask: t["x"] * torch.tensor(mask))

# ---- Resize: nearest and bilinear upsampling, align_corners both ways, a downsample ---------


def resize_case(name, shape, ref, scales=None, sizes=None, **attrs):
    """Resize-13 of x by constant scales (a Constant node: a float initializer would be
    trained) or int64 sizes (an initializer, a constant); ref is F.interpolate."""
    nodes, tensors = [], {"x": rn(*shape)}
    if scales is not None:
        s = np.array(scales, np.float32)
        nodes.append(node("Constant", [], ["scales"], value=numpy_helper.from_array(s, "s")))
        nodes.append(node("Resize", ["x", "", "scales"], **attrs))
    else:
        tensors["sizes"] = i64(sizes)
        nodes.append(node("Resize", ["x", "", "", "sizes"], **attrs))
    add(name, nodes, tensors, lambda t: ref(t["x"]))


NEAREST = dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
LINEAR = dict(mode="linear", coordinate_transformation_mode="half_pixel")
CORNERS = dict(mode="linear", coordinate_transformation_mode="align_corners")
resize_case("resize_nearest_scale2", (1, 2, 3, 4),
            lambda x: F.interpolate(x, scale_factor=2, mode="nearest"),
            scales=[1, 1, 2, 2], **NEAREST)
resize_case("resize_nearest_size", (1, 2, 4, 3),
            lambda x: F.interpolate(x, size=(7, 5), mode="nearest"), sizes=[1, 2, 7, 5],
            **NEAREST)
resize_case("resize_bilinear_scale2", (1, 2, 3, 4),
            lambda x: F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False),
            scales=[1, 1, 2, 2], **LINEAR)
resize_case("resize_bilinear_size", (2, 1, 4, 3),
            lambda x: F.interpolate(x, size=(7, 5), mode="bilinear", align_corners=False),
            sizes=[2, 1, 7, 5], **LINEAR)
resize_case("resize_bilinear_align_corners_scale2", (1, 2, 3, 4),
            lambda x: F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True),
            scales=[1, 1, 2, 2], **CORNERS)
resize_case("resize_bilinear_align_corners_size", (1, 2, 4, 3),
            lambda x: F.interpolate(x, size=(7, 5), mode="bilinear", align_corners=True),
            sizes=[1, 2, 7, 5], **CORNERS)
resize_case("resize_bilinear_downsample", (1, 2, 8, 6),
            lambda x: F.interpolate(x, scale_factor=0.5, mode="bilinear", align_corners=False),
            scales=[1, 1, 0.5, 0.5], **LINEAR)
resize_case("resize_nearest_downsample_size", (1, 1, 7, 9),
            lambda x: F.interpolate(x, size=(3, 4), mode="nearest"), sizes=[1, 1, 3, 4],
            **NEAREST)

# A decoder stage as U-Nets and FPNs have it: conv, bilinear upsampling by 2, conv; the
# upsampled gradient flows on into both convolutions' weights and the input.
add("resize_conv_decoder",
    [node("Conv", ["x", "w1", "b1"], ["h"], pads=[1, 1, 1, 1]),
     node("Constant", [], ["scales"],
          value=numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "s")),
     node("Resize", ["h", "", "scales"], ["u"], **LINEAR),
     node("Conv", ["u", "w2"], pads=[1, 1, 1, 1])],
    {"x": rn(2, 3, 4, 5), "w1": rn(4, 3, 3, 3, scale=0.5), "b1": rn(4),
     "w2": rn(2, 4, 3, 3, scale=0.5)},
    lambda t: F.conv2d(F.interpolate(F.conv2d(t["x"], t["w1"], t["b1"], padding=1),
                                     scale_factor=2, mode="bilinear", align_corners=False),
                       t["w2"], padding=1))

# --------------------------------------------------------------------------------------------
# Running one case
# --------------------------------------------------------------------------------------------


class CaseFailed(Exception):
    pass


def run(cmd, timeout=120):
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise CaseFailed(f"timed out after {timeout} s: {' '.join(cmd)}")
    if result.returncode != 0:
        tail = (result.stdout + result.stderr).strip().splitlines()[-8:]
        raise CaseFailed(f"exit {result.returncode}: {' '.join(os.path.basename(c) for c in cmd[:2])}"
                         + "".join("\n      " + line for line in tail))
    return result.stdout


def relative_error(actual, expected):
    """Normwise max|a - e| / max|e| (test/oracle.py): inf where shapes differ or a value
    is not finite where expected is."""
    return oracle.compare(actual, expected, TOLERANCE).error


def onnx_elem_type(array):
    return helper.np_dtype_to_tensor_dtype(array.dtype) if hasattr(helper, "np_dtype_to_tensor_dtype") \
        else onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[array.dtype]


def reference(case):
    """PyTorch: (y, loss, {param: grad}, labels)."""
    params = set(case.params())
    t = {}
    for name, a in case.tensors.items():
        t[name] = torch.tensor(a, requires_grad=name in params)
    y = case.ref(t)
    rng = np.random.default_rng(zlib.crc32(case.name.encode()))
    if case.loss == "mse":
        labels = rng.standard_normal(tuple(y.shape)).astype(np.float32)
        loss = ((y - torch.tensor(labels)) ** 2).mean()
    else:
        labels = case.labels
        classes = y.shape[-1]
        loss = F.cross_entropy(y.reshape(-1, classes), torch.tensor(labels).reshape(-1),
                               ignore_index=case.ignore_index)
    loss.backward()
    grads = {n: (t[n].grad.numpy() if t[n].grad is not None else np.zeros_like(case.tensors[n]))
             for n in params}
    return y.detach().numpy(), float(loss), grads, labels


def build_model(case, y_shape):
    inputs, inits = [], []
    for name, a in case.tensors.items():
        if name in case.inputs:
            inputs.append(helper.make_tensor_value_info(name, onnx_elem_type(a), list(a.shape)))
        else:
            inits.append(numpy_helper.from_array(a, name))
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y_shape))
    graph = helper.make_graph(case.nodes, case.name.replace("-", "_"), inputs, [out], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="gradient_rules.py")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def printed_half_unit(text):
    mantissa, _, exponent = text.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 0.5 * 10.0 ** -decimals * (10.0 ** int(exponent) if exponent else 1.0)


def forward_error(args, case, work, y_ref):
    """Diagnostics on a mismatch: the inference plan's output against PyTorch's."""
    try:
        plan = os.path.join(work, "forward.plan")
        run([args.loom, "compile", os.path.join(work, "case.onnx"), "-o", plan])
        out = os.path.join(work, "forward_out")
        cmd = [args.loom, "run", plan, "--outputs", out]
        feeds = [f"{n}={os.path.join(work, n + '.npy')}" for n in sorted(case.inputs)]
        if feeds:
            cmd += ["--inputs", ",".join(feeds)]
        run(cmd)
        return relative_error(np.load(os.path.join(out, "y.npy")), y_ref)
    except (CaseFailed, OSError, ValueError) as e:
        return f"unavailable ({str(e).splitlines()[0]})"


def run_case(args, case, work):
    """Returns (ok, worst error, detail lines)."""
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    y_ref, loss_ref, grads_ref, labels = reference(case)
    model = build_model(case, y_ref.shape)
    onnx_path = os.path.join(work, "case.onnx")
    onnx.save(model, onnx_path)
    np.save(os.path.join(work, "labels.npy"), labels)
    for name in case.inputs:
        np.save(os.path.join(work, name + ".npy"), case.tensors[name])

    plan = os.path.join(work, "case.plan")
    compile_cmd = [args.loom, "compile", onnx_path, "--train", "--loss", case.loss,
                   "--optimizer", "sgd", "--lr", "1", "-o", plan]
    if case.loss == "cross_entropy":
        compile_cmd += ["--ignore-index", str(case.ignore_index)]
    if case.frozen:
        compile_cmd += ["--freeze", ",".join(sorted(case.frozen))]
    run(compile_cmd)
    ckpt, metrics = os.path.join(work, "ckpt"), os.path.join(work, "metrics.jsonl")
    feeds = [f"labels={os.path.join(work, 'labels.npy')}"]
    feeds += [f"{n}={os.path.join(work, n + '.npy')}" for n in sorted(case.inputs)]
    stdout = run([args.loom, "run", plan, "--steps", "1", "--data", ",".join(feeds),
                  "--metrics", metrics, "--save", ckpt, "--threads", str(args.threads)])

    problems, details, notes = [], [], []
    # The loss: --metrics (9 digits) and the printed step line (6 digits).
    with open(metrics) as f:
        records = [json.loads(line) for line in f if line.strip()]
    loss_loom = float(records[0]["loss"]) if records else math.nan
    worst = oracle.Worst()
    loss = worst.add(oracle.compare(loss_loom, loss_ref, TOLERANCE, name="loss"))
    if not loss.ok:
        problems.append(f"loss: loom {loss_loom!r}, torch {loss_ref!r} ({loss.message})")
    lines = [STEP_LINE.match(l.strip()) for l in stdout.splitlines()]
    lines = [m for m in lines if m]
    if len(lines) != 1:
        problems.append(f"expected one `loom: step 1 loss L lr R` line, got {len(lines)}")
    else:
        printed = lines[0].group(2)
        if not oracle.compare(float(printed), loss_ref, TOLERANCE,
                              atol=printed_half_unit(printed)):
            problems.append(f"printed loss {printed}, torch {loss_ref!r}")

    # The checkpoint: exactly the expected parameters; the buffers unchanged.
    _, saved = read_checkpoint(ckpt)
    entries = {name: {"kind": kind, "array": array} for name, (kind, array) in saved.items()}
    expected_params = case.params()
    saved_params = {n for n, e in entries.items() if e.get("kind") == "parameter"}
    for name in sorted(saved_params - set(expected_params) - case.buffers - case.frozen):
        problems.append(f"checkpoint has unexpected parameter {name}")
    for name in sorted(case.buffers | case.frozen):
        e = entries.get(name)
        if e is None:
            notes.append(f"buffer {name} not in the checkpoint")
            continue
        if e.get("kind") != "buffer":
            problems.append(f"{name}: kind {e.get('kind')!r}, expected 'buffer'")
        if not oracle.compare(e["array"], case.tensors[name], rtol=0.0):
            problems.append(f"buffer {name} changed")

    for name in expected_params:
        want = grads_ref[name]
        e = entries.get(name)
        if e is None or e.get("kind") != "parameter":
            if np.any(want != 0):
                problems.append(f"parameter {name} is not in the checkpoint as a parameter")
            else:
                notes.append(f"{name} (zero gradient) not in the checkpoint")
            continue
        before = case.tensors[name].astype(np.float64)
        after = e["array"].astype(np.float64)
        if after.shape != before.shape:
            problems.append(f"{name}: checkpoint shape {list(after.shape)}, "
                            f"expected {list(before.shape)}")
            worst.add(math.inf, name)
            continue
        got = before - after
        grad = worst.add(oracle.compare(got, want, TOLERANCE, name=f"d{name}"))
        scale = float(np.max(np.abs(want))) if want.size else 0.0
        resolution = float(np.max(np.spacing(np.abs(case.tensors[name])))) / 2 / max(scale, TINY)
        if scale > 0 and resolution > RESOLUTION_WARN:
            notes.append(f"{name}: float32 update resolution {resolution:.1e} of the gradient")
        if not grad.ok:
            problems.append(f"{grad.message}; max|torch| {scale:.4g}")
            details.append(f"      torch d{name} = {np.array2string(want.ravel()[:12], precision=5, max_line_width=1000)}"
                           + (" ..." if want.size > 12 else ""))
            details.append(f"      loom  d{name} = {np.array2string(got.ravel()[:12], precision=5, max_line_width=1000)}"
                           + (" ..." if got.size > 12 else ""))
    if problems:
        ferr = forward_error(args, case, work, y_ref)
        notes.append("forward output vs torch: " + (f"relative {ferr:.3e}" if isinstance(ferr, float)
                                                    else ferr))
    return not problems, worst.error, problems + details, notes


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loom", help="path to the loom binary")
    parser.add_argument("--source", help="Loom's source tree (unused; for symmetry with the "
                        "other e2e tests)")
    parser.add_argument("--only", help="comma-separated case names or fnmatch patterns")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--sample", type=int, default=1, metavar="K",
                        help="every K-th case only, from the first (the sanitizer "
                        "build's reduced run; cases of one op are neighbours)")
    parser.add_argument("--keep", metavar="DIR", help="work in DIR and keep its files")
    parser.add_argument("--threads", type=int, default=1,
                        help="loom run --threads (default: %(default)s)")
    args = parser.parse_args()

    cases = CASES
    if args.only:
        patterns = [p.strip() for p in args.only.split(",") if p.strip()]
        cases = [c for c in CASES if any(fnmatch.fnmatchcase(c.name, p) for p in patterns)]
        if not cases:
            parser.error(f"no case matches {args.only!r}; --list shows them")
    if args.sample < 1:
        parser.error("--sample must be at least 1")
    cases = cases[::args.sample]
    if args.list:
        for c in cases:
            print(f"{c.name:40s} {' -> '.join(n.op_type for n in c.nodes)}  "
                  f"params: {', '.join(c.params()) or '-'}")
        return 0
    if not args.loom:
        parser.error("--loom is required")

    root = os.path.abspath(args.keep) if args.keep else tempfile.mkdtemp(prefix="loom-grad-")
    width = max(len(c.name) for c in cases)
    passed = failed = 0
    try:
        for case in cases:
            work = os.path.join(root, case.name) if args.keep else os.path.join(root, "case")
            try:
                ok, worst, lines, notes = run_case(args, case, work)
            except (CaseFailed, OSError, ValueError, KeyError, RuntimeError,
                    onnx.checker.ValidationError) as e:
                failed += 1
                print(f"{case.name:{width}s}  FAILED  {type(e).__name__}: {e}", flush=True)
                continue
            passed += ok
            failed += not ok
            print(f"{case.name:{width}s}  {worst:.2e}  {'ok' if ok else 'MISMATCH'}"
                  + "".join(f"\n    {l}" for l in lines)
                  + "".join(f"\n    note: {n}" for n in notes), flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
