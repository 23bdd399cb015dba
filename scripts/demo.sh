#!/usr/bin/env bash
# Loom's main job on its built-in default, as far as Loom goes today: import
# the bundled GPT (2 layers, d=64) for a batch of 8, clean it up, and show
# what the compiler sees. Installs and builds first when needed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
bash scripts/build.sh build >/dev/null
out=build/demo
mkdir -p "$out"
build/tools/loom/loom import models/gpt.onnx --batch 8 --fuse -o "$out/gpt.mlir"
build/tools/loom/loom import models/gpt.onnx --batch 8 --fuse --no-weights \
  -o "$out/gpt.shapes.mlir" >/dev/null
build/tools/loom-opt/loom-opt "$out/gpt.mlir" >/dev/null
echo "loom: the module verifies in loom-opt; first ops of $out/gpt.shapes.mlir:"
grep -m 12 -E "loom\.(gather|layer_norm|matmul|softmax)" "$out/gpt.shapes.mlir" | cut -c1-150
echo "loom: next steps (compile, run, auto-parallel) are not implemented yet."
