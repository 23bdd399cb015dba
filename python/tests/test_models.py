"""Real models through loom.parallelize: the bundled GPT (models/export.py) and a torchvision
ResNet, 5 training steps against PyTorch on one device and against Loom's own single-device
run when partitioned."""

import importlib.util
import os
import sys

import numpy as np
import pytest
import torch

import loom
from conftest import torch_losses

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "test"))
from oracle import assert_close  # noqa: E402  (test/oracle.py)

STEPS = 5
SOURCE = os.environ.get("LOOM_SOURCE",
                        os.path.dirname(os.path.dirname(os.path.dirname(__file__))))

# Megatron's layouts for the GPT's matmuls (models/gpt_megatron.json's patterns).
MEGATRON = {
    "/blocks.*/attn/[qkv]/MatMul": [["dp", 1, 1], [1, "tp"]],
    "/blocks.*/attn/proj/MatMul": [["dp", 1, "tp"], ["tp", 1]],
    "/blocks.*/mlp/fc/MatMul": [["dp", 1, 1], [1, "tp"]],
    "/blocks.*/mlp/proj/MatMul": [["dp", 1, "tp"], ["tp", 1]],
}


def bundled(name):
    spec = importlib.util.spec_from_file_location(
        "loom_models_export", os.path.join(SOURCE, "models", "export.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build_model(name)


def gpt_batch(model, n=4, seed=3):
    g = torch.Generator().manual_seed(seed)
    vocab = model.lm_head.out_features
    return (torch.randint(0, vocab, (n, model.seq), generator=g),
            torch.randint(0, vocab, (n, model.seq), generator=g))


def steps(job, x, y):
    return np.array([job.step(x, labels=y) for _ in range(STEPS)])


def test_gpt_single_device_equals_pytorch():
    model = bundled("gpt")
    ids, targets = gpt_batch(model)
    expected, trained = torch_losses(
        model, (ids,), targets,
        lambda p: torch.optim.AdamW(p, lr=3e-3, weight_decay=0.1, foreach=False), STEPS)
    job = loom.parallelize(model, (ids,), optimizer=loom.AdamW(lr=3e-3, weight_decay=0.1),
                           progress=False)
    assert_close(steps(job, ids, targets), expected, rtol=1e-4, normwise=False)
    model.load_state_dict(job.state_dict())
    with torch.no_grad():
        assert_close(model(ids).numpy(), trained(ids).numpy(), rtol=1e-3,
                                   atol=1e-4, normwise=False)


def assert_same_state(single, split, rtol=1e-5):
    """Every tensor within rtol, normwise (max|b - a| <= rtol * max|a|), as the CLI's
    partitioned oracle compares them (test/e2e/compare_partitioned.py)."""
    a, b = single.state_dict(), split.state_dict()
    assert a.keys() == b.keys()
    for key in a:
        assert_close(b[key].detach().cpu().numpy(), a[key].detach().cpu().numpy(), rtol,
                     name=key)


# SGD, as the CLI's partitioned oracle trains the GPT: its attention key biases have a true
# gradient of zero, which Adam's normalisation would amplify from rounding to steps of lr.
@pytest.mark.parametrize("mesh,strategies", [("dp=2", None), ("dp=2,tp=2", MEGATRON)])
def test_gpt_partitioned_equals_single_device(mesh, strategies):
    model = bundled("gpt")
    ids, targets = gpt_batch(model)
    opt = loom.SGD(lr=0.1)
    single = loom.parallelize(model, (ids,), optimizer=opt, progress=False)
    split = loom.parallelize(model, (ids,), optimizer=opt, mesh=mesh, strategies=strategies,
                             progress=False)
    assert split.num_ranks == (2 if mesh == "dp=2" else 4)
    assert_close(steps(split, ids, targets), steps(single, ids, targets),
                               rtol=1e-5, normwise=False)
    assert_same_state(single, split)


def resnet():
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    return torchvision.models.resnet18(num_classes=10).eval()


def test_resnet_single_device_equals_pytorch():
    model = resnet()
    g = torch.Generator().manual_seed(5)
    x, y = torch.randn(2, 3, 32, 32, generator=g), torch.randint(0, 10, (2,), generator=g)
    expected, _ = torch_losses(model, (x,), y,
                               lambda p: torch.optim.SGD(p, lr=0.02, foreach=False), STEPS)
    job = loom.parallelize(model, (x,), optimizer=loom.SGD(lr=0.02), progress=False)
    assert_close(steps(job, x, y), expected, rtol=1e-4, normwise=False)


@pytest.mark.parametrize("mesh,mode", [("dp=2", None), ("dp=2,tp=2", "auto")])
def test_resnet_partitioned_equals_single_device(mesh, mode):
    model = resnet()
    g = torch.Generator().manual_seed(5)
    x, y = torch.randn(4, 3, 32, 32, generator=g), torch.randint(0, 10, (4,), generator=g)
    single = loom.parallelize(model, (x,), optimizer=loom.SGD(lr=0.02), progress=False)
    split = loom.parallelize(model, (x,), optimizer=loom.SGD(lr=0.02), mesh=mesh, mode=mode,
                             progress=False)
    assert_close(steps(split, x, y), steps(single, x, y), rtol=1e-5, normwise=False)
    assert_same_state(single, split)
