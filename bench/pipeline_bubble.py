#!/usr/bin/python3
"""The pipeline bubble, measured against the schedule's (p - 1) / (v m + p - 1).

A GPT is compiled as two pipeline stages, one rank each, over m micro-batches under GPipe,
1F1B and interleaved 1F1B (v = 2 chunks of layers per stage; v = 1 for the others), and
trained for a few steps with `loom run --ranks P` (threads). `loom run` reports, per rank,
the time its step spent waiting in `recv` over the step's time; this prints that bubble
next to the ideal one of equal stages, and each stage's busy time (step minus wait), whose
spread says how equal the stages were. "expected" is the bubble the schedule implies for
the measured busy times (per micro-batch t_s = busy_s / m; step = sum_s t_s / v +
(m - 1/v) max_s t_s), so measured / expected is what running the schedule costs beyond
the stages' imbalance (sends, waking a waiting thread).

By default the GPT is exported here with 8 blocks of d=128 (models/export.py), whose
stages come out near equal; `--model models/gpt.onnx` takes the bundled two-block GPT,
whose stages are not (stage 1 has the LM head and the loss).

Run it on an otherwise idle machine with at least P cores: rank threads that wait for a
core count as bubble. OMP_NUM_THREADS=1 keeps each rank's kernels on one thread.

    /usr/bin/python3 bench/pipeline_bubble.py --loom build/tools/loom/loom
"""
import argparse
import os
import re
import subprocess
import tempfile


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loom", required=True)
    parser.add_argument("--micro-batch", type=int, default=2, help="rows per micro-batch")
    parser.add_argument("--micro-batches", default="2,4,8")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--model", help="an ONNX GPT (default: export an 8-block one)")
    args = parser.parse_args()

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    work = tempfile.mkdtemp(prefix="loom-bubble-")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    model = args.model
    if not model:
        model = os.path.join(work, "gpt8.onnx")
        subprocess.run(["/usr/bin/python3", os.path.join(root, "models", "export.py"),
                        "--model", "gpt", "--layers", "8", "--d-model", "128", "--heads",
                        "4", "--vocab", "256", "--seq", "64", "-o", model],
                       check=True, capture_output=True)
    p = 2
    print(f"{os.path.basename(model)}, {p} stages (one rank each), "
          f"{args.micro_batch} rows per micro-batch, {args.steps} steps; cores: {os.cpu_count()}")
    print(f"{'schedule':11} {'m':>3} {'ideal':>7} {'measured':>9} {'ratio':>6} "
          f"{'expected':>9} {'ratio':>6}  per rank (bubble, busy ms per step)")
    for m in [int(x) for x in args.micro_batches.split(",")]:
        for schedule in ("gpipe", "1f1b", "interleaved"):
            v = 2 if schedule == "interleaved" else 1
            plan = os.path.join(work, f"{schedule}-{m}.plan")
            subprocess.run([args.loom, "compile", model, "--train",
                            "--optimizer", "sgd", "--batch", str(args.micro_batch * m),
                            "--micro-batches", str(m), "--mesh", f"pp={p}",
                            "--schedule", schedule, "-o", plan]
                           + (["--virtual-stages", str(v)] if v > 1 else []),
                           check=True, capture_output=True, env=env)
            run = subprocess.run([args.loom, "run", plan, "--ranks", str(p),
                                  "--steps", str(args.steps)],
                                 check=True, capture_output=True, text=True, env=env)
            ranks = re.findall(r"rank (\d+) \(stage (\d+)\): .*?bubble ([0-9.]+)% "
                               r"\(recv wait ([0-9.]+) ms of ([0-9.]+) ms per step\)",
                               run.stdout)
            if len(ranks) != p:
                raise SystemExit(f"unexpected loom run output:\n{run.stdout}")
            ideal = (p - 1) / (v * m + p - 1)
            measured = sum(float(r[2]) for r in ranks) / len(ranks) / 100
            busy = [float(r[4]) - float(r[3]) for r in ranks]
            t = [b / m for b in busy]
            step = sum(t) / v + (m - 1 / v) * max(t)
            expected = sum(1 - b / step for b in busy) / len(busy)
            detail = ", ".join(f"{float(r[2]):.1f}% {float(r[4]) - float(r[3]):.1f}"
                               for r in ranks)
            print(f"{schedule:11} {m:>3} {100 * ideal:6.1f}% {100 * measured:8.1f}% "
                  f"{measured / ideal:6.2f} "
                  f"{100 * expected:8.1f}% {measured / expected:6.2f}  {detail}", flush=True)


if __name__ == "__main__":
    main()
