#!/usr/bin/python3
"""torchvision's classifiers, exported from PyTorch, give PyTorch's outputs in Loom.

For each family: a small variant (few classes, small images, reduced width where the
constructor has one) built with a fixed seed, every parameter and batch-norm statistic
redrawn (so that zero-initialised heads do not make the output trivially 0), exported in
eval() mode at opset 14 (torch folds each BatchNorm into its Conv), compiled with `loom
compile` and run with `loom run` on a batch of 2. Checked: max|loom - torch| <= 1e-4 *
max|torch| (normwise).

The families and their sizes are torchvision_families.py's. Those Loom does not import yet
name there (`refused=`) the operator that stops them: the test checks that the refusal names
it, so that a family that starts importing is noticed and moved to the checked list.

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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torchvision_families import FAMILIES, build, image  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import oracle  # noqa: E402  (test/oracle.py)

TOLERANCE = 1e-4


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def export(family, work, name):
    model = build(family)
    x = image(family.size)
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
        for name, family in FAMILIES.items():
            if (only and name not in only) or family.refused:
                continue
            path, want = export(family, work, name)
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
            result = oracle.compare(got, want, TOLERANCE, name=f"{name} output")
            ok = result.ok and np.abs(want).max() > 0  # a zero output would prove nothing
            print(f"{name:20s} {result.error:.2e}  {'ok' if ok else 'MISMATCH'}"
                  + ("" if ok else f"  {result.message}"))
            failures += not ok
        for name, family in FAMILIES.items():
            if (only and name not in only) or not family.refused:
                continue
            path, _ = export(family, work, name)
            rc, log = run([args.loom, "import", path, "--no-weights"])
            expected = f"operator {family.refused} is not supported"
            if rc != 0 and expected in log:
                print(f"{name:20s} refused as expected: {expected}")
            else:
                print(f"{name:20s} UNEXPECTED: {'imports now: delete its refused=' if rc == 0 else log.strip()[-300:]}")
                failures += 1
    print(f"{failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
