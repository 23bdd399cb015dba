#!/usr/bin/python3
"""Loom's forward outputs equal PyTorch's on the bundled models.

For each model: models/reference.py rebuilds the PyTorch module with the
exported weights and writes random inputs and PyTorch's outputs; `loom
compile` + `loom run` computes the same outputs from the ONNX file. They must
agree to 1e-5 relative in f32, measured normwise: max |loom - torch| <=
1e-5 * max |torch| (elementwise relative error is meaningless near zero).
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from oracle import compare  # noqa: E402  (test/oracle.py)

MODELS = {
    # model name -> (onnx file, reference.py model, input names)
    "mlp": ("mlp.onnx", "mlp", "x"),
    "gpt": ("gpt.onnx", "gpt", "input_ids"),
    "gpt_opset14": ("gpt_opset14.onnx", "gpt", "input_ids"),
    "llama": ("llama.onnx", "llama", "input_ids"),
    "cnn": ("cnn.onnx", "cnn", "x"),
    "encoder": ("encoder.onnx", "encoder", "input_ids,padding_mask"),
}
TOLERANCE = 1e-5


def run(cmd):
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"FAILED: {' '.join(cmd)}\n{result.stdout}{result.stderr}")
    return result.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--loom", required=True, help="path to the loom binary")
    parser.add_argument("--source", required=True, help="Loom's source tree")
    parser.add_argument("--batch", type=int, default=3)
    parser.add_argument("--models", default=",".join(MODELS),
                        help="comma-separated subset of the models (default: all)")
    args = parser.parse_args()
    selected = args.models.split(",")
    unknown = [m for m in selected if m not in MODELS]
    if unknown:
        parser.error(f"unknown models {unknown}; choose from {list(MODELS)}")

    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in selected:
            onnx_file, ref_model, input_names = MODELS[name]
            work = os.path.join(tmp, name)
            os.makedirs(work)
            run([sys.executable, os.path.join(args.source, "models", "reference.py"),
                 "--model", ref_model, "--batch", str(args.batch), "--seed", "7",
                 "--out", work])
            plan = os.path.join(work, "model.plan")
            run([args.loom, "compile", os.path.join(args.source, "models", onnx_file),
                 "--batch", str(args.batch), "-o", plan])
            out_dir = os.path.join(work, "loom")
            run([args.loom, "run", plan, "--inputs",
                 ",".join(f"{n}={os.path.join(work, n + '.npy')}"
                          for n in input_names.split(",")),
                 "--outputs", out_dir])
            expected = np.load(os.path.join(work, "logits.npy"))
            actual = np.load(os.path.join(out_dir, "logits.npy"))
            result = compare(actual, expected, rtol=TOLERANCE, name=f"{name} logits")
            print(f"{'ok' if result.ok else 'MISMATCH'}: {result.message}")
            failures += not result.ok
    passed = len(selected) - failures
    print(f"{passed} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
