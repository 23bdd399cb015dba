#!/usr/bin/python3
"""torchvision's classifiers train in Loom exactly as in PyTorch: 3 steps of SGD and of AdamW.

For each family of torchvision_families.py that Loom imports (the small variants and
redrawn weights of the forward test) and each optimizer in OPTIMIZERS:

* the model in eval() mode is exported at opset 14 with TrainingMode.PRESERVE and no
  constant folding, so that BatchNorm stays a BatchNormalization node instead of being
  folded into its Conv and every initializer is a PyTorch tensor under its PyTorch name.
  Checked on the file: every parameter is an initializer, every initializer is a parameter
  or a BatchNorm running statistic, and every BatchNorm2d module is one BatchNormalization
  node reading its weight, bias, running mean and running variance;
* PyTorch trains it 3 steps on one batch of 2 images and labels (train_reference.py's
  train_steps: torch.optim, foreach=False; the model in eval(), so that BatchNorm normalizes
  with its running statistics, which stay constant, and Dropout is the identity: what the
  exported graph computes);
* `loom compile --train --batch 2 --loss cross_entropy --optimizer ... --lr ...` and `loom
  run --steps 3 --data x=...,labels=... --metrics ... --save ckpt/` run the same steps
  (compare_training.run_loom, which also checks the step lines, --metrics and the
  checkpoint's names, kinds, dtypes and shapes, and that the running statistics are saved
  unchanged as buffers).

Checked as compare_training.py checks the bundled models: the loss of every step and every
parameter after the last step to 1e-4 relative normwise, with that script's one exception:
an element whose PyTorch result is ill-conditioned may differ by 10x PyTorch's own spread,
here the larger of its spread over 3 runs from starting weights moved one ulp and its
float32 error (its distance to the same training in float64, where one-ulp runs round the
same way and miss it). The case's line names the tensors that needed it.

SGD: lr 0.02. AdamW: lr 5e-4, weight decay 0.5 (every parameter shrinks by 7.5e-4 of itself
in 3 steps, 7.5x the tolerance, so that a missing decay fails), betas 0.9/0.999, and eps
1e-6 instead of torch's default 1e-8: with 1e-8, an element whose gradient is within float32
rounding of zero (many, in conv weights of ReLU units that the batch barely reaches) moves
by up to +-lr on the sign of its rounding error, and the units this flips make the later
steps differ. PyTorch then does not reproduce itself: its own float32 training with oneDNN
convolutions off, or in float64, differs from it by up to 7e-3 (resnet18), 1e-2
(wide_resnet), 8e-4 (googlenet) and 6e-3 (mnasnet); with eps 1e-6 every family but two
reproduces within 4e-5, and resnet18 and wide_resnet within 2e-4 and 4e-3 (a few elements
of their 2 x 2 pixel layer4 convolutions), which the exception above covers for Loom.

The learning rates move every parameter well beyond its tolerance where the gradient
reaches it: each line gives the smallest ratio and names the parameters below 10x (under
SGD, the early layers of the networks whose gradients vanish toward the input: the
MobileNets, EfficientNet, RegNet, ShuffleNet, SqueezeNet, GoogLeNet, MnasNet; AdamW's
updates do not scale with the gradient and check those).

Families whose `refused` names an operator are not imported yet (the forward test checks
the refusal) and are left out. Prints one line per case; exits 1 on any failure.
"""
import argparse
import os
import shutil
import sys
import tempfile
import time
import types
import warnings

import numpy as np
import onnx
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(SOURCE, "models"))
import compare_training as ct  # noqa: E402
from torchvision_families import FAMILIES, build, image  # noqa: E402
from train_reference import make_labels, train_steps, update_sizes  # noqa: E402

STEPS = 3
BATCH = 2
OPSET = 14
LABEL_SEED = 3
# name -> (optimizer, lr, weight decay, eps)
OPTIMIZERS = {
    "sgd": ("sgd", 0.02, 0.0, None),
    "adamw": ("adamw", 5e-4, 0.5, 1e-6),
}


def export(model, x, path):
    """Exports `model` (eval()) with its BatchNorms kept. Returns the ModelProto."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, x, path, opset_version=OPSET, input_names=["x"],
                          output_names=["logits"], training=torch.onnx.TrainingMode.PRESERVE,
                          do_constant_folding=False)
    return onnx.load(path)


def export_problems(proto, model):
    """What makes the exported initializers differ from PyTorch's parameters (a list)."""
    problems = []
    inits = {i.name for i in proto.graph.initializer}
    params = {n for n, _ in model.named_parameters()}
    buffers = {n for n, b in model.named_buffers() if b.is_floating_point()}
    missing = sorted(params - inits)
    if missing:
        problems.append(f"{len(missing)} parameters are not initializers: {missing[:5]}")
    # Integer initializers (Swin's relative position index, a buffer) are constants.
    floats = {i.name for i in proto.graph.initializer
              if i.data_type == onnx.TensorProto.FLOAT}
    foreign = sorted((inits & floats) - params - buffers)
    if foreign:
        problems.append(f"{len(foreign)} initializers are not PyTorch's (Loom would train "
                        f"them): {foreign[:5]}")
    nodes = {tuple(n.input[1:5]) for n in proto.graph.node if n.op_type == "BatchNormalization"}
    for name, m in model.named_modules():
        if isinstance(m, nn.BatchNorm2d):
            want = tuple(f"{name}.{t}" for t in ("weight", "bias", "running_mean",
                                                  "running_var"))
            if want not in nodes:
                problems.append(f"BatchNorm {name} is not a BatchNormalization node of its "
                                f"own initializers")
    return problems


def reference(family, case, work):
    """PyTorch's training, in compare_training's `ref` form; writes the batch to work/ref."""
    model = build(family)
    x = image(family.size, BATCH)
    with torch.no_grad():
        logits_shape = tuple(model(x).shape)
    labels = make_labels(logits_shape, "cross_entropy",
                         torch.Generator().manual_seed(LABEL_SEED))
    os.makedirs(os.path.join(work, "ref"))
    np.save(os.path.join(work, "ref", "x.npy"), x.numpy())
    np.save(os.path.join(work, "ref", "labels.npy"), labels.numpy())
    hyper = dict(optimizer=case["optimizer"], lr=case["lr"], steps=STEPS,
                 weight_decay=case["weight_decay"])
    if case["eps"] is not None:
        hyper["eps"] = case["eps"]
    result = train_steps(lambda: build(family), [x], labels, ensemble=ct.ENSEMBLE, **hyper)
    exact = train_steps(lambda: build(family).double(), [x.double()], labels, **hyper)
    # PyTorch's own spread: its one-ulp ensemble's, or its float32 error where larger. A
    # tolerance, not a verdict: np.maximum keeps a NaN, and a NaN bound fails the compare.
    spread = {n: np.maximum(s, np.abs(  # oracle: ok (a bound)
                  result["params"][n] - exact["params"][n])) for n, s in result["spread"].items()}
    spread_losses = np.maximum(result["spread_losses"],  # oracle: ok (a bound, see above)
                               np.abs(result["losses"] - exact["losses"]))
    return {"losses": [float(v) for v in result["losses"]], "params": result["params"],
            "buffers": result["buffers"], "summary": {"params": update_sizes(result)},
            "spread": spread, "spread_losses": [float(v) for v in spread_losses]}, model, x


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--loom", required=True)
    parser.add_argument("--only", default="",
                        help="comma-separated family names (default: every family imported)")
    parser.add_argument("--optimizers", default=",".join(OPTIMIZERS),
                        help="comma-separated, of %(default)s")
    parser.add_argument("--keep", metavar="DIR", help="work in DIR and keep its files")
    args = parser.parse_args()
    only = [n for n in args.only.split(",") if n]
    unknown = [n for n in only if n not in FAMILIES] + \
        [o for o in args.optimizers.split(",") if o not in OPTIMIZERS]
    if unknown:
        parser.error(f"unknown: {', '.join(unknown)}")
    torch.set_num_threads(1)
    loom_args = types.SimpleNamespace(loom=args.loom, steps=STEPS, batch=BATCH, backend=None,
                                      source=SOURCE)
    root = os.path.abspath(args.keep) if args.keep else tempfile.mkdtemp(prefix="loom-tvtrain-")
    passed = failed = 0
    try:
        for name, family in FAMILIES.items():
            if (only and name not in only) or family.refused:
                continue
            for opt_name in args.optimizers.split(","):
                optimizer, lr, decay, eps = OPTIMIZERS[opt_name]
                case = ct._case(name, opt_name, optimizer, lr, weight_decay=decay, eps=eps)
                cid = f"{name}:{opt_name}"
                work = os.path.join(root, cid.replace(":", "-"))
                shutil.rmtree(work, ignore_errors=True)
                os.makedirs(work)
                start = time.time()
                try:
                    ref, model, x = reference(family, case, work)
                    path = os.path.join(work, name + ".onnx")
                    problems = export_problems(export(model, x, path), model)
                    actual, run_problems, notes = ct.run_loom(case, loom_args, ref, work,
                                                              model=(path, ["x"]))
                    result = ct.evaluate(actual, ref)
                    result["problems"] = problems + run_problems + result["problems"]
                except (ct.CommandFailed, OSError, ValueError, KeyError, RuntimeError) as e:
                    failed += 1
                    print(f"{cid:26s} FAILED: {type(e).__name__}: {e}", flush=True)
                    continue
                notes.append(f"{time.time() - start:.1f} s")
                if ct.report(cid, result, ref, notes):
                    passed += 1
                else:
                    failed += 1
                sys.stdout.flush()
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
