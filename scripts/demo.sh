#!/usr/bin/env bash
# Loom's main job on its built-in default, as far as Loom goes today
# (partitioning with user strategies; the automatic search comes next):
# compile the bundled GPT (2 layers, d=64) into an AdamW training step for a
# batch of 8, split over 4 devices as data parallel x Megatron tensor
# parallel (mesh dp=2,tp=2, models/gpt_megatron.json), train it for 30 steps
# on 4 ranks (threads) on a text every Debian machine ships (character
# level), save a checkpoint and write the trained model back to ONNX.
# Installs and builds first when needed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
bash scripts/build.sh build >/dev/null
out=build/demo
rm -rf "$out" && mkdir -p "$out"
loom=build/tools/loom/loom
$loom compile models/gpt.onnx --batch 8 --train --optimizer adamw --lr 3e-3 \
  --lr-schedule cosine --warmup-steps 5 --total-steps 30 --min-lr 3e-4 \
  --mesh dp=2,tp=2 --strategy models/gpt_megatron.json \
  --save-strategy "$out/strategy.json" -o "$out/gpt-train.plan"
$loom run "$out/gpt-train.plan" --ranks 4 --steps 30 \
  --tokens /usr/share/common-licenses/GPL-3 --metrics "$out/metrics.jsonl" \
  --trace "$out/trace.json" --save "$out/checkpoint"
$loom export "$out/gpt-train.plan" --checkpoint "$out/checkpoint" \
  -o "$out/gpt-trained.onnx"
echo "loom: metrics in $out/metrics.jsonl, trace in $out/trace.json (one" \
  "track per rank), every op's strategy in $out/strategy.json, trained" \
  "model in $out/gpt-trained.onnx"
