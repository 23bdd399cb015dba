#!/usr/bin/python3
"""Loom's training steps equal PyTorch's on the bundled models.

For each case (model x optimizer): models/train_reference.py rebuilds the PyTorch module
with the exported weights, draws one fixed batch (inputs and labels) and runs N steps of
loss.backward() / opt.step() on it (model in eval() mode, see that script); then

    loom compile MODEL.onnx --batch B --train --loss ... --optimizer ... --lr ... -o P.plan
    loom run P.plan --steps N --data NAME=FILE.npy,...,labels=FILE.npy \\
        --metrics metrics.jsonl --save ckpt/

runs the same N steps on the same batch. Checked:

* the loss of every step (from --metrics, and the `loom: step K loss L lr R` lines on stdout
  or stderr, which must agree with --metrics to their printed precision), and that lr is the
  constant --lr;
* every parameter after the last step (from the --save checkpoint), and that every PyTorch
  parameter is in the checkpoint as kind "parameter" with its PyTorch name, dtype f32 and
  shape; the CNN's BatchNorm running statistics, where the checkpoint has them, must be
  unchanged (PyTorch in eval() mode does not update them) and of kind "buffer".

Tolerance: 1e-4 relative, normwise per tensor: max|loom - torch| <= 1e-4 * max(max|torch|,
tiny), and |loss_loom - loss_torch| <= 1e-4 * |loss_torch| for every step; torch is the
float32 PyTorch run.

One exception, printed on the case's line whenever loom needs it: an element whose PyTorch
result is itself ill-conditioned may differ by up to WIDEN (10) times PyTorch's own spread.
The reference repeats the training 3 times from starting weights moved by one ulp
(train_reference.py --ensemble), and the spread is, per element, the largest deviation of
those runs from the reference, or the median over its tensor where that is larger. It is
~1e-7 relative nearly everywhere, so nearly every element is held to the plain rule. It is large only for Adam/AdamW updates of elements whose gradient
is around eps (g / (sqrt(v) + eps) amplifies gradient rounding: a handful of elements per
tensor) and for the attention key biases (the GPT's, and the middle third of the encoder's
in_proj_bias), whose gradient is zero in exact arithmetic (softmax is invariant to q.b_k), so that in float32 it is rounding noise that Adam scales up
to ~1e-2 lr per step: two PyTorch processes already differ there by more than 1e-4.

--self-check runs no loom: PyTorch in float64 plays loom (an exact implementation, which must
pass), and the line also gives float32 against float64 under the plain rule.

The learning rates are chosen so that the parameters move well beyond the tolerance (a
missing update cannot pass): each case line gives the smallest ratio of a parameter's update
to its tolerance ("sensitivity") and names the parameters that move less than 10x theirs
(the attention key biases, whose gradient is zero, under SGD).
"""
import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile


import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "python", "loom"))
from checkpoint import read_checkpoint, step_directory  # noqa: E402  (numpy alone, by path)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import oracle  # noqa: E402  (test/oracle.py)

TOLERANCE = 1e-4
WIDEN = 10  # an element may differ by WIDEN x PyTorch's own one-ulp spread (see above)
ENSEMBLE = 3  # perturbed reference runs that measure that spread
TINY = float(np.finfo(np.float32).tiny)
MODELS = {
    # model -> (onnx file, input names)
    "mlp": ("mlp.onnx", ["x"]),
    "gpt": ("gpt.onnx", ["input_ids"]),
    "llama": ("llama.onnx", ["input_ids"]),
    "cnn": ("cnn.onnx", ["x"]),
    "encoder": ("encoder.onnx", ["input_ids", "padding_mask"]),
    "lstm": ("lstm.onnx", ["x"]),
    "gru": ("gru.onnx", ["x"]),
    "rnn": ("rnn.onnx", ["x"]),
    "upsampler": ("upsampler.onnx", ["x"]),
}


def _case(model, name, optimizer, lr, extra=False, **hyper):
    case = dict(model=model, name=name, optimizer=optimizer, lr=lr, loss="cross_entropy",
                momentum=None, nesterov=False, weight_decay=0.0, ignored=0,
                ignore_index=-100, extra=extra, defaults=False)
    case.update(hyper)
    return case


def _cases():
    cases = []
    for model in ("mlp", "gpt", "llama", "cnn", "encoder"):
        # The decoders' gradients are small (their loss starts near ln 256), so plain SGD
        # needs a larger rate before the embeddings and norm weights move 10x their tolerance.
        sgd_lr, momentum_lr = (1.0, 0.5) if model in ("gpt", "llama") else (0.1, 0.05)
        # AdamW's decoupled decay shrinks a parameter by lr * weight_decay per step; with
        # lr 1e-3 that is 5e-5 in 5 steps, below the tolerance, and a missing decay would
        # pass on the MLP (and only just fail on the GPT). With these rates a missing decay
        # misses the tolerance by ~8x or more.
        adamw_lr = {"mlp": 1e-2, "gpt": 3e-3, "llama": 3e-3, "cnn": 1e-3,
                    "encoder": 3e-3}[model]
        cases += [
            # sgd and adam give only --loss/--optimizer/--lr: loom's defaults for the rest
            # (weight decay 0, betas 0.9/0.999, eps 1e-8, ignore index -100) must be torch's.
            _case(model, "sgd", "sgd", sgd_lr, defaults=True),
            _case(model, "momentum", "momentum", momentum_lr, momentum=0.9),
            _case(model, "adam", "adam", 1e-3, defaults=True),
            _case(model, "adamw", "adamw", adamw_lr, weight_decay=0.01),
        ]
        if model == "mlp":
            cases += [
                _case(model, "sgd_wd", "sgd", 0.1, weight_decay=0.01),
                # Beyond the basic matrix: the other options of `loom compile --train`.
                _case(model, "nesterov", "momentum", 0.05, extra=True, momentum=0.9,
                      nesterov=True),
                _case(model, "adam_wd", "adam", 1e-3, extra=True, weight_decay=0.01),
                _case(model, "sgd_mse", "sgd", 0.1, extra=True, loss="mse"),
            ]
        if model == "gpt":
            # 40 of the 3 x 64 labels are -100: they must not count, nor divide the mean.
            cases.append(_case(model, "sgd_ignore", "sgd", sgd_lr, extra=True, ignored=40))
    # The recurrent classifiers (ONNX LSTM, GRU and RNN, which Loom unrolls over the
    # sequence; the LSTM and the ReLU RNN bidirectional): plain SGD and AdamW with decoupled
    # decay.
    for model in ("lstm", "gru", "rnn"):
        cases += [
            _case(model, "sgd", "sgd", 0.5, defaults=True),
            _case(model, "adamw", "adamw", 1e-2, weight_decay=0.01),
        ]
    # The ConvTranspose2d upsampler (stride 2 with output_padding, grouped, without bias).
    cases += [
        _case("upsampler", "sgd", "sgd", 0.5, defaults=True),
        _case("upsampler", "adamw", "adamw", 1e-2, weight_decay=0.01),
    ]
    return cases


CASES = _cases()


def case_id(case):
    return f"{case['model']}:{case['name']}"


def hyper_flags(case):
    """Flags shared by train_reference.py and `loom compile` (same spelling in both). A
    `defaults` case leaves out every optional one; train_reference.py's defaults are torch's."""
    flags = ["--loss", case["loss"], "--optimizer", case["optimizer"], "--lr", repr(case["lr"])]
    if case["defaults"]:
        assert case["weight_decay"] == 0.0 and case["ignore_index"] == -100
        assert case["optimizer"] in ("sgd", "adam")
        return flags
    if case["optimizer"] == "momentum":
        flags += ["--momentum", repr(case["momentum"])]
        if case["nesterov"]:
            flags.append("--nesterov")
    if case["optimizer"] in ("adam", "adamw"):
        flags += ["--beta1", "0.9", "--beta2", "0.999",
                  "--eps", repr(case.get("eps", 1e-08))]
    flags += ["--weight-decay", repr(case["weight_decay"])]
    if case["loss"] == "cross_entropy":
        flags += ["--ignore-index", str(case["ignore_index"])]
    return flags


class CommandFailed(Exception):
    pass


def run(cmd, timeout=600):
    """Runs cmd; returns its stdout and stderr (concatenated), or raises CommandFailed."""
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise CommandFailed(f"timed out after {timeout} s: {' '.join(cmd)}")
    if result.returncode != 0:
        tail = (result.stdout + result.stderr).strip().splitlines()[-15:]
        raise CommandFailed(f"exit {result.returncode}: {' '.join(cmd)}\n    "
                            + "\n    ".join(tail))
    return result.stdout + result.stderr


def run_reference(source, case, out, batch, steps, seed, dtype="float32", ensemble=0):
    run([sys.executable, os.path.join(source, "models", "train_reference.py"),
         "--model", case["model"], "--batch", str(batch), "--steps", str(steps),
         "--seed", str(seed), "--ignored", str(case["ignored"]), "--dtype", dtype,
         "--ensemble", str(ensemble), "--out", out] + hyper_flags(case))
    with open(os.path.join(out, "reference.json")) as f:
        summary = json.load(f)

    def load(sub, names):
        return {n: np.load(os.path.join(out, sub, n + ".npy")) for n in names}

    ref = {"losses": [float(v) for v in np.load(os.path.join(out, "losses.npy"))],
           "params": load("params", summary["params"]),
           "buffers": load("buffers", summary["buffers"]), "summary": summary}
    if ensemble:
        ref["spread"] = load("spread", summary["params"])
        ref["spread_losses"] = [float(v) for v in
                                np.load(os.path.join(out, "spread_losses.npy"))]
    return ref


# --------------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------------


def relative_error(actual, expected):
    """max|actual - expected| / max(max|expected|, tiny) (test/oracle.py); inf for a
    non-finite actual where expected is finite, or shapes that differ."""
    return oracle.compare(actual, expected, TOLERANCE).error


def compare_losses(actual, expected):
    """Per-step relative errors |a - e| / |e| (inf for a non-finite or missing a)."""
    return [oracle.compare(a, e, TOLERANCE).error for a, e in zip(actual, expected)]


def compare_tensor(actual, expected, spread):
    """One parameter. Returns a dict: "rel" (normwise relative error); "ok"; "widened" (elements
    whose bound is WIDEN x spread, larger than the plain 1e-4 * max|torch|); "over_plain"
    (elements beyond the plain bound, which pass only through widening); "bad" (elements beyond
    their bound); "worst" (the element with the largest error / bound) and its values."""
    actual = np.asarray(actual, dtype=np.float64).ravel()
    expected = np.asarray(expected, dtype=np.float64).ravel()
    spread = np.asarray(spread, dtype=np.float64).ravel()
    if spread.size:
        # An element's spread is at least its tensor's median spread: where the whole tensor
        # is noise (the GPT's key biases under Adam), a few samples of one element can be
        # small by chance. Elsewhere the median is ~1e-8 and changes nothing.
        spread = np.maximum(spread, np.median(spread))
    plain = TOLERANCE * max(float(np.max(np.abs(expected), initial=0.0)), TINY)
    bound = np.maximum(plain, WIDEN * spread)
    # The verdict: every element within its own bound (NaN and inf fail).
    verdict = oracle.compare(actual, expected, rtol=0.0, atol=bound, normwise=False)
    # The counts below only describe the verdict in the report.
    gap = np.abs(actual - expected)
    gap[~np.isfinite(gap)] = math.inf
    worst = verdict.index[0] if verdict.index else 0
    return {
        "rel": relative_error(actual, expected), "size": int(gap.size),
        "ok": verdict.ok,
        "widened": int(np.count_nonzero(bound > plain)),
        "over_plain": int(np.count_nonzero(~(gap <= plain))),  # oracle: ok (a count)
        "bad": int(np.count_nonzero(~(gap <= bound))),  # oracle: ok (a count)
        "worst": worst, "plain": plain,
        "worst_values": (float(actual[worst]), float(expected[worst]), float(bound[worst]),
                         float(spread[worst])) if gap.size else None,
    }


def evaluate(actual, ref):
    """Compares actual {"losses": [...], "params": {name: array}} with the float32 reference
    and its ensemble spread. Returns a dict."""
    spread_losses = ref.get("spread_losses") or [0.0] * len(ref["losses"])
    loss_errors = compare_losses(actual["losses"], ref["losses"])
    loss_bounds = [max(TOLERANCE, WIDEN * s / max(abs(e), TINY))
                   for s, e in zip(spread_losses, ref["losses"])]
    tensors, problems = {}, []
    if len(actual["losses"]) != len(ref["losses"]):
        problems.append(f"{len(actual['losses'])} losses, PyTorch {len(ref['losses'])}")
    for name, want in ref["params"].items():
        if name not in actual["params"]:
            problems.append(f"parameter {name} is not in the checkpoint")
            continue
        got = actual["params"][name]
        if tuple(got.shape) != tuple(want.shape):
            problems.append(f"{name}: shape {list(got.shape)}, PyTorch {list(want.shape)}")
            continue
        spread = ref["spread"][name] if "spread" in ref else np.zeros(want.shape)
        tensors[name] = compare_tensor(got, want, spread)
    return {
        "losses": [float(v) for v in actual["losses"]],
        "loss_errors": loss_errors, "loss_bounds": loss_bounds,
        "bad_steps": [k for k, (a, e, b) in enumerate(zip(actual["losses"], ref["losses"],
                                                          loss_bounds), 1)
                      if not oracle.compare(a, e, rtol=b, atol=b * TINY).ok],
        "tensors": tensors,
        "bad_params": [n for n, t in tensors.items() if not t["ok"]],
        "problems": problems,
    }


def sensitivities(ref):
    """{name: (max |update| of the float32 reference) / (plain tolerance of that parameter)}."""
    return {name: info["max_abs_update"] / (TOLERANCE * max(info["max_abs"], TINY))
            for name, info in ref["summary"]["params"].items()}


# --------------------------------------------------------------------------------------------
# Running loom and reading what it wrote
# --------------------------------------------------------------------------------------------

# The line the spec gives, `loom: step K loss L lr R`; anything after R (loom adds the step
# time, "(T ms)") is allowed.
STEP_LINE = re.compile(r"^loom: step (\d+) loss (\S+) lr (\S+)(\s.*)?$")


def printed_half_unit(text):
    """Half a unit in the last printed digit of a number as printed (0 if not decimal)."""
    mantissa, _, exponent = text.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    try:
        scale = 10.0 ** int(exponent) if exponent else 1.0
    except ValueError:
        return 0.0
    return 0.5 * 10.0 ** -decimals * scale


def read_step_lines(stdout):
    steps = []
    for line in stdout.splitlines():
        match = STEP_LINE.match(line.strip())
        if match:
            steps.append((int(match.group(1)), match.group(2), match.group(3)))
    return steps


def read_metrics(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def read_saved(directory):
    """Returns (manifest, {name: (kind, declared dtype, declared shape, array)}) of the
    latest checkpoint of a `--save` root, each file's size and CRC-32 checked against the
    manifest's."""
    with open(os.path.join(step_directory(directory), "manifest.json")) as f:
        manifest = json.load(f)
    try:
        _, arrays = read_checkpoint(directory)
    except ValueError as e:
        raise SystemExit(str(e))
    tensors = {}
    for entry in manifest.get("tensors", []):
        kind, array = arrays[entry["name"]]
        tensors[entry["name"]] = (kind, entry.get("dtype"), entry.get("shape"), array)
    return manifest, tensors


def run_loom(case, args, ref, work, model=None):
    """Compiles and runs `case` with loom. Returns ({"losses", "params"}, problems, notes);
    the problems are everything but the numerical comparison, which is evaluate()'s.

    model: (ONNX file, input names), by default the bundled MODELS[case["model"]]; the batch
    is read from work/ref/NAME.npy for each input name and `labels`."""
    if model is None:
        model_file, input_names = MODELS[case["model"]]
        model = (os.path.join(args.source, "models", model_file), input_names)
    model_path, input_names = model
    steps = args.steps
    plan = os.path.join(work, "model.plan")
    run([args.loom, "compile", model_path,
         "--batch", str(args.batch), "--train"] + hyper_flags(case) + ["-o", plan])
    metrics = os.path.join(work, "metrics.jsonl")
    ckpt = os.path.join(work, "ckpt")
    data = ",".join(f"{n}={os.path.join(work, 'ref', n + '.npy')}"
                    for n in input_names + ["labels"])
    cmd = [args.loom, "run", plan, "--steps", str(steps), "--data", data,
           "--metrics", metrics, "--save", ckpt]
    if args.backend:
        cmd += ["--backend", args.backend]
    output = run(cmd)
    with open(os.path.join(work, "loom_run.log"), "w") as f:
        f.write(output)

    problems, notes = [], []
    lr = case["lr"]

    # Losses: from --metrics (full precision); the step lines must agree to their precision.
    records = read_metrics(metrics)
    if [r.get("step") for r in records] != list(range(1, steps + 1)):
        problems.append(f"--metrics steps {[r.get('step') for r in records]}, "
                        f"expected 1..{steps}")
    for r in records:
        missing = {"step", "loss", "lr", "step_time_ms"} - set(r)
        if missing:
            problems.append(f"--metrics record {r} lacks {sorted(missing)}")
            break
    losses = [float(r.get("loss", math.nan)) for r in records][:steps]
    losses += [math.nan] * (steps - len(losses))
    for r in records:
        if "lr" in r and not oracle.compare(float(r["lr"]), lr, rtol=1e-6):
            problems.append(f"--metrics step {r.get('step')}: lr {r['lr']}, expected {lr}")
            break

    lines = read_step_lines(output)
    if [k for k, _, _ in lines] != list(range(1, steps + 1)):
        problems.append(f"output has `loom: step K loss L lr R` lines for K = "
                        f"{[k for k, _, _ in lines]}, expected 1..{steps}")
    for (k, loss_text, lr_text), metric in zip(lines, losses):
        try:
            printed, printed_lr = float(loss_text), float(lr_text)
        except ValueError:
            problems.append(f"step {k}: unparsable values {loss_text!r} {lr_text!r}")
            continue
        if not oracle.compare(printed, metric, rtol=1e-6, atol=printed_half_unit(loss_text)):
            problems.append(f"step {k}: printed loss {loss_text} but --metrics {metric!r}")
        if not oracle.compare(printed_lr, lr, rtol=1e-6, atol=printed_half_unit(lr_text)):
            problems.append(f"step {k}: printed lr {lr_text}, expected {lr}")

    # Checkpoint.
    manifest, tensors = read_saved(ckpt)
    if manifest.get("format") != 3:
        problems.append(f"manifest format {manifest.get('format')!r}, expected 3")
    if manifest.get("step") != steps:
        problems.append(f"manifest step {manifest.get('step')!r}, expected {steps}")
    for name, (kind, dtype, shape, array) in tensors.items():
        if kind not in ("parameter", "buffer", "optimizer_state"):
            problems.append(f"checkpoint {name}: kind {kind!r}")
        if dtype != "f32" or array.dtype != np.float32:
            problems.append(f"checkpoint {name}: dtype {dtype!r}, file {array.dtype}; "
                            f"expected f32")
        if shape is None or list(shape) != list(array.shape):
            problems.append(f"checkpoint {name}: manifest shape {shape}, "
                            f"file {list(array.shape)}")
    params = {}
    for name in ref["params"]:
        if name in tensors:
            kind, _, _, array = tensors[name]
            if kind != "parameter":
                problems.append(f"checkpoint {name}: kind {kind!r}, expected 'parameter'")
            params[name] = array
    unexpected = [n for n, t in tensors.items()
                  if t[0] == "parameter" and n not in ref["params"]]
    if unexpected:
        problems.append(f"checkpoint has {len(unexpected)} parameters that PyTorch does not: "
                        f"{', '.join(unexpected[:5])}{', ...' if len(unexpected) > 5 else ''}")
    # BatchNorm running statistics are constant in eval() mode; check those saved.
    saved_buffers = [n for n in ref["buffers"] if n in tensors]
    for name in saved_buffers:
        kind, _, _, array = tensors[name]
        if kind != "buffer":
            problems.append(f"checkpoint {name}: kind {kind!r}, expected 'buffer'")
        result = oracle.compare(array, ref["buffers"][name], TOLERANCE, name=f"buffer {name}")
        if not result.ok:
            problems.append(f"changed: {result.message}")
    if len(saved_buffers) < len(ref["buffers"]):
        notes.append(f"{len(ref['buffers']) - len(saved_buffers)} of {len(ref['buffers'])} "
                     f"BatchNorm buffers not in the checkpoint")
    states = sum(1 for t in tensors.values() if t[0] == "optimizer_state")
    if states:
        notes.append(f"{states} optimizer_state tensors")
    return {"losses": losses, "params": params}, problems, notes


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def select_cases(parser, args):
    cases = CASES
    if args.quick:
        cases = [c for c in cases if c["model"] == "mlp"]
    if args.only:
        wanted = [w.strip() for w in args.only.split(",") if w.strip()]
        known = {case_id(c) for c in CASES}
        for w in wanted:
            if w not in known and not (w.endswith(":*") and w[:-2] in MODELS):
                parser.error(f"unknown case {w!r}; cases: {', '.join(sorted(known))}")
        cases = [c for c in cases if case_id(c) in wanted or f"{c['model']}:*" in wanted]
    return cases


def report(cid, result, ref, notes, label="loom"):
    """Prints the case's line (and details on failure). Returns True when it passed."""
    tensors = result["tensors"]
    ok = not (result["problems"] or result["bad_steps"] or result["bad_params"])
    worst_loss, worst_param = oracle.Worst(), oracle.Worst()
    for k, e in enumerate(result["loss_errors"], 1):
        worst_loss.add(e, k)
    for n, t in tensors.items():
        worst_param.add(t["rel"], n)

    used = [(n, t) for n, t in tensors.items() if t["ok"] and t["over_plain"]]
    if used:
        notes.insert(0, "within PyTorch's own spread x10 but over the plain 1e-4: " + ", ".join(
            f"{n} ({t['over_plain']} of {t['size']} elements, normwise {t['rel']:.1e})"
            for n, t in sorted(used, key=lambda kv: -kv[1]["rel"])))
    sens = sensitivities(ref)
    least = min(sens.values(), default=math.inf)
    barely = sorted(n for n, r in sens.items() if r < 10)
    if barely:
        notes.append(f"moving < 10x their tolerance, so not checked for an update: "
                     f"{', '.join(barely)}")
    print(f"{cid:16s} {'ok      ' if ok else 'MISMATCH'} "
          f"loss rel {worst_loss.error if worst_loss.count else math.inf:.2e} "
          f"(step {worst_loss.name or 0})  "
          f"params rel {worst_param.error if worst_param.count else math.inf:.2e} "
          f"({worst_param.name})  "
          f"[{len(tensors)} params, sensitivity {least:.2g}x]"
          + "".join(f"\n    note: {n}" for n in notes))
    if result["bad_steps"]:
        print(f"    step losses, PyTorch vs {label}:")
        for k, (want, got, e, b) in enumerate(zip(ref["losses"], result["losses"],
                                                  result["loss_errors"],
                                                  result["loss_bounds"]), 1):
            over = f"  (over {b:.1e})" if k in result["bad_steps"] else ""
            print(f"      step {k}: PyTorch {want:.8g}, {label} {got:.8g}, relative error "
                  f"{e:.3e}{over}")
    if not ok:
        bad = sorted(result["bad_params"], key=lambda n: -tensors[n]["rel"])
        for name in bad[:12]:
            t = tensors[name]
            got, want, bound, spread = t["worst_values"]
            print(f"    {name}: normwise relative error {t['rel']:.3e}; {t['bad']} of "
                  f"{t['size']} elements over their bound; worst [flat {t['worst']}]: "
                  f"{label} {got:.8g}, PyTorch {want:.8g}, |diff| {abs(got - want):.2e}, "
                  f"bound {bound:.2e} (plain {t['plain']:.2e}, spread {spread:.1e})")
        if len(bad) > 12:
            print(f"    ... and {len(bad) - 12} more parameters over tolerance")
        for problem in result["problems"]:
            print(f"    {problem}")
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loom", help="path to the loom binary (not needed with --self-check)")
    parser.add_argument("--source", default=os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), help="Loom's source tree (default: this file's)")
    parser.add_argument("--batch", type=int, default=3, help="batch size (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=5,
                        help="training steps (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=7,
                        help="seed of the batch (default: %(default)s)")
    parser.add_argument("--quick", action="store_true", help="only the MLP cases")
    parser.add_argument("--only", metavar="MODEL:CASE[,...]",
                        help="only these cases, e.g. gpt:adam or cnn:sgd,mlp:sgd_wd "
                             "(MODEL:* for all of a model's); --list shows them")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--backend", help="passed on as `loom run --backend` (default: loom's)")
    parser.add_argument("--keep", metavar="DIR",
                        help="work in DIR and keep its files (default: a temporary directory)")
    parser.add_argument("--self-check", action="store_true",
                        help="run no loom: float64 PyTorch plays loom and must pass; also "
                             "shows float32 against float64 under the plain 1e-4 rule")
    args = parser.parse_args()

    if args.list:
        for case in CASES:
            print(f"{case_id(case):16s} {'(extra) ' if case['extra'] else ''}"
                  f"{' '.join(hyper_flags(case))}"
                  + (f"  [{case['ignored']} labels ignored]" if case["ignored"] else ""))
        return 0
    if not args.self_check and not args.loom:
        parser.error("--loom is required (or --self-check)")
    cases = select_cases(parser, args)

    root = os.path.abspath(args.keep) if args.keep else tempfile.mkdtemp(prefix="loom-train-")
    passed = failed = 0
    try:
        for case in cases:
            cid = case_id(case)
            work = os.path.join(root, cid.replace(":", "-"))
            shutil.rmtree(work, ignore_errors=True)
            os.makedirs(work)
            try:
                ref = run_reference(args.source, case, os.path.join(work, "ref"), args.batch,
                                    args.steps, args.seed, ensemble=ENSEMBLE)
                if args.self_check:
                    ref64 = run_reference(args.source, case, os.path.join(work, "ref64"),
                                          args.batch, args.steps, args.seed, dtype="float64")
                    actual, problems = ref64, []
                    plain = evaluate(ref64, {k: v for k, v in ref.items()
                                             if k not in ("spread", "spread_losses")})
                    over = [n for n in plain["bad_params"]]
                    loss_worst, param_worst = oracle.Worst(), oracle.Worst()
                    for e in plain["loss_errors"]:
                        loss_worst.add(e)
                    for t in plain["tensors"].values():
                        param_worst.add(t["rel"])
                    notes = [f"float32 vs float64 under the plain rule: loss "
                             f"{loss_worst.error:.1e}, params {param_worst.error:.1e}"
                             + (f", over 1e-4: {', '.join(over)}" if over else "")]
                    label = "float64"
                else:
                    actual, problems, notes = run_loom(case, args, ref, work)
                    label = "loom"
                result = evaluate(actual, ref)
                result["problems"] = problems + result["problems"]
            except (CommandFailed, OSError, ValueError, KeyError, TypeError) as e:
                failed += 1
                print(f"{cid:16s} FAILED: {type(e).__name__}: {e}")
                continue
            if report(cid, result, ref, notes, label):
                passed += 1
            else:
                failed += 1
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
