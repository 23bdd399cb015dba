#!/usr/bin/python3
"""Forward latency of the bundled GPT on Loom's CPU backend against PyTorch.

Both run in this process's machine, in the same run, with the same thread
count and the same weights and inputs: PyTorch (Debian's python3-torch, eager,
no_grad) and `loom run --repeat` on a plan compiled from the exported ONNX
model. Prints each configuration's median step time and Loom's speed as a
ratio (PyTorch time / Loom time: above 1 means Loom is faster), plus which
BLAS the PyTorch peer used, since that decides its speed.

Usage: bench/forward_latency.py --loom build/tools/loom/loom [--threads 2]
"""
import argparse
import contextlib
import io
import os
import re
import subprocess
import sys
import tempfile
import time

# The peer must use OpenBLAS with one BLAS thread per torch thread.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
import export  # noqa: E402

CONFIGS = [
    # name, batch, GPT size
    ("gpt (2 layers, d=64, seq 64)", 8, dict()),
    ("gpt (6 layers, d=384, seq 256)", 4,
     dict(layers=6, d_model=384, heads=6, vocab=256, seq=256)),
]


def blas_in_use():
    """The BLAS library torch's process has loaded."""
    with open("/proc/self/maps") as maps:
        libs = {line.split()[-1] for line in maps if "blas" in line.lower()}
    names = sorted({os.path.basename(l) for l in libs})
    return ", ".join(names) or "unknown"


def time_torch(model, inputs, repeat):
    with torch.no_grad():
        for _ in range(2):
            model(*inputs)
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            model(*inputs)
            times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e3


def time_loom(loom, plan, inputs_flag, threads, repeat):
    times = []
    for _ in range(repeat):
        out = subprocess.run(
            [loom, "run", plan, "--threads", str(threads), "--repeat", "5",
             "--inputs", inputs_flag], capture_output=True, text=True, check=True)
        match = re.search(r"steps in ([0-9.]+) ms each", out.stdout)
        times.append(float(match.group(1)))
    return float(np.median(times))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loom", required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    print(f"threads: {args.threads}; PyTorch {torch.__version__} with BLAS: "
          f"{blas_in_use()}")
    print(f"{'model':34} {'batch':>5} {'pytorch ms':>11} {'loom ms':>9} {'ratio':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, batch, size in CONFIGS:
            onnx_path = os.path.join(tmp, "gpt.onnx")
            with contextlib.redirect_stdout(io.StringIO()):
                export.export("gpt", onnx_path, **size)
            model = export.build_model("gpt", **size)
            inputs = export.make_inputs("gpt", model, batch,
                                        torch.Generator().manual_seed(1))
            np.save(os.path.join(tmp, "ids.npy"), inputs[0].numpy())
            plan = os.path.join(tmp, "gpt.plan")
            subprocess.run([args.loom, "compile", onnx_path, "--batch", str(batch),
                            "-o", plan], check=True, capture_output=True)
            torch_ms = time_torch(model, inputs, args.repeat * 5)
            loom_ms = time_loom(args.loom, plan, "input_ids=" +
                                os.path.join(tmp, "ids.npy"), args.threads,
                                args.repeat)
            print(f"{name:34} {batch:5d} {torch_ms:11.2f} {loom_ms:9.2f} "
                  f"{torch_ms / loom_ms:7.2f}x", flush=True)


if __name__ == "__main__":
    main()
