"""Exports the small PyTorch models (MLP, GPT decoder, LLaMA-style decoder, ResNet-style CNN,
nn.TransformerEncoder classifier, LSTM, GRU and RNN classifiers, ConvTranspose2d upsampler)
that Loom imports as ONNX.

Run with the system interpreter, which has torch 1.13 and onnx 1.12:

    /usr/bin/python3 models/export.py --all          # regenerate every committed .onnx file
    /usr/bin/python3 models/export.py --model gpt --layers 4 --d-model 128 --heads 8 \\
        --vocab 512 --seq 128 --tied --opset 17 -o /tmp/gpt_big.onnx
    /usr/bin/python3 models/export.py --model llama --layers 4 --d-model 128 --heads 8 \\
        --kv-heads 2 --ffn 352 --vocab 512 --seq 128 -o /tmp/llama_big.onnx

Every export uses a fixed seed, constant folding, TrainingMode.EVAL (see the CNN note below),
a symbolic batch dimension (`batch`) on the input and the output, and parameters stored as
initializers named after the PyTorch parameters (`blocks.0.attn.q.weight`, ...).

Three things torch 1.13 does on its own are undone or avoided so that the parameter names hold:

* A Linear applied to a rank-3 tensor exports as MatMul(x, W^T) + b, and constant folding
  turns W^T into a new initializer called `onnx::MatMul_<n>`. `restore_parameters` replaces
  each such folded transpose by the original parameter plus an explicit Transpose node, so
  the initializer is the PyTorch tensor under its PyTorch name and shape (and a tied LM
  head keeps sharing the token embedding instead of getting a transposed copy).
* With TrainingMode.EVAL torch folds every BatchNorm into the preceding Conv (new
  `onnx::Conv_<n>` weights, no BatchNormalization node). The CNN is therefore exported from
  a model in eval() mode with TrainingMode.PRESERVE, which is the same export minus that
  fusion: BatchNormalization nodes use the running statistics. `--fuse-bn` gives the fused
  form instead.
* Constant folding would also fold the reordering of an LSTM's or GRU's gates (PyTorch's
  [i, f, g, o] and [r, z, n] into ONNX's [i, o, f, c] and [z, r, h]) into new
  `onnx::LSTM_<n>` initializers. The recurrent classifiers are therefore exported without
  constant folding: the initializers are the PyTorch parameters, and Slice, Concat and
  Unsqueeze nodes build the ONNX node's W, R and B from them.

reference.py rebuilds the same models (same classes, seed and construction order) to produce
PyTorch reference outputs.
"""

import argparse
import collections
import functools
import importlib.util
import math
import os
import sys
import warnings

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F

MODELS_DIR = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SEED = 0
SIZE_LIMIT = 2 * 1024 * 1024  # committed models stay below 2 MiB

# --------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------


class MLP(nn.Module):
    """Linear(32,64) - ReLU - Linear(64,64) - Tanh - Linear(64,10)."""

    def __init__(self, in_features=32, hidden=64, classes=10):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.act1 = nn.ReLU()
        self.fc2 = nn.Linear(hidden, hidden)
        self.act2 = nn.Tanh()
        self.fc3 = nn.Linear(hidden, classes)

    def forward(self, x):
        return self.fc3(self.act2(self.fc2(self.act1(self.fc1(x)))))


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention with separate q/k/v projections."""

    def __init__(self, d_model, heads, seq):
        super().__init__()
        if d_model % heads != 0:
            raise ValueError(f"d_model {d_model} is not divisible by heads {heads}")
        self.heads = heads
        self.head_dim = d_model // heads
        self.scale = 1.0 / math.sqrt(self.head_dim)
        self.q = nn.Linear(d_model, d_model)
        self.k = nn.Linear(d_model, d_model)
        self.v = nn.Linear(d_model, d_model)
        self.proj = nn.Linear(d_model, d_model)
        # Lower-triangular [1, 1, S, S] bool mask; a constant, so it is not in the state_dict.
        mask = torch.tril(torch.ones(seq, seq, dtype=torch.bool)).view(1, 1, seq, seq)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        b, t, c = x.size()
        q = self.q(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)  # [B, H, T, hd]
        k = self.k(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        v = self.v(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        att = torch.matmul(q, k.transpose(-2, -1)) * self.scale  # [B, H, T, T]
        # The sequence length is static and equal to the mask size, so the whole mask is used
        # (no Slice) and constant folding turns ~mask into a single constant.
        att = att.masked_fill(~self.mask, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = torch.matmul(att, v)  # [B, H, T, hd]
        y = y.transpose(1, 2).reshape(b, t, c)
        return self.proj(y)


class FeedForward(nn.Module):
    """d -> 4d -> d with exact (erf) GELU."""

    def __init__(self, d_model):
        super().__init__()
        self.fc = nn.Linear(d_model, 4 * d_model)
        self.act = nn.GELU()
        self.proj = nn.Linear(4 * d_model, d_model)

    def forward(self, x):
        return self.proj(self.act(self.fc(x)))


class Block(nn.Module):
    """Pre-LayerNorm transformer block."""

    def __init__(self, d_model, heads, seq):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, heads, seq)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = FeedForward(d_model)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        return x


class GPT(nn.Module):
    """GPT-style decoder: token + learned position embedding, pre-LN blocks, LM head."""

    def __init__(self, layers=2, d_model=64, heads=4, vocab=256, seq=64, tied=False):
        super().__init__()
        self.seq = seq
        self.tok_emb = nn.Embedding(vocab, d_model)
        self.pos_emb = nn.Embedding(seq, d_model)
        self.blocks = nn.ModuleList([Block(d_model, heads, seq) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab, bias=False)
        if tied:
            self.lm_head.weight = self.tok_emb.weight
        # LayerNorm affine parameters start at (1, 0); perturb them so that a wrong or
        # missing affine step shows up when comparing Loom against PyTorch.
        for module in self.modules():
            if isinstance(module, nn.LayerNorm):
                with torch.no_grad():
                    module.weight.add_(0.1 * torch.randn_like(module.weight))
                    module.bias.normal_(0.0, 0.1)

    def forward(self, input_ids):
        # The sequence length is static: inputs are [batch, seq]. The position table is added
        # whole rather than gathered with arange indices, which constant folding would turn
        # into an anonymous constant instead of the `pos_emb.weight` parameter.
        if not torch.jit.is_tracing() and input_ids.size(1) != self.seq:
            raise ValueError(f"expected sequence length {self.seq}, got {input_ids.size(1)}")
        x = self.tok_emb(input_ids) + self.pos_emb.weight
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight over the last axis (no mean subtraction, no bias)."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotary_tables(seq, head_dim, base=10000.0):
    """cos and sin of the rotary angles, float32 [1, 1, seq, head_dim].

    Position p, frequency i < head_dim / 2: angle p * base^(-2i / head_dim), the frequencies
    repeated for the two halves (the rotate-half form). Computed in float64 with numpy and
    rounded once, so that models/llama_shapes.py (the same function) writes the same bits.
    """
    inv_freq = 1.0 / base ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    angles = np.outer(np.arange(seq, dtype=np.float64), inv_freq)  # [seq, head_dim / 2]
    angles = np.concatenate([angles, angles], axis=-1).reshape(1, 1, seq, head_dim)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def rotate_half(x):
    """[x1, x2] -> [-x2, x1] over the last axis (the rotate-half form of rotary embeddings)."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class GQAttention(nn.Module):
    """Causal grouped-query attention with rotary position embeddings and no biases.

    `heads` query heads share `kv_heads` key/value heads (heads % kv_heads == 0); each KV
    head is broadcast to its heads // kv_heads query heads (unsqueeze, expand, reshape, as
    LLaMA's repeat_kv does).
    """

    def __init__(self, d_model, heads, kv_heads, seq, rope_base=10000.0):
        super().__init__()
        if d_model % heads != 0:
            raise ValueError(f"d_model {d_model} is not divisible by heads {heads}")
        if heads % kv_heads != 0:
            raise ValueError(f"heads {heads} is not divisible by kv_heads {kv_heads}")
        self.heads = heads
        self.kv_heads = kv_heads
        self.head_dim = d_model // heads
        if self.head_dim % 2 != 0:
            raise ValueError(f"head_dim {self.head_dim} must be even for rotary embeddings")
        self.scale = 1.0 / math.sqrt(self.head_dim)
        self.q = nn.Linear(d_model, heads * self.head_dim, bias=False)
        self.k = nn.Linear(d_model, kv_heads * self.head_dim, bias=False)
        self.v = nn.Linear(d_model, kv_heads * self.head_dim, bias=False)
        self.o = nn.Linear(heads * self.head_dim, d_model, bias=False)
        # Rotary tables [1, 1, S, hd]; constants, not in the state_dict.
        cos, sin = rotary_tables(seq, self.head_dim, rope_base)
        self.register_buffer("cos", torch.from_numpy(cos), persistent=False)
        self.register_buffer("sin", torch.from_numpy(sin), persistent=False)
        mask = torch.tril(torch.ones(seq, seq, dtype=torch.bool)).view(1, 1, seq, seq)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        b, t, _ = x.size()
        q = self.q(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)  # [B, H, T, hd]
        k = self.k(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)  # [B, KV, T, hd]
        v = self.v(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q = q * self.cos + rotate_half(q) * self.sin
        k = k * self.cos + rotate_half(k) * self.sin
        rep = self.heads // self.kv_heads
        if rep > 1:
            k = k[:, :, None].expand(b, self.kv_heads, rep, t, self.head_dim).reshape(
                b, self.heads, t, self.head_dim)
            v = v[:, :, None].expand(b, self.kv_heads, rep, t, self.head_dim).reshape(
                b, self.heads, t, self.head_dim)
        att = torch.matmul(q, k.transpose(-2, -1)) * self.scale  # [B, H, T, T]
        att = att.masked_fill(~self.mask, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = torch.matmul(att, v)  # [B, H, T, hd]
        y = y.transpose(1, 2).reshape(b, t, self.heads * self.head_dim)
        return self.o(y)


class SwiGLU(nn.Module):
    """down(silu(gate(x)) * up(x)), no biases."""

    def __init__(self, d_model, ffn):
        super().__init__()
        self.gate = nn.Linear(d_model, ffn, bias=False)
        self.up = nn.Linear(d_model, ffn, bias=False)
        self.down = nn.Linear(ffn, d_model, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class LLaMABlock(nn.Module):
    """Pre-RMSNorm block: x + attn(attn_norm(x)), then x + mlp(mlp_norm(x))."""

    def __init__(self, d_model, heads, kv_heads, ffn, seq):
        super().__init__()
        self.attn_norm = RMSNorm(d_model)
        self.attn = GQAttention(d_model, heads, kv_heads, seq)
        self.mlp_norm = RMSNorm(d_model)
        self.mlp = SwiGLU(d_model, ffn)

    def forward(self, x):
        x = x + self.attn(self.attn_norm(x))
        x = x + self.mlp(self.mlp_norm(x))
        return x


class LLaMA(nn.Module):
    """LLaMA-style decoder: token embedding, RMSNorm/GQA+RoPE/SwiGLU blocks, untied head."""

    def __init__(self, layers=2, d_model=64, heads=4, kv_heads=2, ffn=None, vocab=256, seq=64):
        super().__init__()
        ffn = ffn or 4 * d_model
        self.seq = seq
        self.tok_emb = nn.Embedding(vocab, d_model)
        self.blocks = nn.ModuleList(
            [LLaMABlock(d_model, heads, kv_heads, ffn, seq) for _ in range(layers)])
        self.norm = RMSNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab, bias=False)
        # RMSNorm weights start at 1; perturb them so that a wrong or missing scale shows.
        for module in self.modules():
            if isinstance(module, RMSNorm):
                with torch.no_grad():
                    module.weight.add_(0.1 * torch.randn_like(module.weight))

    def forward(self, input_ids):
        if not torch.jit.is_tracing() and input_ids.size(1) != self.seq:
            raise ValueError(f"expected sequence length {self.seq}, got {input_ids.size(1)}")
        x = self.tok_emb(input_ids)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.norm(x))


class BasicBlock(nn.Module):
    """conv3x3-bn-relu-conv3x3-bn plus skip (1x1 conv + bn projection when the shape changes), relu."""

    def __init__(self, in_ch, out_ch, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_ch)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_ch)
        self.relu2 = nn.ReLU()
        self.has_proj = stride != 1 or in_ch != out_ch
        if self.has_proj:
            self.proj_conv = nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False)
            self.proj_bn = nn.BatchNorm2d(out_ch)

    def forward(self, x):
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        skip = self.proj_bn(self.proj_conv(x)) if self.has_proj else x
        return self.relu2(out + skip)


class CNN(nn.Module):
    """Small ResNet: stem conv-bn-relu, maxpool, two basic blocks (second strided), GAP, FC."""

    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(3, stride=2, padding=1)  # 32x32 -> 16x16
        self.layer1 = BasicBlock(16, 16, stride=1)  # 16x16
        self.layer2 = BasicBlock(16, 32, stride=2)  # 8x8, projected skip
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, classes)
        # Non-trivial BatchNorm state so that the running statistics and affine terms matter.
        for module in self.modules():
            if isinstance(module, nn.BatchNorm2d):
                with torch.no_grad():
                    module.weight.uniform_(0.5, 1.5)
                    module.bias.normal_(0.0, 0.2)
                    module.running_mean.normal_(0.0, 0.5)
                    module.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        x = self.pool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer2(self.layer1(x))
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)


class Upsampler(nn.Module):
    """A strided conv, then transposed convolutions that upsample back (stride 2 with
    output_padding, and grouped), GAP, FC: the decoder side of an autoencoder as a classifier."""

    def __init__(self, classes=10):
        super().__init__()
        self.down = nn.Conv2d(3, 8, 3, stride=2, padding=1)  # 16x16 -> 8x8
        self.up1 = nn.ConvTranspose2d(8, 8, 3, stride=2, padding=1, output_padding=1)  # 16x16
        self.up2 = nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1, groups=2, bias=False)  # 32
        self.fc = nn.Linear(4, classes)

    def forward(self, x):
        x = torch.relu(self.down(x))
        x = torch.tanh(self.up2(torch.tanh(self.up1(x))))
        return self.fc(x.mean((2, 3)))


class RNNClassifier(nn.Module):
    """x [batch, seq, features] -> 2-layer nn.LSTM, nn.GRU or nn.RNN (ReLU; batch_first) ->
    Linear to the classes. A bidirectional network classifies its last layer's final states
    (the forward direction's after the last step, the reverse direction's after the first:
    ONNX's Y_h); a one-directional one its output at the last step (ONNX's Y). The last step
    of the reverse direction's output would leave its recurrent weight without a gradient:
    that step starts from the zero state."""

    def __init__(self, cell, bidirectional, features=8, hidden=16, classes=5, seq=6):
        super().__init__()
        self.seq, self.features = seq, features
        recurrent = {"lstm": nn.LSTM, "gru": nn.GRU,
                     "rnn": functools.partial(nn.RNN, nonlinearity="relu")}[cell]
        self.rnn = recurrent(features, hidden, num_layers=2, batch_first=True,
                             bidirectional=bidirectional)
        self.head = nn.Linear(hidden * (2 if bidirectional else 1), classes)

    def forward(self, x):
        y, state = self.rnn(x)
        if not self.rnn.bidirectional:
            return self.head(y[:, -1])
        h = state[0] if isinstance(self.rnn, nn.LSTM) else state
        return self.head(torch.cat([h[-2], h[-1]], dim=1))


# --------------------------------------------------------------------------------------------
# Construction shared with reference.py
# --------------------------------------------------------------------------------------------

class EncoderClassifier(nn.Module):
    """nn.TransformerEncoder sequence classifier with a boolean padding mask.

    Token embedding plus a learned position table, post-norm encoder layers (ReLU FFN, no
    dropout) that ignore the padded keys (`src_key_padding_mask`), the mean of the unpadded
    positions, and a linear head. The mask is an input: True where a position is padding.
    """

    def __init__(self, layers=2, d_model=32, heads=4, ffn=64, vocab=128, seq=16, classes=5):
        super().__init__()
        self.seq = seq
        self.tok_emb = nn.Embedding(vocab, d_model)
        self.pos_emb = nn.Parameter(0.1 * torch.randn(seq, d_model))
        layer = nn.TransformerEncoderLayer(d_model, heads, ffn, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, classes)
        # The encoder's layers are copies of one layer: draw each anew (also the biases,
        # which start at 0, and the LayerNorms, which start at 1/0, so a wrong one shows).
        with torch.no_grad():
            for name, p in self.encoder.named_parameters():
                if p.dim() > 1:
                    nn.init.xavier_uniform_(p)
                elif "norm" in name and name.endswith("weight"):
                    p.copy_(1.0 + 0.1 * torch.randn_like(p))
                else:
                    p.copy_(0.1 * torch.randn_like(p))

    def forward(self, input_ids, padding_mask):
        x = self.tok_emb(input_ids) + self.pos_emb
        x = self.encoder(x, src_key_padding_mask=padding_mask)
        keep = (~padding_mask).unsqueeze(-1).to(x.dtype)
        return self.head((x * keep).sum(1) / keep.sum(1))


GPT_DEFAULTS = dict(layers=2, d_model=64, heads=4, vocab=256, seq=64, tied=False)
# ffn 176: LLaMA's 8/3 * d_model rounded up to a multiple of 16.
LLAMA_DEFAULTS = dict(layers=2, d_model=64, heads=4, kv_heads=2, ffn=176, vocab=256, seq=64)
DEFAULT_OPSET = {"mlp": 13, "gpt": 17, "llama": 17, "cnn": 13, "encoder": 17, "lstm": 14,
                 "gru": 14, "rnn": 14, "upsampler": 17}
# The recurrent classifiers: the LSTM and the ReLU RNN bidirectional, the GRU one-directional.
RNN_MODELS = {"lstm": True, "gru": False, "rnn": True}


def add_model_args(parser):
    """Adds the model-selection and size options shared by export.py and reference.py."""
    parser.add_argument("--model",
                        choices=["mlp", "gpt", "llama", "cnn", "encoder", "lstm", "gru", "rnn",
                                 "upsampler"],
                        help="which model to build")
    gpt = parser.add_argument_group("GPT and LLaMA size (ignored for the other models)")
    gpt.add_argument("--layers", type=int, default=GPT_DEFAULTS["layers"],
                     help="number of transformer blocks (default: %(default)s)")
    gpt.add_argument("--d-model", type=int, default=GPT_DEFAULTS["d_model"],
                     help="model width (default: %(default)s)")
    gpt.add_argument("--heads", type=int, default=GPT_DEFAULTS["heads"],
                     help="attention heads; must divide --d-model (default: %(default)s)")
    gpt.add_argument("--vocab", type=int, default=GPT_DEFAULTS["vocab"],
                     help="vocabulary size (default: %(default)s)")
    gpt.add_argument("--seq", type=int, default=GPT_DEFAULTS["seq"],
                     help="sequence length, static in the graph (default: %(default)s)")
    gpt.add_argument("--tied", action="store_true",
                     help="gpt only: tie the LM head to the token embedding (default: untied)")
    gpt.add_argument("--kv-heads", type=int, default=LLAMA_DEFAULTS["kv_heads"],
                     help="llama only: key/value heads of grouped-query attention; must "
                          "divide --heads (default: %(default)s)")
    gpt.add_argument("--ffn", type=int, default=LLAMA_DEFAULTS["ffn"],
                     help="llama only: hidden size of the SwiGLU MLP (default: %(default)s)")


def gpt_config(args):
    return dict(layers=args.layers, d_model=args.d_model, heads=args.heads,
                vocab=args.vocab, seq=args.seq, tied=args.tied)


def llama_config(args):
    return dict(layers=args.layers, d_model=args.d_model, heads=args.heads,
                kv_heads=args.kv_heads, ffn=args.ffn, vocab=args.vocab, seq=args.seq)


def model_config(args):
    """The size keyword arguments of build_model for args.model ({} for mlp, cnn and the
    recurrent classifiers)."""
    if args.model == "gpt":
        return gpt_config(args)
    if args.model == "llama":
        if args.tied:
            raise ValueError("--tied is for gpt; the LLaMA head is untied")
        return llama_config(args)
    return {}


def build_model(name, seed=DEFAULT_SEED, **gpt_kwargs):
    """Builds model `name` in eval() mode with weights fully determined by `seed`."""
    torch.manual_seed(seed)
    if name == "mlp":
        model = MLP()
    elif name == "gpt":
        config = dict(GPT_DEFAULTS)
        config.update(gpt_kwargs)
        model = GPT(**config)
    elif name == "llama":
        config = dict(LLAMA_DEFAULTS)
        config.update(gpt_kwargs)
        model = LLaMA(**config)
    elif name == "cnn":
        model = CNN()
    elif name == "encoder":
        model = EncoderClassifier()
    elif name in RNN_MODELS:
        model = RNNClassifier(name, bidirectional=RNN_MODELS[name])
    elif name == "upsampler":
        model = Upsampler()
    else:
        raise ValueError(f"unknown model {name!r}")
    return model.eval()


def input_spec(name, model):
    """Returns [(input name, shape without batch, dtype)] for model `name`."""
    if name == "mlp":
        return [("x", (32,), torch.float32)]
    if name in ("gpt", "llama"):
        return [("input_ids", (model.seq,), torch.int64)]
    if name == "cnn":
        return [("x", (3, 32, 32), torch.float32)]
    if name == "upsampler":
        return [("x", (3, 16, 16), torch.float32)]
    if name == "encoder":
        return [("input_ids", (model.seq,), torch.int64),
                ("padding_mask", (model.seq,), torch.bool)]
    if name in RNN_MODELS:
        return [("x", (model.seq, model.features), torch.float32)]
    raise ValueError(f"unknown model {name!r}")


def make_inputs(name, model, batch, generator=None):
    """Random inputs for model `name`: normal floats, token ids uniform over the vocabulary,
    padding masks True after a random length of 1 to the sequence length per row."""
    inputs = []
    for _, shape, dtype in input_spec(name, model):
        if dtype == torch.bool:
            lengths = torch.randint(1, shape[-1] + 1, (batch, 1), generator=generator)
            inputs.append(torch.arange(shape[-1]).unsqueeze(0) >= lengths)
        elif dtype == torch.int64:
            vocab = model.tok_emb.num_embeddings
            inputs.append(torch.randint(0, vocab, (batch,) + shape, generator=generator))
        else:
            inputs.append(torch.randn((batch,) + shape, generator=generator, dtype=dtype))
    return inputs


# --------------------------------------------------------------------------------------------
# Export
# --------------------------------------------------------------------------------------------


# The folded-transpose repair is the Python package's (python/loom/onnx_export.py), loaded
# by path so that this script needs neither the built extension nor an installed package.
_spec = importlib.util.spec_from_file_location(
    "loom_onnx_export",
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python",
                 "loom", "onnx_export.py"))
_onnx_export = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_onnx_export)
restore_parameters = _onnx_export.restore_parameters


def export(name, path, opset=None, seed=DEFAULT_SEED, fuse_bn=False, batch=2, **gpt_kwargs):
    """Exports model `name` to `path`, checks it and prints a summary. Returns the ModelProto."""
    opset = opset or DEFAULT_OPSET[name]
    model = build_model(name, seed=seed, **gpt_kwargs)
    spec = input_spec(name, model)
    input_names = [n for n, _, _ in spec]
    dummy = tuple(make_inputs(name, model, batch, torch.Generator().manual_seed(seed)))
    dynamic_axes = {n: {0: "batch"} for n in input_names}
    dynamic_axes["logits"] = {0: "batch"}
    # See the module docstring: EVAL everywhere except the CNN, whose BatchNorms EVAL would fuse.
    training = torch.onnx.TrainingMode.EVAL
    if name == "cnn" and not fuse_bn:
        training = torch.onnx.TrainingMode.PRESERVE  # the model is in eval() mode

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with warnings.catch_warnings():
        # PRESERVE + constant folding warns about models in training mode; ours is in eval().
        warnings.filterwarnings("ignore", message="It is recommended that constant folding")
        # The recurrent classifiers' zero initial states follow the symbolic batch; Loom
        # binds it at compile time (--batch).
        warnings.filterwarnings("ignore", message="Exporting a model to ONNX with a batch_size")
        torch.onnx.export(
            model, dummy, path,
            export_params=True,
            opset_version=opset,
            input_names=input_names,
            output_names=["logits"],
            dynamic_axes=dynamic_axes,
            do_constant_folding=name not in RNN_MODELS,  # see the module docstring
            training=training,
            keep_initializers_as_inputs=False,
        )

    proto = onnx.load(path)
    replaced = restore_parameters(proto, model.state_dict())
    onnx.save(proto, path)
    onnx.checker.check_model(onnx.load(path), full_check=True)

    param_names = set(model.state_dict())
    others = [i.name for i in proto.graph.initializer if i.name not in param_names]
    hist = collections.Counter(n.op_type for n in proto.graph.node)
    size = os.path.getsize(path)
    print(f"== {path}")
    print(f"   model={name} opset={opset} size={size} bytes ({size / 1024:.1f} KiB)"
          + (f" config={dict(GPT_DEFAULTS, **gpt_kwargs)}" if name == "gpt" else "")
          + (f" config={dict(LLAMA_DEFAULTS, **gpt_kwargs)}" if name == "llama" else ""))
    print(f"   inputs={[(i.name, _dims(i)) for i in proto.graph.input]}"
          f" outputs={[(o.name, _dims(o)) for o in proto.graph.output]}")
    print(f"   initializers={len(proto.graph.initializer)}"
          f" (restored from folded transposes: {len(replaced)};"
          f" non-parameter constants: {others or 'none'})")
    print(f"   nodes={len(proto.graph.node)} op histogram:")
    for op, count in sorted(hist.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"     {op:22s} {count}")
    return proto


def _dims(value_info):
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Export Loom's test models (mlp, gpt, llama, cnn, encoder, lstm, gru, rnn, "
                    "upsampler) "
                    "from PyTorch to ONNX.")
    parser.add_argument("--all", action="store_true",
                        help="write mlp.onnx, gpt.onnx, gpt_opset14.onnx, llama.onnx, cnn.onnx, "
                             "encoder.onnx, lstm.onnx, gru.onnx, rnn.onnx and upsampler.onnx into "
                             "models/ with the default configurations (the default when "
                             "--model is not given)")
    add_model_args(parser)
    parser.add_argument("--opset", type=int, default=None,
                        help="ONNX opset (default: 13 for mlp and cnn, 17 for gpt and llama, "
                             "14 for lstm, gru and rnn)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED,
                        help="torch.manual_seed used before building the model (default: %(default)s)")
    parser.add_argument("--fuse-bn", action="store_true",
                        help="cnn only: export with TrainingMode.EVAL, which folds each "
                             "BatchNorm into its Conv (default keeps BatchNormalization nodes)")
    parser.add_argument("-o", "--output", default=None,
                        help="output path (default: models/<model>.onnx)")
    args = parser.parse_args(argv)

    if args.all or args.model is None:
        if args.output or args.opset or args.fuse_bn or gpt_config(args) != GPT_DEFAULTS \
                or llama_config(args) != LLAMA_DEFAULTS:
            parser.error("--all writes the committed defaults; -o, --opset, --fuse-bn and "
                         "the GPT size options need --model")
        jobs = [("mlp", "mlp.onnx", None), ("gpt", "gpt.onnx", 17),
                ("gpt", "gpt_opset14.onnx", 14), ("llama", "llama.onnx", 17),
                ("cnn", "cnn.onnx", None), ("encoder", "encoder.onnx", 17),
                ("lstm", "lstm.onnx", None), ("gru", "gru.onnx", None),
                ("rnn", "rnn.onnx", None), ("upsampler", "upsampler.onnx", None)]
        for name, filename, opset in jobs:
            export(name, os.path.join(MODELS_DIR, filename), opset=opset, seed=args.seed)
        too_big = [f for _, f, _ in jobs
                   if os.path.getsize(os.path.join(MODELS_DIR, f)) >= SIZE_LIMIT]
        if too_big:
            sys.exit(f"error: larger than 2 MiB: {too_big}")
        return

    output = args.output or os.path.join(MODELS_DIR, f"{args.model}.onnx")
    kwargs = model_config(args)
    export(args.model, output, opset=args.opset, seed=args.seed, fuse_bn=args.fuse_bn,
           **kwargs)


if __name__ == "__main__":
    main()
