#!/usr/bin/python3
"""Bucketed gradient reductions are bit-for-bit the per-gradient ones, in fewer collectives.

Each configuration is compiled three times: --bucket-mb 0 (one all-reduce per gradient,
the plan before loom-bucket-gradients), the default 25 MiB buckets, and small buckets
(--bucket-mb 0.004 for the MLP, 0.1 for the GPT: several buckets, some gradients
alone in theirs). Each
plan trains 2 steps on the threads communicator with --trace and --save. Checked:

* the bucketed runs' checkpoints (parameters and optimizer state) and per-step losses
  are bitwise those of --bucket-mb 0: every communicator sums each element in member
  order wherever it lies in the bucket (runtime/comm/Sum.h), so packing must not change
  a single bit; any other order of summation, a misplaced slice or a gradient reduced
  twice would;
* the trace's all-reduces (summed over ranks and steps) drop with buckets, and the
  small buckets need more of them than the default ones and fewer than none.

The configurations: the MLP (dp=4, AdamW; dp=2 under --precision bf16, whose gradients
are reduced in bf16) and the GPT (dp=2 SGD; Megatron dp=2,tp=2, where the replicated
norms' gradients reduce over both axes and the split weights' over dp, two kinds of
bucket; a 1F1B pipeline pp=2,dp=2 with 2 micro-batches, reduced once after the
accumulation; ZeRO-1 with AdamW, whose weight gradients are all reduce-scattered, one
per gradient, so that the buckets must leave the plan's collectives as they are; ZeRO-2
with AdamW, whose weight gradients summed before their transposes are all-reduced and
sliced, and bucketed).
Exit status 0 when every configuration agrees.
"""
import argparse
import collections
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import oracle  # noqa: E402  (test/oracle.py)

MEGATRON = "models/gpt_megatron.json"

# name, model, batch, compile flags; ZeRO-1 (NOTHING_TO_BUCKET) reduce-scatters every
# weight gradient.
NOTHING_TO_BUCKET = ("gpt zero-1 dp=2 adamw",)
CONFIGS = [
    ("mlp dp=4 adamw", "mlp", 8, ["--mesh", "dp=4", "--optimizer", "adamw"]),
    ("mlp dp=2 bf16", "mlp", 8, ["--mesh", "dp=2", "--precision", "bf16"]),
    ("gpt dp=2", "gpt", 4, ["--mesh", "dp=2"]),
    ("gpt megatron dp=2,tp=2", "gpt", 4, ["--mesh", "dp=2,tp=2", "--strategy", MEGATRON]),
    ("gpt pipeline pp=2,dp=2 1f1b m=2", "gpt", 8,
     ["--mesh", "pp=2,dp=2", "--micro-batches", "2", "--schedule", "1f1b"]),
    ("gpt zero-1 dp=2 adamw", "gpt", 4, ["--mesh", "dp=2", "--zero", "1", "--optimizer", "adamw"]),
    ("gpt zero-2 dp=2 adamw", "gpt", 4, ["--mesh", "dp=2", "--zero", "2", "--optimizer", "adamw"]),
]

BUCKETS = [("none", "0"), ("default", "25"), ("small", None)]
# Small buckets per model: a few of its gradients each (the MLP's are 40 B to 16 KiB,
# the GPT's 256 B to 64 KiB).
SMALL = {"mlp": "0.004", "gpt": "0.1"}


def run(cmd):
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{result.stdout}{result.stderr}")


def collectives(trace):
    with open(trace) as f:
        events = json.load(f)
    events = events["traceEvents"] if isinstance(events, dict) else events
    return collections.Counter(e["name"] for e in events
                               if e.get("cat") == "collective" and e.get("ph") != "M")


def checkpoint(folder):
    return {name: np.load(os.path.join(folder, name))
            for name in sorted(os.listdir(folder)) if name.endswith(".npy")}


def losses(metrics):
    with open(metrics) as f:
        return [json.loads(line)["loss"] for line in f if line.strip()]


def check(args, work, name, model, batch, flags):
    results = {}
    for bucket, mb in BUCKETS:
        mb = mb or SMALL[model]
        base = os.path.join(work, f"{name.replace(' ', '_').replace('=', '')}-{bucket}")
        plan = base + ".plan"
        run([args.loom, "compile", os.path.join(args.source, "models", model + ".onnx"),
             "--batch", str(batch), "--train", "--lr", "0.05", "--bucket-mb", mb]
            + [os.path.join(args.source, f) if f == MEGATRON else f for f in flags]
            + ["-o", plan])
        run([args.loom, "run", plan, "--steps", "2", "--seed", "3", "--comm", "threads",
             "--threads", "2", "--trace", base + ".json", "--metrics", base + ".jsonl",
             "--save", base + ".ckpt"])
        results[bucket] = (collectives(base + ".json"), checkpoint(base + ".ckpt"),
                           losses(base + ".jsonl"))
    failures = []
    ref_counts, ref_ckpt, ref_losses = results["none"]
    # Bitwise equality of NaNs would prove nothing: the unbucketed run must be finite.
    if not all(math.isfinite(x) for x in ref_losses):
        failures.append(f"unbucketed losses {ref_losses} are not all finite")
    for bucket, _ in BUCKETS[1:]:
        counts, ckpt, step_losses = results[bucket]
        same = oracle.compare_sequences(step_losses, ref_losses, rtol=0.0, name="losses")
        if not same.ok:
            failures.append(f"{bucket} buckets: {same.message}")
        if sorted(ckpt) != sorted(ref_ckpt):
            failures.append(f"{bucket} buckets: checkpoint tensors differ")
        for tensor in ref_ckpt:
            a, b = ref_ckpt[tensor], ckpt.get(tensor)
            if b is None or a.dtype != b.dtype or a.tobytes() != b.tobytes():
                failures.append(f"{bucket} buckets: {tensor} is not bitwise equal")
        for kind in set(ref_counts) | set(counts):
            if kind != "all_reduce" and counts[kind] != ref_counts[kind]:
                failures.append(f"{bucket} buckets: {counts[kind]} {kind} "
                                f"instead of {ref_counts[kind]}")
    none, default, small = (results[b][0]["all_reduce"] for b, _ in BUCKETS)
    if name in NOTHING_TO_BUCKET:
        if not none == small == default:
            failures.append(f"all-reduces: none {none}, small {small}, default {default} "
                            "(every weight gradient is reduce-scattered: nothing to bucket)")
    elif not default < small < none and not (default < none and small == default):
        failures.append(f"all-reduces: none {none}, small {small}, default {default}")
    print(f"{'ok ' if not failures else 'FAIL'} {name}: all-reduces over ranks and 2 steps "
          f"{none} -> {small} (small buckets, {SMALL[model]} MiB) -> {default} (25 MiB)")
    for f in failures:
        print("    " + f)
    return not failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loom", required=True)
    parser.add_argument("--source", required=True)
    args = parser.parse_args()
    ok = True
    with tempfile.TemporaryDirectory() as work:
        for name, model, batch, flags in CONFIGS:
            ok &= check(args, work, name, model, batch, flags)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
