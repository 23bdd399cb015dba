#!/usr/bin/python3
"""Training-mode BatchNormalization equals PyTorch's train(): batch statistics, their
gradient and the running statistics, on one device and data parallel.

A small ResNet (torchvision's BasicBlock, one block per stage, widths 8-16-32-64 instead
of 64-512, 32x32 images, batch 8, BatchNorm2d with non-trivial affine terms and running
statistics) is exported in train() mode (TrainingMode.TRAINING, opset 14, no constant
folding: every BatchNormalization has training_mode 1 and its running-statistics outputs)
and trained 3 steps with SGD, cross-entropy, on one fixed batch:

* one device against PyTorch in train() mode: the loss of every step, every parameter
  and every running_mean / running_var after the last step, from the --save checkpoint
  under PyTorch's names (kind "parameter", and kind "buffer" for the statistics);
* `--mesh dp=2 --sync-batchnorm` (statistics over the global batch) against the same
  PyTorch run, i.e. the single device;
* `--mesh dp=2` without it (each replica normalizes with its own half batch, as DDP)
  against PyTorch emulating DDP in one process: each half batch goes through the model
  separately (its own batch statistics), the loss is the mean over the whole batch, and
  the running statistics kept are the first half's (rank 0's, which DDP broadcasts);
* `--mesh dp=2,tp=2` (--mode data splits the batch over both axes: 4 replicas of two
  images each; with one image each, float32 rounding alone moves PyTorch by 4e-4) against
  DDP emulated on 4 replicas;
* `--mesh dp=2 --sync-batchnorm --recompute layers` (the backward computes the batch
  statistics again) against the same;
* `--micro-batches 2` on one device against PyTorch's gradient accumulation over the two
  halves: each micro-batch normalizes with its own statistics and moves the running
  statistics in turn.

Tolerance: 1e-4 relative, normwise per tensor (max|loom - torch| <= 1e-4 max|torch|), and
per step for the loss. The test can fail: the per-replica reference must differ from the
global-batch one by more than 10x the tolerance in the first loss and in the running
statistics, so a run that takes the wrong statistics is caught, and every parameter and
statistic must move by more than 10x its tolerance over the 3 steps.
Exit status 0 when every configuration agrees.
"""
import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "python", "loom"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checkpoint import read_checkpoint  # noqa: E402  (numpy alone, loaded by path)
from oracle import Worst, beyond, compare, compare_sequences  # noqa: E402

TOLERANCE = 1e-4
BATCH, CLASSES, STEPS, LR = 8, 10, 3, 0.1


def build_model(torch):
    import torch.nn as nn
    from torchvision.models.resnet import BasicBlock

    class SmallResNet(nn.Module):
        """torchvision's ResNet with [1, 1, 1, 1] BasicBlocks, narrow, for 32x32."""

        def __init__(self, widths=(8, 16, 32, 64)):
            super().__init__()
            self.conv1 = nn.Conv2d(3, widths[0], 3, 1, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(widths[0])
            self.relu = nn.ReLU()
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            layers, inplanes = [], widths[0]
            for i, w in enumerate(widths):
                stride = 1 if i == 0 else 2
                down = None
                if stride != 1 or inplanes != w:
                    down = nn.Sequential(nn.Conv2d(inplanes, w, 1, stride, bias=False),
                                         nn.BatchNorm2d(w))
                layers.append(nn.Sequential(BasicBlock(inplanes, w, stride, down)))
                inplanes = w
            self.layer1, self.layer2, self.layer3, self.layer4 = layers
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(widths[-1], CLASSES)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    torch.manual_seed(0)
    model = SmallResNet()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.3, 0.3)
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
    model.train()
    return model


def state(model):
    """{name: array} of parameters and running statistics (PyTorch's names)."""
    out = {n: p.detach().numpy().copy() for n, p in model.named_parameters()}
    for n, b in model.named_buffers():
        if n.endswith("running_mean") or n.endswith("running_var"):
            out[n] = b.detach().numpy().copy()
    return out


def reference(torch, model, x, labels, replicas, accumulate=False):
    """PyTorch's 3 SGD steps in train() mode; with replicas > 1, DDP emulated in one
    process (see the module docstring), or with `accumulate` gradient accumulation over
    that many micro-batches (their forwards in a row, each moving the running
    statistics). Returns (losses, state after)."""
    import torch.nn.functional as F
    model = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        if replicas == 1:
            logits = model(x)
        else:
            # Each replica starts from the same statistics (fresh tensors: the
            # backward keeps the ones a forward used) and rank 0's are kept.
            start = [(m.running_mean.clone(), m.running_var.clone()) for m in bns]
            parts, kept = [], None
            for chunk in torch.chunk(x, replicas):
                if not accumulate:
                    for m, (mean, var) in zip(bns, start):
                        m.running_mean, m.running_var = mean.clone(), var.clone()
                parts.append(model(chunk))
                if kept is None:
                    kept = [(m.running_mean, m.running_var) for m in bns]
            if not accumulate:
                for m, (mean, var) in zip(bns, kept):
                    m.running_mean, m.running_var = mean, var
            logits = torch.cat(parts)
        loss = F.cross_entropy(logits, labels)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return losses, state(model)


def run(cmd):
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    return result.returncode, result.stdout + result.stderr


def train_loom(args, work, onnx_path, name, mesh=None, sync=False, micro=1, extra=()):
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    plan = os.path.join(d, "model.plan")
    cmd = [args.loom, "compile", onnx_path, "--batch", str(BATCH), "--train", "--loss",
           "cross_entropy", "--optimizer", "sgd", "--lr", str(LR), "-o", plan]
    if mesh:
        cmd += ["--mesh", mesh]
    if sync:
        cmd += ["--sync-batchnorm"]
    if micro > 1:
        cmd += ["--micro-batches", str(micro)]
    cmd += list(extra)
    code, output = run(cmd)
    if code != 0:
        raise SystemExit(f"{name}: compile failed:\n{output}")
    data = ",".join(f"{n}={os.path.join(work, n + '.npy')}" for n in ("x", "labels"))
    cmd = [args.loom, "run", plan, "--steps", str(STEPS), "--data", data, "--metrics",
           os.path.join(d, "metrics.jsonl"), "--save", os.path.join(d, "ckpt")]
    if mesh:
        ranks = 1
        for axis in mesh.split(","):
            ranks *= int(axis.split("=")[1])
        cmd += ["--ranks", str(ranks)]
    code, output = run(cmd)
    if code != 0:
        raise SystemExit(f"{name}: run failed:\n{output}")
    with open(os.path.join(d, "metrics.jsonl")) as f:
        losses = [json.loads(line)["loss"] for line in f if line.strip()]
    _, tensors = read_checkpoint(os.path.join(d, "ckpt"))
    return losses, tensors


def relative(a, e):
    """Normwise relative distance of a to e (inf when a is not finite or shapes differ)."""
    return compare(a, e, rtol=float("inf")).error


def compare_state(losses, tensors, ref_losses, ref_state):
    """(list of what differs, worst relative error)."""
    worst = Worst()
    problems = []
    worst.add(compare_sequences(losses, ref_losses, rtol=TOLERANCE, name="losses"))
    for name, expected in ref_state.items():
        kind = "buffer" if name.endswith(("running_mean", "running_var")) else "parameter"
        if name not in tensors:
            problems.append(f"{name} is not in the checkpoint")
            continue
        got_kind, actual = tensors[name]
        if got_kind != kind:
            problems.append(f"{name}: kind {got_kind!r}, expected {kind!r}")
        worst.add(compare(actual, expected, rtol=TOLERANCE, name=name))
    problems += [r.message for r in worst.failures]
    return problems, worst.error


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loom", required=True)
    parser.add_argument("--source", help="the source tree (unused; for symmetry)")
    parser.add_argument("--work", help="keep the files here")
    args = parser.parse_args()

    import torch
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    work = args.work or tempfile.mkdtemp(prefix="loom-bn-train-")
    os.makedirs(work, exist_ok=True)

    model = build_model(torch)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(BATCH, 3, 32, 32, generator=gen)
    labels = torch.randint(0, CLASSES, (BATCH,), generator=gen)
    np.save(os.path.join(work, "x.npy"), x.numpy())
    np.save(os.path.join(work, "labels.npy"), labels.numpy().astype(np.int64))
    onnx_path = os.path.join(work, "resnet.onnx")
    torch.onnx.export(model, x, onnx_path, input_names=["x"], output_names=["logits"],
                      opset_version=14, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, dynamic_axes={"x": {0: "batch"}})
    # Tracing ran the model once in train() mode, which moved its running statistics:
    # the file holds the moved ones, and the references start from them too.
    import onnx
    from onnx import numpy_helper
    graph = onnx.load(onnx_path).graph
    exported = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    initial = state(model)
    for name, value in initial.items():
        if name not in exported or not np.array_equal(exported[name], value):
            raise SystemExit(f"the exported initializer {name} differs from the model's")
    modes = {a.i for n in graph.node if n.op_type == "BatchNormalization"
             for a in n.attribute if a.name == "training_mode"}
    if modes != {1}:
        raise SystemExit(f"BatchNormalization training_mode {modes}, expected {{1}}")

    global_losses, global_state = reference(torch, model, x, labels, 1)
    replica_losses, replica_state = reference(torch, model, x, labels, 2)
    micro_losses, micro_state = reference(torch, model, x, labels, 2, accumulate=True)
    four_losses, four_state = reference(torch, model, x, labels, 4)

    failed = False
    # The test can fail: the references differ, and the training moves everything.
    gap_loss = abs(global_losses[0] - replica_losses[0]) / abs(global_losses[0])
    gap_stats = min(relative(replica_state[n], global_state[n])
                    for n in global_state if n.endswith("running_mean"))
    moved = min((relative(global_state[n], initial[n]), n) for n in global_state)
    print(f"per-replica against global statistics: first loss {gap_loss:.2e}, "
          f"running means >= {gap_stats:.2e}; smallest move {moved[0]:.2e} ({moved[1]})")
    if not (beyond(gap_loss, 10 * TOLERANCE) and beyond(gap_stats, 10 * TOLERANCE)):
        print("FAIL: per-replica and global statistics are too close to tell apart")
        failed = True
    if not beyond(moved[0], 10 * TOLERANCE):
        print(f"FAIL: {moved[1]} moves too little to check its update")
        failed = True

    configs = [
        ("one device", "one", None, False, 1, global_losses, global_state),
        ("dp=2 --sync-batchnorm", "dp2-sync", "dp=2", True, 1, global_losses, global_state),
        ("dp=2 per-replica statistics", "dp2", "dp=2", False, 1, replica_losses,
         replica_state),
        ("dp=2,tp=2 per-replica statistics (4 replicas under --mode data)", "dp2tp2",
         "dp=2,tp=2", False, 1, four_losses, four_state),
        ("2 micro-batches (accumulation)", "m2", None, False, 2, micro_losses, micro_state),
        ("dp=2 --sync-batchnorm --recompute layers", "dp2-sync-recompute", "dp=2", True, 1,
         global_losses, global_state, ["--recompute", "layers"]),
    ]
    for name, slug, mesh, sync, micro, ref_losses, ref_state, *extra in configs:
        losses, tensors = train_loom(args, work, onnx_path, slug, mesh, sync, micro,
                                     extra[0] if extra else ())
        problems, worst = compare_state(losses, tensors, ref_losses, ref_state)
        status = "ok" if not problems else "FAIL"
        print(f"{status}: {name}: worst relative error {worst:.2e} "
              f"(losses {', '.join(f'{l:.6f}' for l in losses)})")
        for p in problems[:10]:
            print("    " + p)
        failed |= bool(problems)

    # `loom export --state-dict` of the one-device run loads into the module with
    # strict=True: parameters and statistics as trained, and each BatchNorm's
    # num_batches_tracked the forwards trained (counted from 0).
    d = os.path.join(work, "one")
    npz = os.path.join(d, "state.npz")
    code, output = run([args.loom, "export", os.path.join(d, "model.plan"), "--checkpoint",
                        os.path.join(d, "ckpt"), "--state-dict", npz])
    if code != 0:
        print(f"FAIL: loom export --state-dict:\n{output}")
        return 1
    with np.load(npz) as archive:
        loaded = {k: torch.from_numpy(archive[k]) for k in archive.files}
    fresh = copy.deepcopy(model)
    try:
        fresh.load_state_dict(loaded, strict=True)
    except RuntimeError as e:
        print(f"FAIL: the exported state dict does not load: {e}")
        return 1
    worst = Worst()
    for key, value in fresh.state_dict().items():
        if key.endswith("num_batches_tracked"):
            worst.add(compare(value.numpy(), STEPS, rtol=0.0, name=key))
        else:
            worst.add(compare(value.numpy(), global_state.get(key),
                              rtol=TOLERANCE, name=key))
    print(f"{'ok' if worst.ok else 'FAIL'}: --state-dict loads with strict=True: "
          f"{worst.report()}")
    failed |= not worst.ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
