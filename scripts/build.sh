#!/usr/bin/env bash
# Configures and builds Loom with ninja (and ccache when present).
#   scripts/build.sh [BUILD_DIR] [extra cmake args...]
# Default BUILD_DIR is build/. Installs nothing: run scripts/setup.sh first.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
cmake -G Ninja -S . -B "$dir" \
  -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
  -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit "$@" >/dev/null
cmake --build "$dir"
