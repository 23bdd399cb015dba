#!/usr/bin/python3
"""Writes the models of pad.test into the folder given: Pad-2 (attributes), Pad-13
(inputs, a negative pad), a mode Loom refuses, run-time pads, and Mod."""
import sys

import numpy as np
import onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
out = sys.argv[1]
f = lambda n, s, t=T.FLOAT: h.make_tensor_value_info(n, t, s)
def save(name, nodes, inputs, outputs, inits, opset):
    g = h.make_graph(nodes, 'g', inputs, outputs, inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid('', opset)]), f'{out}/{name}.onnx')
# Pad-2: attributes.
save('pad2', [h.make_node('Pad', ['x'], ['y'], pads=[0, 1, 2, 0], mode='edge')],
     [f('x', [2, 3])], [f('y', [4, 4])], [], 7)
# Pad-13: pads and constant_value initializers, a negative pad crops first.
save('pad13', [h.make_node('Constant', [], ['v'], value=nh.from_array(np.array(0.5, np.float32))),
               h.make_node('Pad', ['x', 'p', 'v'], ['y'])], [f('x', [4, 5])], [f('y', [4, 5])],
     [nh.from_array(np.array([-1, 2, 1, -2], np.int64), 'p')], 13)
# A mode Loom does not pad in, and pads computed at run time.
save('wrap', [h.make_node('Pad', ['x', 'p'], ['y'], mode='wrap', name='pw')], [f('x', [4, 5])],
     [f('y', [4, 7])], [nh.from_array(np.array([0, 1, 0, 1], np.int64), 'p')], 13)
save('runtime_pads', [h.make_node('Pad', ['x', 'pp'], ['y'], name='pr')],
     [f('x', [4, 5]), f('pp', [4], T.INT64)], [f('y', [4, 7])], [], 13)
# Mod: of constants it folds (fmod=0, the divisor's sign); of run-time values it is an op.
save('mod', [h.make_node('Mod', ['c', 'd'], ['k']), h.make_node('Cast', ['k'], ['kf'], to=T.FLOAT),
             h.make_node('Mod', ['x', 'kf'], ['y'], fmod=1)],
     [f('x', [3])], [f('y', [3])],
     [nh.from_array(np.array([-7, 7, 5], np.int64), 'c'), nh.from_array(np.array([3, -3, 5], np.int64), 'd')], 13)
