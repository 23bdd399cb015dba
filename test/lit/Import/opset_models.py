#!/usr/bin/python3
"""Writes the small ONNX models of opset-versions.test: operators at the opsets
where their form differs from opset 13's.

    opset_models.py OUTDIR

softmax11.onnx     Softmax-11, axis 1 of a [2, 3, 4] input (flattens to [2, 12])
logsoftmax11.onnx  LogSoftmax-11, default axis (1) of a [2, 3, 4] input
squeeze11.onnx     Squeeze-11 and Unsqueeze-11 with `axes` attributes
split11.onnx       Split-11 with a `split` attribute
reducesum11.onnx   ReduceSum-11 with an `axes` attribute
add6.onnx          Add-6 (opset 6), whose `broadcast` attribute Loom does not import
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper


def save(out, name, nodes, inputs, outputs, opset):
    graph = helper.make_graph(nodes, name, inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 6 if opset >= 11 else 3
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out, name + ".onnx"))


def vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    save(out, "softmax11", [helper.make_node("Softmax", ["x"], ["y"], axis=1)],
         [vi("x", [2, 3, 4])], [vi("y", [2, 3, 4])], 11)
    save(out, "logsoftmax11", [helper.make_node("LogSoftmax", ["x"], ["y"])],
         [vi("x", [2, 3, 4])], [vi("y", [2, 3, 4])], 11)
    save(out, "squeeze11",
         [helper.make_node("Squeeze", ["x"], ["s"], axes=[1]),
          helper.make_node("Unsqueeze", ["s"], ["y"], axes=[0, 3])],
         [vi("x", [2, 1, 4])], [vi("y", [1, 2, 4, 1])], 11)
    save(out, "split11", [helper.make_node("Split", ["x"], ["a", "b"], axis=1, split=[1, 3])],
         [vi("x", [2, 4])], [vi("a", [2, 1]), vi("b", [2, 3])], 11)
    save(out, "reducesum11",
         [helper.make_node("ReduceSum", ["x"], ["y"], axes=[1], keepdims=0)],
         [vi("x", [2, 3, 4])], [vi("y", [2, 4])], 11)
    save(out, "add6", [helper.make_node("Add", ["x", "x"], ["y"])],
         [vi("x", [2, 3])], [vi("y", [2, 3])], 6)
    np.save(os.path.join(out, "x234.npy"),
            np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32))


if __name__ == "__main__":
    main()
