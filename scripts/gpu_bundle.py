#!/usr/bin/python3
"""Builds the GPU bundle (see docs/gpu.md): everything the GPU check needs, made on this
CPU machine, for a GPU machine that has no MLIR, libonnx, oneDNN or MPI.

    scripts/gpu_bundle.py OUTDIR --build build --runtime-build build-gpu-bundle

* compiles with `loom` (the full build) every plan the check runs: the bundled MLP, GPT,
  CNN, LLaMA-style decoder and encoder classifier for training (AdamW, 5 steps) and
  inference, in f32, bf16 and f16 (--precision; training keeps f32 master weights, f16
  with a static loss scale), and inference of the models' pure-bf16 copies, on one device
  and data-parallel over 8 virtual devices; the GPT, the LLaMA decoder and the encoder on
  pp=2 x dp=2 x tp=2 (1F1B, ZeRO-1, recompute); and the bench's
  GPTs (a 125M GPT-2-small for the GPU and a small one for the CPU, fused and unfused,
  seeded initialisation: the plans carry no weights);
* computes the expected results with `loom run` on the CPU backend (oneDNN): the losses
  of every training plan's single-device run and every inference plan's outputs;
* emits the ONNX node tests as plans (`loom-node-test-plans`);
* copies in `loom-run` and the runtime-only test binaries (from --runtime-build, a build
  with LOOM_RUNTIME_ONLY=ON, oneDNN and MPI off, shared libraries) with every library they
  need that is not on the GPU image (not libc, libstdc++, libgomp or CUDA's), stripped,
  check.sh and check.py, with test/oracle.py (check.py's comparisons) beside them;
* writes manifest.json, which check.py reads, and checks the size limit (40 MiB).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(SOURCE, "models"))

LIMIT_BYTES = 40 * 1024 * 1024
MODELS = ("mlp", "gpt", "cnn", "llama", "encoder")
# Trained on dp2 x tp2 x pp2 (1F1B, ZeRO-1, recompute) against one device, the layouts
# from the search or, for the LLaMA decoder (whose search on so small a model splits
# nothing), from its Megatron strategy file.
PIPELINED = {"gpt": ["--mode", "auto"], "llama": [
    "--strategy", os.path.join(SOURCE, "models", "llama_megatron.json")],
    "encoder": ["--mode", "auto"]}
BATCH = 8
STEPS = 5
SEED = 1
# Loss tolerances (relative) of a GPU run against the CPU's: f32 as the issue asks;
# bf16 as the partitioned bf16 oracle (test/e2e/CMakeLists.txt, 5e-2); f16 with its loss
# scale as compare_mixed_precision.py's f16 bound (2e-3) with room for kernel order.
RTOL = {"f32": 1e-4, "bf16": 5e-2, "f16": 1e-2}
# Inference outputs, normwise: f32 as the forward oracle (compare_pytorch.py, 1e-5) with
# room for another device's summation order; bf16 and f16 about 8 and 64 times their
# unit roundoff.
INFER_RTOL = {"f32": 1e-4, "bf16": 3e-2, "f16": 4e-3, "bf16model": 3e-2}
TRAIN_FLAGS = ["--train", "--optimizer", "adamw", "--lr", "1e-2", "--eps", "1e-3"]
# Libraries the GPU image has, or that must come from its driver: never bundled.
SYSTEM_LIBS = ("linux-vdso", "ld-linux", "libc.so", "libm.so", "libstdc++", "libgcc_s",
               "libgomp", "libpthread", "libdl.so", "librt.so", "libcuda.so", "libcudart",
               "libcublas", "libcublasLt", "libcudnn", "libnccl")
# The bench's GPT sizes: GPT-2 small on the GPU (bench/gpu_gpt.py), a small one on the CPU.
BENCH = {
    "cuda": dict(layers=12, d_model=768, heads=12, vocab=50304, seq=1024, batch=8),
    "cpu": dict(layers=2, d_model=128, heads=4, vocab=256, seq=64, batch=4),
}


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise SystemExit(f"gpu_bundle: failed: {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return r.stdout


def losses_of(metrics):
    with open(metrics) as f:
        return [json.loads(line)["loss"] for line in f]


def bf16_model(src, dst):
    import onnx
    sys.path.insert(0, os.path.join(SOURCE, "test", "e2e"))
    import to_bf16
    onnx.save(to_bf16.convert(onnx.load(src)), dst)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--build", default=os.path.join(SOURCE, "build"))
    p.add_argument("--runtime-build", default=os.path.join(SOURCE, "build-gpu-bundle"))
    args = p.parse_args()
    loom = os.path.join(args.build, "tools", "loom", "loom")
    out = os.path.abspath(args.out)
    if os.path.exists(out):
        shutil.rmtree(out)
    for d in ("bin", "lib", "plans", "expected", "models"):
        os.makedirs(os.path.join(out, d))
    manifest = {"batch": BATCH, "steps": STEPS, "seed": SEED, "training": [],
                "inference": [], "partitioned": [], "bench": {}}
    work = tempfile.mkdtemp(prefix="loom-bundle-")

    def plan_path(name):
        return os.path.join(out, "plans", name + ".plan")

    def compile_plan(name, model, flags):
        run([loom, "compile", model, "--batch", str(BATCH)] + flags + ["-o", plan_path(name)])
        return "plans/" + name + ".plan"

    def init_flags(precision):
        # The f32 plans carry the models' ONNX weights; the others draw theirs from a
        # seeded rule (the same global tensors on every backend and partition), which
        # keeps the bundle small.
        return [] if precision == "f32" else ["--init", "seeded", "--seed", "1"]

    def cpu_losses(name, ranks=None):
        metrics = os.path.join(work, name + ".jsonl")
        cmd = [loom, "run", plan_path(name), "--steps", str(STEPS), "--seed", str(SEED),
               "--metrics", metrics]
        if ranks:
            cmd += ["--ranks", str(ranks)]
        run(cmd)
        return losses_of(metrics)

    # Training: one device and dp=8, per model and precision.
    for model in MODELS:
        onnx_path = os.path.join(SOURCE, "models", model + ".onnx")
        for precision in ("f32", "bf16", "f16"):
            flags = TRAIN_FLAGS + init_flags(precision)
            if precision != "f32":
                flags += ["--precision", precision]
            if precision == "f16":
                flags += ["--loss-scale", "1024"]
            name = f"{model}-{precision}-train"
            single = compile_plan(name, onnx_path, flags)
            expected = cpu_losses(name)
            manifest["training"].append(dict(name=name, plan=single, ranks=1,
                                             expected=expected, rtol=RTOL[precision]))
            dp = compile_plan(name + "-dp8", onnx_path, flags + ["--mesh", "dp=8"])
            manifest["training"].append(dict(name=name + "-dp8", plan=dp, ranks=8,
                                             expected=expected, rtol=RTOL[precision]))
    # The decoders and the encoder on dp2 x tp2 x pp2 with ZeRO-1 and recompute, against
    # their single device.
    for model, layouts in PIPELINED.items():
        name = f"{model}-f32-train-pp2dp2tp2"
        pipe = compile_plan(name, os.path.join(SOURCE, "models", model + ".onnx"),
                            TRAIN_FLAGS + layouts + [
                                "--mesh", "pp=2,dp=2,tp=2", "--micro-batches", "2",
                                "--schedule", "1f1b", "--zero", "1", "--recompute", "layers"])
        manifest["partitioned"].append(dict(
            name=name, plan=pipe, ranks=8, rtol=1e-4,
            expected=next(t["expected"] for t in manifest["training"]
                          if t["name"] == f"{model}-f32-train")))

    # Inference: f32, --precision bf16 and f16 (the forward in that type, f32 outputs),
    # and the models' pure-bf16 copies (test/e2e/to_bf16.py); one device and dp=8.
    for model in MODELS:
        onnx_path = os.path.join(SOURCE, "models", model + ".onnx")
        for kind in ("f32", "bf16", "f16", "bf16model"):
            src, flags = onnx_path, init_flags(kind)
            if kind in ("bf16", "f16"):
                flags += ["--precision", kind]
            if kind == "bf16model":
                src = os.path.join(work, model + "-bf16.onnx")
                bf16_model(onnx_path, src)
            name = f"{model}-{kind}-infer"
            single = compile_plan(name, src, flags)
            outdir = os.path.join(out, "expected", name)
            run([loom, "run", plan_path(name), "--seed", str(SEED), "--outputs", outdir])
            rtol = INFER_RTOL[kind]
            manifest["inference"].append(dict(name=name, plan=single, ranks=1,
                                              expected="expected/" + name, rtol=rtol))
            dp = compile_plan(name + "-dp8", src, flags + ["--mesh", "dp=8"])
            manifest["inference"].append(dict(name=name + "-dp8", plan=dp, ranks=8,
                                              expected="expected/" + name, rtol=rtol))

    # The bench's GPTs: shape-only ONNX files (models/gpt_shapes.py), seeded weights.
    for backend, size in BENCH.items():
        shapes = os.path.join(work, f"bench-{backend}.onnx")
        run([sys.executable, os.path.join(SOURCE, "models", "gpt_shapes.py"),
             "--layers", str(size["layers"]), "--d-model", str(size["d_model"]),
             "--heads", str(size["heads"]), "--vocab", str(size["vocab"]),
             "--seq", str(size["seq"]), "-o", shapes])
        runs = []
        # f32, and on the GPU bf16 mixed precision (the MFU goal's case).
        for dtype in ("f32", "bf16") if backend == "cuda" else ("f32",):
            plans = {}
            for fuse in ("true", "false"):
                name = f"bench-{backend}-gpt-{dtype}-fuse-{fuse}"
                run([loom, "compile", shapes, "--batch", str(size["batch"]), "--train",
                     "--optimizer", "adamw", "--lr", "1e-4", "--init", "seeded",
                     "--seed", "1", f"--fuse={fuse}", "-o", plan_path(name)]
                    + (["--precision", dtype] if dtype != "f32" else []))
                plans[fuse] = "plans/" + name + ".plan"
            runs.append(dict(dtype=dtype, fused=plans["true"], unfused=plans["false"]))
        manifest["bench"][backend] = dict(size, runs=runs)
    shutil.copy(os.path.join(SOURCE, "models", "export.py"), os.path.join(out, "models"))
    # export.py loads the Python package's export helpers by path (python/loom/).
    os.makedirs(os.path.join(out, "python", "loom"), exist_ok=True)
    shutil.copy(os.path.join(SOURCE, "python", "loom", "onnx_export.py"),
                os.path.join(out, "python", "loom"))

    # The ONNX node tests as plans, with their data and the known failures.
    node_plans = os.path.join(args.build, "test", "unit", "node", "loom-node-test-plans")
    run([node_plans, os.path.join(out, "node")])
    shutil.copy(os.path.join(SOURCE, "test", "unit", "onnx_node_known_failures.txt"),
                os.path.join(out, "node-known-failures.txt"))

    # The runtime-only binaries and the libraries they need beyond the GPU image's.
    binaries = {"loom-run": "tools/loom-run/loom-run",
                "loom-node-tests": "test/unit/node/loom-node-tests",
                "loom-collective-check": "test/unit/comm/loom-collective-check",
                "loom-allocator-tests": "test/unit/cuda/loom-allocator-tests",
                "loom-cuda-kernel-tests": "test/unit/cuda/loom-cuda-kernel-tests",
                "loom-gemm-bench": "bench/cuda/loom-gemm-bench"}
    libs = {}  # by file name: ldd names one library by several relative paths
    for name, rel in binaries.items():
        path = os.path.join(args.runtime_build, rel)
        if not os.path.exists(path):
            continue  # the CUDA-only ones, in a build without the toolkit
        shutil.copy(path, os.path.join(out, "bin", name))
        # Symbols are not needed to run, and halve the size.
        run(["strip", "--strip-unneeded", os.path.join(out, "bin", name)])
        for line in run(["ldd", path]).splitlines():
            parts = line.split("=>")
            if len(parts) != 2 or "not found" in parts[1]:
                continue
            lib = parts[1].split("(")[0].strip()
            if lib and not any(os.path.basename(lib).startswith(s) for s in SYSTEM_LIBS):
                libs[os.path.basename(lib)] = lib
    for name, lib in sorted(libs.items()):
        dst = os.path.join(out, "lib", name)
        shutil.copy(os.path.realpath(lib), dst)
        run(["strip", "--strip-unneeded", dst])
    for f in ("check.sh", "check.py"):
        shutil.copy(os.path.join(SOURCE, "scripts", "gpu-check", f), os.path.join(out, f))
    shutil.copy(os.path.join(SOURCE, "test", "oracle.py"), os.path.join(out, "oracle.py"))
    os.chmod(os.path.join(out, "check.sh"), 0o755)
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    shutil.rmtree(work)

    total = sum(os.path.getsize(os.path.join(d, f))
                for d, _, files in os.walk(out) for f in files)
    print(f"gpu_bundle: {out}: {total / 2**20:.1f} MiB "
          f"({len(manifest['training'])} training, {len(manifest['inference'])} inference, "
          f"{len(manifest['partitioned'])} pipeline plans; libraries: "
          f"{', '.join(sorted(libs)) or 'none'})")
    if total > LIMIT_BYTES:
        raise SystemExit(f"gpu_bundle: {total / 2**20:.1f} MiB is over the "
                         f"{LIMIT_BYTES // 2**20} MiB limit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
