#!/usr/bin/python3
"""Training step time of a partitioned GPT on 1, 2 and 4 ranks, and its traffic.

The bundled GPT architecture (export.py) at a size where the step is dominated by matmuls
is compiled once per configuration with `loom compile --train --mesh ...` (data parallel,
Megatron tensor parallel, and both) and trained with `loom run --ranks N` (one thread per
rank in one process, the threads communicator). All runs share the machine's cores: the
total thread count is the same for every configuration (--threads, split evenly over the
ranks), so the ratio single-device time / partitioned time measures what partitioning
costs or gains on the same hardware, not a speed-up from more hardware.

For every configuration, `--comm-report` gives per collective instruction the bytes rank 0
actually received from its peers (counted by the communicator where it copies) and the
bytes the compiler's layout math predicted (the planner's bus-bandwidth cost, attached to
each collective by loom-partition). They are printed side by side, summed per step by
collective kind. They must be equal (to half a byte per call): the last line is the
verdict, and the exit status is 1 when a kind's measured bytes differ from the predicted
(each named, with by how much), 0 when all agree.

Usage: bench/partition_scaling.py --loom build/tools/loom/loom [--threads 2] [--steps 8]
"""
import argparse
import collections
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
import export  # noqa: E402

SIZE = dict(layers=4, d_model=256, heads=4, vocab=256, seq=128)
BATCH = 8


def megatron(dp):
    return {"strategies": [
        {"pattern": "/blocks.*/attn/[qkv]/MatMul", "strategy": [[dp, 1, 1], [1, "tp"]]},
        {"pattern": "/blocks.*/attn/proj/MatMul", "strategy": [[dp, 1, "tp"], ["tp", 1]]},
        {"pattern": "/blocks.*/mlp/fc/MatMul", "strategy": [[dp, 1, 1], [1, "tp"]]},
        {"pattern": "/blocks.*/mlp/proj/MatMul", "strategy": [[dp, 1, "tp"], ["tp", 1]]},
    ]}


CONFIGS = [
    # name, ranks, --mesh, strategy file contents
    ("single device", 1, None, None),
    ("data parallel dp=2", 2, "dp=2", None),
    ("data parallel dp=4", 4, "dp=4", None),
    ("megatron tp=2", 2, "tp=2", megatron(1)),
    ("megatron tp=4", 4, "tp=4", megatron(1)),
    ("dp=2 x megatron tp=2", 4, "dp=2,tp=2", megatron("dp")),
]


def run(cmd):
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{result.stdout}{result.stderr}")
    return result.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loom", required=True)
    parser.add_argument("--threads", type=int, default=2, help="total, shared by the ranks")
    parser.add_argument("--steps", type=int, default=8, help="timed steps (after 2 warm-up)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        onnx_path = os.path.join(tmp, "gpt.onnx")
        with contextlib.redirect_stdout(io.StringIO()):
            export.export("gpt", onnx_path, **SIZE)
        rng = np.random.default_rng(0)
        shape = (BATCH, SIZE["seq"])
        np.save(os.path.join(tmp, "ids.npy"), rng.integers(0, SIZE["vocab"], shape))
        np.save(os.path.join(tmp, "labels.npy"), rng.integers(0, SIZE["vocab"], shape))
        data = f"input_ids={tmp}/ids.npy,labels={tmp}/labels.npy"
        print(f"GPT {SIZE}, batch {BATCH}, SGD; {args.threads} threads in all; "
              f"median of {args.steps} steps")
        print(f"{'configuration':24} {'ranks':>5} {'step ms':>9} {'ratio':>7} "
              f"{'collectives/step':>17} {'measured B/step':>16} {'predicted B/step':>17}")
        single_ms = None
        traffic = {}
        for name, ranks, mesh, strategy in CONFIGS:
            plan = os.path.join(tmp, "p.plan")
            cmd = [args.loom, "compile", onnx_path, "--batch", str(BATCH), "--train",
                   "--optimizer", "sgd", "--lr", "0.01", "-o", plan]
            if mesh:
                cmd += ["--mesh", mesh]
            if strategy:
                path = os.path.join(tmp, "strategy.json")
                with open(path, "w") as f:
                    json.dump(strategy, f)
                cmd += ["--strategy", path]
            run(cmd)
            metrics = os.path.join(tmp, "metrics.jsonl")
            report = os.path.join(tmp, "comm.jsonl")
            run([args.loom, "run", plan, "--ranks", str(ranks), "--threads",
                 str(args.threads), "--steps", str(args.steps + 2), "--data", data,
                 "--metrics", metrics, "--comm-report", report])
            times = [json.loads(l)["step_time_ms"] for l in open(metrics)][2:]
            ms = float(np.median(times))
            single_ms = single_ms or ms
            steps = args.steps + 2
            kinds = collections.defaultdict(lambda: [0, 0.0, 0.0])
            calls = measured = predicted = 0.0
            if os.path.exists(report):
                for line in open(report):
                    r = json.loads(line)
                    if r["predicted_bytes"] < 0:
                        continue  # local steps: no traffic
                    per_step = r["calls"] / steps
                    k = kinds[r["op"]]
                    k[0] += per_step
                    k[1] += r["bytes_per_call"] * per_step
                    k[2] += r["predicted_bytes"] * per_step
                    calls += per_step
                    measured += r["bytes_per_call"] * per_step
                    predicted += r["predicted_bytes"] * per_step
            traffic[name] = kinds
            print(f"{name:24} {ranks:5d} {ms:9.1f} {single_ms / ms:6.2f}x {calls:17.0f} "
                  f"{measured:16,.0f} {predicted:17,.0f}", flush=True)
        print("\nper collective kind (rank 0, per step): calls, measured bytes, predicted bytes")
        different = []
        for name, kinds in traffic.items():
            for op, (n, m, p) in sorted(kinds.items()):
                same = abs(m - p) <= 0.5 * n  # oracle: ok (byte counts, a report)
                print(f"  {name:24} {op:15} {n:5.0f} {m:14,.0f} {p:14,.0f}"
                      f"  {'equal' if same else 'DIFFERENT'}")
                if not same:
                    different.append(f"{name} {op}: measured {m:,.0f} B against predicted "
                                     f"{p:,.0f} B ({m - p:+,.0f} B per step)")
    if different:
        print(f"FAILED: measured traffic equal to predicted per collective kind: "
              f"{len(different)} differ: " + "; ".join(different))
        return 1
    print(f"passed: measured traffic equal to predicted for every collective kind of "
          f"{len(traffic)} configurations")
    return 0


if __name__ == "__main__":
    sys.exit(main())
