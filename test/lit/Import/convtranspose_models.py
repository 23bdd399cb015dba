#!/usr/bin/python3
"""Writes the models of convtranspose.test into the folder given: 2-D ConvTranspose with
every attribute, 1-D, output_shape, and the forms Loom refuses (3-D, output padding not
smaller than the stride, output_shape that needs padding before the output)."""
import sys

import numpy as np
import onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
out = sys.argv[1]
f = lambda n, s: h.make_tensor_value_info(n, T.FLOAT, s)
w = lambda n, *s: nh.from_array(np.zeros(s, np.float32), n)


def save(name, x, ws, y, bias=None, **attrs):
    inits = [w('w', *ws)] + ([w('b', bias)] if bias else [])
    node = h.make_node('ConvTranspose', ['x', 'w'] + (['b'] if bias else []), ['y'], name='ct',
                       **attrs)
    g = h.make_graph([node], 'g', [f('x', x)], [f('y', y)], inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid('', 17)]), f'{out}/{name}.onnx')


# Height (3 - 1) * 2 - 1 - 0 + 3 + 1 = 7, width (3 - 1) * 2 - 0 - 1 + 2 * 2 + 1 + 1 = 9.
save('ct2d', [1, 4, 3, 3], [4, 3, 3, 3], [1, 6, 7, 9], bias=6, strides=[2, 2],
     pads=[1, 0, 0, 1], dilations=[1, 2], output_padding=[1, 1], group=2)
# (5 - 1) * 2 - 1 - 0 + 3 + 1 = 11, through a unit height.
save('ct1d', [2, 2, 5], [2, 3, 3], [2, 3, 11], bias=3, strides=[2], pads=[1, 0],
     output_padding=[1])
# The default output is 9 x 7: one more row and column is output_padding.
save('output_shape', [1, 1, 3, 3], [1, 2, 3, 3], [1, 2, 10, 8], strides=[3, 2],
     output_shape=[10, 8])
save('same_upper', [1, 1, 3, 3], [1, 2, 3, 3], [1, 2, 6, 6], strides=[2, 2],
     auto_pad='SAME_UPPER')
save('ct3d', [1, 1, 3, 3, 3], [1, 2, 3, 3, 3], [1, 2, 5, 5, 5])
save('wide_output_padding', [1, 1, 3, 3], [1, 1, 2, 2], [1, 1, 6, 6], dilations=[2, 2],
     output_padding=[1, 1])
save('output_shape_before', [1, 1, 3, 3], [1, 2, 3, 3], [1, 2, 9, 9], strides=[2, 2],
     auto_pad='SAME_UPPER', output_shape=[9, 9])
