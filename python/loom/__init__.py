"""Loom from Python: compile a PyTorch module's training step for a mesh of devices and run
it in this process.

    import torch, loom
    job = loom.parallelize(model, example_inputs=(ids,), loss="cross_entropy",
                           optimizer=loom.AdamW(lr=3e-4, weight_decay=0.1),
                           mesh="dp=2,tp=2", mode="auto")
    print(job.explain(top=10))
    loss = job.step(ids, labels=targets)
    model.load_state_dict(job.state_dict())

See docs/python.md.
"""

from ._loom import CompileError, RunError
from .api import Compiled, Job, Simulation, compile, load, parallelize, simulate
from .optim import SGD, Adam, AdamW, Optimizer

__all__ = ["CompileError", "RunError", "Compiled", "Job", "Simulation", "compile", "load",
           "parallelize", "simulate", "SGD", "Adam", "AdamW", "Optimizer"]
