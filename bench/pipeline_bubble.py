#!/usr/bin/python3
"""The pipeline bubble, measured against the schedule's (p - 1) / (m + p - 1).

The bundled GPT (models/gpt.onnx: two blocks, d=64, vocabulary 256) is compiled as two
pipeline stages, one rank each (stage 0: embeddings and block 0; stage 1: block 1, the
final LayerNorm, the LM head and the loss, so the stages are not equal), over M
micro-batches under GPipe and 1F1B, and trained for a few steps
with `loom run --ranks P` (threads). `loom run` reports, per rank, the time its step spent
waiting in `recv` over the step's time; this prints that bubble next to the ideal one of
equal stages, and each stage's busy time (step minus wait), whose spread says how equal
the stages were.

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
    args = parser.parse_args()

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    work = tempfile.mkdtemp(prefix="loom-bubble-")
    model = os.path.join(root, "models", "gpt.onnx")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = 2
    print(f"bundled GPT, {p} stages (one rank each), "
          f"{args.micro_batch} rows per micro-batch, {args.steps} steps; cores: {os.cpu_count()}")
    print(f"{'schedule':9} {'m':>3} {'ideal':>7} {'measured':>9} {'ratio':>6}  per rank "
          f"(bubble, busy ms per step)")
    for m in [int(x) for x in args.micro_batches.split(",")]:
        for schedule in ("gpipe", "1f1b"):
            plan = os.path.join(work, f"{schedule}-{m}.plan")
            subprocess.run([args.loom, "compile", model, "--train",
                            "--optimizer", "sgd", "--batch", str(args.micro_batch * m),
                            "--micro-batches", str(m), "--mesh", f"pp={p}",
                            "--schedule", schedule, "-o", plan],
                           check=True, capture_output=True, env=env)
            run = subprocess.run([args.loom, "run", plan, "--ranks", str(p),
                                  "--steps", str(args.steps)],
                                 check=True, capture_output=True, text=True, env=env)
            ranks = re.findall(r"rank (\d+) \(stage (\d+)\): .*?bubble ([0-9.]+)% "
                               r"\(recv wait ([0-9.]+) ms of ([0-9.]+) ms per step\)",
                               run.stdout)
            if len(ranks) != p:
                raise SystemExit(f"unexpected loom run output:\n{run.stdout}")
            ideal = (p - 1) / (m + p - 1)
            measured = sum(float(r[2]) for r in ranks) / len(ranks) / 100
            detail = ", ".join(f"{float(r[2]):.1f}% {float(r[4]) - float(r[3]):.1f}"
                               for r in ranks)
            print(f"{schedule:9} {m:>3} {100 * ideal:6.1f}% {100 * measured:8.1f}% "
                  f"{measured / ideal:6.2f}  {detail}", flush=True)


if __name__ == "__main__":
    main()
