#!/usr/bin/env bash
# Loom's main job on its built-in default: measure this machine (a hardware
# profile of 4 ranks sharing its cores), let the automatic search choose
# how to split the bundled GPT (2 layers, d=64; an AdamW training step for a
# batch of 8) over a mesh of 4 devices (dp=2 x tp=2), show what it chose
# and why (loom explain), train it for 30 steps on 4 ranks (threads) on a
# text every Debian machine ships (character level), save a checkpoint and
# write the trained model back to ONNX. Installs and builds first when
# needed.
#
# CI runs the same commands shortened (test/CMakeLists.txt, `demo`):
# LOOM_DEMO_STEPS (default 30) steps, on the build in LOOM_BUILD_DIR
# (default build/), which LOOM_DEMO_NO_BUILD=1 takes as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${LOOM_DEMO_STEPS:-30}
build=${LOOM_BUILD_DIR:-build}
if [ -z "${LOOM_DEMO_NO_BUILD:-}" ]; then
  bash scripts/setup.sh >/dev/null
  bash scripts/build.sh "$build" >/dev/null
fi
out=$build/demo
rm -rf "$out" && mkdir -p "$out"
loom=$build/tools/loom/loom
$loom calibrate --ranks 4 -o "$out/cpu.json" | tail -1
$loom compile models/gpt.onnx --batch 8 --train --optimizer adamw --lr 3e-3 \
  --lr-schedule cosine --warmup-steps 5 --total-steps 30 --min-lr 3e-4 \
  --mesh dp=2,tp=2 --mode auto --cluster "$out/cpu.json" \
  --save-strategy "$out/strategy.json" -o "$out/gpt-train.plan"
$loom explain "$out/gpt-train.plan" --top 8
$loom run "$out/gpt-train.plan" --ranks 4 --steps "$steps" \
  --tokens /usr/share/common-licenses/GPL-3 --metrics "$out/metrics.jsonl" \
  --trace "$out/trace.json" --save "$out/checkpoint"
$loom export "$out/gpt-train.plan" --checkpoint "$out/checkpoint" \
  -o "$out/gpt-trained.onnx"
echo "loom: metrics in $out/metrics.jsonl, trace in $out/trace.json (one" \
  "track per rank), every op's strategy in $out/strategy.json (the plan's" \
  "full explanation: loom explain $out/gpt-train.plan), trained model in" \
  "$out/gpt-trained.onnx"
