"""Loom's optimizers, named and defaulted as PyTorch's are.

Each is the update rule the compiled training step applies to every parameter, with
PyTorch's semantics: `SGD` (with `momentum` > 0, heavy ball or Nesterov), `Adam` (L2 weight
decay added to the gradient) and `AdamW` (decoupled weight decay), at a constant learning
rate.
"""

import math


class Optimizer:
    """The base of Loom's optimizers: `options()` gives the compiler's settings."""

    name = None

    def options(self):
        raise NotImplementedError

    @staticmethod
    def _check(name, value, low=0.0, low_open=False, high=None):
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number, got {value!r}")
        if value < low or (low_open and value == low) or (high is not None and value >= high):
            bound = f"in [{low}, {high})" if high is not None else \
                (f"greater than {low}" if low_open else f"at least {low}")
            raise ValueError(f"{name} must be {bound}, got {value!r}")
        return float(value)

    def __repr__(self):
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"loom.{type(self).__name__}({fields})"


class SGD(Optimizer):
    def __init__(self, lr=1e-3, momentum=0.0, nesterov=False, weight_decay=0.0):
        self.lr = self._check("lr", lr, low_open=True)
        self.momentum = self._check("momentum", momentum, high=1.0)
        if nesterov and self.momentum == 0:
            raise ValueError("nesterov needs a momentum greater than 0")
        self.nesterov = bool(nesterov)
        self.weight_decay = self._check("weight_decay", weight_decay)

    def options(self):
        return {"optimizer": "momentum" if self.momentum > 0 else "sgd", "lr": self.lr,
                "momentum": self.momentum, "nesterov": self.nesterov,
                "weight_decay": self.weight_decay}


class Adam(Optimizer):
    _kind = "adam"

    def __init__(self, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        self.lr = self._check("lr", lr, low_open=True)
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise ValueError(f"betas must be a pair, got {betas!r}")
        self.betas = (self._check("betas[0]", betas[0], high=1.0),
                      self._check("betas[1]", betas[1], high=1.0))
        self.eps = self._check("eps", eps, low_open=True)
        self.weight_decay = self._check("weight_decay", weight_decay)

    def options(self):
        return {"optimizer": self._kind, "lr": self.lr, "beta1": self.betas[0],
                "beta2": self.betas[1], "eps": self.eps, "weight_decay": self.weight_decay}


class AdamW(Adam):
    _kind = "adamw"

    def __init__(self, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        super().__init__(lr, betas, eps, weight_decay)


_BY_NAME = {"sgd": SGD, "momentum": lambda: SGD(momentum=0.9), "adam": Adam, "adamw": AdamW}


def from_torch(optimizer):
    """Loom's optimizer with the settings of a torch.optim.SGD, Adam or AdamW; ValueError
    for a setting Loom's update rules do not have."""
    kind = type(optimizer).__name__
    groups = optimizer.param_groups
    settings = {k: v for k, v in groups[0].items() if k != "params"}
    if any({k: v for k, v in g.items() if k != "params"} != settings for g in groups[1:]):
        raise ValueError(f"torch.optim.{kind} has parameter groups with different settings; "
                         "Loom applies one optimizer setting to every parameter")
    unsupported = {"dampening": 0, "amsgrad": False, "maximize": False, "differentiable": False,
                   "capturable": False}
    for key, plain in unsupported.items():
        if settings.get(key, plain) != plain:
            raise ValueError(f"torch.optim.{kind}({key}={settings[key]!r}) has no Loom "
                             f"equivalent; use {key}={plain!r}")
    lr = float(settings["lr"])
    if kind == "SGD":
        return SGD(lr, settings.get("momentum", 0.0), settings.get("nesterov", False),
                   settings.get("weight_decay", 0.0))
    if kind in ("Adam", "AdamW"):
        return (Adam if kind == "Adam" else AdamW)(
            lr, tuple(settings["betas"]), settings["eps"], settings["weight_decay"])
    raise ValueError(f"torch.optim.{kind} has no Loom equivalent: use SGD, Adam or AdamW")


def resolve(optimizer):
    """An Optimizer from what `parallelize` was given: one of Loom's, a torch.optim SGD,
    Adam or AdamW (its settings; Loom trains the parameters itself), a name, or None
    (AdamW with PyTorch's defaults)."""
    if optimizer is None:
        return AdamW()
    if isinstance(optimizer, Optimizer):
        return optimizer
    if isinstance(optimizer, str) and optimizer.lower() in _BY_NAME:
        return _BY_NAME[optimizer.lower()]()
    if hasattr(optimizer, "param_groups") and hasattr(optimizer, "step"):
        return from_torch(optimizer)
    raise ValueError(
        f"unknown optimizer {optimizer!r}: give loom.SGD(...), loom.Adam(...) or "
        f"loom.AdamW(...), or one of {', '.join(repr(n) for n in _BY_NAME)}")
