#!/usr/bin/env bash
# The GPU check, run from the bundle that scripts/gpu-bundle.sh made (docs/gpu.md).
#   ./check.sh [--backend cuda|cpu] [--only STEP,...]
# Writes its report (report.txt, report.json, a log per case) to $OUT when that is set,
# else to ./gpu-report. Needs bash and python3 with numpy (PyTorch for the bench's peer).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export PATH="${PATH:-/usr/local/bin:/usr/bin:/bin}"
report="${OUT:-$here/gpu-report}"
mkdir -p "$report"

# CUDA's libraries wherever the image keeps them: the toolkit's lib64, or the nvidia-*
# Python packages' lib folders (PyTorch's wheels bring cuBLAS, cuDNN and NCCL there).
libs="$here/lib"
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && libs="$libs:$d"
done
for py in python3 /usr/bin/python3; do
  if command -v "$py" >/dev/null 2>&1; then
    site=$("$py" -c 'import site, sys; print("\n".join(site.getsitepackages()))' 2>/dev/null) || continue
    while read -r s; do
      for d in "$s"/nvidia/*/lib; do [ -d "$d" ] && libs="$libs:$d"; done
    done <<< "$site"
    break
  fi
done
export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

python=$(command -v python3 || echo /usr/bin/python3)
exec "$python" "$here/check.py" --bundle "$here" --report "$report" "$@"
