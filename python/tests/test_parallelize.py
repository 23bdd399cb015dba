"""loom.parallelize against PyTorch and against itself: losses, trained weights back into
PyTorch, checkpoints, and the errors a user gets."""

import os
import re
import sys

import numpy as np
import pytest
import torch
import torch.nn as nn

import loom
from conftest import batch, make_mlp, torch_losses

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "test"))
from oracle import assert_close  # noqa: E402  (test/oracle.py)

STEPS = 5


def loom_losses(job, x, y, steps=STEPS):
    return np.array([job.step(x, labels=y) for _ in range(steps)])


@pytest.mark.parametrize("name", ["sgd", "momentum", "adam", "adamw"])
def test_mlp_single_device_equals_pytorch(name):
    model, (x, y) = make_mlp(), batch()
    loom_opt, torch_opt = {
        "sgd": (loom.SGD(lr=0.1), lambda p: torch.optim.SGD(p, lr=0.1)),
        "momentum": (loom.SGD(lr=0.05, momentum=0.9, nesterov=True),
                     lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True)),
        "adam": (loom.Adam(lr=1e-2, weight_decay=0.01),
                 lambda p: torch.optim.Adam(p, lr=1e-2, weight_decay=0.01, foreach=False)),
        "adamw": (loom.AdamW(lr=1e-2, weight_decay=0.1),
                  lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1, foreach=False)),
    }[name]
    expected, trained = torch_losses(model, (x,), y, torch_opt, STEPS)
    job = loom.parallelize(model, (x,), loss="cross_entropy", optimizer=loom_opt,
                           progress=False)
    assert job.num_ranks == 1
    assert_close(loom_losses(job, x, y), expected, rtol=1e-4, atol=1e-6, normwise=False)
    # The trained weights, back in PyTorch, give the trained model's outputs.
    model.load_state_dict(job.state_dict())
    with torch.no_grad():
        assert_close(model(x).numpy(), trained(x).numpy(), rtol=1e-4, atol=1e-5, normwise=False)
    assert job.steps_taken == STEPS


@pytest.mark.parametrize("mesh,mode", [("dp=2", None), ("dp=2,tp=2", "auto")])
def test_mlp_partitioned_equals_single_device(mesh, mode):
    model, (x, y) = make_mlp(), batch()
    single = loom.parallelize(model, (x,), optimizer=loom.AdamW(lr=1e-2), progress=False)
    split = loom.parallelize(model, (x,), optimizer=loom.AdamW(lr=1e-2), mesh=mesh,
                             mode=mode, progress=False)
    assert split.num_ranks == (2 if mesh == "dp=2" else 4)
    assert_close(loom_losses(split, x, y), loom_losses(single, x, y),
                               rtol=1e-5, atol=1e-6, normwise=False)
    a, b = single.state_dict(), split.state_dict()
    for key in a:
        assert_close(b[key].numpy(), a[key].numpy(), rtol=1e-5, atol=1e-6,
                                   name=key, normwise=False)


def test_padded_zero_equals_pytorch():
    """ZeRO-3 over 3 ranks: no dimension of the MLP divides by 3, so every parameter and
    its Adam state are padded to split; the job trains as PyTorch does and speaks of the
    model's own shapes."""
    model, (x, y) = make_mlp(), batch(n=6)
    expected, trained = torch_losses(
        model, (x,), y, lambda p: torch.optim.Adam(p, lr=1e-2, foreach=False), STEPS)
    job = loom.parallelize(model, (x,), optimizer=loom.Adam(lr=1e-2), mesh="dp=3", zero=3,
                           progress=False)
    assert "padded to divide" in job.explain()
    assert_close(loom_losses(job, x, y), expected, rtol=1e-4, atol=1e-6, normwise=False)
    state = job.state_dict()
    for key, value in trained.state_dict().items():
        assert state[key].shape == value.shape, key
        assert_close(state[key].numpy(), value.numpy(), rtol=1e-4, atol=1e-5,
                                   name=key, normwise=False)
    moments = job.optimizer_state()
    assert len(moments) == 2 * len(trained.state_dict())
    for key, value in moments.items():
        assert value.shape == tuple(state[key.split("::")[0]].shape), key


def test_save_then_load_resumes_bit_for_bit(tmp_path):
    model, (x, y) = make_mlp(), batch()
    job = loom.parallelize(model, (x,), optimizer=loom.Adam(lr=1e-2), mesh="dp=2",
                           progress=False)
    loom_losses(job, x, y, 2)
    job.save(tmp_path / "ckpt")
    resumed = loom.load(tmp_path / "ckpt", model)
    assert resumed.steps_taken == 2
    # The same three steps from the same state: the same bits.
    assert loom_losses(resumed, x, y, 3).tobytes() == loom_losses(job, x, y, 3).tobytes()
    for key, value in job.state_dict().items():
        assert torch.equal(resumed.state_dict()[key], value), key
    adam = job.optimizer_state()
    assert adam and all(np.array_equal(v, resumed.optimizer_state()[k]) for k, v in adam.items())


def test_inference_compile_equals_pytorch():
    model, (x, _) = make_mlp(), batch()
    forward = loom.compile(model, (x,), mesh="dp=2", progress=False)
    with torch.no_grad():
        assert_close(forward(x).numpy(), model(x).numpy(), rtol=1e-5, atol=1e-6, normwise=False)
    assert "predicted" in forward.explain(top=3)


def test_explain_is_the_cli_report():
    """The report's node lines name the model's ONNX nodes exactly, as `loom explain` does
    (a module name such as "fc1" alone, or a mangled node name, fails)."""
    model, (x, _) = make_mlp(), batch()
    job = loom.parallelize(model, (x,), mesh="dp=2", progress=False)
    report = job.explain(top=0)
    nodes = {line.split()[0] for line in report.splitlines() if line.strip().startswith("/")}
    assert {"/fc1/Gemm", "/fc2/Gemm"} <= nodes, report


def test_progress_lines_reach_the_callback():
    model, (x, _) = make_mlp(), batch()
    lines = []
    loom.parallelize(model, (x,), mesh="dp=2,tp=2", mode="auto", progress=lines.append)
    assert lines and all(line.startswith("loom:") for line in lines)


class Det(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 16)

    def forward(self, x):
        return torch.linalg.det(self.fc(x).reshape(-1, 4, 4)).reshape(-1, 1)


def test_unsupported_op_raises_compile_error_naming_the_node():
    x = torch.randn(2, 4)
    with pytest.raises(loom.CompileError) as raised:
        loom.parallelize(Det(), (x,), loss="mse", progress=False)
    assert "Det" in str(raised.value)


def test_bad_arguments_raise_value_errors():
    model, (x, _) = make_mlp(), batch(n=6)
    with pytest.raises(ValueError, match="does not split evenly"):
        loom.parallelize(model, (x,), mesh="dp=4", progress=False)
    with pytest.raises(ValueError, match="unknown optimizer"):
        loom.parallelize(model, (x,), optimizer="lion", progress=False)
    with pytest.raises(ValueError, match="unknown loss"):
        loom.parallelize(model, (x,), loss="hinge", progress=False)
    with pytest.raises(ValueError, match="NAME=SIZE"):
        loom.parallelize(model, (x,), mesh="dp:2", progress=False)
    with pytest.raises(ValueError, match="lr"):
        loom.AdamW(lr=-1)
    with pytest.raises(ValueError, match="unknown compile option"):
        loom.parallelize(model, (x,), progress=False, bucket_megabytes=4)


class Normed(nn.Module):
    """Two fresh BatchNorms: their weights (ones) and running variances (ones) are equal
    tensors, which torch.onnx.export stores once."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn1 = nn.BatchNorm2d(4)
        self.bn2 = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(self.bn2(self.bn1(self.conv(x))).mean(dim=(2, 3)))


def test_export_gives_every_parameter_its_own_initializer(tmp_path):
    import onnx
    from loom import onnx_export
    model, x = Normed().eval(), torch.randn(2, 3, 6, 6)
    onnx_export.export_module(model, (x,), str(tmp_path / "m.onnx"))
    inits = {t.name for t in onnx.load(str(tmp_path / "m.onnx")).graph.initializer}
    assert set(model.state_dict()) - {k for k in model.state_dict() if "num_batches" in k} \
        <= inits
    # And so training moves them apart, as PyTorch's does.
    y = torch.tensor([0, 2])
    expected, trained = torch_losses(model, (x,), y, lambda p: torch.optim.SGD(p, lr=0.5), STEPS)
    job = loom.parallelize(model, (x,), optimizer=loom.SGD(lr=0.5), progress=False)
    assert_close(loom_losses(job, x, y), expected, rtol=1e-4, normwise=False)
    state = job.state_dict()
    for key in ("bn1.weight", "bn2.weight", "bn1.running_var"):
        assert_close(state[key].numpy(), trained.state_dict()[key].numpy(),
                                   rtol=1e-4, atol=1e-6, name=key, normwise=False)


def test_simulate_predicts_a_cluster_this_machine_is_not():
    model, (x, _) = make_mlp(), batch(n=64)
    sim = loom.simulate(model, (x,), mesh="dp=8,tp=8", cluster="8xH100-80GB", progress=False)
    assert sim.step_seconds > 0 and sim.peak_bytes > 0
    assert sim.parallel["mesh"] == "dp=8,tp=8"
    assert "8xH100-80GB" in sim.explain(top=3)


MPI_SCRIPT = """
import sys
import numpy as np
import loom
from conftest import make_mlp, batch
model, (x, y) = make_mlp(), batch()
single = loom.parallelize(model, (x,), optimizer=loom.SGD(lr=0.1), progress=False)
# comm="auto" (the default) finds that mpirun started this process.
job = loom.parallelize(model, (x,), optimizer=loom.SGD(lr=0.1), mesh="dp=2", progress=False)
assert job.num_ranks == 2
ours = [job.step(x, labels=y) for _ in range(3)]
theirs = [single.step(x, labels=y) for _ in range(3)]
np.testing.assert_allclose(ours, theirs, rtol=1e-5)
a, b = job.state_dict(), single.state_dict()
for key in a:
    np.testing.assert_allclose(a[key].numpy(), b[key].numpy(), rtol=1e-5, atol=1e-6)
# Each process writes its own file: two processes' stdout lines can
# interleave through mpirun.
with open(sys.argv[1] + "/rank%d" % job.rank, "w") as f:
    f.write("rank %d agrees" % job.rank)
"""


def test_under_mpirun_each_process_is_one_rank(tmp_path):
    import os
    import shutil
    import subprocess
    import sys
    if not shutil.which("mpirun"):
        pytest.skip("no mpirun")
    script = tmp_path / "mpi_job.py"
    script.write_text(MPI_SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.environ.get("PYTHONPATH", ""), os.path.dirname(__file__)]))
    done = subprocess.run(["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
                           sys.executable, str(script), str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    verdicts = [(tmp_path / f"rank{r}").read_text() if (tmp_path / f"rank{r}").exists()
                else None for r in (0, 1)]
    assert verdicts == ["rank 0 agrees", "rank 1 agrees"], done.stdout + done.stderr


def test_strategies_by_submodule_path():
    model, (x, y) = make_mlp(), batch()
    single = loom.parallelize(model, (x,), optimizer=loom.SGD(lr=0.1), progress=False)
    # fc1 column-parallel over tp, its batch over dp; propagation completes the rest.
    split = loom.parallelize(model, (x,), optimizer=loom.SGD(lr=0.1), mesh="dp=2,tp=2",
                             strategies={"fc1": [["dp", 1], ["tp", 1]]}, progress=False)
    fc1 = [line for line in split.explain(top=0).splitlines()
           if line.strip().startswith("/fc1/Gemm")]
    assert fc1 and "[dp,-] x [tp,-]" in fc1[0] and fc1[0].endswith("fixed"), fc1
    assert_close(loom_losses(split, x, y), loom_losses(single, x, y), rtol=1e-5, normwise=False)
    with pytest.raises(loom.CompileError, match=r"strategies\['fc1'\]: no op of the model fits"):
        loom.parallelize(model, (x,), mesh="dp=2,tp=2", progress=False,
                         strategies={"fc1": [["dp", 1], ["tp", 1], ["tp"]]})


def test_a_torch_optimizer_gives_its_settings():
    model, (x, y) = make_mlp(), batch()
    make = lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=1e-3)  # noqa: E731
    expected, _ = torch_losses(model, (x,), y, make, STEPS)
    job = loom.parallelize(model, (x,), optimizer=make(model.parameters()), progress=False)
    assert_close(loom_losses(job, x, y), expected, rtol=1e-4, atol=1e-6, normwise=False)
    with pytest.raises(ValueError, match="amsgrad"):
        loom.parallelize(model, (x,), progress=False,
                         optimizer=torch.optim.Adam(model.parameters(), amsgrad=True))
    with pytest.raises(ValueError, match="RMSprop has no Loom equivalent"):
        loom.parallelize(model, (x,), progress=False,
                         optimizer=torch.optim.RMSprop(model.parameters()))


def test_inputs_of_the_wrong_shape_or_type_raise_value_errors():
    model, (x, y) = make_mlp(), batch()
    job = loom.parallelize(model, (x,), mesh="dp=2", progress=False)
    with pytest.raises(ValueError, match=r"input 'x' must have shape \[8, 16\], got \[4, 16\]"):
        job.step(x[:4], labels=y)
    with pytest.raises(ValueError, match="float64"):
        job.step(x.double(), labels=y)
    with pytest.raises(ValueError, match="labels"):
        job.step(x, labels=y.float())
    with pytest.raises(ValueError, match=r"takes 1 input\(s\) \(x\), got 2"):
        job.step(x, x, labels=y)
    with pytest.raises(ValueError, match="labels"):
        job.step(x, labels=None)
    with pytest.raises(ValueError, match="trains"):
        job.run(x)
    # Nothing half-done: the job still trains after the rejected inputs.
    assert job.steps_taken == 0
    assert np.isfinite(job.step(x, labels=y)) and job.steps_taken == 1


def test_explain_is_what_loom_explain_prints(tmp_path):
    import os
    import subprocess
    loom_cli = os.path.join(os.path.dirname(os.path.dirname(loom.__file__)), "..", "tools",
                            "loom", "loom")
    if not os.path.exists(loom_cli):
        pytest.skip("not the build tree's package (no tools/loom/loom beside it)")
    model, (x, _) = make_mlp(), batch()
    job = loom.parallelize(model, (x,), mesh="dp=2,tp=2", mode="auto", progress=False)
    plan = tmp_path / "job.plan"
    plan.write_bytes(job._plan)
    cli = subprocess.run([loom_cli, "explain", str(plan), "--top", "4"], capture_output=True,
                         text=True, check=True).stdout
    ours = job.explain(top=4)
    # The same report but for its title line (the CLI names the plan file).
    assert ours.splitlines()[1:] == cli.splitlines()[1:]
    assert len(ours.splitlines()) > 5


def test_compiler_messages_name_keywords_not_flags():
    model, (x, _) = make_mlp(), batch()
    with pytest.raises((ValueError, loom.CompileError)) as raised:
        loom.parallelize(model, (x,), mesh="dp=2", progress=False, virtual_stages=0)
    assert "virtual_stages" in str(raised.value) and "--" not in str(raised.value)
    with pytest.raises((ValueError, loom.CompileError)) as raised:
        loom.parallelize(model, (x,), mesh="dp=2", progress=False, stages_auto=True)
    assert "stages_auto=True" in str(raised.value) and "--" not in str(raised.value)


def test_progress_is_a_tqdm_bar_over_the_phases_when_tqdm_is_installed(monkeypatch):
    import sys
    import types
    events = []

    class Bar:
        def __init__(self, total, desc, file, leave):
            self.total, self.desc, self.n = total, desc, 0
            events.append(("open", total))

        def update(self, k):
            self.n += k

        def set_description(self, text):
            self.desc = text
            events.append(("phase", text))

        def write(self, text, file=None):
            events.append(("line", text))

        def close(self):
            events.append(("close", self.n))

    fake = types.ModuleType("tqdm")
    fake.tqdm = Bar
    monkeypatch.setitem(sys.modules, "tqdm", fake)
    model, (x, _) = make_mlp(), batch()
    loom.parallelize(model, (x,), mesh="dp=2,tp=2", mode="auto")
    phases = [text for kind, text in events if kind == "phase"]
    assert [p.split()[1] for p in phases] == ["exporting", "compiling", "loading"], phases
    assert any(kind == "line" and text.startswith("loom: --mode auto") for kind, text in events)
    assert events[0] == ("open", 3) and events[-1] == ("close", 3)


def test_progress_is_plain_lines_without_tqdm(monkeypatch, capsys):
    import sys
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm raises ImportError
    model, (x, _) = make_mlp(), batch()
    loom.parallelize(model, (x,), mesh="dp=2,tp=2", mode="auto")
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("loom: exporting MLP to ONNX")
    assert any(line.startswith("loom: compiling for mesh dp=2,tp=2") for line in lines)
    assert any(line.startswith("loom: --mode auto") for line in lines)


def test_cuda_backend_trains_as_the_cpu_does_or_says_why_not():
    model, (x, y) = make_mlp(), batch()
    with pytest.raises(ValueError, match="backend must be 'cpu' or 'cuda'"):
        loom.parallelize(model, (x,), backend="tpu", progress=False)
    cpu = loom.parallelize(model, (x,), optimizer=loom.SGD(lr=0.1), mesh="dp=2",
                           progress=False)
    try:
        gpu = loom.parallelize(model, (x,), optimizer=loom.SGD(lr=0.1), mesh="dp=2",
                               backend="cuda", progress=False)
    except loom.RunError as e:
        # A build without the CUDA backend, or a machine without a GPU: said, not crashed.
        assert "cuda" in str(e).lower()
        pytest.skip(f"no CUDA here: {e}")
    assert_close(loom_losses(gpu, x, y), loom_losses(cpu, x, y), rtol=1e-5, normwise=False)


def test_a_module_in_train_mode_trains_its_batchnorm_as_pytorch_does():
    torch.manual_seed(0)
    model, x, y = Normed().train(), torch.randn(4, 3, 6, 6), torch.tensor([0, 2, 1, 0])
    before = {k: v.clone() for k, v in model.state_dict().items()}
    expected, trained = torch_losses(model, (x,), y, lambda p: torch.optim.SGD(p, lr=0.5), STEPS)
    job = loom.parallelize(model, (x,), optimizer=loom.SGD(lr=0.5), progress=False)
    # Exporting and checking ran the module's forward; its running statistics are as
    # they were.
    for key, value in model.state_dict().items():
        assert torch.equal(value, before[key]), key
    assert_close(loom_losses(job, x, y), expected, rtol=1e-4, normwise=False)
    state = job.state_dict()
    for key in ("bn1.running_mean", "bn2.running_var", "bn1.weight"):
        assert_close(state[key].numpy(), trained.state_dict()[key].numpy(),
                                   rtol=1e-4, atol=1e-6, name=key, normwise=False)


def test_parallel_reports_the_plans_own_choices():
    """job.parallel is the plan's configuration, not the arguments': a ZeRO level the
    search chose under a memory limit, and the plan's own predicted step and peak."""
    model, (x, _) = make_mlp(), batch(n=8)
    job = loom.parallelize(model, (x,), optimizer=loom.Adam(lr=1e-2), mesh="dp=4",
                           mode="auto", memory_limit=9000, progress=False)
    explained = job.explain(top=0)
    level = re.search(r"optimizer sharding: ZeRO-(\d)", explained)
    assert level, explained
    assert job.parallel["zero"] == int(level.group(1)) > 0
    assert job.parallel["peak_bytes"] <= 9000
    assert job.parallel["step_seconds"] > 0
