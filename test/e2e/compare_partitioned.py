#!/usr/bin/python3
"""Partitioned equals single device: the oracle of Loom's SPMD partitioning.

For each bundled model (MLP, GPT, CNN) one batch is drawn (models/train_reference.py),
and the model is trained for --steps steps on it:

* once on one device:  loom compile MODEL --batch B --train ... -o single.plan
                       loom run single.plan --steps N --data ... --metrics --save
* once per configuration, partitioned over a mesh:
                       loom compile ... --mesh AXES [--strategy FILE] -o p.plan
                       loom run p.plan --ranks R ...      (threads, one per rank)

Configurations: data parallel on 2, 4 and 8 ranks; optimizer sharding (ZeRO 1, 2 and 3,
with SGD, momentum and AdamW, alone and with tensor parallelism); recompute (of every
layer, with tensor parallelism and with ZeRO-3; of attention, from a strategy file);
pipeline stages (pp=2 and 4, GPipe, 1F1B and interleaved 1F1B, over 2 to 8 micro-batches,
with dp, tp, ZeRO 1-3 and recompute; interleaving on 4 stages runs on a 6-block GPT exported
here, "gpt6", whose 9 layers fill the 8 chunks) and micro-batches on a mesh (gradient accumulation); Megatron tensor parallelism (column
then row split of each MLP and attention pair; for the CNN, output- then input-channel
split of a residual block's convolutions) on 2 and 4; mixed dp x tp meshes of 4 and 8;
--random random strategies per model: a random mesh of 2 to 8 devices and random
split counts or axes for random ops, kept when `loom compile` accepts them (rejections
are counted: they must be clear errors, never crashes); and the plans of --mode auto on
three meshes, with ample memory and with 60% and 35% of what that plan needs (a limit
nothing fits is a clear error, counted).

Vocabulary-parallel loss: the GPT on tp=2, tp=4, dp=2 x tp=2 (SGD, AdamW) and 1F1B on
pp=2 x tp=2 over 2 micro-batches, and the LLaMA on dp=2 x tp=2, with the LM head split
over the vocabulary, and "gptv" (the GPT with a vocabulary of 8192, exported here)
under --mode auto with a 20 MB limit; each such
compile's --emit-mlir must keep the loss split (a softmax_cross_entropy taking the rows'
log-sum-exp) and hold no all-gather or all-to-all that makes the logits.

The LLaMA-style decoder ("llama") runs a short list of its own: Megatron from
models/llama_megatron.json on tp=2 (KV heads split), tp=4 (KV heads replicated) and
dp=2 x tp=2 (SGD and AdamW), --mode auto on dp=2 x tp=2 with ample and with limited
memory, and 1F1B on pp=2 alone and with Megatron tp=2. So does the nn.TransformerEncoder
classifier with its boolean padding mask ("encoder"): dp=2, Megatron feed-forwards on
dp=2 x tp=2 (SGD and AdamW), --mode auto (ample and limited memory), and 1F1B on pp=2
alone and with tp=2.
With a --batch divisible by 3 (and --only padded) it runs padded_configs(): ZeRO over
3 data-parallel ranks, where optimizer sharding pads every parameter to split it.
--reduced (the sanitizer build) keeps three of each: Megatron dp=2 x tp=2, --mode auto on
dp=2 x tp=2, and 1F1B on pp=2.

Every configuration must reproduce the single-device loss of every step and every
parameter after the last step within --rtol (normwise per tensor: max|p - s| <= rtol *
max|s|). The models train with SGD (plus one AdamW and one momentum configuration per
model, AdamW with epsilon 1e-3), so that parameters whose true gradient is zero (GPT's
attention key biases) are not amplified by Adam's normalisation into differences of size lr
(see compare_training.py).

--mpi also runs one data-parallel configuration under `mpirun -np 4` (--comm mpi).

--backend cuda runs every `loom run` on the CUDA backend: the single-device run on one
GPU, a partitioned run's ranks as virtual devices sharing it (threads communicator);
without a GPU the script prints why and exits 77 (skipped). --bf16 trains bf16 copies of
the models (test/e2e/to_bf16.py), single device and partitioned alike; --precision bf16
or f16 compiles every run with that compute precision over f32 master weights; a
tensor or loss beyond --rtol from the single-device run then still agrees when it is no
further from the single-device f32 run than the single-device run itself is (see
compare()).
Exit status 0 when every configuration agrees.
"""
import argparse
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

import to_bf16
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "python", "loom"))
from checkpoint import read_checkpoint  # noqa: E402  (numpy alone, loaded by path)
from partitioned_configs import LLAMA_REDUCED, fixed_configs, padded_configs
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import oracle  # noqa: E402  (test/oracle.py)

MODELS = {
    # model -> (onnx file, input names)
    "mlp": ("mlp.onnx", ["x"]),
    "gpt": ("gpt.onnx", ["input_ids"]),
    "llama": ("llama.onnx", ["input_ids"]),
    "cnn": ("cnn.onnx", ["x"]),
    "encoder": ("encoder.onnx", ["input_ids", "padding_mask"]),
    # Exported here (models/export.py): 6 blocks, so that its 9 layers fill the
    # 8 chunks of interleaved 1F1B on 4 stages.
    "gpt6": ("gpt6.onnx", ["input_ids"]),
    # Exported here: a vocabulary of 8192, whose logits dominate memory, so that
    # --mode auto under a limit keeps the loss split over the vocabulary.
    "gptv": ("gptv.onnx", ["input_ids"]),
}

# Models exported into the work directory: export.py / train_reference.py flags.
GENERATED = {
    "gpt6": ["--model", "gpt", "--layers", "6", "--d-model", "32", "--heads", "2",
             "--vocab", "64", "--seq", "16"],
    "gptv": ["--model", "gpt", "--vocab", "8192"],
}

# Configurations whose logits stay split over the vocabulary through the loss: the
# compile's --emit-mlir must hold no all_gather (or all_to_all) that makes a tensor as
# wide as the vocabulary with at least a row per vocabulary entry (the gathered logits;
# the transposed LM head weight, [d_model, vocab], is narrower).
VOCAB_PARALLEL = {"vocab-parallel megatron tp=2", "vocab-parallel megatron dp=2,tp=2",
                  "vocab-parallel megatron tp=4", "vocab-parallel adamw dp=2,tp=2",
                  "auto vocab-parallel dp=2,tp=2 memory 20 MB",
                  "vocab-parallel pipeline pp=2,tp=2 1f1b m=2"}
VOCAB = {"gpt": 256, "llama": 256, "gptv": 8192}


def class_split_losses(mlir_text):
    """The number of softmax_cross_entropy ops of mlir_text that take a log-sum-exp (a
    class block of a vocabulary-parallel loss)."""
    return sum(1 for line in mlir_text.splitlines()
               if "loom.softmax_cross_entropy " in line and ", tensor<" in line
               and line.rstrip().endswith("-> tensor<f32>")
               and line.split(":")[-1].count("tensor<") == 4)


def gathered_logits(mlir_text, vocab=256):
    """The all_gather / all_to_all lines of mlir_text that make a [.., vocab] tensor of at
    least vocab rows."""
    found = []
    for line in mlir_text.splitlines():
        if "loom.all_gather" not in line and "loom.all_to_all" not in line:
            continue
        result = line.rsplit("-> tensor<", 1)
        if len(result) != 2:
            continue
        dims = result[1].split(">")[0].split("x")[:-1]
        if len(dims) >= 2 and int(dims[-1]) == vocab:
            rows = 1
            for d in dims[:-1]:
                rows *= int(d)
            if rows >= vocab:
                found.append(line.strip())
    return found
# Models checked on a few configurations only (no random strategies, no memory-limited
# --mode auto probes): tensor parallelism from their strategy file, --mode auto, pipelines.
FIXED_ONLY = {"llama", "encoder"}

RANDOM_MESHES = [
    [("a", 2)], [("a", 4)], [("a", 8)], [("a", 2), ("b", 2)], [("a", 2), ("b", 4)],
    [("a", 4), ("b", 2)], [("a", 2), ("b", 2), ("c", 2)],
]


def mesh_flag(axes):
    return ",".join(f"{n}={s}" for n, s in axes)


class Runner:
    def __init__(self, args, work):
        self.args = args
        self.work = work

    def run(self, cmd, timeout=600):
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return result.returncode, result.stdout + result.stderr

    def model_path(self, model):
        onnx_file, _ = MODELS[model]
        path = os.path.join(self.args.source, "models", onnx_file)
        if model in GENERATED:
            path = os.path.join(self.work, onnx_file)
            if not os.path.exists(path):
                subprocess.run([sys.executable, os.path.join(self.args.source, "models",
                                                             "export.py")]
                               + GENERATED[model] + ["-o", path], check=True,
                               capture_output=True)
        if not self.args.bf16:
            return path
        converted = os.path.join(self.work, "bf16-" + onnx_file)
        if not os.path.exists(converted):
            import onnx
            onnx.save(to_bf16.convert(onnx.load(path)), converted)
        return converted

    def compile(self, model, out, extra, precision=None):
        precision = precision or self.args.precision
        cmd = [self.args.loom, "compile", self.model_path(model),
               "--batch", str(self.args.batch), "--train"] + extra + ["-o", out]
        if precision != "f32":
            cmd[-2:-2] = ["--precision", precision]
        return self.run(cmd)

    def train(self, model, plan, directory, ranks=None, mpi=False):
        _, inputs = MODELS[model]
        data = ",".join(f"{n}={os.path.join(self.work, model, 'data', n + '.npy')}"
                        for n in inputs + ["labels"])
        cmd = [self.args.loom, "run", plan, "--steps", str(self.args.steps), "--data", data,
               "--metrics", os.path.join(directory, "metrics.jsonl"),
               "--save", os.path.join(directory, "ckpt")]
        if ranks:
            cmd += ["--ranks", str(ranks)]
        if self.args.backend != "cpu":
            cmd += ["--backend", self.args.backend]
        if mpi:
            cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(ranks)] + \
                [c for c in cmd if c not in ("--ranks", str(ranks))] + ["--comm", "mpi"]
        return self.run(cmd)


def parameters(directory):
    """The checkpointed parameters of a run, by file name, in f64."""
    _, tensors = read_checkpoint(os.path.join(directory, "ckpt"))
    return {name: (name, array.astype(np.float64))
            for name, (kind, array) in tensors.items() if kind == "parameter"}


def losses(directory):
    return [json.loads(l)["loss"] for l in open(os.path.join(directory, "metrics.jsonl"))]


def agrees_via_f32(b, a, t, rtol, differs):
    """Whether `b`, `differs` (a failed Comparison) from the lower precision
    single-device result `a`, is no further from the f32 result `t` than `a`
    is (nor than rtol)."""
    a_from_f32 = oracle.compare(a, t, rtol).error
    bound = max(rtol, a_from_f32) if math.isfinite(a_from_f32) else rtol  # oracle: ok (finite)
    result = oracle.compare(b, t, bound)
    if result.ok:
        print(f"     {differs.name}: {differs.error:.3e} from the single-device run, but "
              f"{result.error:.3e} from f32 where the single-device run is {a_from_f32:.3e}")
    return result.ok


def compare(single, other, rtol, exact=None):
    """(None, worst relative difference) when `other` reproduces `single`,
    else (what differs, the worst so far); test/oracle.py's normwise compare
    per tensor and per loss.

    With `exact` (the single-device run in f32, when `single` and `other` ran
    at a lower compute precision), a tensor or loss that differs from
    `single` by more than rtol still agrees when `other` is no further from
    the f32 result than `single` is (nor than rtol): two roundings of the same
    sums in another order, not a wrong one. AdamW near convergence turns such
    roundings into updates of size lr, so the bf16 single-device run is not
    always a sharper reference than that."""
    reference = parameters(single)
    theirs = parameters(other) if os.path.isdir(os.path.join(other, "ckpt")) else {}
    truth = parameters(exact) if exact else {}
    worst = oracle.Worst()
    for file, (name, a) in reference.items():
        if file not in theirs:
            return f"parameter {name} missing from the checkpoint", worst.error
        b = theirs[file][1]
        result = oracle.compare(b, a, rtol, name=f"parameter {name}")
        if not result.ok and file in truth and agrees_via_f32(b, a, truth[file][1], rtol, result):
            continue
        worst.add(result)
        if not result.ok:
            return result.message, worst.error
    la, lb = losses(single), losses(other)
    lt = losses(exact) if exact else None
    if len(la) != len(lb):
        return f"{len(lb)} losses, expected {len(la)}", worst.error
    for step, (x, y) in enumerate(zip(la, lb), 1):
        result = oracle.compare(y, x, rtol, name=f"step {step} loss")
        if not result.ok and lt and agrees_via_f32(y, x, lt[step - 1], rtol, result):
            continue
        worst.add(result)
        if not result.ok:
            return result.message, worst.error
    return None, worst.error


# What a configuration's compile must print, where the configuration exists to
# exercise a choice the compiler makes.
EXPECTED_OUTPUT = {
    "stage meshes by --stages auto dp=4":
        "--stages auto chose submeshes of different sizes, dp=2/dp=1/dp=1",
    "stage meshes by --stages auto over the limit dp=4":
        "per device, over the limit of 683.6 KiB; --stages auto takes the next shape, "
        "pp=2,dp=2",
}


def random_strategy(rng, ops, axes):
    """Random counts or axis names for 1 to 6 random ops of `ops` (entries of a saved
    strategy file: node, op, index and the operands' ranks)."""
    entries = []
    for op in rng.sample(ops, min(len(ops), rng.randint(1, 6))):
        strategy = []
        for operand in op["strategy"]:
            dims = []
            for _ in operand:
                choice = rng.random()
                if choice < 0.55:
                    dims.append(1)
                elif choice < 0.85:
                    dims.append(rng.choice(axes)[0])
                else:
                    dims.append(rng.choice([s for _, s in axes]))
            strategy.append(dims)
        entries.append({"node": op["node"], "op": op["op"], "index": op["index"],
                        "strategy": strategy})
    return entries


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loom", required=True)
    parser.add_argument("--source", required=True, help="the Loom source tree")
    parser.add_argument("--models", default="mlp,gpt,cnn,gpt6,gptv,llama,encoder")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--random", type=int, default=20, help="random strategies per model")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mpi", action="store_true", help="also one run under mpirun -np 4")
    parser.add_argument("--keep", help="keep the work directory here")
    parser.add_argument("--only", help="only the fixed configurations whose name contains "
                        "this (no random strategies, no --mode auto probes)")
    parser.add_argument("--reduced", action="store_true",
                        help="of the LLaMA decoder's and the encoder's lists only: "
                        + ", ".join(LLAMA_REDUCED))
    parser.add_argument("--backend", default="cpu", help="cpu or cuda (loom run --backend)")
    parser.add_argument("--bf16", action="store_true", help="train bf16 copies of the models")
    parser.add_argument("--precision", default="f32",
                        help="loom compile --precision for every run (f32, bf16, f16)")
    args = parser.parse_args()

    work = args.keep or tempfile.mkdtemp(prefix="loom-partitioned-")
    os.makedirs(work, exist_ok=True)
    runner = Runner(args, work)
    if args.backend != "cpu":
        probe = os.path.join(work, "probe.plan")
        runner.compile("mlp", probe, [])
        code, output = runner.run([args.loom, "run", probe, "--backend", args.backend])
        if code != 0 and "no CUDA device" in output:
            print("skipped: " + output.strip().splitlines()[-1].replace("loom: error: ", ""))
            return 77
    failures = 0
    total = 0
    start = time.time()
    for model in args.models.split(","):
        root = os.path.join(work, model)
        os.makedirs(root, exist_ok=True)
        # One batch (two labels ignored, so the mean's count is exercised).
        model_flags = GENERATED.get(model, ["--model", model])
        subprocess.run([sys.executable, os.path.join(args.source, "models", "train_reference.py"),
                        *model_flags, "--optimizer", "sgd", "--lr", "0.1",
                        "--batch", str(args.batch), "--steps", "1", "--ignored", "2",
                        "--out", os.path.join(root, "data")],
                       check=True, capture_output=True)
        singles = {}

        def single(optimizer, precision=None):
            precision = precision or args.precision
            if (optimizer, precision) not in singles:
                d = os.path.join(root, "single-" + optimizer +
                                 ("" if precision == args.precision else "-" + precision))
                os.makedirs(d, exist_ok=True)
                plan = os.path.join(d, "model.plan")
                flags = ["--optimizer", optimizer, "--lr", "0.1"]
                if optimizer == "adamw":
                    flags += ["--eps", "1e-3"]
                for cmd in (runner.compile(model, plan, flags, precision),
                            runner.train(model, plan, d)):
                    if cmd[0] != 0:
                        raise SystemExit(f"{model}: the single-device run failed:\n{cmd[1]}")
                singles[(optimizer, precision)] = d
            return singles[(optimizer, precision)]

        def exact(optimizer):
            """The f32 single-device run, where the runs compute in lower precision."""
            return single(optimizer, "f32") if args.precision != "f32" else None

        def check(name, mesh, strategy, flags, mpi=False, expect_valid=True):
            nonlocal failures, total
            d = os.path.join(root, name.replace(" ", "_").replace(",", "_").replace("=", "")
                             .replace("/", "+"))
            os.makedirs(d, exist_ok=True)
            # Stages on submeshes of their own: "dp=4/tp=2" (--stage-meshes).
            own = "/" in mesh
            extra = flags + ["--lr", "0.1", "--stage-meshes" if own else "--mesh", mesh]
            if strategy is not None:
                path = os.path.join(d, "strategy.json")
                with open(path, "w") as f:
                    json.dump({"strategies": strategy}, f)
                extra += ["--strategy", path]
            plan = os.path.join(d, "model.plan")
            if name in VOCAB_PARALLEL:
                extra += ["--emit-mlir", os.path.join(d, "model.mlir")]
            code, output = runner.compile(model, plan, extra)
            if code != 0:
                if not expect_valid and "loom: error:" in output and \
                        "Stack dump" not in output:
                    return False  # rejected with a clear error
                failures += 1
                total += 1
                print(f"FAIL {model} {name}: compile: {output.strip()}")
                return True
            if name in VOCAB_PARALLEL:
                with open(os.path.join(d, "model.mlir")) as f:
                    text = f.read()
                gathered = gathered_logits(text, VOCAB[model])
                if not class_split_losses(text):
                    gathered.append("(no softmax_cross_entropy takes a log-sum-exp)")
                if gathered:
                    failures += 1
                    total += 1
                    print(f"FAIL {model} {name}: the loss is not split over the "
                          f"vocabulary:\n"
                          + "\n".join(gathered[:4]))
                    return True
            expected = EXPECTED_OUTPUT.get(name)
            if expected and expected not in output:
                failures += 1
                total += 1
                print(f"FAIL {model} {name}: the compile did not print {expected!r}:\n"
                      f"{output.strip()}")
                return True
            ranks = 0
            for submesh in mesh.split("/"):
                devices = 1
                for part in submesh.split(","):
                    devices *= int(part.split("=")[1])
                ranks += devices
            code, output = runner.train(model, plan, d, ranks=ranks, mpi=mpi)
            total += 1
            optimizer = flags[flags.index("--optimizer") + 1]
            if code != 0:
                failures += 1
                print(f"FAIL {model} {name}: run: {output.strip()[-2000:]}")
                return True
            problem, worst = compare(single(optimizer), d, args.rtol, exact(optimizer))
            if problem:
                failures += 1
                print(f"FAIL {model} {name} on {ranks} ranks: {problem}")
            else:
                print(f"ok   {model} {name} on {ranks} ranks: worst relative difference "
                      f"{worst:.2e}", flush=True)
            return True

        padded = padded_configs(model) if args.batch % 3 == 0 else []
        for name, mesh, strategy, flags in fixed_configs(model, args.reduced) + padded:
            # Where stages' messages go does not depend on the precision:
            # --stage-meshes is checked in f32 only.
            if args.precision != "f32" and name.startswith("stage meshes"):
                continue
            if not args.only or args.only in name:
                check(name, mesh, strategy, flags)
        if args.only or model in GENERATED or model in FIXED_ONLY:
            continue

        # --mode auto: with ample memory, then with limits that force the
        # search to split (a fraction of what the unconstrained plan needs,
        # as its static memory plan says). A limit no plan meets must be a
        # clear error naming the tensors; at least one limited plan per
        # model must compile, run and agree.
        limited = 0
        for mesh in ("dp=2,tp=2", "dp=4", "a=2,b=2,c=2"):
            probe = os.path.join(root, "auto-probe.plan")
            code, output = runner.compile(model, probe, ["--optimizer", "sgd", "--mesh", mesh,
                                                         "--mode", "auto"])
            if code == 0:
                code, output = runner.run([args.loom, "explain", probe])
            match = re.search(r"^memory per device .*? \(([0-9]+) bytes\)", output, re.M)
            if code != 0 or not match:
                failures += 1
                total += 1
                print(f"FAIL {model} auto {mesh}: {output.strip()}")
                continue
            ample = int(match.group(1))
            check(f"auto {mesh}", mesh, None, ["--optimizer", "sgd", "--mode", "auto"])
            for fraction in (0.6, 0.35):
                limit = str(int(ample * fraction))
                if check(f"auto {mesh} memory {fraction}", mesh, None,
                         ["--optimizer", "sgd", "--mode", "auto", "--memory-limit", limit],
                         expect_valid=False):
                    limited += 1
                else:
                    print(f"     {model} auto {mesh} memory {fraction}: no plan fits "
                          f"{limit} bytes (a clear error)")
        if limited == 0:
            failures += 1
            total += 1
            print(f"FAIL {model}: no memory-limited auto plan compiled")
        if args.mpi and model == "mlp":
            check("mpi dp=4", "dp=4", None, ["--optimizer", "sgd"], mpi=True)

        # Random strategies: the ops come from a saved data-parallel strategy.
        saved = os.path.join(root, "ops.json")
        code, output = runner.compile(model, os.path.join(root, "ops.plan"),
                                      ["--mesh", "a=2", "--save-strategy", saved])
        if code != 0:
            raise SystemExit(f"{model}: cannot list the ops: {output}")
        ops = [e for e in json.load(open(saved))["strategies"] if e["strategy"]]
        rng = random.Random(args.seed * 1000 + sum(map(ord, model)))
        accepted = rejected = 0
        while accepted < args.random and rejected < 50 * max(args.random, 1):
            axes = rng.choice(RANDOM_MESHES)
            strategy = random_strategy(rng, ops, axes)
            if check(f"random {accepted + 1}", mesh_flag(axes), strategy,
                     ["--optimizer", "sgd"], expect_valid=False):
                accepted += 1
            else:
                rejected += 1
        print(f"     {model}: {accepted} random strategies run, {rejected} rejected by "
              f"loom compile with an error")
        if accepted < args.random:
            failures += 1
            print(f"FAIL {model}: only {accepted} of {args.random} random strategies were valid")

    print(f"{total - failures} of {total} partitioned runs equal the single-device run "
          f"(rtol {args.rtol}, backend {args.backend}{', bf16' if args.bf16 else ''}{', precision ' + args.precision if args.precision != 'f32' else ''}) in "
          f"{time.time() - start:.0f} s")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
