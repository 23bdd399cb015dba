#!/usr/bin/python3
"""Dropout partitioned equals dropout on one device: the same masks on every mesh.

An MLP with a training-mode Dropout between its two layers (exported from PyTorch with
TrainingMode.TRAINING, so the ONNX node has training_mode true and its mask output
named) is trained 3 steps with SGD on one device and partitioned:

* dp=2 (the batch split: each rank draws its rows of the global mask),
* tp=2 (Megatron: fc1 column-split, so the dropout's input is split by columns; fc2
  row-split),
* dp=2,tp=2 (both: each rank's block is a quarter of the global tensor),
* and 2 micro-batches of a batch of 16 (gradient accumulation on one device, dp=2, and
  pp=2 pipelined), against the batch-16 model in one step: micro-batch k draws its rows
  of the full batch's mask (the dropout's index_offset),

and every partitioned run must reproduce the single-device loss of every step and every
parameter after the last step within --rtol (normwise per tensor, as
compare_partitioned.py; only reduction order differs). The mask is drawn from the
element's global index, the node's seed and the step, so any other mask on a rank would
change the loss by far more than that.

The test can fail: the same model with the Dropout in inference mode (the identity) must
give a different first loss, and two steps of one run draw different masks (the loss of
the training-mode model differs from the inference-mode one at every step). On
--backend cuda (exit 77 without a GPU) the single-device run and the partitioned runs'
virtual devices share one GPU.
Exit status 0 when every configuration agrees.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "python", "loom"))
from checkpoint import read_checkpoint  # noqa: E402  (numpy alone, loaded by path)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import oracle  # noqa: E402  (test/oracle.py)

BATCH, IN, HIDDEN, OUT = 8, 16, 32, 4

MEGATRON = lambda dp: [
    {"node": "/fc1/Gemm", "op": "matmul", "strategy": [[dp, 1], ["tp", 1]]},
    {"node": "/fc2/Gemm", "op": "matmul", "strategy": [[dp, "tp"], [1, "tp"]]},
]

CONFIGS = [
    ("dp=2", "dp=2", None),
    ("tp=2 megatron", "tp=2", MEGATRON(1)),
    ("dp=2,tp=2 megatron", "dp=2,tp=2", MEGATRON("dp")),
]

# Gradient accumulation: the batch-8 model run as 2 micro-batches of a batch of 16
# (on one device, data parallel, and pipelined) against the batch-16 model in one
# step: micro-batch k draws its rows of the full batch's mask (index_offset).
MICRO_CONFIGS = [
    ("m=2", None),
    ("dp=2 m=2", "dp=2"),
    ("pp=2 m=2", "pp=2"),
]


def export(path, training, batch=BATCH):
    import torch

    class Mlp(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(IN, HIDDEN)
            self.drop = torch.nn.Dropout(0.5)
            self.fc2 = torch.nn.Linear(HIDDEN, OUT)

        def forward(self, x):
            return self.fc2(self.drop(torch.relu(self.fc1(x))))

    torch.manual_seed(0)
    model = Mlp()
    mode = torch.onnx.TrainingMode.TRAINING if training else torch.onnx.TrainingMode.EVAL
    torch.onnx.export(model, (torch.randn(batch, IN),), path, input_names=["x"],
                      output_names=["y"], training=mode, do_constant_folding=False,
                      opset_version=13)
    if not training:
        return
    import onnx
    node = [n for n in onnx.load(path).graph.node if n.op_type == "Dropout"]
    assert len(node) == 1 and len(node[0].input) == 3, "the export has no training Dropout"


def run(cmd):
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    return result.returncode, result.stdout + result.stderr


def train(args, work, model, name, mesh=None, strategy=None, micro=1, batch=BATCH):
    d = os.path.join(work, name.replace(" ", "_").replace(",", "_").replace("=", ""))
    os.makedirs(d, exist_ok=True)
    plan = os.path.join(d, "model.plan")
    cmd = [args.loom, "compile", model, "--batch", str(batch), "--train", "--optimizer",
           "sgd", "--lr", "0.1", "-o", plan]
    if micro > 1:
        cmd += ["--micro-batches", str(micro)]
    if mesh:
        cmd += ["--mesh", mesh]
    if strategy is not None:
        path = os.path.join(d, "strategy.json")
        with open(path, "w") as f:
            json.dump({"strategies": strategy}, f)
        cmd += ["--strategy", path]
    code, output = run(cmd)
    if code != 0:
        raise SystemExit(f"{name}: compile failed:\n{output}")
    suffix = "" if batch == BATCH else str(batch)
    data = ",".join(f"{n}={os.path.join(work, n + suffix + '.npy')}" for n in ("x", "labels"))
    cmd = [args.loom, "run", plan, "--steps", "3", "--data", data, "--metrics",
           os.path.join(d, "metrics.jsonl"), "--save", os.path.join(d, "ckpt")]
    if mesh:
        ranks = 1
        for axis in mesh.split(","):
            ranks *= int(axis.split("=")[1])
        cmd += ["--ranks", str(ranks)]
    if args.backend != "cpu":
        cmd += ["--backend", args.backend]
    code, output = run(cmd)
    if code != 0 and "no CUDA device" in output:
        print("skipped: " + output.strip().splitlines()[-1].replace("loom: error: ", ""))
        raise SystemExit(77)
    if code != 0:
        raise SystemExit(f"{name}: run failed:\n{output}")
    return d


def losses(d):
    return [json.loads(l)["loss"] for l in open(os.path.join(d, "metrics.jsonl"))]


def compare(single, other, rtol):
    """(None or what differs, the worst relative difference): every parameter
    normwise and every loss to rtol (test/oracle.py)."""
    _, expected = read_checkpoint(os.path.join(single, "ckpt"))
    _, got = read_checkpoint(os.path.join(other, "ckpt"))
    worst = oracle.Worst()
    params = 0
    for name, (kind, a) in expected.items():
        if kind != "parameter":
            continue
        params += 1
        if name not in got:
            return f"parameter {name} missing from the checkpoint", worst.error
        result = worst.add(oracle.compare(got[name][1], a, rtol, name=f"parameter {name}"))
        if not result.ok:
            return result.message, worst.error
    if params != 4:
        return f"{params} parameters in the checkpoint, expected 4", worst.error
    la, lb = losses(single), losses(other)
    if len(la) != 3:
        return f"{len(la)} single-device losses, expected 3", worst.error
    result = worst.add(oracle.compare_sequences(lb, la, rtol, name="losses"))
    if not result.ok:
        return result.message, worst.error
    return None, worst.error


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loom", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--rtol", type=float, default=1e-6)
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="loom-dropout-")
    rng = np.random.default_rng(1)
    np.save(os.path.join(work, "x.npy"), rng.standard_normal((BATCH, IN)).astype(np.float32))
    np.save(os.path.join(work, "labels.npy"), rng.integers(0, OUT, BATCH).astype(np.int64))
    np.save(os.path.join(work, "x16.npy"),
            rng.standard_normal((2 * BATCH, IN)).astype(np.float32))
    np.save(os.path.join(work, "labels16.npy"),
            rng.integers(0, OUT, 2 * BATCH).astype(np.int64))
    model = os.path.join(work, "dropout.onnx")
    export(model, training=True)
    identity = os.path.join(work, "identity.onnx")
    export(identity, training=False)
    model16 = os.path.join(work, "dropout16.onnx")
    export(model16, training=True, batch=2 * BATCH)

    single = train(args, work, model, "single")
    reference = train(args, work, identity, "inference-mode")
    failures = 0
    # The test sees the masks: with them the losses differ from the identity's.
    la, lb = losses(single), losses(reference)
    if not all(math.isfinite(x) for x in la + lb) or len(la) != len(lb) or \
            any(oracle.compare(x, y, 1e-4, name="loss") for x, y in zip(la, lb)):
        print(f"FAIL dropout changes nothing (or a loss is not finite): losses {la} and "
              f"without it {lb}")
        failures += 1
    for name, mesh, strategy in CONFIGS:
        d = train(args, work, model, name, mesh, strategy)
        error, worst = compare(single, d, args.rtol)
        if error:
            failures += 1
            print(f"FAIL {name}: {error}")
        else:
            print(f"ok   {name}: losses {losses(d)}, worst relative difference {worst:.2e}")
    single16 = train(args, work, model16, "single batch 16", batch=2 * BATCH)
    for name, mesh in MICRO_CONFIGS:
        d = train(args, work, model, name, mesh, micro=2, batch=2 * BATCH)
        error, worst = compare(single16, d, args.rtol)
        if error:
            failures += 1
            print(f"FAIL {name}: {error}")
        else:
            print(f"ok   {name}: losses {losses(d)}, worst relative difference {worst:.2e}")
    checks = len(CONFIGS) + len(MICRO_CONFIGS) + 1
    print(f"{checks - failures} of {checks} checks passed "
          f"(single device losses {la}, without dropout {lb})")
    if not args.keep:
        subprocess.run(["rm", "-rf", work])
    else:
        print("work directory:", work)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
