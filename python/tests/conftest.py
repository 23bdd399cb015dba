"""Shared fixtures of the Python package's tests: small PyTorch models, a fixed batch, and
PyTorch's own training loop as the oracle."""

import copy
import os

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_num_threads(1)


class MLP(nn.Module):
    def __init__(self, d_in=16, hidden=32, classes=8):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.fc2 = nn.Linear(hidden, classes)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


def make_mlp(seed=0):
    torch.manual_seed(seed)
    return MLP().eval()


def batch(n=8, d_in=16, classes=8, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d_in, generator=g), torch.randint(0, classes, (n,), generator=g)


def torch_losses(model, inputs, labels, make_optimizer, steps, loss="cross_entropy"):
    """PyTorch's training loop on a copy of `model`: the loss of each step (before its
    update), and the trained copy."""
    model = copy.deepcopy(model)
    opt = make_optimizer(model.parameters())
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        out = model(*inputs)
        if loss == "cross_entropy":
            value = F.cross_entropy(out.reshape(-1, out.shape[-1]), labels.reshape(-1))
        else:
            value = F.mse_loss(out, labels)
        value.backward()
        opt.step()
        losses.append(value.item())
    return np.array(losses), model


@pytest.fixture
def source_dir():
    return os.environ.get("LOOM_SOURCE",
                          os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
