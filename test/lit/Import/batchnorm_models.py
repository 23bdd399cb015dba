#!/usr/bin/python3
"""Writes the small ONNX models of batchnorm-training.test.

    batchnorm_models.py OUTDIR

train.onnx    BatchNormalization-15 'bn', training_mode 1, x [4, 2, 3], its
              running_mean / running_var outputs named but not graph outputs (as
              PyTorch's train() export), momentum 0.9, scale/bias/mean/var initializers,
              producer_name "pytorch"
onnx.onnx     the same written by another producer (ONNX's own running variance)
train6.onnx   the same with x [6, 2, 3]
trainN.onnx   the same with x [N, 2, 3]
old.onnx      BatchNormalization-9 (opset 9) with its training outputs
x.npy         a [4, 2, 3] input, labels.npy its MSE labels
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def save(out, name, batch, opset=15, training=True, producer="pytorch"):
    shape = [batch, 2, 3]
    inits = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in
             [("bn.weight", [1.5, 0.5]), ("bn.bias", [0.1, -0.2]),
              ("bn.running_mean", [0.3, -0.4]), ("bn.running_var", [1.2, 0.8])]]
    attrs = dict(epsilon=1e-5, momentum=0.9)
    outputs = ["y", "rm", "rv"]
    if training:
        attrs["training_mode"] = 1
    else:
        outputs += ["saved_mean", "saved_var"]
    node = helper.make_node("BatchNormalization", ["x", "bn.weight", "bn.bias",
                                                   "bn.running_mean", "bn.running_var"],
                            outputs, name="bn", **attrs)
    graph = helper.make_graph(
        [node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    model.producer_name = producer
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out, name + ".onnx"))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    save(out, "train", 4)
    save(out, "onnx", 4, producer="onnx-example")
    save(out, "train6", 6)
    save(out, "trainN", "N")
    save(out, "old", 4, opset=9, training=False)
    rng = np.random.default_rng(3)
    np.save(os.path.join(out, "x.npy"), rng.standard_normal((4, 2, 3)).astype(np.float32))
    np.save(os.path.join(out, "labels.npy"), np.zeros((4, 2, 3), np.float32))


if __name__ == "__main__":
    main()
