"""Writes PyTorch reference inputs and outputs (.npy) for the models that export.py gives Loom.

The model is rebuilt with export.py's classes, seed and construction order, so its weights are
those of the exported .onnx file (pass the same size flags and --weight-seed as the export):

    /usr/bin/python3 models/reference.py --model gpt --batch 2 --seed 0 --out /tmp/ref
    /usr/bin/python3 models/reference.py --model gpt --batch 2 --out /tmp/ref \\
        --check-onnx models/gpt.onnx

writes DIR/<input name>.npy (`x` for mlp and cnn, `input_ids` for gpt) and DIR/logits.npy.
--check-onnx also verifies that every initializer of the given ONNX file is bit-identical to
the rebuilt model's tensor of the same name and that no parameter is missing.
"""

import argparse
import os
import sys

import numpy as np
import torch
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export import DEFAULT_SEED, add_model_args, build_model, input_spec, model_config, make_inputs  # noqa: E402


def reference(name, batch, seed=0, weight_seed=DEFAULT_SEED, **gpt_kwargs):
    """Rebuilds model `name` and runs it on random inputs drawn from `seed`.

    Returns (model, {input name: ndarray}, logits ndarray). Inputs come from a separate
    generator, so `seed` does not affect the weights.
    """
    model = build_model(name, seed=weight_seed, **gpt_kwargs)
    generator = torch.Generator().manual_seed(seed)
    inputs = make_inputs(name, model, batch, generator)
    with torch.no_grad():
        logits = model(*inputs)
    names = [n for n, _, _ in input_spec(name, model)]
    return model, {n: t.numpy() for n, t in zip(names, inputs)}, logits.numpy()


def check_initializers(model, onnx_path):
    """Compares the ONNX initializers with model.state_dict(); returns a list of problems."""
    import onnx  # only needed for the check

    state = model.state_dict()
    problems = []
    found = set()
    for init in onnx.load(onnx_path).graph.initializer:
        if init.name not in state:
            problems.append(f"initializer {init.name!r} is not a PyTorch state_dict entry")
            continue
        expected = state[init.name].detach().cpu().numpy()
        actual = numpy_helper.to_array(init)
        if actual.shape != expected.shape or actual.dtype != expected.dtype:
            problems.append(f"{init.name}: ONNX {actual.dtype}{list(actual.shape)} vs "
                            f"PyTorch {expected.dtype}{list(expected.shape)}")
        elif not np.array_equal(actual, expected):
            diff = np.max(np.abs(actual.astype(np.float64) - expected.astype(np.float64)))
            problems.append(f"{init.name}: values differ (max abs diff {diff:g})")
        found.add(state[init.name].data_ptr())
    for pname, tensor in state.items():
        # BatchNorm's step counter is not used in eval mode and is not exported.
        if pname.endswith("num_batches_tracked"):
            continue
        if tensor.data_ptr() not in found:
            problems.append(f"state_dict entry {pname!r} has no ONNX initializer")
    return problems


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Write PyTorch reference inputs/outputs (.npy) for a model exported by "
                    "export.py, for comparison with Loom.")
    add_model_args(parser)
    parser.add_argument("--batch", type=int, default=2, help="batch size of the random inputs (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the random inputs, independent of the weights (default: %(default)s)")
    parser.add_argument("--weight-seed", type=int, default=DEFAULT_SEED,
                        help="model seed; must equal the --seed given to export.py (default: %(default)s)")
    parser.add_argument("--out", required=True, help="directory to write the .npy files into")
    parser.add_argument("--check-onnx", metavar="PATH", default=None,
                        help="also check that PATH's initializers equal the rebuilt weights; "
                             "exits with status 1 on a mismatch")
    args = parser.parse_args(argv)
    if args.model is None:
        parser.error("--model is required")

    kwargs = model_config(args)
    model, inputs, logits = reference(args.model, args.batch, seed=args.seed,
                                      weight_seed=args.weight_seed, **kwargs)
    os.makedirs(args.out, exist_ok=True)
    for name, array in list(inputs.items()) + [("logits", logits)]:
        path = os.path.join(args.out, f"{name}.npy")
        np.save(path, array)
        print(f"wrote {path} {array.dtype}{list(array.shape)}")

    if args.check_onnx:
        problems = check_initializers(model, args.check_onnx)
        for problem in problems:
            print(f"mismatch: {problem}", file=sys.stderr)
        if problems:
            sys.exit(1)
        print(f"{args.check_onnx}: all initializers match the rebuilt model")


if __name__ == "__main__":
    main()
