#!/usr/bin/env python3
"""The GPU check's steps, run by check.sh from a bundle made by scripts/gpu-bundle.sh.

Each step is time-boxed; a failure is recorded and the check goes on. Steps:
  a  unit       the runtime's unit-test binaries (the caching allocator; the CUDA kernels
                against the CPU backend, where built)
  b  node       the ONNX node tests on the backend, against their expected outputs
  c  parity     each bundled model trained 5 steps (f32, bf16, f16; one device and dp=8)
                against the CPU's losses, and inference (f32 and bf16) against its outputs
  d  partition  the GPT on pp2 x dp2 x tp2 (1F1B, ZeRO-1, recompute) on 8 virtual devices
                against the single device's losses
  e  collective every collective of the communicator (cuda: NCCL, one rank; cpu: threads)
  f  bench      a GPT training step against PyTorch eager on the same device (MFU; fused
                against unfused; on cuda GEMM efficiency against cublasGemmEx)
  g  memcheck   one GPT training step under compute-sanitizer memcheck (cuda), or plainly
                (cpu: there is no sanitizer for the CPU in the bundle)
Writes report.txt (the table), report.json and logs/ under --report.
"""
import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time

# test/oracle.py, the comparisons: beside this file in the bundle (scripts/gpu_bundle.py
# copies it there), else in the source tree this file comes from.
_HERE = os.path.dirname(os.path.abspath(__file__))
for _where in (_HERE, os.path.join(_HERE, "..", "..", "test")):
    if os.path.isfile(os.path.join(_where, "oracle.py")):
        sys.path.insert(0, _where)
        break
import oracle  # noqa: E402

# Each step's time box on the GPU, in seconds, and the whole check's limit (8 minutes):
# the boxes add up to more, but the last check took 97 s in all. On the CPU (--backend
# cpu, the ctest here) every box is CPU_SCALE times as long: there the check tests the
# bundle, not the time.
STEP_BUDGET = {"unit": 60, "node": 60, "parity": 150, "partition": 45, "collective": 30,
               "bench": 120, "memcheck": 60}
TOTAL_BUDGET = 470
CPU_SCALE = 4
# Dense peaks of an H100/H200 SXM (as bench/gpu_gpt.py), for the bench's MFU.
PEAK = {"bf16": 989.4e12, "f32": 66.9e12}
STEP_NAMES = {"unit": "a", "node": "b", "parity": "c", "partition": "d", "collective": "e",
              "bench": "f", "memcheck": "g"}


class Check:
    def __init__(self, bundle, report, backend):
        self.bundle, self.report, self.backend = bundle, report, backend
        self.rows = []
        self.logs = os.path.join(report, "logs")
        os.makedirs(self.logs, exist_ok=True)
        with open(os.path.join(bundle, "manifest.json")) as f:
            self.manifest = json.load(f)
        self.deadline = None

    def bin(self, name):
        return os.path.join(self.bundle, "bin", name)

    def path(self, rel):
        return os.path.join(self.bundle, rel)

    def run(self, name, cmd, timeout, env=None):
        """Runs cmd within the step's time left; (returncode, output). 124: timed out."""
        left = self.deadline - time.time()
        limit = max(1, min(timeout, left))
        start = time.time()
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=limit,
                               env=dict(os.environ, **env) if env else None)
            code, out = r.returncode, r.stdout + r.stderr
        except subprocess.TimeoutExpired as e:
            code = 124
            out = ((e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes)
                   else (e.stdout or "")) + f"\n(timed out after {limit:.0f} s)\n"
        except OSError as e:
            code, out = 127, str(e)
        with open(os.path.join(self.logs, name + ".log"), "w") as f:
            f.write("$ " + " ".join(cmd) + "\n" + out + f"\n(exit {code}, "
                    f"{time.time() - start:.1f} s)\n")
        return code, out

    def record(self, step, case, status, detail, seconds):
        self.rows.append(dict(step=STEP_NAMES[step] + " " + step, case=case, status=status,
                              detail=detail, seconds=round(seconds, 1)))
        print(f"{status:5} {STEP_NAMES[step]} {step:10} {case:34} {detail}", flush=True)

    def loom_run(self, plan, extra, name, timeout=120):
        cmd = [self.bin("loom-run"), self.path(plan), "--backend", self.backend,
               "--seed", str(self.manifest["seed"])] + extra
        return self.run(name, cmd, timeout)

    # --- the steps ------------------------------------------------------------------

    def step_unit(self):
        # On the CPU the kernel tests' "device" is a second CPU backend: that checks
        # the binary and its cases, not the CUDA kernels.
        env = {"LOOM_TEST_DEVICE_BACKEND": "cpu"} if self.backend == "cpu" else None
        for t in ("loom-allocator-tests", "loom-cuda-kernel-tests"):
            start = time.time()
            if not os.path.exists(self.bin(t)):
                self.record("unit", t, "FAIL", "not in the bundle (a build without CUDA?)", 0)
                continue
            code, out = self.run("unit-" + t, [self.bin(t), "--gtest_brief=1"], 55,
                                 env=env if t == "loom-cuda-kernel-tests" else None)
            summary = [l for l in out.splitlines() if "tests ran" in l or "PASSED" in l
                       or "FAILED" in l]
            self.record("unit", t, "pass" if code == 0 else "FAIL",
                        (summary[-1].strip() if summary else f"exit {code}"),
                        time.time() - start)

    def step_node(self):
        start = time.time()
        code, out = self.run("node", [self.bin("loom-node-tests"), "--backend", self.backend,
                                      self.path("node"), self.path("node-known-failures.txt")],
                             STEP_BUDGET["node"])
        first = out.strip().splitlines()[0] if out.strip() else f"exit {code}"
        self.record("node", "onnx node tests", "pass" if code == 0 else "FAIL",
                    first.replace("ONNX node tests run on backend ", ""), time.time() - start)

    def compare_losses(self, step, t, extra):
        start = time.time()
        metrics = os.path.join(self.logs, t["name"] + ".jsonl")
        cmd = ["--steps", str(len(t["expected"])), "--metrics", metrics]
        if t["ranks"] > 1:
            cmd += ["--ranks", str(t["ranks"])]
        code, out = self.loom_run(t["plan"], cmd + extra, t["name"])
        if code != 0:
            last = out.strip().splitlines()[-1] if out.strip() else ""
            return self.record(step, t["name"], "FAIL", f"exit {code}: {last}",
                               time.time() - start)
        with open(metrics) as f:
            got = [json.loads(l)["loss"] for l in f]
        # Each step's loss to rtol relative (|e| floored at 1e-12), as many steps as expected.
        result = oracle.compare_sequences(got, t["expected"], t["rtol"],
                                          atol=t["rtol"] * 1e-12, name="losses")
        detail = (f"losses {got[0]:.5g}..{got[-1]:.5g}, worst rel. diff {result.error:.1e} "
                  f"(rtol {t['rtol']:g})" if result.ok else result.message)
        self.record(step, t["name"], "pass" if result.ok else "FAIL", detail,
                    time.time() - start)

    def step_parity(self):
        import numpy as np
        for t in self.manifest["training"]:
            self.compare_losses("parity", t, [])
        for t in self.manifest["inference"]:
            start = time.time()
            outdir = os.path.join(self.logs, t["name"] + "-outputs")
            extra = ["--outputs", outdir] + (["--ranks", str(t["ranks"])]
                                             if t["ranks"] > 1 else [])
            code, out = self.loom_run(t["plan"], extra, t["name"])
            if code != 0:
                last = out.strip().splitlines()[-1] if out.strip() else ""
                self.record("parity", t["name"], "FAIL", f"exit {code}: {last}",
                            time.time() - start)
                continue
            # Every output to rtol in the 2-norm: ||g - e|| <= rtol * ||e||.
            worst = oracle.Worst()
            for f in sorted(os.listdir(self.path(t["expected"]))):
                e = np.load(os.path.join(self.path(t["expected"]), f))
                path = os.path.join(outdir, f)
                g = np.load(path) if os.path.exists(path) else None
                worst.add(oracle.compare(g, e, t["rtol"], norm="l2", name=f))
            self.record("parity", t["name"], "pass" if worst.ok else "FAIL",
                        f"outputs' normwise rel. diff {worst.error:.1e} (rtol {t['rtol']:g})"
                        if worst.ok else worst.report(), time.time() - start)

    def step_partition(self):
        for t in self.manifest["partitioned"]:
            self.compare_losses("partition", t, [])

    def step_collective(self):
        start = time.time()
        cmd = [self.bin("loom-collective-check"), "--comm",
               "nccl" if self.backend == "cuda" else "threads"]
        if self.backend != "cuda":
            cmd += ["--ranks", "4"]
        code, out = self.run("collective", cmd, STEP_BUDGET["collective"])
        last = out.strip().splitlines()[-1] if out.strip() else f"exit {code}"
        self.record("collective", cmd[2], "pass" if code == 0 else "FAIL", last,
                    time.time() - start)

    def step_bench(self):
        b = self.manifest["bench"][self.backend]
        L, d, T, V = b["layers"], b["d_model"], b["seq"], b["vocab"]
        flops = b["batch"] * T * (6 * (12 * L * d * d + d * V) + 12 * L * T * d)
        for r in b["runs"]:
            start = time.time()
            times = {}
            for kind in ("fused", "unfused"):
                name = f"bench-{r['dtype']}-{kind}"
                metrics = os.path.join(self.logs, name + ".jsonl")
                code, out = self.loom_run(r[kind], ["--steps", "8", "--metrics", metrics],
                                          name, timeout=60)
                if code != 0:
                    last = out.strip().splitlines()[-1] if out.strip() else ""
                    self.record("bench", f"gpt step {r['dtype']}", "FAIL",
                                f"loom {kind}: exit {code}: {last}", time.time() - start)
                    break
                with open(metrics) as f:
                    ms = sorted(json.loads(l)["step_time_ms"] for l in f)[1:]
                times[kind] = ms[len(ms) // 2]
            if len(times) < 2:
                continue
            code, out = self.run(f"bench-{r['dtype']}-pytorch",
                                 [sys.executable, os.path.abspath(__file__), "--torch-step",
                                  json.dumps(dict(b, dtype=r["dtype"])),
                                  "--backend", self.backend], 50)
            torch_ms = next((float(l.split()[1]) for l in out.splitlines()
                             if l.startswith("torch_ms ")), None)
            rate = flops / (times["fused"] / 1e3)
            detail = (f"loom {times['fused']:.2f} ms ({rate / 1e12:.3g} TFLOP/s), unfused "
                      f"{times['unfused']:.2f} ms ({times['unfused'] / times['fused']:.2f}x)")
            detail += (f"; pytorch {torch_ms:.2f} ms, ratio (pytorch / loom) "
                       f"{torch_ms / times['fused']:.2f}x" if torch_ms else
                       "; pytorch peer failed (see its log)")
            if self.backend == "cuda":
                mfu = rate / PEAK[r['dtype']]
                detail += (f"; MFU {100 * mfu:.1f}% of "
                           f"{PEAK[r['dtype']] / 1e12:.0f} TFLOP/s")
                # bench/gpu_gpt.py's goals, recorded as its verdict; the row passes when
                # both sides ran (the goals are not the check's criterion).
                missed = ([] if torch_ms and torch_ms / times["fused"] >= 1.0 else
                          ["ratio >= 1.0x"]) + \
                    (["MFU >= 50%"] if r["dtype"] == "bf16" and not mfu >= 0.5 else [])
                detail += ("; goals met" if not missed else
                           "; goals missed: " + ", ".join(missed))
            self.record("bench", f"gpt step {r['dtype']}", "pass" if torch_ms else "FAIL",
                        detail, time.time() - start)
        if self.backend == "cuda":
            for dtype in (r["dtype"] for r in b["runs"]):
                start = time.time()
                code, out = self.run(f"bench-gemm-{dtype}",
                                     [self.bin("loom-gemm-bench"), "--tokens",
                                      str(b["batch"] * T), "--d-model", str(d), "--vocab",
                                      str(V), "--dtype", dtype], 60)
                lines = [l for l in out.splitlines() if l.strip()]
                self.record("bench", f"gemm {dtype} vs cublasGemmEx",
                            "pass" if code == 0 else "FAIL",
                            lines[-1].strip() if lines else f"exit {code}",
                            time.time() - start)

    def step_memcheck(self):
        start = time.time()
        plan = next(t for t in self.manifest["training"] if t["name"] == "gpt-f32-train")
        cmd = [self.bin("loom-run"), self.path(plan["plan"]), "--backend", self.backend,
               "--steps", "1", "--seed", str(self.manifest["seed"])]
        sanitizer = shutil.which("compute-sanitizer") or (
            "/usr/local/cuda/bin/compute-sanitizer"
            if os.path.exists("/usr/local/cuda/bin/compute-sanitizer") else None)
        if self.backend == "cuda":
            if not sanitizer:
                return self.record("memcheck", "gpt step", "FAIL",
                                   "compute-sanitizer not found", 0)
            cmd = [sanitizer, "--tool", "memcheck", "--error-exitcode", "99"] + cmd
        code, out = self.run("memcheck", cmd, STEP_BUDGET["memcheck"])
        summary = [l for l in out.splitlines() if "ERROR SUMMARY" in l]
        detail = summary[-1].strip() if summary else (
            "one step, no sanitizer on the cpu backend" if code == 0 else f"exit {code}")
        self.record("memcheck", "gpt step", "pass" if code == 0 else "FAIL", detail,
                    time.time() - start)

    def environment(self):
        lines = [f"backend {self.backend}", f"bundle {self.bundle}",
                 f"LD_LIBRARY_PATH {os.environ.get('LD_LIBRARY_PATH', '')}"]
        for cmd in (["nvidia-smi"], ["nvidia-smi", "--query-gpu=name,driver_version,"
                                     "memory.total", "--format=csv"],
                    ["ldd", self.bin("loom-run")]):
            if shutil.which(cmd[0]) or os.path.exists(cmd[0]):
                try:
                    r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
                    lines.append("$ " + " ".join(cmd) + "\n" + r.stdout + r.stderr)
                except (OSError, subprocess.TimeoutExpired) as e:
                    lines.append(f"$ {' '.join(cmd)}: {e}")
        try:
            import torch
            lines.append(f"PyTorch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN "
                         f"{torch.backends.cudnn.version()}, NCCL "
                         f"{'.'.join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else '-'}")
        except Exception as e:  # noqa: BLE001 (any import failure is worth a line)
            lines.append(f"PyTorch: not usable ({e})")
        text = "\n".join(lines)
        with open(os.path.join(self.report, "environment.txt"), "w") as f:
            f.write(text + "\n")
        print(text, flush=True)


def torch_step(size, backend):
    """Times PyTorch eager's AdamW step of the bench's GPT; prints 'torch_ms X'."""
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "models"))
    import export
    device = "cuda" if backend == "cuda" else "cpu"
    gpt = {k: size[k] for k in ("layers", "d_model", "heads", "vocab", "seq")}
    model = export.build_model("gpt", **gpt).to(device)
    # bf16: mixed precision as Loom's --precision bf16 (f32 weights, bf16 compute).
    autocast = (torch.autocast(device_type=device, dtype=torch.bfloat16)
                if size.get("dtype") == "bf16" else contextlib.nullcontext())
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, size["vocab"], (size["batch"], size["seq"]), generator=gen)
    labels = torch.randint(0, size["vocab"], ids.shape, generator=gen)
    ids, labels = ids.to(device), labels.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    times = []
    for i in range(8):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with autocast:
            logits = model(ids)
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1))
        loss.backward()
        opt.step()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(1e3 * (time.perf_counter() - start))
    times = sorted(times[1:])
    print(f"torch_ms {times[len(times) // 2]:.3f}")


def main():
    p = argparse.ArgumentParser(description="The GPU check (docs/gpu.md)")
    p.add_argument("--bundle", default=os.path.dirname(os.path.abspath(__file__)))
    p.add_argument("--report", default=None)
    p.add_argument("--backend", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--only", default="", help="comma-separated steps (default: all)")
    p.add_argument("--torch-step", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.torch_step:
        torch_step(json.loads(args.torch_step), args.backend)
        return 0
    report = args.report or os.path.join(args.bundle, "gpu-report")
    os.makedirs(report, exist_ok=True)
    check = Check(args.bundle, report, args.backend)
    began = time.time()
    check.environment()
    steps = [s for s in STEP_BUDGET if not args.only or s in args.only.split(",")]
    scale = 1 if args.backend == "cuda" else CPU_SCALE
    end = began + scale * TOTAL_BUDGET
    for step in steps:
        check.deadline = min(time.time() + scale * STEP_BUDGET[step], end)
        start = time.time()
        try:
            getattr(check, "step_" + step)()
        except Exception as e:  # noqa: BLE001 (a step's crash is its failure, not the check's)
            check.record(step, "(step)", "FAIL", f"{type(e).__name__}: {e}",
                         time.time() - start)
    passed = sum(r["status"] == "pass" for r in check.rows)
    failed = len(check.rows) - passed
    width = max(len(r["case"]) for r in check.rows) if check.rows else 10
    table = [f"{'step':13} {'case':{width}} {'result':6} {'s':>6}  detail"]
    for r in check.rows:
        table.append(f"{r['step']:13} {r['case']:{width}} {r['status']:6} "
                     f"{r['seconds']:6.1f}  {r['detail']}")
    table.append(f"check: {passed} passed, {failed} failed in {time.time() - began:.0f} s "
                 f"on {args.backend}")
    text = "\n".join(table)
    with open(os.path.join(report, "report.txt"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(report, "report.json"), "w") as f:
        json.dump(dict(backend=args.backend, passed=passed, failed=failed,
                       seconds=round(time.time() - began, 1), rows=check.rows), f, indent=1)
    print("\n" + text)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
