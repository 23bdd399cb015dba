#!/usr/bin/python3
"""Compares two checkpoints' parameters and two metrics files' losses.

Usage: compare_checkpoints.py CKPT_A CKPT_B METRICS_A METRICS_B RTOL
Prints 'N parameters and M losses agree' or the first disagreement (exit 1).
Parameters agree when max|a - b| <= RTOL * max|a| (normwise).
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "python", "loom"))
from checkpoint import read_checkpoint  # noqa: E402  (numpy alone, loaded by path)


def main():
    a_dir, b_dir, a_metrics, b_metrics, rtol = sys.argv[1:6]
    rtol = float(rtol)
    _, a_tensors = read_checkpoint(a_dir)
    _, b_tensors = read_checkpoint(b_dir)
    params = 0
    for name, (kind, a) in a_tensors.items():
        if kind != "parameter":
            continue
        a = a.astype(np.float64)
        b = b_tensors[name][1].astype(np.float64)
        error = np.abs(a - b).max() / max(np.abs(a).max(), 1e-12)
        if error > rtol:
            print(f"{name}: relative difference {error:.3e} > {rtol}")
            return 1
        params += 1
    losses_a = [json.loads(line)["loss"] for line in open(a_metrics)]
    losses_b = [json.loads(line)["loss"] for line in open(b_metrics)]
    for step, (x, y) in enumerate(zip(losses_a, losses_b), 1):
        if abs(x - y) > rtol * abs(x):
            print(f"step {step}: loss {x} vs {y}")
            return 1
    print(f"{params} parameters and {len(losses_a)} losses agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
