#!/usr/bin/python3
"""Training step of a GPT of about 125M parameters on one GPU: Loom's CUDA backend
against PyTorch eager on the same GPU, in one run.

The model is export.py's GPT at GPT-2 small sizes (12 layers, d_model 768, 12 heads,
vocabulary 50304, sequence 1024; 124M parameters with the untied LM head), one AdamW
step (forward, backward, update) on the same batch. In --dtype bf16 both sides train
pure-bf16 copies (Loom: test/e2e/to_bf16.py; PyTorch: model.to(bfloat16)). Prints:

* the median step time of each and the throughput ratio PyTorch time / Loom time
  (goal: at least 1.0x), and Loom's time without its GEMM epilogue fusion
  (loom compile --fuse=false), measured in the same run;
* Loom's model FLOP/s utilisation: 6 N + 12 L T d FLOPs per token (N the parameters
  that multiply, i.e. all but the embeddings; attention counted without the causal
  saving) over the step time, against the GPU's dense peak (H100/H200 SXM: 989 TFLOP/s
  bf16, 67 TFLOP/s f32; --peak overrides) (goal: >= 50% on H100 in bf16);
* GEMM efficiency: the step's GEMM shapes through Loom's matmul kernel against a plain
  cublasGemmEx (build/bench/cuda/loom-gemm-bench).

Its last line is the verdict on the goals: "passed: ..." and exit status 0 when the
throughput ratio is at least 1.0x and (in bf16) the MFU at least 50%, else "FAILED: "
with each goal missed and by how much, and exit status 1. Without a GPU (or a CUDA build
of Loom) it prints "skipped: no GPU (...)" and exits 0: there is nothing to judge.

Usage: bench/gpu_gpt.py --loom build/tools/loom/loom [--dtype bf16|f32] [--batch 8]
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

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(SOURCE, "models"))
sys.path.insert(0, os.path.join(SOURCE, "test", "e2e"))

SIZE = dict(layers=12, d_model=768, heads=12, vocab=50304, seq=1024)
PEAKS = {"bf16": 989.4e12, "f32": 66.9e12}  # H100/H200 SXM, dense


def probe_gpu(loom, work):
    """None when Loom and PyTorch both see a GPU, else why not."""
    plan = os.path.join(work, "probe.plan")
    r = subprocess.run([loom, "compile", os.path.join(SOURCE, "models", "mlp.onnx"),
                        "--batch", "2", "-o", plan], capture_output=True, text=True)
    if r.returncode != 0:
        return "cannot compile the probe: " + r.stderr.strip()
    r = subprocess.run([loom, "run", plan, "--backend", "cuda"], capture_output=True,
                       text=True)
    if r.returncode != 0:
        return r.stderr.strip().replace("loom: error: ", "")
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed"
    if not torch.cuda.is_available():
        return "this PyTorch has no CUDA device"
    return None


def time_torch(model, ids, labels, steps):
    import torch
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    times = []
    for i in range(steps + 3):
        torch.cuda.synchronize()
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        logits = model(ids)
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1))
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        if i >= 3:
            times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loom", required=True)
    parser.add_argument("--dtype", choices=["bf16", "f32"], default="bf16")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--peak", type=float, help="the GPU's peak FLOP/s in --dtype")
    parser.add_argument("--gemm-bench", default=None,
                        help="loom-gemm-bench (default: next to loom in the build)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as work:
        why = probe_gpu(args.loom, work)
        if why:
            print(f"skipped: no GPU ({why})")
            return 0
        import torch
        import export
        import to_bf16
        import onnx

        gpu = torch.cuda.get_device_name(0)
        print(f"GPU: {gpu}; PyTorch {torch.__version__}; dtype {args.dtype}; "
              f"batch {args.batch} x seq {SIZE['seq']}")
        onnx_path = os.path.join(work, "gpt.onnx")
        with contextlib.redirect_stdout(io.StringIO()):
            export.export("gpt", onnx_path, **SIZE)
        model = export.build_model("gpt", **SIZE)
        if args.dtype == "bf16":
            onnx.save(to_bf16.convert(onnx.load(onnx_path)), onnx_path)
        params = sum(p.numel() for p in model.parameters())
        gen = torch.Generator().manual_seed(1)
        (ids,) = export.make_inputs("gpt", model, args.batch, gen)
        labels = torch.randint(0, SIZE["vocab"], ids.shape, generator=gen)
        np.save(os.path.join(work, "ids.npy"), ids.numpy())
        np.save(os.path.join(work, "labels.npy"), labels.numpy())

        data = (f"input_ids={os.path.join(work, 'ids.npy')},"
                f"labels={os.path.join(work, 'labels.npy')}")

        def time_loom(fuse):
            plan = os.path.join(work, f"gpt-{fuse}.plan")
            subprocess.run([args.loom, "compile", onnx_path, "--batch", str(args.batch),
                            "--train", "--optimizer", "adamw", "--lr", "1e-4",
                            f"--fuse={fuse}", "-o", plan],
                           check=True, capture_output=True)
            metrics = os.path.join(work, f"metrics-{fuse}.jsonl")
            subprocess.run([args.loom, "run", plan, "--backend", "cuda", "--steps",
                            str(args.steps + 3), "--data", data, "--metrics", metrics],
                           check=True, capture_output=True)
            with open(metrics) as f:
                return float(np.median([json.loads(l)["step_time_ms"] for l in f][3:]))

        loom_ms = time_loom("true")
        unfused_ms = time_loom("false")

        device_model = model.cuda()
        if args.dtype == "bf16":
            device_model = device_model.to(torch.bfloat16)
        torch_ms = time_torch(device_model, ids.cuda(), labels.cuda(), args.steps)

        L, d, T, V = SIZE["layers"], SIZE["d_model"], SIZE["seq"], SIZE["vocab"]
        matmul_params = 12 * L * d * d + d * V
        tokens = args.batch * T
        flops = tokens * (6 * matmul_params + 12 * L * T * d)
        peak = args.peak or PEAKS[args.dtype]
        print(f"parameters: {params / 1e6:.1f} M; {flops / 1e12:.2f} TFLOP per step")
        print(f"{'':10} {'step ms':>9} {'tokens/s':>10} {'TFLOP/s':>8} {'MFU':>6}")
        for name, ms in (("pytorch", torch_ms), ("loom", loom_ms),
                         ("unfused", unfused_ms)):
            rate = flops / (ms / 1e3)
            print(f"{name:10} {ms:9.2f} {tokens / (ms / 1e3):10.0f} {rate / 1e12:8.1f} "
                  f"{100 * rate / peak:5.1f}%")
        print(f"throughput ratio (PyTorch time / Loom time): {torch_ms / loom_ms:.2f}x "
              f"(goal >= 1.0x); Loom MFU {100 * flops / (loom_ms / 1e3) / peak:.1f}% of "
              f"{peak / 1e12:.0f} TFLOP/s (goal >= 50% on H100 in bf16)")
        print(f"epilogue fusion: {unfused_ms / loom_ms:.2f}x (unfused time / fused time)")
        sys.stdout.flush()

        bench = args.gemm_bench or os.path.join(
            os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(args.loom)))),
            "bench", "cuda", "loom-gemm-bench")
        if os.path.exists(bench):
            subprocess.run([bench, "--tokens", str(tokens), "--d-model", str(d), "--vocab",
                            str(V), "--dtype", args.dtype], check=False)
        else:
            print(f"GEMM efficiency: {bench} not found (a build without CUDA?)")
        sys.stdout.flush()
    return verdict(torch_ms, loom_ms, flops, peak, args.dtype)


def verdict(torch_ms, loom_ms, flops, peak, dtype):
    """Prints the goals' verdict, last: throughput at least PyTorch's and, in bf16, MFU at
    least 50%. The exit status: 0 when both hold, else 1."""
    ratio = torch_ms / loom_ms
    mfu = flops / (loom_ms / 1e3) / peak
    failed = []
    if not ratio >= 1.0:
        failed.append(f"throughput PyTorch time / Loom time >= 1.0x: {ratio:.2f}x, "
                      f"{100 * (1 - ratio):.0f}% short")
    if dtype == "bf16" and not mfu >= 0.5:
        failed.append(f"MFU >= 50% in bf16: {100 * mfu:.1f}%, {50 - 100 * mfu:.1f} points short")
    if failed:
        print("FAILED: " + "; ".join(failed))
        return 1
    print(f"passed: throughput {ratio:.2f}x PyTorch (goal >= 1.0x)"
          + (f", MFU {100 * mfu:.1f}% (goal >= 50%)" if dtype == "bf16" else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
