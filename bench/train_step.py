#!/usr/bin/python3
"""Training step time of the bundled GPT on Loom's CPU backend against PyTorch.

One AdamW step (forward, backward, update) of the same model, weights and
batch, measured in the same run with the same thread count: PyTorch
(Debian's python3-torch, eager, foreach=False) against `loom run --steps` on
a plan compiled with `loom compile --train`. Prints each configuration's
median step time and the ratio PyTorch time / Loom time (above 1: Loom is
faster), plus the BLAS the PyTorch peer used.

Usage: bench/train_step.py --loom build/tools/loom/loom [--threads 2]
"""
import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
sys.path.insert(0, HERE)
import export  # noqa: E402
from forward_latency import blas_in_use  # noqa: E402

CONFIGS = [
    ("gpt (2 layers, d=64, seq 64)", 8, dict()),
    ("gpt (6 layers, d=384, seq 256)", 4,
     dict(layers=6, d_model=384, heads=6, vocab=256, seq=256)),
]


def time_torch(model, ids, labels, steps):
    model.train(False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    times = []
    for i in range(steps + 2):
        start = time.perf_counter()
        opt.zero_grad()
        logits = model(ids)
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
        loss.backward()
        opt.step()
        if i >= 2:
            times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e3


def time_loom(loom, plan, data, threads, steps, tmp):
    metrics = os.path.join(tmp, "metrics.jsonl")
    subprocess.run([loom, "run", plan, "--threads", str(threads), "--steps",
                    str(steps + 2), "--data", data, "--metrics", metrics],
                   check=True, capture_output=True)
    with open(metrics) as f:
        times = [json.loads(line)["step_time_ms"] for line in f][2:]
    return float(np.median(times))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loom", required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"threads: {args.threads}; PyTorch {torch.__version__} with BLAS: "
          f"{blas_in_use()}")
    print(f"{'model (AdamW step)':34} {'batch':>5} {'pytorch ms':>11} "
          f"{'loom ms':>9} {'ratio':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, batch, size in CONFIGS:
            onnx_path = os.path.join(tmp, "gpt.onnx")
            with contextlib.redirect_stdout(io.StringIO()):
                export.export("gpt", onnx_path, **size)
            model = export.build_model("gpt", **size)
            gen = torch.Generator().manual_seed(1)
            (ids,) = export.make_inputs("gpt", model, batch, gen)
            labels = torch.randint(0, model.tok_emb.num_embeddings, ids.shape,
                                   generator=gen)
            np.save(os.path.join(tmp, "ids.npy"), ids.numpy())
            np.save(os.path.join(tmp, "labels.npy"), labels.numpy())
            plan = os.path.join(tmp, "gpt.plan")
            subprocess.run([args.loom, "compile", onnx_path, "--batch", str(batch),
                            "--train", "--optimizer", "adamw", "--lr", "1e-3",
                            "-o", plan], check=True, capture_output=True)
            torch_ms = time_torch(model, ids, labels, args.steps)
            data = (f"input_ids={os.path.join(tmp, 'ids.npy')},"
                    f"labels={os.path.join(tmp, 'labels.npy')}")
            loom_ms = time_loom(args.loom, plan, data, args.threads, args.steps, tmp)
            print(f"{name:34} {batch:5d} {torch_ms:11.2f} {loom_ms:9.2f} "
                  f"{torch_ms / loom_ms:7.2f}x", flush=True)


if __name__ == "__main__":
    main()
