"""Writes shape-only GPT models as ONNX files, for planning models too big to hold weights for.

Run with the system interpreter, which has onnx 1.12:

    /usr/bin/python3 models/gpt_shapes.py --layers 96 --d-model 12288 --heads 96 \\
        --vocab 50257 --seq 2048 --tied -o /tmp/gpt3.onnx

The graph is built node by node with `onnx.helper` and has the structure of the `GPT` class
that export.py exports (see models/README.md): token embedding Gather plus the whole position
table, pre-LayerNorm blocks with causal self-attention (separate q, k, v and proj linears)
and an exact-GELU MLP, a final LayerNorm and the LM head. It keeps export.py's conventions:

* each linear is `Transpose(W) -> MatMul -> Add(bias)`, with the parameter `W` stored as
  [out, in] under its PyTorch state_dict name (`blocks.0.attn.q.weight`); with `--tied` the
  LM head is `Transpose(tok_emb.weight) -> MatMul`;
* initializers in state_dict order; node names with torch's scopes and per-scope counters
  (`/blocks.0/attn/MatMul`, `/blocks.0/attn/q/Transpose`), outputs named `<node>_output_0`,
  and the final MatMul writes `logits`;
* opset 17 uses `LayerNormalization`; opsets 13 to 16 use the decomposition torch emits
  (`ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add`);
* input `input_ids` int64 [batch, seq], output `logits` float32 [batch, seq, vocab], with
  `batch` symbolic.

Two simplifications, both with the same values as the exported graph:

* The Shape/Gather/Unsqueeze/Concat arithmetic torch emits for `view`/`reshape` under a
  symbolic batch becomes one constant target per Reshape whose batch entry is 0 ("copy the
  input's dimension", allowzero=0), e.g. [0, seq, heads, head_dim].
* The causal mask. torch stores `~tril(ones(seq, seq))` as a [1, 1, seq, seq] bool Constant
  in every block, which is seq^2 bytes per layer (4 MiB per layer at seq 2048). Here it is
  computed once, in the graph, from a Range and integer arithmetic that any importer folds:

      idx  = Range(0, seq, 1)                          # [seq], the key position j
      rows = Reshape(idx, [1, 1, seq, 1])              # the query position i
      mask = Cast(Div(Sub(idx, rows) + (seq - 1), seq), to=BOOL)   # [1, 1, seq, seq]

  (j - i + seq - 1) // seq is 1 exactly when j > i, so `mask` equals torch's constant, and
  every block's `Where(mask, -inf, scores)` reads it. Its nodes live in the scope
  `/causal_mask`; the file size does not depend on seq.

Trainable initializers (float tensors) are ONNX external data:
`data_location = EXTERNAL` with `location` = `<OUT stem>.weights` (next to OUT, e.g.
`gpt3.weights` for `gpt3.onnx`), `offset` and `length`, laid out contiguously in initializer
order. The data file is never written, so a 175B-parameter model is a few hundred KiB and an
importer that reads shapes only (`loom import --no-weights`) never opens it.
`--weights-from FILE.onnx` instead copies every initializer's data from FILE (same names,
shapes and types, or an error), which makes the output a complete model that can be run and
compared with FILE.

The output is deterministic: the same arguments give the same bytes.
"""

import argparse
import collections
import math
import os
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FIRST_OPSET, LAST_OPSET = 13, 17
LAYER_NORM_EPS = 1e-5


class ShapeError(Exception):
    """A configuration or --weights-from file that cannot give the requested model."""


class GraphBuilder:
    """Accumulates nodes and initializer declarations, naming nodes the way torch 1.13 does.

    A node of type T in scope S is called `S/T`, then `S/T_1`, `S/T_2`, ... and its single
    output `<node name>_output_0` unless an explicit output name is given.
    """

    def __init__(self, opset):
        self.opset = opset
        self.nodes = []
        self.params = []  # (name, shape) in state_dict order
        self._counters = collections.Counter()

    def node(self, scope, op_type, inputs, output=None, **attrs):
        """Appends a node and returns the name of its output."""
        count = self._counters[(scope, op_type)]
        self._counters[(scope, op_type)] += 1
        name = f"{scope}/{op_type}" + (f"_{count}" if count else "")
        output = output or f"{name}_output_0"
        self.nodes.append(helper.make_node(op_type, list(inputs), [output], name=name, **attrs))
        return output

    def constant(self, scope, value):
        """A Constant node holding the numpy array (or numpy scalar) `value`."""
        tensor = numpy_helper.from_array(np.asarray(value))
        return self.node(scope, "Constant", [], value=tensor)

    def param(self, name, shape):
        """Declares a parameter initializer; returns its name for use as a node input."""
        self.params.append((name, tuple(int(d) for d in shape)))
        return name


# --------------------------------------------------------------------------------------------
# The model, module by module (mirrors export.py's GPT, Block, CausalSelfAttention, FeedForward)
# --------------------------------------------------------------------------------------------


def linear(g, scope, x, prefix):
    """`Transpose(W) -> MatMul -> Add(bias)`: W is the [out, in] parameter `<prefix>.weight`."""
    wt = g.node(scope, "Transpose", [f"{prefix}.weight"], perm=[1, 0])
    y = g.node(scope, "MatMul", [x, wt])
    return g.node(scope, "Add", [f"{prefix}.bias", y])


def layer_norm(g, scope, x, prefix):
    """LayerNorm over the last axis: one node from opset 17, torch's decomposition before."""
    weight, bias = f"{prefix}.weight", f"{prefix}.bias"
    if g.opset >= 17:
        return g.node(scope, "LayerNormalization", [x, weight, bias], axis=-1,
                      epsilon=LAYER_NORM_EPS)
    mean = g.node(scope, "ReduceMean", [x], axes=[-1])
    centered = g.node(scope, "Sub", [x, mean])
    squared = g.node(scope, "Pow", [centered, g.constant(scope, np.float32(2.0))])
    var = g.node(scope, "ReduceMean", [squared], axes=[-1])
    var_eps = g.node(scope, "Add", [var, g.constant(scope, np.float32(LAYER_NORM_EPS))])
    std = g.node(scope, "Sqrt", [var_eps])
    normed = g.node(scope, "Div", [centered, std])
    scaled = g.node(scope, "Mul", [normed, weight])
    return g.node(scope, "Add", [scaled, bias])


def causal_mask(g, seq):
    """The [1, 1, seq, seq] bool mask, True above the diagonal (the positions set to -inf)."""
    scope = "/causal_mask"
    n = g.constant(scope, np.int64(seq))
    idx = g.node(scope, "Range", [g.constant(scope, np.int64(0)), n,
                                  g.constant(scope, np.int64(1))])
    rows = reshape(g, scope, idx, [1, 1, seq, 1])
    diff = g.node(scope, "Sub", [idx, rows])  # [1, 1, seq, seq]: key j minus query i
    shifted = g.node(scope, "Add", [diff, g.constant(scope, np.int64(seq - 1))])
    above = g.node(scope, "Div", [shifted, n])  # 1 where j > i, else 0
    return g.node(scope, "Cast", [above], to=TensorProto.BOOL)


def reshape(g, scope, x, target):
    """Reshape to a constant target; 0 copies the input's dimension (allowzero=0)."""
    attrs = {"allowzero": 0} if g.opset >= 14 else {}
    return g.node(scope, "Reshape", [x, g.constant(scope, np.array(target, dtype=np.int64))],
                  **attrs)


def attention(g, scope, x, prefix, cfg, mask):
    """CausalSelfAttention: heads split by Reshape [0, S, H, hd] + Transpose, masked softmax."""
    seq, heads, d_model = cfg["seq"], cfg["heads"], cfg["d_model"]
    head_dim = d_model // heads
    split = [0, seq, heads, head_dim]
    q = linear(g, f"{scope}/q", x, f"{prefix}.q")
    q = g.node(scope, "Transpose", [reshape(g, scope, q, split)], perm=[0, 2, 1, 3])
    k = reshape(g, scope, linear(g, f"{scope}/k", x, f"{prefix}.k"), split)
    v = linear(g, f"{scope}/v", x, f"{prefix}.v")
    v = g.node(scope, "Transpose", [reshape(g, scope, v, split)], perm=[0, 2, 1, 3])
    kt = g.node(scope, "Transpose", [k], perm=[0, 2, 3, 1])  # k^T: [B, H, hd, S]
    scores = g.node(scope, "MatMul", [q, kt])
    scale = np.float32(1.0 / math.sqrt(head_dim))
    scores = g.node(scope, "Mul", [scores, g.constant(scope, scale)])
    scores = g.node(scope, "Where", [mask, g.constant(scope, np.float32(-np.inf)), scores])
    probs = g.node(scope, "Softmax", [scores], axis=-1)
    y = g.node(scope, "MatMul", [probs, v])  # [B, H, S, hd]
    y = g.node(scope, "Transpose", [y], perm=[0, 2, 1, 3])
    y = reshape(g, scope, y, [0, seq, d_model])
    return linear(g, f"{scope}/proj", y, f"{prefix}.proj")


def feed_forward(g, scope, x, prefix):
    """fc -> exact GELU x * (erf(x / sqrt 2) + 1) * 0.5 -> proj."""
    h = linear(g, f"{scope}/fc", x, f"{prefix}.fc")
    act = f"{scope}/act"
    e = g.node(act, "Div", [h, g.constant(act, np.float32(math.sqrt(2.0)))])
    e = g.node(act, "Erf", [e])
    e = g.node(act, "Add", [e, g.constant(act, np.float32(1.0))])
    y = g.node(act, "Mul", [h, e])
    y = g.node(act, "Mul", [y, g.constant(act, np.float32(0.5))])
    return linear(g, f"{scope}/proj", y, f"{prefix}.proj")


def declare_params(g, cfg):
    """All parameters in state_dict order, with PyTorch shapes ([out, in] for linears)."""
    d, v = cfg["d_model"], cfg["vocab"]
    g.param("tok_emb.weight", [v, d])
    g.param("pos_emb.weight", [cfg["seq"], d])
    for i in range(cfg["layers"]):
        p = f"blocks.{i}"
        for name, shape in [("ln1.weight", [d]), ("ln1.bias", [d]),
                            ("attn.q.weight", [d, d]), ("attn.q.bias", [d]),
                            ("attn.k.weight", [d, d]), ("attn.k.bias", [d]),
                            ("attn.v.weight", [d, d]), ("attn.v.bias", [d]),
                            ("attn.proj.weight", [d, d]), ("attn.proj.bias", [d]),
                            ("ln2.weight", [d]), ("ln2.bias", [d]),
                            ("mlp.fc.weight", [4 * d, d]), ("mlp.fc.bias", [4 * d]),
                            ("mlp.proj.weight", [d, 4 * d]), ("mlp.proj.bias", [d])]:
            g.param(f"{p}.{name}", shape)
    g.param("ln_f.weight", [d])
    g.param("ln_f.bias", [d])
    if not cfg["tied"]:
        g.param("lm_head.weight", [v, d])


def build_graph(cfg, opset):
    """Returns the GraphBuilder holding the whole GPT forward graph."""
    g = GraphBuilder(opset)
    declare_params(g, cfg)
    mask = causal_mask(g, cfg["seq"])
    x = g.node("/tok_emb", "Gather", ["tok_emb.weight", "input_ids"])
    x = g.node("", "Add", [x, "pos_emb.weight"])
    for i in range(cfg["layers"]):
        scope, prefix = f"/blocks.{i}", f"blocks.{i}"
        h = layer_norm(g, f"{scope}/ln1", x, f"{prefix}.ln1")
        x = g.node(scope, "Add", [x, attention(g, f"{scope}/attn", h, f"{prefix}.attn", cfg, mask)])
        h = layer_norm(g, f"{scope}/ln2", x, f"{prefix}.ln2")
        x = g.node(scope, "Add", [x, feed_forward(g, f"{scope}/mlp", h, f"{prefix}.mlp")])
    h = layer_norm(g, "/ln_f", x, "ln_f")
    # The LM head has no bias; tied, it reads the token embedding.
    head = "tok_emb" if cfg["tied"] else "lm_head"
    wt = g.node("/lm_head", "Transpose", [f"{head}.weight"], perm=[1, 0])
    g.node("/lm_head", "MatMul", [h, wt], output="logits")
    return g


# --------------------------------------------------------------------------------------------
# Initializers: external references, or data copied from another model
# --------------------------------------------------------------------------------------------


def external_initializers(params, location):
    """TensorProtos that reference `location` (not written) at contiguous offsets."""
    tensors, offset = [], 0
    for name, shape in params:
        count = math.prod(shape)
        if count <= 1:
            # Not trainable state for an importer: a constant, kept inline.
            tensors.append(numpy_helper.from_array(np.zeros(shape, np.float32), name))
            continue
        length = 4 * count
        t = TensorProto()
        t.name = name
        t.data_type = TensorProto.FLOAT
        t.dims.extend(shape)
        t.data_location = TensorProto.EXTERNAL
        for key, value in (("location", location), ("offset", offset), ("length", length)):
            entry = t.external_data.add()
            entry.key, entry.value = key, str(value)
        tensors.append(t)
        offset += length
    return tensors, offset


def copied_initializers(params, path):
    """TensorProtos holding the data of the same-named initializers of the model at `path`."""
    try:
        source = onnx.load(path)  # resolves the source's own external data, if it has any
    except Exception as e:  # a missing file, or one that is not an ONNX model
        raise ShapeError(f"--weights-from {path}: cannot load it: {e}") from e
    by_name = {t.name: t for t in source.graph.initializer}
    wanted = {name for name, _ in params}
    problems = []
    tensors = []
    for name, shape in params:
        t = by_name.get(name)
        if t is None:
            problems.append(f"'{name}' {list(shape)} is missing")
            continue
        if tuple(t.dims) != shape or t.data_type != TensorProto.FLOAT:
            problems.append(f"'{name}' is {TensorProto.DataType.Name(t.data_type)} "
                            f"{list(t.dims)}, expected FLOAT {list(shape)}")
            continue
        tensors.append(numpy_helper.from_array(numpy_helper.to_array(t), name))
    extra = [t.name for t in source.graph.initializer
             if t.name not in wanted and t.data_type == TensorProto.FLOAT and math.prod(t.dims) > 1]
    if extra:
        problems.append(f"parameters the generated model lacks: {', '.join(extra[:5])}"
                        + (" ..." if len(extra) > 5 else "")
                        + " (does --tied or the size match?)")
    if problems:
        shown = problems[:8] + ([f"... and {len(problems) - 8} more"] if len(problems) > 8 else [])
        raise ShapeError(f"--weights-from {path} does not fit the requested model:\n  "
                         + "\n  ".join(shown))
    return tensors


# --------------------------------------------------------------------------------------------
# Model assembly and command line
# --------------------------------------------------------------------------------------------


def check_config(cfg, opset):
    for key in ("layers", "d_model", "heads", "vocab", "seq"):
        if cfg[key] < 1:
            raise ShapeError(f"--{key.replace('_', '-')} must be at least 1, got {cfg[key]}")
    if cfg["d_model"] % cfg["heads"]:
        raise ShapeError(f"--d-model {cfg['d_model']} is not divisible by --heads {cfg['heads']}")
    if not FIRST_OPSET <= opset <= LAST_OPSET:
        raise ShapeError(f"--opset must be between {FIRST_OPSET} and {LAST_OPSET}, got {opset}")


def make_model(cfg, opset, output, weights_from=None):
    """Builds the ModelProto. Returns (model, parameter count, external data bytes)."""
    check_config(cfg, opset)
    return assemble_model(build_graph(cfg, opset), cfg, opset, output, weights_from, "gpt")


def assemble_model(g, cfg, opset, output, weights_from, kind):
    """The ModelProto of GraphBuilder `g` (a decoder of kind "gpt" or "llama" taking
    `input_ids` and writing `logits`). Returns (model, parameter count, external bytes)."""
    params = sum(math.prod(shape) for _, shape in g.params)
    if weights_from:
        initializers, external = copied_initializers(g.params, weights_from), 0
    else:
        stem = os.path.splitext(os.path.basename(output))[0]
        initializers, external = external_initializers(g.params, f"{stem}.weights")

    seq, vocab = cfg["seq"], cfg["vocab"]
    graph = helper.make_graph(
        g.nodes, f"loom_{kind}_shapes",
        inputs=[helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", seq])],
        outputs=[helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                               ["batch", seq, vocab])],
        initializer=initializers)
    # IR version 7 for opsets 13 and 14, 8 for 15 to 17 (what ONNX pairs with each opset).
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              ir_version=7 if opset <= 14 else 8,
                              producer_name=f"loom-{kind}-shapes", producer_version="1")
    config = dict(cfg, opset=opset,
                  weights=f"copied from {os.path.basename(weights_from)}" if weights_from
                  else "external, not written")
    helper.set_model_props(model, {k: str(v) for k, v in config.items()})
    return model, params, external


def human_bytes(n):
    """1536 -> '1.5 KiB'."""
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} bytes" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return None


def checkable_copy(model):
    """A copy of `model` whose external initializers are graph inputs of the same type.

    onnx.checker insists that an external data file exists (relative to the working
    directory when it checks a model in memory), so the check looks at the graph, the types
    and the inferred shapes with the parameters as inputs instead.
    """
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    graph = copy.graph
    external = [t for t in graph.initializer if t.data_location == TensorProto.EXTERNAL]
    kept = [t for t in graph.initializer if t.data_location != TensorProto.EXTERNAL]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    graph.input.extend(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                       for t in external)
    return copy


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Write a shape-only GPT (export.py's GPT structure) as ONNX, its "
                    "parameters as external data that is never written.")
    parser.add_argument("--layers", type=int, required=True, help="transformer blocks")
    parser.add_argument("--d-model", type=int, required=True, help="model width")
    parser.add_argument("--heads", type=int, required=True,
                        help="attention heads; must divide --d-model")
    parser.add_argument("--vocab", type=int, required=True, help="vocabulary size")
    parser.add_argument("--seq", type=int, required=True, help="sequence length (static)")
    parser.add_argument("--tied", action="store_true",
                        help="tie the LM head to the token embedding (default: untied)")
    parser.add_argument("--opset", type=int, default=LAST_OPSET,
                        help="ONNX opset, 13 to 17; below 17 LayerNorm is decomposed "
                             "(default: %(default)s)")
    parser.add_argument("--weights-from", metavar="FILE.onnx",
                        help="copy every initializer's data from FILE (same names and "
                             "shapes) instead of writing external references")
    parser.add_argument("--check", action="store_true",
                        help="also run onnx.checker.check_model(full_check=True) on the result "
                             "(external parameters are checked as typed graph inputs, since the "
                             "checker requires their data file to exist)")
    parser.add_argument("-o", "--output", required=True, help="the .onnx file to write")
    args = parser.parse_args(argv)

    cfg = dict(layers=args.layers, d_model=args.d_model, heads=args.heads, vocab=args.vocab,
               seq=args.seq, tied=args.tied)
    write_model(args, cfg, make_model, "gpt_shapes")


def write_model(args, cfg, make, tool):
    """Makes the model of `cfg` with `make` (a make_model), writes it to args.output
    (checked with --check) and prints a summary line; exits with the error on bad sizes."""
    start = time.perf_counter()
    try:
        model, params, external = make(cfg, args.opset, args.output, args.weights_from)
    except (ShapeError, OSError) as e:
        sys.exit(f"{tool}.py: error: {e}")
    if args.check:
        onnx.checker.check_model(checkable_copy(model), full_check=True)
    data = model.SerializeToString()
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "wb") as f:
        f.write(data)
    elapsed = time.perf_counter() - start
    weights = (f"weights copied from {args.weights_from}" if args.weights_from else
               f"external data {human_bytes(external)} (not written)")
    print(f"{tool}: wrote {args.output}: {args.layers} layers, {params:,} parameters, "
          f"{len(model.graph.node)} nodes, {human_bytes(len(data))}, {weights}, {elapsed:.2f} s")

if __name__ == "__main__":
    main()
