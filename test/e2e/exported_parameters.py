#!/usr/bin/python3
"""Parameters the exporter shared or folded are trained as PyTorch trains them.

torch.onnx.export changes a model's parameters in two ways that training must undo
(compiler/onnx/ExportedParameters.h):

* In eval mode it stores initializers of equal value once and makes the others Identity
  nodes named after their parameters: a fresh transformer's five LayerNorm weights (all
  ones) and biases (all zeros) arrive as one tensor each. Trained as one, they would get
  the sum of five gradients. Case "layernorms": 10 SGD steps through the CLI equal
  PyTorch's, every parameter and loss.
* With constant folding, a GPT-2-style head that reuses the embedding
  (`h @ wte.weight.t()`) arrives with the transposed copy as an initializer of its own
  (`onnx::MatMul_N`). Trained as a separate tensor, the embedding would get only its
  lookup's gradient. Cases "tied-sgd" and "tied-adamw": 3 steps equal PyTorch's, the
  embedding to 1e-5.

Each case first checks that the export has the hazard (so the test cannot pass by the
exporter changing its habits), and that every parameter moves by more than 10x the
tolerance (so an untrained parameter cannot pass). Reference: PyTorch float32, same
initial weights and batch. Exit status 0 when every case agrees.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python", "loom"))
from checkpoint import read_checkpoint  # noqa: E402  (numpy alone, loaded by path)
from oracle import Worst, compare, compare_sequences  # noqa: E402

BATCH, SEQ, VOCAB, CLASSES, WIDTH = 4, 8, 32, 5, 16


def layernorm_model(torch):
    """A fresh two-block transformer classifier with five LayerNorms."""
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self, d, heads=2):
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc1, self.fc2 = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
            q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
                       for z in (q, k, v))
            att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // self.heads), -1)
            x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
            return x + self.fc2(torch.relu(self.fc1(self.ln2(x))))

    class Classifier(nn.Module):
        def __init__(self, d=WIDTH):
            super().__init__()
            self.emb = nn.Embedding(VOCAB, d)
            self.blocks = nn.Sequential(Block(d), Block(d))
            self.ln_f = nn.LayerNorm(d)
            self.head = nn.Linear(d, CLASSES)

        def forward(self, ids):
            return self.head(self.ln_f(self.blocks(self.emb(ids))).mean(1))

    return Classifier()


def tied_gpt(torch):
    """A GPT-2-style decoder whose head is the embedding's transpose."""
    import torch.nn as nn

    class TiedGPT(nn.Module):
        def __init__(self, d=WIDTH):
            super().__init__()
            self.wte = nn.Embedding(VOCAB, d)
            self.pos = nn.Parameter(torch.randn(SEQ, d) * 0.1)
            self.ln = nn.LayerNorm(d)
            self.fc = nn.Linear(d, d)
            with torch.no_grad():
                self.ln.weight.uniform_(0.5, 1.5)

        def forward(self, ids):
            h = self.wte(ids) + self.pos
            h = h + torch.tanh(self.fc(self.ln(h)))
            return h @ self.wte.weight.t()

    return TiedGPT()


def export(torch, model, ids, path, folding):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (ids,), path, input_names=["ids"], output_names=["logits"],
                          opset_version=17, do_constant_folding=folding)
    import onnx
    return onnx.load(path).graph


def folded_weights(graph, model):
    """{initializer: parameter} for the weights the export folded whole into their
    transposes (a Linear's W^T as `onnx::MatMul_N`, with no initializer named W left): Loom
    trains those as tensors of their own, which is the same training under another name."""
    from onnx import numpy_helper
    named = {t.name for t in graph.initializer}
    params = {n: p.detach().numpy() for n, p in model.named_parameters() if n not in named}
    out = {}
    for t in graph.initializer:
        value = numpy_helper.to_array(t)
        for n, p in params.items():
            if p.ndim == 2 and value.shape == p.T.shape and np.array_equal(value, p.T):
                out[t.name] = n
    return out


def reference(torch, model, ids, labels, optimizer, lr, steps):
    """PyTorch's losses and parameters after `steps` steps on one batch."""
    import copy
    import torch.nn.functional as F
    model = copy.deepcopy(model)
    opt = (torch.optim.SGD(model.parameters(), lr=lr) if optimizer == "sgd"
           else torch.optim.AdamW(model.parameters(), lr=lr))
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        logits = model(ids)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return losses, model


def run(cmd):
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise SystemExit(f"FAILED: {' '.join(cmd)}\n{result.stdout}{result.stderr}")
    return result.stdout + result.stderr


def train_loom(loom, work, onnx_path, ids, labels, optimizer, lr, steps, folded):
    """The CLI's losses, parameters after `steps` steps (under PyTorch's names: `folded`
    maps the export's folded transposes to theirs), and compile log."""
    np.save(os.path.join(work, "ids.npy"), ids.numpy().astype(np.int64))
    np.save(os.path.join(work, "labels.npy"), labels.numpy().astype(np.int64))
    plan = os.path.join(work, "model.plan")
    # PyTorch's AdamW decays by 0.01 unless told otherwise; Loom's flag defaults to 0.
    decay = ["--weight-decay", "0.01"] if optimizer == "adamw" else []
    log = run([loom, "compile", onnx_path, "--train", "--loss", "cross_entropy",
               "--optimizer", optimizer, "--lr", str(lr), "-o", plan] + decay)
    metrics = os.path.join(work, "metrics.jsonl")
    data = f"ids={os.path.join(work, 'ids.npy')},labels={os.path.join(work, 'labels.npy')}"
    run([loom, "run", plan, "--steps", str(steps), "--data", data, "--metrics", metrics,
         "--save", os.path.join(work, "ckpt")])
    with open(metrics) as f:
        losses = [json.loads(line)["loss"] for line in f if line.strip()]
    _, tensors = read_checkpoint(os.path.join(work, "ckpt"))
    params = {}
    for name, (kind, array) in tensors.items():
        if kind == "parameter":
            params[folded.get(name, name)] = array.T if name in folded else array
    # `loom export` writes the trained values into the model under the same names, the
    # restored parameters included (their Identity or folded copy replaced as on import).
    trained = os.path.join(work, "trained.onnx")
    run([loom, "export", plan, "--checkpoint", os.path.join(work, "ckpt"), "-o", trained])
    import onnx
    from onnx import numpy_helper
    written = {}
    for t in onnx.load(trained).graph.initializer:
        if t.name in folded:
            written[folded[t.name]] = numpy_helper.to_array(t).T
        elif t.name in params:
            written[t.name] = numpy_helper.to_array(t)
    for name, array in params.items():
        result = compare(written.get(name), array, rtol=0.0, name=f"exported {name}")
        if not result.ok:
            raise SystemExit(f"FAILED: loom export: {result.message}")
    # --state-dict: the same values under PyTorch's names and layouts.
    state = os.path.join(work, "state.npz")
    run([loom, "export", plan, "--checkpoint", os.path.join(work, "ckpt"), "--state-dict",
         state])
    with np.load(state) as archive:
        state_dict = {k: archive[k] for k in archive.files}
    return losses, params, log, state_dict


def check_state_dict(torch, name, model, trained, state_dict, ids):
    """`loom export --state-dict` loads into the source module with strict=True and
    reproduces the trained module's outputs."""
    import copy
    fresh = copy.deepcopy(model)
    try:
        fresh.load_state_dict({k: torch.from_numpy(v) for k, v in state_dict.items()},
                              strict=True)
    except RuntimeError as e:
        print(f"FAIL: {name}: the state dict does not load: {e}")
        return False
    with torch.no_grad():
        result = compare(fresh(ids).numpy(), trained(ids).numpy(), rtol=1e-4,
                         name="outputs with the exported state dict")
    print(f"{'ok' if result.ok else 'FAIL'}: {name}: {result.message}")
    return result.ok


def check_case(name, losses, params, ref_losses, ref_params, initial, rtol, strict=()):
    """Prints the case's verdict; True when it agrees. `strict` names tensors held to 1e-5."""
    worst = Worst()
    worst.add(compare_sequences(losses, ref_losses, rtol=rtol, name="losses"))
    for key, expected in ref_params.items():
        tol = 1e-5 if key in strict else rtol
        worst.add(compare(params.get(key), expected, rtol=tol, name=key))
        # The parameter must move, or an untrained copy would pass.
        moved = compare(expected, initial[key], rtol=10 * tol, name=key)
        if moved.ok:
            worst.failures.append(moved)
            print(f"    {key} moves only {moved.error:.1e}, under 10x its tolerance")
    missing = sorted(set(params) - set(ref_params))
    if missing:
        print(f"    the plan trains tensors PyTorch does not have: {', '.join(missing)}")
    ok = worst.ok and not missing
    print(f"{'ok' if ok else 'FAIL'}: {name}: {worst.report()}")
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loom", required=True)
    parser.add_argument("--work", help="keep the files here")
    args = parser.parse_args()

    import torch
    torch.manual_seed(0)
    torch.set_num_threads(1)
    work = args.work or tempfile.mkdtemp(prefix="loom-exported-params-")
    os.makedirs(work, exist_ok=True)
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen)
    failed = False

    # Five LayerNorms, exported in eval mode: equal values stored once.
    model = layernorm_model(torch).eval()
    labels = torch.randint(0, CLASSES, (BATCH,), generator=gen)
    path = os.path.join(work, "layernorms.onnx")
    graph = export(torch, model, ids, path, folding=True)
    inits = {t.name for t in graph.initializer}
    shared = [n.output[0] for n in graph.node
              if n.op_type == "Identity" and n.input[0] in inits]
    if sum(k.endswith("weight") and "ln" in k for k in shared) < 4:
        print(f"FAIL: layernorms: the export no longer shares the LayerNorm weights "
              f"(Identity outputs: {shared}); this case proves nothing")
        failed = True
    initial = {n: p.detach().numpy().copy() for n, p in model.named_parameters()}
    ref_losses, trained = reference(torch, model, ids, labels, "sgd", 0.2, 10)
    ref_params = {n: p.detach().numpy().copy() for n, p in trained.named_parameters()}
    case = os.path.join(work, "layernorms")
    os.makedirs(case, exist_ok=True)
    losses, params, log, state_dict = train_loom(args.loom, case, path, ids, labels,
                                                 "sgd", 0.2, 10,
                                                 folded_weights(graph, model))
    notes = log.count("loom: import: ")
    print(f"layernorms: the import restored {notes} shared parameters "
          f"({len(shared)} Identity nodes)")
    if notes != len(shared):
        print("FAIL: layernorms: the import's notes do not list every shared parameter")
        failed = True
    failed |= not check_case("layernorms, 10 SGD steps", losses, params, ref_losses,
                             ref_params, initial, 1e-4)
    failed |= not check_state_dict(torch, "layernorms, --state-dict", model, trained,
                                   state_dict, ids)

    # A tied head, exported with constant folding: the embedding's transpose folded.
    labels = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen)
    model = tied_gpt(torch).eval()
    path = os.path.join(work, "tied.onnx")
    graph = export(torch, model, ids, path, folding=True)
    folded = [t.name for t in graph.initializer if t.name.startswith("onnx::")]
    if not folded or "wte.weight" not in {t.name for t in graph.initializer}:
        print(f"FAIL: tied: the export no longer folds the head's transpose "
              f"(initializers: {[t.name for t in graph.initializer]}); this case proves "
              "nothing")
        failed = True
    initial = {n: p.detach().numpy().copy() for n, p in model.named_parameters()}
    for optimizer, lr in (("sgd", 0.5), ("adamw", 0.01)):
        ref_losses, trained = reference(torch, model, ids, labels, optimizer, lr, 3)
        ref_params = {n: p.detach().numpy().copy() for n, p in trained.named_parameters()}
        case = os.path.join(work, "tied-" + optimizer)
        os.makedirs(case, exist_ok=True)
        losses, params, log, state_dict = train_loom(args.loom, case, path, ids, labels,
                                                     optimizer, lr, 3,
                                                     folded_weights(graph, model))
        if "transpose" not in log:
            print(f"FAIL: tied-{optimizer}: the import does not report the folded "
                  f"transpose:\n{log}")
            failed = True
        failed |= not check_case(f"tied head, 3 {optimizer} steps", losses, params,
                                 ref_losses, ref_params, initial, 1e-4,
                                 strict=("wte.weight",))
        failed |= not check_state_dict(torch, f"tied head, {optimizer}, --state-dict", model,
                                       trained, state_dict, ids)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
