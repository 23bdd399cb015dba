#!/usr/bin/python3
"""Writes a bf16 copy of an ONNX model: every float initializer, Constant and graph
input or output becomes BFLOAT16 (rounded to nearest even), and Casts to float cast
to bf16. compare_partitioned.py --bf16 trains such copies."""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper


def bf16_tensor(t):
    if t.data_type != TensorProto.FLOAT:
        return t
    a = numpy_helper.to_array(t).astype(np.float32)
    bits = a.view(np.uint32).astype(np.uint64)
    rounded = ((bits + np.uint64(0x7FFF) + ((bits >> np.uint64(16)) & np.uint64(1)))
               >> np.uint64(16)).astype(np.uint16)
    out = TensorProto()
    out.name = t.name
    out.dims.extend(t.dims)
    out.data_type = TensorProto.BFLOAT16
    out.raw_data = rounded.tobytes()
    return out


def convert(model):
    g = model.graph
    for i, t in enumerate(g.initializer):
        g.initializer[i].CopyFrom(bf16_tensor(t))
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = TensorProto.BFLOAT16
    for node in g.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                a.t.CopyFrom(bf16_tensor(a.t))
            if node.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = TensorProto.BFLOAT16
    return model


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("model")
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    onnx.save(convert(onnx.load(args.model)), args.output)


if __name__ == "__main__":
    main()
