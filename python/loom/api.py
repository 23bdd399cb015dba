"""loom.parallelize, loom.compile, loom.simulate and loom.load: a PyTorch module in, a
compiled, partitioned step out, run by Loom's runtime in this process."""

import collections
import json
import os
import re
import shutil
import sys
import tempfile

import numpy as np

from . import _loom
from . import onnx_export
from . import optim

LOSSES = ("cross_entropy", "mse")
_PLAN_FILE = "plan.loom"
_JOB_FILE = "python.json"


# --- Arguments ------------------------------------------------------------------------

def _parse_mesh(mesh):
    """{"dp": 2, "tp": 2} from "dp=2,tp=2" (or a dict); ValueError if malformed."""
    if mesh is None or mesh == "":
        return {}
    if isinstance(mesh, dict):
        items = list(mesh.items())
    elif isinstance(mesh, str):
        items = []
        for part in mesh.split(","):
            name, sep, size = part.partition("=")
            if not sep or not name.strip() or not size.strip().isdigit():
                raise ValueError(f"mesh {mesh!r}: each axis is NAME=SIZE, as in 'dp=2,tp=2'")
            items.append((name.strip(), int(size)))
    else:
        raise ValueError(f"mesh must be a string such as 'dp=2,tp=2' or a dict, got {mesh!r}")
    axes = {}
    for name, size in items:
        if not isinstance(size, int) or size < 1:
            raise ValueError(f"mesh axis {name!r} must have a positive size, got {size!r}")
        if name in axes:
            raise ValueError(f"mesh {mesh!r} names axis {name!r} twice")
        axes[name] = size
    return axes


def _mesh_text(axes):
    return ",".join(f"{k}={v}" for k, v in axes.items())


def _check_batch(axes, batch, mode, strategies):
    """A batch the data-parallel axes cannot split evenly is the user's to fix."""
    if not axes or batch is None:
        return
    data_mode = mode in (None, "data") and strategies is None
    if data_mode:
        devices = 1
        for name, size in axes.items():
            if name != "pp":
                devices *= size
        ways, what = devices, f"the {devices} devices of mesh '{_mesh_text(axes)}'"
    elif "dp" in axes:
        ways, what = axes["dp"], f"the data-parallel axis dp={axes['dp']}"
    else:
        return
    if batch % ways:
        raise ValueError(f"the batch of {batch} does not split evenly over {what}: "
                         f"use a batch that is a multiple of {ways}, or a smaller mesh")


def _strategy_file(strategies, workdir):
    """A strategy file's path from a path, a {pattern or submodule: strategy} dict, or a
    whole strategy document ({"strategies": [...]})."""
    if strategies is None:
        return None
    if isinstance(strategies, (str, os.PathLike)):
        return os.fspath(strategies)
    if not isinstance(strategies, dict):
        raise ValueError("strategies must be a strategy file's path or a dict")
    if "strategies" in strategies:
        document = strategies
    else:
        entries = []
        for key, strategy in strategies.items():
            # A submodule path ("blocks.0.attn.q") selects the nodes exported inside it.
            pattern = key if key.startswith("/") else "/" + key.replace(".", "/") + "/*"
            entries.append({"pattern": pattern, "strategy": strategy})
        document = {"strategies": entries}
    path = os.path.join(workdir, "strategies.json")
    with open(path, "w") as f:
        json.dump(document, f)
    return path


# `loom compile`'s flags as this module's keywords, where the names differ.
_KEYWORDS = {"strategy": "strategies", "save-strategy": "save_strategy_file",
             "train": "a training step (loom.parallelize)"}


def _keywords(message):
    """A compiler message's flags as keyword arguments: "--micro-batches" reads
    "micro_batches", "--stages auto" "stages_auto=True"."""
    message = message.replace("--stages auto", "stages_auto=True")
    return re.sub(r"(?<![\w-])--([a-z][a-z0-9-]*)",
                  lambda m: _KEYWORDS.get(m.group(1), m.group(1).replace("-", "_")), message)


def _in_user_terms(message, strategies, strategy_file):
    """The compiler's message in this module's terms: keywords for flags, and a strategy
    file this module wrote from a dict named by that dict's keys ("strategies['fc1']" for
    "<file>: strategy entry 1")."""
    message = _keywords(message)
    if not isinstance(strategies, dict) or not strategy_file:
        return message
    keys = list(strategies["strategies"] if "strategies" in strategies else strategies)

    def entry(match):
        k = int(match.group(1)) - 1
        if "strategies" in strategies or not 0 <= k < len(keys):
            return f"strategies entry {k + 1}"
        return f"strategies[{keys[k]!r}]"

    message = re.sub(r"strategy entry (\d+)", entry, message)
    return message.replace(strategy_file + ": ", "").replace(strategy_file, "strategies")


def _numpy(value, what):
    """A C-contiguous numpy array of a tensor or array, without a copy where one is not
    needed (a contiguous CPU tensor shares its memory)."""
    try:
        import torch
        if isinstance(value, torch.Tensor):
            value = value.detach()
            if value.device.type != "cpu":
                value = value.cpu()
            if value.dtype == torch.bfloat16:
                value = value.float()
            return np.ascontiguousarray(value.numpy())
    except ImportError:
        pass
    if isinstance(value, np.ndarray):
        return np.ascontiguousarray(value)
    raise ValueError(f"{what} must be a torch tensor or a numpy array, got {type(value).__name__}")


class _Progress:
    """Where a compile's progress goes. `progress=True`: a tqdm bar over its phases (export,
    compile, loading the ranks) when tqdm is installed, with the compiler's lines printed
    above it; plain "loom: ..." lines on stderr otherwise. A callable gets every line
    instead; False silences it all."""

    PHASES = 3

    def __init__(self, progress):
        self._callback = progress if callable(progress) else None
        self._enabled = bool(progress)
        self._bar = None
        if progress is True:
            try:
                from tqdm import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self._bar = tqdm(total=self.PHASES, desc="loom", file=sys.stderr, leave=False)

    def line(self, text):
        if self._callback:
            self._callback(text)
        elif self._bar is not None:
            self._bar.write(text, file=sys.stderr)
        elif self._enabled:
            print(text, file=sys.stderr, flush=True)

    def phase(self, text):
        """A phase begins (the one before it is over)."""
        if self._bar is not None:
            if self._bar.desc != "loom":
                self._bar.update(1)
            self._bar.set_description(f"loom: {text}")
        else:
            self.line(f"loom: {text}")

    def close(self):
        if self._bar is not None:
            self._bar.update(self.PHASES - self._bar.n)
            self._bar.close()
            self._bar = None


# --- Jobs -----------------------------------------------------------------------------

class Job:
    """A compiled step loaded on its ranks: `step` trains, `run` infers."""

    def __init__(self, native, plan, parallel, inputs, names, base_state, workdir=None):
        self._native = native
        self._plan = plan
        self.parallel = parallel
        self._inputs = inputs            # the model's ONNX input names, in call order
        self._names = names              # PyTorch state_dict key -> Loom's tensor name
        self._base = base_state          # the module's state_dict when it was compiled
        self._workdir = workdir

    def __del__(self):
        if getattr(self, "_workdir", None):
            shutil.rmtree(self._workdir, ignore_errors=True)

    @property
    def num_ranks(self):
        return self._native.num_ranks

    @property
    def rank(self):
        """This process's rank: 0, but under mpirun (comm="mpi")."""
        return self._native.rank

    @property
    def steps_taken(self):
        return self._native.steps_taken

    @property
    def step_seconds(self):
        """The mean wall time of a step so far (the first rank's)."""
        return self._native.step_seconds

    def _feed(self, inputs, labels):
        if len(inputs) != len(self._inputs):
            raise ValueError(f"the model takes {len(self._inputs)} input(s) "
                             f"({', '.join(self._inputs)}), got {len(inputs)}")
        values = {n: _numpy(v, f"input '{n}'") for n, v in zip(self._inputs, inputs)}
        if labels is not None:
            values["labels"] = _numpy(labels, "labels")
        self._native.set_inputs(values)

    def step(self, *inputs, labels):
        """One training step on the global batch `inputs` with `labels`; its loss (the
        loss before this step's update, as PyTorch's loop computes it)."""
        if not self._native.is_training:
            raise ValueError("step() needs a job from loom.parallelize; this one infers (call it)")
        if labels is None:
            raise ValueError("step() needs the batch's labels (labels=...)")
        self._feed(inputs, labels)
        return self._native.train_step()

    def run(self, *inputs):
        """A forward pass; the outputs by name, as numpy arrays."""
        if self._native.is_training:
            raise ValueError("run() is for a job from loom.compile; this one trains (step)")
        self._feed(inputs, None)
        return self._native.run()

    def explain(self, top=10):
        """What the plan is predicted to cost, node by node (`loom explain`)."""
        return _loom.explain(self._plan, "plan", top)

    def state_dict(self):
        """The module's state_dict with Loom's trained values: every key of the module's own
        state_dict, so that `model.load_state_dict(job.state_dict())` takes it whole."""
        import torch
        gathered = self._native.state_dict()
        out = collections.OrderedDict()
        for key, initial in self._base.items():
            name = self._names.get(key)
            if name in gathered:
                out[key] = torch.from_numpy(gathered[name]).to(initial.dtype).reshape(initial.shape)
            else:
                out[key] = initial.clone()
        return out

    def optimizer_state(self):
        """The optimizer's state by Loom's names ("<parameter>.<state>"), as numpy arrays."""
        kinds = {name: kind for name, kind, _, _ in self._native.state()}
        return {k: v for k, v in self._native.state_dict().items()
                if kinds.get(k) == "optimizer_state"}

    def save(self, directory):
        """A checkpoint `loom.load` resumes from: Loom's checkpoint (parameters, buffers,
        optimizer state and step), the plan, and how the module's names map to Loom's."""
        directory = os.fspath(directory)
        self._native.save(directory)
        if self._native.rank != 0:
            return  # under mpirun, rank 0 writes these (each rank wrote its blocks)
        with open(os.path.join(directory, _PLAN_FILE), "wb") as f:
            f.write(self._plan)
        with open(os.path.join(directory, _JOB_FILE), "w") as f:
            json.dump({"inputs": self._inputs, "names": self._names,
                       "parallel": self.parallel}, f, indent=1)


def _state_names(module, onnx_path):
    """PyTorch state_dict key -> the ONNX initializer that holds it. A key that shares its
    storage with another (a tied LM head) maps to the one the export kept."""
    import onnx
    kept = {t.name for t in onnx.load(onnx_path, load_external_data=False).graph.initializer}
    by_storage = {}
    names = {}
    for key, tensor in module.state_dict().items():
        storage = (tensor.data_ptr(), tuple(tensor.shape))
        if key in kept:
            by_storage.setdefault(storage, key)
    for key, tensor in module.state_dict().items():
        storage = (tensor.data_ptr(), tuple(tensor.shape))
        if key in kept:
            names[key] = key
        elif storage in by_storage:
            names[key] = by_storage[storage]
    return names


def _check_trainable(module, example_inputs, names, trained):
    """Every parameter the forward uses must be one the plan trains (`trained`, Loom's
    names) under the name the export gave it: one the export folded into a tensor the
    importer cannot trace back to it (ExportedParameters.h) would not be trained as PyTorch
    trains it."""
    import torch
    params = [(k, p) for k, p in module.named_parameters() if p.requires_grad]
    if not params:
        return
    # The forward moves BatchNorm's running statistics in train(): put them back after.
    saved = {k: v.detach().clone() for k, v in module.state_dict().items()}
    try:
        with torch.enable_grad():
            out = module(*example_inputs)
            outputs = out if isinstance(out, (tuple, list)) else (out,)
            total = sum(o.float().sum() for o in outputs
                        if torch.is_tensor(o) and o.requires_grad)
            if not torch.is_tensor(total):
                return
            grads = torch.autograd.grad(total, [p for _, p in params], allow_unused=True)
    finally:
        onnx_export.restore_state(module, saved)
    lost = [k for (k, _), g in zip(params, grads)
            if g is not None and names.get(k) not in trained]
    if lost:
        raise _loom.CompileError(
            f"{len(lost)} parameter(s) the forward uses are not trained by the plan "
            f"({', '.join(lost[:4])}{', ...' if len(lost) > 4 else ''}): torch.onnx.export "
            "folded them into tensors that are no transpose, reshape, cast or leading rows "
            "of them, so Loom cannot train them as PyTorch does; compute them in the "
            "forward from inputs the export cannot fold (or report the model to Loom)")


def _fixed_buffers(module, names):
    """The exported names of `module`'s floating-point buffers that training keeps as
    they are (a scale, a mask registered with register_buffer): every such buffer but
    BatchNorm's running statistics, which the step updates. An ONNX file cannot tell a
    buffer from a parameter, so they are given to the compiler as `freeze` patterns."""
    import torch.nn as nn
    statistics = set()
    for prefix, m in module.named_modules():
        if isinstance(m, nn.modules.batchnorm._NormBase):
            statistics.update(f"{prefix}.{n}" if prefix else n for n, _ in
                              m.named_buffers(recurse=False))
    fixed = []
    for key, buffer in module.named_buffers():
        name = names.get(key)
        if (buffer.is_floating_point() and key not in statistics and name
                and not any(c in name for c in "*?[]\\") and name not in fixed):
            fixed.append(name)
    return fixed


def _compile_module(module, example_inputs, options, strategies, progress, workdir):
    example_inputs = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) \
        else (example_inputs,)
    path = os.path.join(workdir, "model.onnx")
    progress.phase(f"exporting {type(module).__name__} to ONNX")
    inputs = onnx_export.export_module(module, example_inputs, path)
    names = _state_names(module, path)
    options = dict(options, model=path)
    if options.get("train"):
        fixed = _fixed_buffers(module, names)
        if fixed:
            given = options.get("freeze") or []
            options["freeze"] = ([given] if isinstance(given, str) else list(given)) + fixed
    strategy_file = _strategy_file(strategies, workdir)
    if strategy_file:
        options["strategy_file"] = strategy_file
    progress.phase("compiling" + (f" for mesh {options['mesh']}" if options.get("mesh") else ""))
    try:
        plan, parallel, _ = _loom.compile(options, progress.line)
    except (_loom.CompileError, ValueError) as e:
        raise type(e)(_in_user_terms(str(e), strategies, strategy_file)) from None
    return plan, parallel, inputs, names


def _load_job(model, example_inputs, settings, strategies, progress, backend, comm, threads):
    """Exports and compiles `model` with `settings`, and loads the plan on its ranks."""
    workdir = tempfile.mkdtemp(prefix="loom-")
    reporter = _Progress(progress)
    try:
        plan, parallel, inputs, names = _compile_module(
            model, example_inputs, settings, strategies, reporter, workdir)
        reporter.phase("loading the plan on its ranks")
        native = _loom.Job(plan, backend, comm, threads)
        if settings.get("train"):
            trained = {name for name, kind, _, _ in native.state() if kind == "parameter"}
            _check_trainable(model, tuple(example_inputs) if isinstance(
                example_inputs, (tuple, list)) else (example_inputs,), names, trained)
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    finally:
        reporter.close()
    return Job(native, plan, parallel, inputs, names, _base_state(model), workdir)


def _parallel_options(mesh, mode, cluster, zero, precision, micro_batches, schedule,
                      recompute, extra):
    options = {"mesh": _mesh_text(mesh), "cluster": cluster, "precision": precision}
    for key, value in (("mode", mode), ("zero", zero), ("micro_batches", micro_batches),
                       ("schedule", schedule), ("recompute", recompute)):
        if value is not None:
            options[key] = value
    options.update(extra)
    return options


def parallelize(model, example_inputs, loss="cross_entropy", optimizer=None, mesh=None,
                mode=None, cluster="8xH100-80GB", strategies=None, zero=None,
                precision="f32", micro_batches=None, schedule=None, recompute=None,
                backend="cpu", comm="auto", threads=0, progress=True, **options):
    """Compiles `model`'s training step for `mesh` and loads it on its ranks.

    `example_inputs` fix the input shapes (the global batch). The step's loss is `loss`
    ("cross_entropy" or "mse") of the model's output against the labels `Job.step` is
    given, and `optimizer` updates every parameter. `mode` is "data", "semi" (with
    `strategies`) or "auto"; the rest are `loom compile`'s settings under their flag names
    (`bucket_mb`, `memory_limit`, `stages_auto`, `lr_schedule`, ...). Raises CompileError
    with the compiler's message, ValueError for arguments that cannot work.
    """
    if loss not in LOSSES:
        raise ValueError(f"unknown loss {loss!r}: use one of {', '.join(map(repr, LOSSES))}")
    opt = optim.resolve(optimizer)
    axes = _parse_mesh(mesh)
    batch = _batch_of(example_inputs)
    _check_batch(axes, batch, mode, strategies)
    settings = _parallel_options(axes, mode, cluster, zero, precision, micro_batches,
                                 schedule, recompute, options)
    settings.update(opt.options(), train=True, loss=loss)
    return _load_job(model, example_inputs, settings, strategies, progress, backend, comm,
                     threads)


def _batch_of(example_inputs):
    first = example_inputs[0] if isinstance(example_inputs, (tuple, list)) else example_inputs
    shape = getattr(first, "shape", None)
    return int(shape[0]) if shape is not None and len(shape) > 0 else None


def _base_state(model):
    return collections.OrderedDict((k, v.detach().clone()) for k, v in model.state_dict().items())


class Compiled:
    """An inference step: call it with the inputs, get the model's output back."""

    def __init__(self, job):
        self.job = job

    def __call__(self, *inputs):
        import torch
        outputs = self.job.run(*inputs)
        return torch.from_numpy(outputs["logits"])

    def explain(self, top=10):
        return self.job.explain(top)


def compile(model, example_inputs, mesh=None, mode=None, cluster="8xH100-80GB",
            strategies=None, precision="f32", backend="cpu", comm="auto", threads=0,
            progress=True, **options):
    """Compiles `model`'s forward pass for `mesh`; returns a callable."""
    axes = _parse_mesh(mesh)
    _check_batch(axes, _batch_of(example_inputs), mode, strategies)
    settings = _parallel_options(axes, mode, cluster, None, precision, None, None, None,
                                 options)
    return Compiled(_load_job(model, example_inputs, settings, strategies, progress, backend,
                              comm, threads))


class Simulation:
    """A plan compiled for a cluster, not run: its predicted step and memory."""

    def __init__(self, plan, parallel):
        self._plan = plan
        self.parallel = parallel
        self.step_seconds = parallel["step_seconds"]
        self.peak_bytes = parallel["peak_bytes"]

    def explain(self, top=10):
        return _loom.explain(self._plan, "simulation", top)


def simulate(model, example_inputs, loss="cross_entropy", optimizer=None, mesh=None,
             mode="auto", cluster="8xH100-80GB", strategies=None, precision="f32",
             progress=True, **options):
    """Predicts `model`'s training step on `cluster` without running it (`loom simulate`):
    shapes only, so the mesh may be far larger than this machine."""
    if loss not in LOSSES:
        raise ValueError(f"unknown loss {loss!r}: use one of {', '.join(map(repr, LOSSES))}")
    settings = _parallel_options(_parse_mesh(mesh), mode, cluster, None, precision, None,
                                 None, None, options)
    settings.update(optim.resolve(optimizer).options(), train=True, loss=loss, simulate=True)
    workdir = tempfile.mkdtemp(prefix="loom-")
    reporter = _Progress(progress)
    try:
        plan, parallel, _, _ = _compile_module(model, example_inputs, settings, strategies,
                                               reporter, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        reporter.close()
    return Simulation(plan, parallel)


def load(directory, model, backend="cpu", comm="auto", threads=0):
    """Resumes a job `Job.save` wrote: the same plan, every tensor and the step count as
    saved. `model` gives the state_dict keys (and the values of any Loom does not hold)."""
    directory = os.fspath(directory)
    try:
        with open(os.path.join(directory, _PLAN_FILE), "rb") as f:
            plan = f.read()
        with open(os.path.join(directory, _JOB_FILE)) as f:
            saved = json.load(f)
    except OSError as e:
        raise ValueError(f"{directory}: not a checkpoint of loom's Python API ({e})") from None
    native = _loom.Job(plan, backend, comm, threads)
    native.load(directory)
    return Job(native, plan, saved["parallel"], saved["inputs"], saved["names"],
               _base_state(model))
