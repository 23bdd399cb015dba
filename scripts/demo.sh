#!/usr/bin/env bash
# Loom's main job on its built-in default, as far as Loom goes today: compile
# the bundled GPT (2 layers, d=64) for a batch of 8 into a plan and run its
# forward step on the CPU backend, with a Chrome trace. Installs and builds
# first when needed. (Training and auto-parallel compilation come next.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
bash scripts/build.sh build >/dev/null
out=build/demo
mkdir -p "$out"
loom=build/tools/loom/loom
$loom import models/gpt.onnx --batch 8 --fuse --no-weights -o "$out/gpt.mlir"
$loom compile models/gpt.onnx --batch 8 -o "$out/gpt.plan"
$loom run "$out/gpt.plan" --repeat 10 --outputs "$out/outputs" \
  --trace "$out/trace.json"
echo "loom: IR in $out/gpt.mlir, outputs in $out/outputs/, trace in $out/trace.json"
echo "loom: not yet built: training steps, several devices, auto-parallel."
