#!/usr/bin/python3
"""Memory measured from outside the executor, against the plan.

`memory_peak.py` compares the executor's own account of its allocations
with the plan; this one measures the whole process's C heap with a counter
preloaded into `loom run` (test/memcount), which sees what the kernels and
their libraries allocate too. `loom run` marks the counter before it reads
the plan ("start"), before the executor is created ("begin"), once it is
("created"), after every step ("step") and at the end; each bundled model
is compiled for training (AdamW, batch 8) on one device and run 3 steps.
Per model it reports:

    planned     the plan's state plus step arena (`loom explain`);
    measured    the heap's high-water from "start" to the end, minus its
                bytes at "start": all the process held for the plan,
                reading it included;
    loading     the high-water while the plan is read, over "start";
    tables      in use at "created" over "start", less the planned bytes:
                the executor's tables and the plan without its data;
    caches      what the first step leaves allocated (library primitive
                caches, their per-thread scratchpads, kernel caches);
    transient   the most a later step rises above what the step before it
                left: scratch allocated and freed inside a step;
    own         the same without the blocks that oneDNN's and OpenMP's code
                allocated itself (by the caller's address).

Checked, per model:

* the counter sees every planned byte (planned <= in use at "created" -
  at "start"): the plan is no more than the process holds;
* the kernels' scratch is in the plan: after the first step, no step
  rises more than 32 KiB + 1% of the plan above what the step before it
  left (small blocks inside kernel calls take 5-12 KiB, oneDNN's operator
  new on machines without AVX-512 up to 22 KiB more), not counting blocks
  that oneDNN and OpenMP allocated themselves inside their calls (the "own"
  column: oneDNN's gemm-based convolutions, and its matmuls without
  AVX-512, allocate buffers of their own that no user scratchpad
  replaces; the counter tells them apart by the caller's address);
* with --models gpt-350m, a GPT of GPT-2 medium's shape (354M parameters,
  batch 2 of 512 tokens, exported for the run): the process holds at most
  1% more than its plan (1.0014x measured on 2026-11-29), reading the plan
  included: no copy of the parameters outlives the executor's loading.

Not checked yet: issue 49's Deliver 5 wants measured <= predicted <= 1.1 x
measured, and the plan does not predict the executor's tables or the
libraries' caches (the "tables" and "caches" columns; docs/reliability.md,
"Memory the plan does not count"). Exit status 0 when the checks hold.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile

# What a step may allocate and free beside the plan: small blocks inside
# kernel calls (5-12 KiB), and on machines without AVX-512 up to 22 KiB
# more through operator new, which the counter cannot tell from the
# program's own.
TRANSIENT_SLACK = 32 * 1024

# The libraries whose own buffers (allocated by their code, inside a call)
# are reported apart: oneDNN's gemm-based convolutions, and its matmuls on
# machines without AVX-512, allocate and free buffers inside each call
# which no user scratchpad replaces; OpenMP's runtime allocates for its
# thread teams.
LIBRARIES = "libdnnl,libgomp"

# A 354M-parameter GPT exported for the run (--models gpt-350m): the
# process must hold at most 1% more than its plan.
LARGE = "gpt-350m"
LARGE_BOUND = 1.01

MODELS = ["mlp", "gpt", "llama", "cnn", "encoder", "lstm", "gru", "rnn", "upsampler"]


def run(cmd, env=None):
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    if result.returncode != 0:
        raise RuntimeError("%s failed (exit %d):\n%s%s" % (
            " ".join(cmd), result.returncode, result.stdout, result.stderr))
    return result.stdout


def planned_bytes(explanation, model):
    """The plan's state plus step arena, as `loom explain` states them."""
    match = re.search(r"memory per device .*?\((\d+) bytes\)", explanation)
    if not match:
        raise RuntimeError("%s: `loom explain` states no memory per device:\n%s" % (
            model, explanation))
    return int(match.group(1))


def export_large(args, work):
    """GPT-2 medium's shape (24 layers of width 1024, 16 heads, vocabulary
    50257; sequence 512 here): 354M parameters."""
    path = os.path.join(work, LARGE + ".onnx")
    run([sys.executable, os.path.join(args.source, "models", "export.py"), "--model", "gpt",
         "--layers", "24", "--d-model", "1024", "--heads", "16", "--vocab", "50257",
         "--seq", "512", "-o", path])
    return path


def measure(args, work, model, steps):
    plan = os.path.join(work, model + ".plan")
    if model == LARGE:
        source, batch = export_large(args, work), "2"
    else:
        source, batch = os.path.join(args.source, "models", model + ".onnx"), "8"
    run([args.loom, "compile", source, "--batch", batch, "--train", "--optimizer", "adamw",
         "-o", plan])
    if model == LARGE:
        os.remove(source)
    planned = planned_bytes(run([args.loom, "explain", plan]), model)
    report = os.path.join(work, model + ".memcount.json")
    env = dict(os.environ, LD_PRELOAD=args.counter, LOOM_MEMCOUNT_OUT=report,
               LOOM_MEMCOUNT_LIBRARIES=LIBRARIES)
    run([args.loom, "run", plan, "--steps", str(steps), "--seed", "3"], env=env)
    with open(report) as f:
        counted = json.load(f)
    marks = counted.get("marks", [])
    names = [m.get("name") for m in marks]
    want = ["start", "begin", "created"] + ["step"] * steps + ["end"]
    if names != want:
        raise RuntimeError("%s: the counter's marks are %s, expected %s" % (model, names, want))
    for m in marks:
        for key in ("in_use", "peak_before", "own_in_use", "own_peak_before"):
            if not isinstance(m.get(key), int) or m[key] < 0:
                raise RuntimeError("%s: mark %r has no valid %s: %r" % (model, m["name"], key, m))
    base = marks[0]["in_use"]
    created = marks[2]["in_use"] - base
    measured = max(m["peak_before"] for m in marks[1:]) - base
    # Steps after the first: marks 4 .. 3 + steps - 1. What a step rises,
    # with and without the libraries' own blocks.
    later = range(4, 3 + steps)
    transient = max(marks[i]["peak_before"] - marks[i - 1]["in_use"] for i in later)
    own = max(marks[i]["own_peak_before"] - marks[i - 1]["own_in_use"] for i in later)
    return {
        "planned": planned,
        "measured": measured,
        "loading": marks[1]["peak_before"] - base,
        "created": created,
        "tables": created - planned,
        "caches": marks[3]["in_use"] - marks[2]["in_use"],
        "transient": transient,
        "own": own,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--loom", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--counter", required=True, help="libloom_memcount.so")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    if args.steps < 2:
        parser.error("--steps must be at least 2 (the transient is measured after the first)")

    failures = []
    kib = 1024.0
    print("%-10s %10s %10s %8s %10s %10s %10s %10s %10s" % (
        "model", "planned", "measured", "ratio", "loading", "tables", "caches",
        "transient", "own"))
    with tempfile.TemporaryDirectory() as work:
        for model in args.models.split(","):
            try:
                r = measure(args, work, model, args.steps)
            except (RuntimeError, subprocess.TimeoutExpired, ValueError) as e:
                failures.append("%s: %s" % (model, e))
                continue
            ratio = r["measured"] / r["planned"] if r["planned"] > 0 else math.nan
            print("%-10s %9.1fK %9.1fK %8.3f %9.1fK %9.1fK %9.1fK %9.1fK %9.1fK" % (
                model, r["planned"] / kib, r["measured"] / kib, ratio, r["loading"] / kib,
                r["tables"] / kib, r["caches"] / kib, r["transient"] / kib,
                r["own"] / kib))
            if not r["planned"] > 0 or not math.isfinite(ratio):
                failures.append("%s: no planned bytes (%r)" % (model, r))
            elif r["created"] < r["planned"]:
                failures.append("%s: the counter saw %d bytes allocated by the executor's "
                                "creation, fewer than the %d planned" % (
                                    model, r["created"], r["planned"]))
            if model == LARGE and not r["measured"] <= LARGE_BOUND * r["planned"]:
                failures.append("%s: the process held %d bytes, over %.2f x the %d planned" % (
                    model, r["measured"], LARGE_BOUND, r["planned"]))
            bound = TRANSIENT_SLACK + 0.01 * r["planned"]
            if not r["own"] <= bound:
                failures.append("%s: a step rose %d bytes above the last, %d of them "
                                "not in blocks %s allocated themselves (at most %d "
                                "expected): a kernel's scratch the plan does not hold" % (
                                    model, r["transient"], r["own"], LIBRARIES, bound))
    for f in failures:
        print("FAIL " + f)
    print("%d models, %d failures" % (len(args.models.split(",")), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
