#!/usr/bin/python3
"""The GPU bundle, tested without a GPU (docs/gpu.md).

Builds the bundle (scripts/gpu-bundle.sh: a runtime-only build, every plan, the CPU's
expected results), then checks that
* `loom-run` links no MLIR or LLVM library, and every library a bundled binary needs is in
  the bundle or on the GPU image's short list (libc, libm, libstdc++, libgcc_s, libgomp,
  libcuda, libcudart, libcublas, libcublasLt, libcudnn*, libnccl);
* the bundle is at most 40 MiB;
* `check.sh --backend cpu` passes every step in an environment cleared of the build
  (env -i, LD_LIBRARY_PATH only into the bundle), and writes its report.

Usage: gpu_bundle.py --source DIR --build DIR --work DIR
"""
import argparse
import json
import os
import subprocess
import sys

WHITELIST = ("linux-vdso", "ld-linux", "libc.so", "libm.so", "libstdc++", "libgcc_s",
             "libgomp", "libpthread", "libdl.so", "librt.so", "libcuda.so", "libcudart",
             "libcublas", "libcublasLt", "libcudnn", "libnccl")
LIMIT = 40 * 1024 * 1024


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--source", required=True)
    p.add_argument("--build", required=True)
    p.add_argument("--work", required=True)
    args = p.parse_args()
    bundle = os.path.join(args.work, "bundle")
    env = dict(os.environ, LOOM_BUILD=args.build,
               LOOM_BUNDLE_BUILD=os.path.join(args.work, "runtime-build"))
    r = subprocess.run(["bash", os.path.join(args.source, "scripts", "gpu-bundle.sh"), bundle],
                       env=env, capture_output=True, text=True)
    print(r.stdout[-3000:] + r.stderr[-3000:])
    if r.returncode != 0:
        print("FAIL: scripts/gpu-bundle.sh failed")
        return 1
    failures = []

    # Libraries: each bundled binary's, resolved with only the bundle's lib/ added.
    lib = os.path.join(bundle, "lib")
    for name in sorted(os.listdir(os.path.join(bundle, "bin"))):
        path = os.path.join(bundle, "bin", name)
        out = subprocess.run(["ldd", path], capture_output=True, text=True,
                             env={"LD_LIBRARY_PATH": lib + ":/usr/local/cuda/lib64"}).stdout
        for line in out.splitlines():
            soname = os.path.basename(line.split("=>")[0].strip().split()[0]) \
                if line.strip() else ""
            where = line.split("=>")[1].strip() if "=>" in line else ""
            if not soname:
                continue
            if "mlir" in soname.lower() or "llvm" in soname.lower():
                failures.append(f"{name} links {soname}")
            elif where.startswith(lib):
                continue
            elif not any(soname.startswith(w) for w in WHITELIST):
                failures.append(f"{name} needs {soname} ({where or 'not found'}), which is "
                                "neither in the bundle nor on the whitelist")
    size = sum(os.path.getsize(os.path.join(d, f))
               for d, _, files in os.walk(bundle) for f in files)
    print(f"bundle size {size / 2**20:.1f} MiB (limit {LIMIT // 2**20} MiB)")
    if size > LIMIT:
        failures.append(f"the bundle is {size / 2**20:.1f} MiB, over the limit")

    # The check itself on the CPU backend, in a cleared environment.
    report = os.path.join(args.work, "report")
    r = subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", "HOME=" + args.work,
                        "OUT=" + report, "LD_LIBRARY_PATH=" + lib,
                        "bash", os.path.join(bundle, "check.sh"), "--backend", "cpu"],
                       capture_output=True, text=True, timeout=900)
    print(r.stdout[-6000:] + r.stderr[-2000:])
    try:
        with open(os.path.join(report, "report.json")) as f:
            rows = json.load(f)["rows"]
    except (OSError, ValueError) as e:
        rows = []
        failures.append(f"no report.json from check.sh: {e}")
    steps = {row["step"].split()[0] for row in rows}
    if steps != set("abcdefg") and rows:
        failures.append(f"the report has steps {sorted(steps)}, not a to g")
    failures += [f"check.sh step {row['step']} {row['case']}: {row['detail']}"
                 for row in rows if row["status"] != "pass"]
    if r.returncode != 0 and not failures:
        failures.append(f"check.sh exited {r.returncode}")
    for f in failures:
        print("FAIL: " + f)
    print(f"{1 if not failures else 0} passed, {1 if failures else 0} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
