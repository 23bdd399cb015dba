#!/usr/bin/python3
"""Compares two checkpoints' parameters and two metrics files' losses.

Usage: compare_checkpoints.py CKPT_A CKPT_B METRICS_A METRICS_B RTOL
Prints 'N parameters and M losses agree' or the first disagreement (exit 1).
Parameters agree when max|a - b| <= RTOL * max|a| (normwise), losses step by
step to RTOL relative, and both files hold the same number of steps
(test/oracle.py's compare: a NaN, an inf or a missing step fails).
"""
import json
import os
import sys


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "python", "loom"))
from checkpoint import read_checkpoint  # noqa: E402  (numpy alone, loaded by path)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from oracle import compare, compare_sequences  # noqa: E402  (test/oracle.py)


def main():
    a_dir, b_dir, a_metrics, b_metrics, rtol = sys.argv[1:6]
    rtol = float(rtol)
    _, a_tensors = read_checkpoint(a_dir)
    _, b_tensors = read_checkpoint(b_dir)
    params = 0
    for name, (kind, a) in a_tensors.items():
        if kind != "parameter":
            continue
        if name not in b_tensors:
            print(f"{name}: missing from {b_dir}")
            return 1
        # The floor of max|a| at 1e-12 lets an all-zero tensor match to rtol * 1e-12.
        result = compare(b_tensors[name][1], a, rtol=rtol, atol=rtol * 1e-12, name=name)
        if not result.ok:
            print(result.message)
            return 1
        params += 1
    losses_a = [json.loads(line)["loss"] for line in open(a_metrics)]
    losses_b = [json.loads(line)["loss"] for line in open(b_metrics)]
    result = compare_sequences(losses_b, losses_a, rtol=rtol, name=f"losses of {b_metrics}")
    if not result.ok:
        print(result.message)
        return 1
    print(f"{params} parameters and {len(losses_a)} losses agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
