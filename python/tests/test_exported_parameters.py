"""Parameters torch.onnx.export folds away are trained by loom.parallelize as PyTorch trains
them: a GPT's position table looked up at `torch.arange(T)` (folded into a constant of its
leading T rows) and a head tied to the embedding (folded into its transpose); and buffers,
which the ONNX file cannot tell from parameters, are not trained."""

import os
import sys

import numpy as np
import torch
import torch.nn as nn

import loom
from conftest import torch_losses

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "test"))
from oracle import assert_close, compare  # noqa: E402  (test/oracle.py)

VOCAB, SEQ, MAX_SEQ, WIDTH = 32, 8, 12, 16


class PositionGPT(nn.Module):
    """Token and position embeddings (`self.pos(torch.arange(T))`, T below the table's
    length), one residual MLP, a head tied to the token embedding."""

    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, WIDTH)
        self.pos = nn.Embedding(MAX_SEQ, WIDTH)
        self.ln = nn.LayerNorm(WIDTH)
        self.fc = nn.Linear(WIDTH, WIDTH)

    def forward(self, ids):
        h = self.wte(ids) + self.pos(torch.arange(ids.shape[1]))
        h = h + torch.tanh(self.fc(self.ln(h)))
        return h @ self.wte.weight.t()


def test_position_table_and_tied_head_train_as_in_pytorch():
    torch.manual_seed(0)
    model = PositionGPT().eval()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, VOCAB, (4, SEQ), generator=g)
    labels = torch.randint(0, VOCAB, (4, SEQ), generator=g)
    initial = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    expected, trained = torch_losses(
        model, (ids,), labels,
        lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.01, foreach=False), 3)
    job = loom.parallelize(model, (ids,), optimizer=loom.AdamW(lr=1e-2, weight_decay=0.01),
                           progress=False)
    losses = np.array([job.step(ids, labels=labels) for _ in range(3)])
    assert_close(losses, expected, rtol=1e-5, normwise=False)
    state = job.state_dict()
    assert set(state) == set(trained.state_dict())
    for key, value in trained.state_dict().items():
        assert_close(np.asarray(state[key]), value.numpy(), rtol=1e-5, name=key)
        # Every parameter moved, the position rows past T only by the weight decay.
        assert not compare(value.numpy(), initial[key], rtol=1e-3, name=key).ok, key
    model.load_state_dict(state, strict=True)


class ScaledMLP(nn.Module):
    """A Linear whose output a registered float buffer scales."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.register_buffer("scale", torch.tensor([0.5, 2.0, 1.5]))

    def forward(self, x):
        return self.fc(x) * self.scale


def test_a_registered_buffer_is_not_trained():
    torch.manual_seed(0)
    model = ScaledMLP().eval()
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(4, 4, generator=g), torch.randn(4, 3, generator=g)
    expected, trained = torch_losses(model, (x,), y,
                                     lambda p: torch.optim.SGD(p, lr=0.1), 3, loss="mse")
    job = loom.parallelize(model, (x,), loss="mse", optimizer=loom.SGD(lr=0.1),
                           progress=False)
    losses = np.array([job.step(x, labels=y) for _ in range(3)])
    assert_close(losses, expected, rtol=1e-5, normwise=False)
    state = job.state_dict()
    for key, value in trained.state_dict().items():
        assert_close(np.asarray(state[key]), value.numpy(), rtol=1e-5, name=key)
