#!/usr/bin/env bash
# Compiles the plans the plan fuzzer mutates (test/fuzz/PlanTarget.cpp),
# with `loom compile` as users do: one device (inference, with weights),
# data parallel, data x tensor parallel with a strategy file, pipeline
# parallel (1F1B), ZeRO-3 on a convolutional model, and the bundled GPT
# under the Megatron strategy (whose saved form seeds the strategy fuzzer).
# Training plans use seeded initialisation, which keeps the weights out of
# them: the mutations land on the program, and small plans keep each input
# cheap under the sanitizers.
#   make_plan_seeds.sh LOOM SOURCE_DIR OUT_DIR
set -euo pipefail
loom=$1 src=$2 out=$3
models=$src/models
rm -rf "$out"
mkdir -p "$out"
train=(--train --init seeded --seed 1)
"$loom" compile "$models/mlp.onnx" --batch 2 -o "$out/mlp-infer.plan"
"$loom" compile "$models/mlp.onnx" --batch 4 "${train[@]}" --optimizer adamw \
  --mesh dp=2 -o "$out/mlp-dp2.plan"
"$loom" compile "$models/mlp.onnx" --batch 8 "${train[@]}" --optimizer adamw \
  --mesh dp=2,tp=2 --strategy "$src/test/fuzz/corpus/strategy/mlp-tp.json" \
  -o "$out/mlp-dp2tp2.plan"
"$loom" compile "$models/mlp.onnx" --batch 8 --micro-batches 2 "${train[@]}" \
  --optimizer sgd --mesh pp=2 -o "$out/mlp-pp2.plan"
"$loom" compile "$models/upsampler.onnx" --batch 2 "${train[@]}" \
  --optimizer adamw --mesh dp=2 --zero 3 -o "$out/upsampler-dp2-zero3.plan"
"$loom" compile "$models/gpt.onnx" --batch 4 "${train[@]}" --optimizer sgd \
  --mesh dp=2,tp=2 --strategy "$models/gpt_megatron.json" \
  --save-strategy "$out/gpt-dp2tp2.strategy.json" -o "$out/gpt-dp2tp2.plan"
ls -l "$out"
