#!/usr/bin/python3
"""Trains the bundled GPT (models/export.py: 2 layers, d_model 64, seq 64, vocab 256) from
Python on 4 ranks of this machine: `loom.parallelize` compiles its AdamW step for a
dp=2 x tp=2 mesh with Megatron's tensor-parallel layouts for the attention and MLP
matmuls (semi-auto: the strategies below, completed by propagation), and the ranks run as
threads of this process. The text is read at character level (bytes as tokens).

    PYTHONPATH=build/python /usr/bin/python3 examples/train_gpt.py [--steps 50] [--text FILE]

At the end the trained weights go back into the PyTorch module, which then predicts the
same next-token distribution Loom does; a checkpoint is saved and resumed. Both are
checked, and the script exits 1 when they do not hold: Loom's forward pass with the
trained weights (`loom.compile`) gives PyTorch's logits on the last batch, and the resumed
job, at the step it was saved, computes PyTorch's loss there (to 1e-4, normwise).
"""
import argparse
import os
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "models"))
sys.path.insert(0, os.path.join(ROOT, "test"))

import export  # noqa: E402  (the bundled models' PyTorch classes)
import loom  # noqa: E402
import oracle  # noqa: E402  (test/oracle.py: the checks' comparison)

TOLERANCE = 1e-4  # f32, the same weights: only the order of the sums differs

# Megatron's layouts: column-parallel q, k, v and fc; row-parallel proj (per submodule
# path, or an ONNX node pattern when the key starts with "/").
MEGATRON = {
    "/blocks.*/attn/[qkv]/MatMul": [["dp", 1, 1], [1, "tp"]],
    "/blocks.*/attn/proj/MatMul": [["dp", 1, "tp"], ["tp", 1]],
    "/blocks.*/mlp/fc/MatMul": [["dp", 1, 1], [1, "tp"]],
    "/blocks.*/mlp/proj/MatMul": [["dp", 1, "tp"], ["tp", 1]],
}


def batches(text, batch, seq, steps):
    data = np.frombuffer(text, dtype=np.uint8).astype(np.int64)
    rng = np.random.default_rng(0)
    for _ in range(steps):
        starts = rng.integers(0, len(data) - seq - 1, batch)
        x = np.stack([data[s:s + seq] for s in starts])
        y = np.stack([data[s + 1:s + seq + 1] for s in starts])
        yield torch.from_numpy(x), torch.from_numpy(y)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--text", default="/usr/share/common-licenses/GPL-3")
    args = parser.parse_args()

    model = export.build_model("gpt")
    seq = model.seq
    with open(args.text, "rb") as f:
        text = f.read()
    data = list(batches(text, args.batch, seq, args.steps))
    job = loom.parallelize(model, example_inputs=(data[0][0],), loss="cross_entropy",
                           optimizer=loom.AdamW(lr=3e-3, weight_decay=0.01),
                           mesh="dp=2,tp=2", strategies=MEGATRON)
    print(job.explain(top=5))
    for step, (x, y) in enumerate(data, 1):
        loss = job.step(x, labels=y)
        if step == 1 or step % 10 == 0:
            print(f"step {step:4d}  loss {loss:.4f}  ({1e3 * job.step_seconds:.1f} ms/step)")

    model.load_state_dict(job.state_dict())
    x, y = data[-1]
    with torch.no_grad():
        logits = model(x)
    torch_loss = F.cross_entropy(logits.reshape(-1, 256), y.reshape(-1)).item()
    print(f"PyTorch with the trained weights: loss {torch_loss:.4f} on the last batch")
    checks = []
    # Loom's own forward pass with the trained weights predicts PyTorch's distribution.
    forward = loom.compile(model, (x,), mesh="dp=2", progress=False)
    checks.append(oracle.compare(forward(x).numpy(), logits.numpy(), TOLERANCE,
                                 name="Loom's logits with the trained weights"))
    with tempfile.TemporaryDirectory() as ckpt:
        job.save(ckpt)
        resumed = loom.load(ckpt, model)
        at = resumed.steps_taken
        loss = resumed.step(x, labels=y)  # the loss before this step's update
        print(f"resumed at step {at}: loss {loss:.4f}")
    checks.append(oracle.compare(loss, torch_loss, TOLERANCE,
                                 name="the resumed job's loss on the last batch"))
    checks.append(oracle.compare(at, args.steps, 0.0, name="the resumed job's step"))
    for check in checks:
        print(("agrees: " if check.ok else "DISAGREES: ") + check.message)
    return 0 if all(checks) else 1


if __name__ == "__main__":
    sys.exit(main())
