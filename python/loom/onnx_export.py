"""PyTorch module to ONNX, the way Loom imports it.

`export_module` runs `torch.onnx.export` with the shapes of the example inputs bound
(no symbolic dimension), the module's own mode kept (TrainingMode.PRESERVE: a module in
train() exports training-mode BatchNormalization, one in eval() the inference form, and
BatchNorms are never folded into convolutions), and parameters stored as initializers under
their PyTorch names. `restore_parameters` undoes what constant folding does to those names.

This file imports neither torch nor the native extension at module level, so that
models/export.py can load it by path.
"""

import inspect
import warnings

import numpy as np
import onnx
from onnx import helper, numpy_helper

# The opset the exports use: the newest torch 1.13 writes that Loom's importer reads whole.
DEFAULT_OPSET = 17


def restore_parameters(model_proto, state_dict):
    """Replaces constant-folded parameter transposes by the parameter plus a Transpose node.

    An initializer whose name is not a parameter name and whose value is exactly the
    transpose of a 2-D parameter is removed; the parameter becomes the initializer (if it is
    not one already) and a Transpose node, named after the consuming module, recomputes the
    folded value. Initializers end up in state_dict order. Returns the list of (folded name, parameter name) pairs replaced.
    """
    graph = model_proto.graph
    # Distinct tensors by storage, first name wins (a tied LM head shares the embedding).
    params = {}
    seen = set()
    for pname, tensor in state_dict.items():
        key = (tensor.data_ptr(), tuple(tensor.shape))
        if key in seen:
            continue
        seen.add(key)
        params[pname] = tensor.detach().cpu().numpy()
    init_names = {init.name for init in graph.initializer}
    used_names = {n.name for n in graph.node}

    replaced = []
    for init in list(graph.initializer):
        if init.name in params:
            continue
        value = numpy_helper.to_array(init)
        if value.ndim != 2:
            continue
        match = None
        for pname, pvalue in params.items():
            if pvalue.shape == value.shape[::-1] and pvalue.dtype == value.dtype \
                    and np.array_equal(pvalue.T, value):
                match = pname
                break
        if match is None:
            continue
        folded = init.name
        graph.initializer.remove(init)
        if match not in init_names:
            graph.initializer.append(numpy_helper.from_array(params[match], match))
            init_names.add(match)

        consumers = [i for i, n in enumerate(graph.node) if folded in n.input]
        first = consumers[0]
        scope = graph.node[first].name.rsplit("/", 1)[0] if graph.node[first].name else ""
        node_name = f"{scope}/Transpose"
        suffix = 0
        while node_name in used_names:
            suffix += 1
            node_name = f"{scope}/Transpose_{suffix}"
        used_names.add(node_name)
        out_name = f"{node_name}_output_0"
        for i in consumers:
            node = graph.node[i]
            for j, name in enumerate(node.input):
                if name == folded:
                    node.input[j] = out_name
        for vi in graph.value_info:
            if vi.name == folded:
                vi.name = out_name
        graph.node.insert(first, helper.make_node("Transpose", [match], [out_name],
                                                  name=node_name, perm=[1, 0]))
        replaced.append((folded, match))

    # Initializers in state_dict order (restored ones were appended at the end).
    order = {pname: i for i, pname in enumerate(params)}
    inits = []
    for init in sorted(graph.initializer, key=lambda t: order.get(t.name, len(order))):
        copy = onnx.TensorProto()
        copy.CopyFrom(init)
        inits.append(copy)
    del graph.initializer[:]
    graph.initializer.extend(inits)
    return replaced


def restore_deduplicated(model_proto, state_dict):
    """Gives back every parameter and buffer its own initializer where the export shared one.

    torch.onnx.export stores initializers of equal value once and makes the others Identity
    nodes of it: a fresh model's BatchNorm weights (all ones) and running variances become
    one tensor, which training would then update as one. Each Identity of an initializer
    whose output is a state_dict key is replaced by an initializer of that key's value,
    unless the two share storage in the module (a tied weight, which is one parameter).
    Returns the keys restored.
    """
    graph = model_proto.graph
    inits = {t.name for t in graph.initializer}

    def storage(key):
        tensor = state_dict.get(key)
        return None if tensor is None else (tensor.data_ptr(), tuple(tensor.shape))

    restored = []
    for node in list(graph.node):
        if node.op_type != "Identity" or node.input[0] not in inits:
            continue
        key = node.output[0]
        if key not in state_dict or key in inits:
            continue
        if storage(key) == storage(node.input[0]):
            continue
        value = state_dict[key].detach().cpu().numpy()
        graph.initializer.append(numpy_helper.from_array(value, key))
        inits.add(key)
        graph.node.remove(node)
        restored.append(key)
    return restored


def add_missing_parameters(model_proto, module):
    """Adds every trainable parameter the export left out (folded whole into another
    tensor, as `self.pos(torch.arange(T))` is) as an initializer under its name, so that
    the importer can find the folded tensor as a view of it and train the parameter
    through it (compiler/onnx/ExportedParameters.h). A tied parameter is added once.
    Returns the names added."""
    graph = model_proto.graph
    present = {t.name for t in graph.initializer}
    seen = {(t.data_ptr(), tuple(t.shape)) for k, t in module.state_dict().items()
            if k in present}
    added = []
    for name, param in module.named_parameters():
        storage = (param.data_ptr(), tuple(param.shape))
        if not param.requires_grad or name in present or storage in seen:
            continue
        seen.add(storage)
        graph.initializer.append(numpy_helper.from_array(param.detach().cpu().numpy(), name))
        added.append(name)
    return added


def input_names(module, count):
    """The names of the first `count` arguments of `module.forward` ("x", "input_ids", ...);
    "input_<i>" where the signature does not say."""
    try:
        params = [p for p in inspect.signature(module.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params[:count]]
    names += [f"input_{i}" for i in range(len(names), count)]
    return names


def restore_state(module, saved):
    """Puts back the tensors of `module.state_dict()` saved before a call that changed them
    (a forward in train() moves BatchNorm's running statistics)."""
    import torch
    with torch.no_grad():
        for key, tensor in module.state_dict().items():
            if key in saved and not torch.equal(tensor, saved[key]):
                tensor.copy_(saved[key])


def _has_recurrent(module):
    import torch.nn as nn
    return any(isinstance(m, (nn.LSTM, nn.GRU, nn.RNN)) for m in module.modules())


def export_module(module, example_inputs, path, opset=DEFAULT_OPSET):
    """Exports `module` called on `example_inputs` (a tuple of tensors) to `path`.

    Returns the ONNX input names, in the order of `example_inputs`. Constant folding is
    off for recurrent modules (it would fold the reordering of their gates into new,
    unnamed initializers); elsewhere it is on, and folded weight transposes are restored.
    """
    import torch
    names = input_names(module, len(example_inputs))
    # The export runs the forward, which in train() updates BatchNorm's running statistics:
    # the module and the file both keep the values from before the call.
    before = {k: v.detach().clone() for k, v in module.state_dict().items()}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="It is recommended that constant folding")
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        torch.onnx.export(
            module, tuple(example_inputs), path,
            export_params=True,
            opset_version=opset,
            input_names=names,
            output_names=["logits"],
            do_constant_folding=not _has_recurrent(module),
            training=torch.onnx.TrainingMode.PRESERVE,
            keep_initializers_as_inputs=False,
        )
    restore_state(module, before)
    proto = onnx.load(path)
    for init in proto.graph.initializer:
        if init.name in before:
            value = before[init.name].cpu().numpy()
            exported = numpy_helper.to_array(init)
            if value.shape == exported.shape and not np.array_equal(value, exported):
                init.CopyFrom(numpy_helper.from_array(value.astype(exported.dtype), init.name))
    restore_deduplicated(proto, module.state_dict())
    restore_parameters(proto, module.state_dict())
    add_missing_parameters(proto, module)
    onnx.save(proto, path)
    return names
