#!/usr/bin/python3
"""The Python API's training step against the CLI's, for the same plan.

The GPT of models/export.py at 6 layers, d_model 384 (6 heads, seq 128, vocab 256) is
compiled once through `loom.parallelize` (AdamW, the given mesh); the same plan bytes are
written to a file and run by `loom run --steps N --metrics` with the same ranks and threads.
Both train on the same fixed batch. Per step:

* Python: the wall time of `job.step(ids, labels=targets)` as the caller sees it (torch
  tensors converted, the global batch copied into each rank's shard, the ranks' threads
  started and joined, the loss returned);
* CLI: `loom run`'s own step time (rank 0's training step, its `step_time_ms`).

It prints the median of the steps after the first WARMUP of each, and the overhead
python / cli - 1. The target: under 5%; the last line is the verdict, and the exit status
is 1 when the overhead is 5% or more, 0 when it is under.

Usage: bench/python_overhead.py --loom build/tools/loom/loom [--mesh dp=2] [--steps 12]
           [--threads 2] [--batch 8]
Needs PYTHONPATH=build/python (the build tree's package).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))

import export  # noqa: E402
import loom  # noqa: E402

WARMUP = 2
TARGET = 0.05  # the overhead python / cli - 1 must be under this
GPT = dict(layers=6, d_model=384, heads=6, vocab=256, seq=128)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--loom", default=os.path.join(HERE, "..", "build", "tools", "loom",
                                                       "loom"))
    parser.add_argument("--mesh", default="dp=2")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()

    model = export.build_model("gpt", **GPT)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, GPT["vocab"], (args.batch, GPT["seq"]), generator=g)
    targets = torch.randint(0, GPT["vocab"], (args.batch, GPT["seq"]), generator=g)
    start = time.perf_counter()
    job = loom.parallelize(model, (ids,), optimizer=loom.AdamW(lr=1e-4), mesh=args.mesh,
                           threads=args.threads, progress=False)
    compile_s = time.perf_counter() - start
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        job.step(ids, labels=targets)
        times.append(time.perf_counter() - t0)
    python_ms = 1e3 * float(np.median(times[WARMUP:]))

    with tempfile.TemporaryDirectory() as tmp:
        plan = os.path.join(tmp, "gpt.plan")
        with open(plan, "wb") as f:
            f.write(job._plan)
        np.save(os.path.join(tmp, "ids.npy"), ids.numpy())
        np.save(os.path.join(tmp, "labels.npy"), targets.numpy())
        metrics = os.path.join(tmp, "metrics.jsonl")
        data = f"input_ids={tmp}/ids.npy,labels={tmp}/labels.npy"
        subprocess.run([args.loom, "run", plan, "--steps", str(args.steps), "--data", data,
                        "--threads", str(args.threads), "--metrics", metrics],
                       check=True, stdout=subprocess.DEVNULL)
        with open(metrics) as f:
            cli = [json.loads(line)["step_time_ms"] for line in f]
    cli_ms = float(np.median(cli[WARMUP:]))

    print(f"GPT {GPT['layers']} layers, d_model {GPT['d_model']}, batch {args.batch}, mesh "
          f"{args.mesh} ({job.num_ranks} thread ranks), {args.threads} threads, "
          f"compiled in {compile_s:.1f} s")
    print(f"{'':8} {'median step':>12}")
    print(f"{'python':8} {python_ms:10.2f} ms")
    print(f"{'cli':8} {cli_ms:10.2f} ms")
    overhead = python_ms / cli_ms - 1
    print(f"overhead python / cli - 1 = {100 * overhead:+.1f}% (target < 5%)")
    if not overhead < TARGET:  # oracle: ok (a timing)
        print(f"FAILED: overhead < {TARGET:.0%}: {100 * overhead:+.1f}%, "
              f"{100 * (overhead - TARGET):.1f} points over")
        return 1
    print(f"passed: overhead {100 * overhead:+.1f}% < {TARGET:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
