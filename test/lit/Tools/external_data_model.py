#!/usr/bin/python3
"""Writes, into DIR, ONNX models (y = x @ w) whose initializer w keeps its data in an
external file: dotdot.onnx ('../../etc/passwd'), absolute.onnx ('/etc/passwd'),
link.onnx ('leak.bin', a symbolic link to /etc/passwd) and inside.onnx ('w.bin', a
file in DIR holding w's 64 bytes).

Usage: external_data_model.py DIR
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper


def model(location):
    w = TensorProto()
    w.name = "w"
    w.data_type = TensorProto.FLOAT
    w.dims.extend([4, 4])
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", "64")):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "external",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def main():
    out = sys.argv[1]
    np.arange(16, dtype=np.float32).tofile(os.path.join(out, "w.bin"))
    link = os.path.join(out, "leak.bin")
    if not os.path.lexists(link):
        os.symlink("/etc/passwd", link)
    for name, location in (("dotdot", "../../etc/passwd"), ("absolute", "/etc/passwd"),
                           ("link", "leak.bin"), ("inside", "w.bin")):
        with open(os.path.join(out, name + ".onnx"), "wb") as f:
            f.write(model(location).SerializeToString())


if __name__ == "__main__":
    main()
