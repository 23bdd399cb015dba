"""Writes shape-only LLaMA-style models as ONNX files, for planning models too big to hold weights for.

Run with the system interpreter, which has onnx 1.12:

    /usr/bin/python3 models/llama_shapes.py --layers 32 --d-model 4096 --heads 32 \\
        --kv-heads 8 --ffn 11008 --vocab 32000 --seq 2048 -o /tmp/llama7b.onnx

The graph is built node by node with `onnx.helper` and has the structure of the `LLaMA`
class that export.py exports (see models/README.md): token embedding Gather, pre-RMSNorm
blocks with grouped-query attention (q, k, v and o linears, rotary embeddings in the
rotate-half form, the KV heads broadcast to the query heads) and a SwiGLU MLP (gate, up,
down), a final RMSNorm and the untied LM head; no biases. It keeps the conventions of
export.py and models/gpt_shapes.py, whose helpers it uses:

* each linear is `Transpose(W) -> MatMul`, the parameter `W` stored as [out, in] under its
  PyTorch state_dict name (`blocks.0.attn.q.weight`);
* initializers in state_dict order; torch's node names (`/blocks.0/attn/q/MatMul`); the final
  MatMul writes `logits`;
* RMSNorm is torch's `x * rsqrt(mean(x^2) + eps) * w`: `Pow, ReduceMean, Add, Sqrt, Div(1, .),
  Mul, Mul`; SiLU is `Sigmoid, Mul`;
* the rotary tables are two [1, 1, seq, head_dim] float Constants, the same values as
  export.py's (its `rotary_tables`, repeated here so that this script needs no torch);
* the reshapes have constant targets with a 0 batch entry and the causal mask is computed in
  the graph, as in gpt_shapes.py; repeat_kv is `Unsqueeze, Expand([1, 1, rep, 1, 1]),
  Reshape`, where torch computes the Expand shape from the symbolic batch.

Parameters are ONNX external data (`<OUT stem>.weights`) that is never written, or with
`--weights-from FILE.onnx` copied from FILE. The output is deterministic.
"""

import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_shapes import (FIRST_OPSET, LAST_OPSET, GraphBuilder, ShapeError,  # noqa: E402
                        assemble_model, causal_mask, reshape, write_model)

RMS_NORM_EPS = 1e-5
ROPE_BASE = 10000.0


def rotary_tables(seq, head_dim, base=ROPE_BASE):
    """export.py's rotary_tables: cos and sin, float32 [1, 1, seq, head_dim]."""
    inv_freq = 1.0 / base ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    angles = np.outer(np.arange(seq, dtype=np.float64), inv_freq)
    angles = np.concatenate([angles, angles], axis=-1).reshape(1, 1, seq, head_dim)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def linear(g, scope, x, prefix):
    """`Transpose(W) -> MatMul`: W is the [out, in] parameter `<prefix>.weight`."""
    wt = g.node(scope, "Transpose", [f"{prefix}.weight"], perm=[1, 0])
    return g.node(scope, "MatMul", [x, wt])


def rms_norm(g, scope, x, prefix):
    squared = g.node(scope, "Pow", [x, g.constant(scope, np.float32(2.0))])
    mean = g.node(scope, "ReduceMean", [squared], axes=[-1], keepdims=1)
    shifted = g.node(scope, "Add", [mean, g.constant(scope, np.float32(RMS_NORM_EPS))])
    root = g.node(scope, "Sqrt", [shifted])
    inverse = g.node(scope, "Div", [g.constant(scope, np.float32(1.0)), root])
    normed = g.node(scope, "Mul", [x, inverse])
    return g.node(scope, "Mul", [normed, f"{prefix}.weight"])


def rotary(g, scope, x, cos, sin, head_dim):
    """x * cos + rotate_half(x) * sin, rotate_half(x) = [-x2, x1]."""
    half = head_dim // 2

    def slice_(start, end):
        ints = lambda v: g.constant(scope, np.array([v], dtype=np.int64))
        return g.node(scope, "Slice", [x, ints(start), ints(end), ints(-1), ints(1)])

    scaled = g.node(scope, "Mul", [x, cos])
    upper = g.node(scope, "Neg", [slice_(half, head_dim)])
    rotated = g.node(scope, "Concat", [upper, slice_(0, half)], axis=-1)
    return g.node(scope, "Add", [scaled, g.node(scope, "Mul", [rotated, sin])])


def repeat_kv(g, scope, x, cfg):
    """[B, KV, S, hd] -> [B, H, S, hd]: each KV head broadcast to heads / kv_heads heads."""
    rep = cfg["heads"] // cfg["kv_heads"]
    head_dim = cfg["d_model"] // cfg["heads"]
    x = g.node(scope, "Unsqueeze", [x, g.constant(scope, np.array([2], dtype=np.int64))])
    x = g.node(scope, "Expand", [x, g.constant(scope, np.array([1, 1, rep, 1, 1],
                                                               dtype=np.int64))])
    return reshape(g, scope, x, [0, cfg["heads"], cfg["seq"], head_dim])


def attention(g, scope, x, prefix, cfg, mask, cos, sin):
    seq, heads, kv_heads, d_model = cfg["seq"], cfg["heads"], cfg["kv_heads"], cfg["d_model"]
    head_dim = d_model // heads

    def split(y, n):
        y = reshape(g, scope, y, [0, seq, n, head_dim])
        return g.node(scope, "Transpose", [y], perm=[0, 2, 1, 3])

    q = split(linear(g, f"{scope}/q", x, f"{prefix}.q"), heads)
    k = split(linear(g, f"{scope}/k", x, f"{prefix}.k"), kv_heads)
    v = split(linear(g, f"{scope}/v", x, f"{prefix}.v"), kv_heads)
    q = rotary(g, scope, q, cos, sin, head_dim)
    k = rotary(g, scope, k, cos, sin, head_dim)
    if heads != kv_heads:
        k = repeat_kv(g, scope, k, cfg)
        v = repeat_kv(g, scope, v, cfg)
    kt = g.node(scope, "Transpose", [k], perm=[0, 1, 3, 2])
    scores = g.node(scope, "MatMul", [q, kt])
    scores = g.node(scope, "Mul", [scores, g.constant(scope, np.float32(1.0 / math.sqrt(head_dim)))])
    scores = g.node(scope, "Where", [mask, g.constant(scope, np.float32(-np.inf)), scores])
    probs = g.node(scope, "Softmax", [scores], axis=-1)
    y = g.node(scope, "MatMul", [probs, v])
    y = g.node(scope, "Transpose", [y], perm=[0, 2, 1, 3])
    y = reshape(g, scope, y, [0, seq, heads * head_dim])
    return linear(g, f"{scope}/o", y, f"{prefix}.o")


def swiglu(g, scope, x, prefix):
    gate = linear(g, f"{scope}/gate", x, f"{prefix}.gate")
    silu = g.node(scope, "Mul", [gate, g.node(scope, "Sigmoid", [gate])])
    up = linear(g, f"{scope}/up", x, f"{prefix}.up")
    return linear(g, f"{scope}/down", g.node(scope, "Mul", [silu, up]), f"{prefix}.down")


def declare_params(g, cfg):
    d, v, f = cfg["d_model"], cfg["vocab"], cfg["ffn"]
    hd = d // cfg["heads"]
    g.param("tok_emb.weight", [v, d])
    for i in range(cfg["layers"]):
        for name, shape in [("attn_norm.weight", [d]),
                            ("attn.q.weight", [cfg["heads"] * hd, d]),
                            ("attn.k.weight", [cfg["kv_heads"] * hd, d]),
                            ("attn.v.weight", [cfg["kv_heads"] * hd, d]),
                            ("attn.o.weight", [d, cfg["heads"] * hd]),
                            ("mlp_norm.weight", [d]),
                            ("mlp.gate.weight", [f, d]), ("mlp.up.weight", [f, d]),
                            ("mlp.down.weight", [d, f])]:
            g.param(f"blocks.{i}.{name}", shape)
    g.param("norm.weight", [d])
    g.param("lm_head.weight", [v, d])


def build_graph(cfg, opset):
    g = GraphBuilder(opset)
    declare_params(g, cfg)
    mask = causal_mask(g, cfg["seq"])
    cos, sin = rotary_tables(cfg["seq"], cfg["d_model"] // cfg["heads"])
    cos, sin = g.constant("/rotary", cos), g.constant("/rotary", sin)
    x = g.node("/tok_emb", "Gather", ["tok_emb.weight", "input_ids"])
    for i in range(cfg["layers"]):
        scope, prefix = f"/blocks.{i}", f"blocks.{i}"
        h = rms_norm(g, f"{scope}/attn_norm", x, f"{prefix}.attn_norm")
        x = g.node(scope, "Add", [x, attention(g, f"{scope}/attn", h, f"{prefix}.attn", cfg,
                                               mask, cos, sin)])
        h = rms_norm(g, f"{scope}/mlp_norm", x, f"{prefix}.mlp_norm")
        x = g.node(scope, "Add", [x, swiglu(g, f"{scope}/mlp", h, f"{prefix}.mlp")])
    h = rms_norm(g, "/norm", x, "norm")
    wt = g.node("/lm_head", "Transpose", ["lm_head.weight"], perm=[1, 0])
    g.node("/lm_head", "MatMul", [h, wt], output="logits")
    return g


def check_config(cfg, opset):
    for key in ("layers", "d_model", "heads", "kv_heads", "ffn", "vocab", "seq"):
        if cfg[key] < 1:
            raise ShapeError(f"--{key.replace('_', '-')} must be at least 1, got {cfg[key]}")
    if cfg["d_model"] % cfg["heads"]:
        raise ShapeError(f"--d-model {cfg['d_model']} is not divisible by --heads {cfg['heads']}")
    if cfg["heads"] % cfg["kv_heads"]:
        raise ShapeError(f"--heads {cfg['heads']} is not divisible by --kv-heads {cfg['kv_heads']}")
    if (cfg["d_model"] // cfg["heads"]) % 2:
        raise ShapeError(f"the head size {cfg['d_model'] // cfg['heads']} must be even "
                         "(rotary embeddings rotate pairs)")
    if not FIRST_OPSET <= opset <= LAST_OPSET:
        raise ShapeError(f"--opset must be between {FIRST_OPSET} and {LAST_OPSET}, got {opset}")


def make_model(cfg, opset, output, weights_from=None):
    """Builds the ModelProto. Returns (model, parameter count, external data bytes)."""
    check_config(cfg, opset)
    return assemble_model(build_graph(cfg, opset), cfg, opset, output, weights_from, "llama")


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Write a shape-only LLaMA-style decoder (export.py's LLaMA structure) as "
                    "ONNX, its parameters as external data that is never written.")
    parser.add_argument("--layers", type=int, required=True, help="transformer blocks")
    parser.add_argument("--d-model", type=int, required=True, help="model width")
    parser.add_argument("--heads", type=int, required=True,
                        help="query heads; must divide --d-model")
    parser.add_argument("--kv-heads", type=int, default=None,
                        help="key/value heads; must divide --heads (default: --heads)")
    parser.add_argument("--ffn", type=int, required=True, help="SwiGLU hidden size")
    parser.add_argument("--vocab", type=int, required=True, help="vocabulary size")
    parser.add_argument("--seq", type=int, required=True, help="sequence length (static)")
    parser.add_argument("--opset", type=int, default=LAST_OPSET,
                        help=f"ONNX opset, {FIRST_OPSET} to {LAST_OPSET} (default: %(default)s)")
    parser.add_argument("--weights-from", metavar="FILE.onnx",
                        help="copy every initializer's data from FILE (same names and "
                             "shapes) instead of writing external references")
    parser.add_argument("--check", action="store_true",
                        help="also run onnx.checker.check_model(full_check=True) on the result")
    parser.add_argument("-o", "--output", required=True, help="the .onnx file to write")
    args = parser.parse_args(argv)

    cfg = dict(layers=args.layers, d_model=args.d_model, heads=args.heads,
               kv_heads=args.kv_heads or args.heads, ffn=args.ffn, vocab=args.vocab,
               seq=args.seq)
    write_model(args, cfg, make_model, "llama_shapes")

if __name__ == "__main__":
    main()
