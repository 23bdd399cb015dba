#!/usr/bin/python3
"""GPT-3 175B shapes on 1024 H100s: the pipeline `--mode auto --stages auto`
chooses, against the (t, p, d) configuration the Megatron-LM paper
(arXiv 2104.04473, Table 1) trained GPT-3 175B with: tensor parallelism
t=8, pipeline p=8, data parallelism d=16, batch 1536 in micro-batches of
one sequence (96 per pipeline), activation recompute. Both are predicted
by Loom's own cost model with `loom simulate` (no weights are read):

  - Megatron: --mesh pp=8,dp=16,tp=8 --micro-batches 96, the Megatron
    layouts from models/gpt_megatron.json, --recompute layers; and the
    same with ZeRO-1 (optimizer state split over d), which Megatron's
    distributed optimizer later added, and with the paper's interleaved
    schedule (2 model chunks per stage);
  - Loom: --mesh dp=128,tp=8 --mode auto --stages auto: the number of
    stages (dividing 128), the micro-batch count, the schedule (1F1B or
    interleaved) and the stage boundaries are searched, each stage's layouts, ZeRO level and recompute by the
    intra-op search.

Training is f32 with AdamW (16 bytes of state per parameter) on the
8xH100-80GB profile (74.5 GiB per device); --precision bf16 computes the
forward and backward of all three in bf16 over f32 master weights (as the
paper's mixed-precision training did, in fp16), the state unchanged. For each it prints the
predicted step, the plan's memory per device (its static memory plan:
largest stage, state + arena) and whether that fits, and the ratio of
Loom's predicted step to each Megatron configuration's. The criterion, its last line:
Loom's plan fits the limit and its step is no longer than any Megatron configuration's
(exit status 0), else what it misses by how much (exit status 1). Usage:
bench/gpt3_pipeline.py [--loom PATH] [--precision f32|bf16]
"""

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import loom_simulate  # noqa: E402

ROOT = loom_simulate.ROOT
LIMIT_GIB = 80e9 / 2**30


def generate(out):
    loom_simulate.generate(out, layers=96, d=12288, heads=96, vocab=50257, seq=2048)


def simulate(loom, model, args, precision):
    return loom_simulate.simulate(loom, model, ["--batch", "1536", "--optimizer", "adamw",
                                                "--precision", precision] + args)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loom", default=loom_simulate.DEFAULT_LOOM)
    parser.add_argument("--precision", default="f32", choices=("f32", "bf16"),
                        help="compute precision (bf16: over f32 master weights)")
    args = parser.parse_args()
    p = args.precision
    megatron = ["--mesh", "pp=8,dp=16,tp=8", "--micro-batches", "96", "--strategy",
                os.path.join(ROOT, "models", "gpt_megatron.json"), "--recompute", "layers"]
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "gpt3.onnx")
        generate(model)
        cases = [
            ("Megatron t=8 p=8 d=16", simulate(args.loom, model, megatron, p)),
            ("Megatron t=8 p=8 d=16 + ZeRO-1", simulate(args.loom, model, megatron + ["--zero", "1"], p)),
            ("Megatron t=8 p=8 d=16 interleaved",
             simulate(args.loom, model, megatron + ["--schedule", "interleaved"], p)),
            ("Loom --mode auto --stages auto",
             simulate(args.loom, model, ["--mesh", "dp=128,tp=8", "--mode", "auto",
                                         "--stages", "auto"], p)),
        ]
    print("GPT-3 175B shapes (96 layers, d=12288, seq 2048), batch 1536, AdamW, compute %s, "
          "1024 x H100-80GB (limit %.1f GiB per device)" % (
              "f32" if p == "f32" else "bf16 over f32 master weights", LIMIT_GIB))
    print("%-34s %-18s %6s %-15s %6s %4s %12s %14s %5s %8s" % (
        "configuration", "mesh", "stages", "schedule", "micro", "zero", "step (pred.)",
        "memory/device", "fits", "wall s"))
    for name, r in cases:
        if not r["ok"]:
            print("%-34s failed: %s" % (name, r["text"].strip().splitlines()[-1][:160]))
            continue
        print("%-34s %-18s %6d %-15s %6d %4d %10.2f s %10.1f GiB %5s %8.1f" % (
            name, r["mesh"], r["stages"], r["schedule"], r["micro"], r["zero"], r["step"],
            r["memory"],
            "yes" if r["memory"] <= LIMIT_GIB else "no", r["wall"]))
    loom = cases[-1][1]
    for line in loom.get("chose", []):
        print("  " + line)
    if loom["ok"]:
        for name, r in cases[:-1]:
            if r["ok"]:
                print("Loom auto / %s: %.3f (predicted step; below 1 is faster)" % (
                    name, loom["step"] / r["step"]))
    print("All figures are Loom's predictions (cost model of the 8xH100-80GB profile), "
          "not measurements.")
    return verdict(cases)


def verdict(cases):
    """Prints, last, whether Loom's choice fits the limit and is no slower than every
    Megatron configuration (what the bench shows, bench/README.md); the exit status."""
    loom = cases[-1][1]
    failed = []
    if not loom["ok"]:
        failed.append("Loom --mode auto --stages auto: no plan")
    else:
        if not loom["memory"] <= LIMIT_GIB:
            failed.append("Loom's plan within %.1f GiB per device: %.1f GiB, %.1f GiB over" % (
                LIMIT_GIB, loom["memory"], loom["memory"] - LIMIT_GIB))
        for name, r in cases[:-1]:
            if not r["ok"]:
                failed.append("%s: no prediction to compare with" % name)
            elif not loom["step"] <= r["step"]:
                failed.append("Loom auto no slower than %s: %.3f of its step, %.1f%% slower" % (
                    name, loom["step"] / r["step"], 100 * (loom["step"] / r["step"] - 1)))
    if failed:
        print("FAILED: " + "; ".join(failed))
        return 1
    print("passed: Loom's plan fits %.1f GiB per device and is no slower than any Megatron "
          "configuration" % LIMIT_GIB)
    return 0


if __name__ == "__main__":
    sys.exit(main())
