#!/usr/bin/python3
"""torchvision's classifiers, exported from PyTorch, give PyTorch's outputs in Loom.

For each family: a small variant (few classes, small images, reduced width where the
constructor has one) built with a fixed seed, every parameter and batch-norm statistic
redrawn (so that zero-initialised heads do not make the output trivially 0), exported in
eval() mode at opset 14 (torch folds each BatchNorm into its Conv), compiled with `loom
compile` and run with `loom run` on a batch of 2. Checked: max|loom - torch| <= 1e-4 *
max|torch| (normwise).

Families Loom does not import yet are listed in REFUSED with the operator that stops them:
the test checks that the refusal names it, so that a family that starts importing is
noticed and moved to the checked list.

Prints one line per family; exits 1 on any mismatch or unexpected refusal.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import torch
import torchvision.models as M

TOLERANCE = 1e-4

# name: (constructor, image size)
FAMILIES = {
    "resnet18": (lambda: M.resnet18(num_classes=10), 64),
    "resnext": (lambda: M.resnet.ResNet(M.resnet.Bottleneck, [1, 1, 1, 1], num_classes=10,
                                        groups=4, width_per_group=8), 64),
    "wide_resnet": (lambda: M.resnet.ResNet(M.resnet.Bottleneck, [1, 1, 1, 1],
                                            num_classes=10, width_per_group=128), 32),
    "mobilenet_v2": (lambda: M.mobilenet_v2(width_mult=0.25, num_classes=10), 64),
    "mobilenet_v3_small": (lambda: M.mobilenet_v3_small(num_classes=10), 64),
    "efficientnet_b0": (lambda: M.efficientnet_b0(num_classes=10), 64),
    "regnet_y_400mf": (lambda: M.regnet_y_400mf(num_classes=10), 64),
    "shufflenet_v2": (lambda: M.shufflenet_v2_x0_5(num_classes=10), 64),
    "squeezenet": (lambda: M.squeezenet1_1(num_classes=10), 64),
    "googlenet": (lambda: M.googlenet(num_classes=10, aux_logits=False, init_weights=True), 96),
    "mnasnet": (lambda: M.mnasnet0_5(num_classes=10), 64),
    "convnext": (lambda: M.convnext.ConvNeXt(
        [M.convnext.CNBlockConfig(16, 32, 1), M.convnext.CNBlockConfig(32, None, 1)],
        num_classes=10), 64),
    "vit": (lambda: M.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                        hidden_dim=16, mlp_dim=32, num_classes=10), 32),
    "densenet": (lambda: M.densenet.DenseNet(8, (2, 2), 16, num_classes=10), 64),
    "inception_v3": (lambda: M.inception_v3(num_classes=10, aux_logits=False,
                                            init_weights=True), 96),
    "swin": (lambda: M.swin_transformer.SwinTransformer([2, 2], 16, [1, 1], [2, 2], [2, 2],
                                                        num_classes=10), 32),
}

# Not imported yet: (constructor, image size, the operator the refusal names).
REFUSED = {}


def redraw(model, seed):
    """Every float parameter ~ N(0, 0.5^2 / fan-in); statistics positive and non-trivial."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            fan_in = p[0].numel() if p.dim() > 1 else p.numel()
            p.copy_(torch.randn(p.shape, generator=g) * (0.5 / max(fan_in, 1) ** 0.5 * 2))
        for name, b in model.named_buffers():
            if name.endswith("running_mean"):
                b.copy_(torch.randn(b.shape, generator=g) * 0.2)
            elif name.endswith("running_var"):
                b.copy_(torch.rand(b.shape, generator=g) + 0.5)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def export(make, size, work, name):
    torch.manual_seed(0)
    model = make().eval()
    redraw(model, 1)
    x = torch.randn(2, 3, size, size, generator=torch.Generator().manual_seed(2))
    path = os.path.join(work, name + ".onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, x, path, opset_version=14, input_names=["x"],
                          output_names=["y"])
    with torch.no_grad():
        want = model(x).numpy()
    np.save(os.path.join(work, name + "_x.npy"), x.numpy())
    return path, want


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loom", required=True)
    parser.add_argument("--only", default="", help="comma-separated family names")
    args = parser.parse_args()
    only = set(filter(None, args.only.split(",")))
    failures = 0
    with tempfile.TemporaryDirectory(prefix="loom-torchvision-") as work:
        for name, (make, size) in FAMILIES.items():
            if only and name not in only:
                continue
            path, want = export(make, size, work, name)
            plan, out = os.path.join(work, name + ".plan"), os.path.join(work, name + "_out")
            rc, log = run([args.loom, "compile", path, "-o", plan])
            if rc == 0:
                rc, log = run([args.loom, "run", plan, "--inputs",
                               f"x={os.path.join(work, name + '_x.npy')}", "--outputs", out])
            if rc != 0:
                print(f"{name:20s} FAILED  {log.strip().splitlines()[-1]}")
                failures += 1
                continue
            got = np.load(os.path.join(out, "y.npy"))
            scale = max(float(np.abs(want).max()), 1e-30)
            err = float(np.abs(got.astype(np.float64) - want).max()) / scale
            ok = err <= TOLERANCE and np.abs(want).max() > 0
            print(f"{name:20s} {err:.2e}  {'ok' if ok else 'MISMATCH'}")
            failures += not ok
        for name, (make, size, op) in REFUSED.items():
            if only and name not in only:
                continue
            path, _ = export(make, size, work, name)
            rc, log = run([args.loom, "import", path, "--no-weights"])
            expected = f"operator {op} is not supported"
            if rc != 0 and expected in log:
                print(f"{name:20s} refused as expected: {expected}")
            else:
                print(f"{name:20s} UNEXPECTED: {'imports now: move it to FAMILIES' if rc == 0 else log.strip()[-300:]}")
                failures += 1
    print(f"{failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
