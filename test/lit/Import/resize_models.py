#!/usr/bin/python3
"""Writes the models of resize.test into the folder given: PyTorch's exports of
nn.Upsample and F.interpolate (opset 11 and 13), Upsample-7 and -9, Resize-10,
and the forms Loom refuses (tf_crop_and_resize, scales computed at run time)."""
import sys
import warnings

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import helper as h, TensorProto as T, numpy_helper as nh

warnings.filterwarnings('ignore')
out = sys.argv[1]
f = lambda n, s, t=T.FLOAT: h.make_tensor_value_info(n, t, s)


def save(name, nodes, inputs, outputs, inits, opset):
    g = h.make_graph(nodes, 'g', inputs, outputs, inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid('', opset)]), f'{out}/{name}.onnx')


class Interp(torch.nn.Module):
    def __init__(self, **kw):
        super().__init__()
        self.kw = kw

    def forward(self, x):
        return F.interpolate(x, **self.kw)


def export(name, opset, **kw):
    torch.onnx.export(Interp(**kw), torch.randn(1, 2, 4, 4), f'{out}/{name}.onnx',
                      opset_version=opset)


export('torch_nearest13', 13, scale_factor=2, mode='nearest')
export('torch_bilinear13', 13, scale_factor=2, mode='bilinear', align_corners=False)
export('torch_bilinear_ac11', 11, scale_factor=2, mode='bilinear', align_corners=True)
# size=...: the sizes are Shape -> Slice -> Concat, folded on the host.
export('torch_size13', 13, size=(7, 5), mode='bilinear', align_corners=False)
export('torch_size11', 11, size=(7, 5), mode='nearest')
scales = nh.from_array(np.array([1, 1, 2, 3], np.float32), 's')
save('upsample7', [h.make_node('Upsample', ['x'], ['y'], scales=[1., 1., 2., 3.])],
     [f('x', [1, 1, 2, 2])], [f('y', [1, 1, 4, 6])], [], 7)
# A float initializer is a trained parameter: scales come from Constant nodes.
const = h.make_node('Constant', [], ['s'], value=scales)
save('upsample9', [const, h.make_node('Upsample', ['x', 's'], ['y'], mode='linear')],
     [f('x', [1, 1, 2, 2])], [f('y', [1, 1, 4, 6])], [], 9)
save('resize10', [const, h.make_node('Resize', ['x', 's'], ['y'])],
     [f('x', [1, 1, 2, 2])], [f('y', [1, 1, 4, 6])], [], 10)
save('crop', [const, h.make_node('Resize', ['x', '', 's'], ['y'], name='rc',
                                 coordinate_transformation_mode='tf_crop_and_resize')],
     [f('x', [1, 1, 2, 2])], [f('y', [1, 1, 4, 6])], [], 13)
save('runtime_scales', [h.make_node('Resize', ['x', '', 'ss'], ['y'], name='rr')],
     [f('x', [1, 1, 2, 2]), f('ss', [4])], [f('y', [1, 1, 4, 6])], [], 13)
