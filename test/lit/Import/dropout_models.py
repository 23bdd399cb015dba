#!/usr/bin/python3
"""Writes the small ONNX models of dropout.test: Dropout in its forms.

    dropout_models.py OUTDIR

train.onnx       Dropout-13 'drop', training mode, ratio 0.25, mask output unused
train_seed.onnx  the same with a `seed` attribute (5)
mask.onnx        training mode, the mask output used (cast to float and added)
zero.onnx        training mode, ratio 0 (the identity)
eval.onnx        training_mode false (the identity)
dropout10.onnx   Dropout-10 (opset 10), `ratio` attribute 0.5 (always the identity)
bad_ratio.onnx   training mode, ratio 1 (invalid)
x.npy            a [4, 6] input, labels.npy its MSE labels
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def save(out, name, nodes, opset=13, outputs=("y",)):
    graph = helper.make_graph(nodes, name, [vi("x")], [vi(o) for o in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 6
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out, name + ".onnx"))


def vi(name):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, [4, 6])


def const(name, value):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value, name))


def dropout(ratio, training, outputs=("y", "mask"), **attrs):
    return [const("ratio", np.array(ratio, np.float32)),
            const("mode", np.array(training)),
            helper.make_node("Dropout", ["x", "ratio", "mode"], list(outputs), name="drop",
                             **attrs)]


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    save(out, "train", dropout(0.25, True))
    save(out, "train_seed", dropout(0.25, True, seed=5))
    save(out, "mask", dropout(0.25, True, ("d", "mask")) + [
        helper.make_node("Cast", ["mask"], ["m"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["d", "m"], ["y"])])
    save(out, "zero", dropout(0.0, True))
    save(out, "eval", dropout(0.25, False))
    save(out, "dropout10", [helper.make_node("Dropout", ["x"], ["y"], ratio=0.5)], opset=10)
    save(out, "bad_ratio", dropout(1.0, True))
    np.save(os.path.join(out, "x.npy"),
            np.random.default_rng(3).standard_normal((4, 6)).astype(np.float32))
    np.save(os.path.join(out, "labels.npy"), np.zeros((4, 6), np.float32))


if __name__ == "__main__":
    main()
