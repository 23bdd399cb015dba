#!/usr/bin/env bash
# Builds the GPU bundle: the runtime alone (loom-run and the runtime-only tests, no MLIR,
# oneDNN or MPI), every plan the GPU check runs, the CPU's expected results, check.sh.
#   scripts/gpu-bundle.sh OUTDIR
# Needs the full build in build/ (scripts/build.sh) for `loom`; makes the runtime-only
# build in build-gpu-bundle/ (LOOM_BUNDLE_BUILD overrides). See docs/gpu.md.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/gpu-bundle.sh OUTDIR}
full=${LOOM_BUILD:-build}
rt=${LOOM_BUNDLE_BUILD:-build-gpu-bundle}
[ -x "$full/tools/loom/loom" ] || { echo "gpu-bundle: build Loom first (scripts/build.sh)" >&2; exit 1; }
# Shared libraries: the CUDA kernels (2.6 MB of device code) are in the bundle once,
# not once per binary; RPATHs relative to each binary, which the bundle's lib/ (on
# LD_LIBRARY_PATH in check.sh) stands in for.
cmake -G Ninja -S . -B "$rt" -DLOOM_RUNTIME_ONLY=ON -DLOOM_ENABLE_DNNL=OFF \
  -DLOOM_ENABLE_MPI=OFF -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
  -DCMAKE_BUILD_RPATH_USE_ORIGIN=ON >/dev/null
cmake --build "$rt"
# The compile and expected-result runs use every core of this machine.
/usr/bin/python3 scripts/gpu_bundle.py "$out" --build "$full" --runtime-build "$rt"
