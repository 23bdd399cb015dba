"""Running `loom simulate` on shape-only GPTs and reading its report, for the benches
that predict clusters far too big to run here (gpt3_pipeline.py, published_runs.py).

    generate(out, layers, d, heads, vocab, seq)   models/gpt_shapes.py: no weights
    simulate(loom, model, args) -> dict            one `loom simulate --train --top 1`

simulate's dict: ok, text, wall (s), and when ok: step (s), memory (GiB), memory_bytes,
mesh, devices, nodes, stages, schedule ("1f1b", "interleavedx2", "-"), micro, zero,
compute and comm (s), chose (the lines where --mode auto says what it chose).
"""

import os
import re
import resource
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_LOOM = os.path.join(ROOT, "build", "tools", "loom", "loom")


def generate(out, layers, d, heads, vocab, seq):
    """A shape-only GPT (export.py's structure, untied head) at `out`."""
    subprocess.run([sys.executable, os.path.join(ROOT, "models", "gpt_shapes.py"),
                    "--layers", str(layers), "--d-model", str(d), "--heads", str(heads),
                    "--vocab", str(vocab), "--seq", str(seq), "-o", out],
                   check=True, stdout=subprocess.DEVNULL)


def gib(text):
    value, unit = text.split()
    return float(value) * {"B": 2**-30, "KiB": 2**-20, "MiB": 2**-10, "GiB": 1,
                           "TiB": 1024}[unit]


def seconds(text):
    value, unit = text.split()
    return float(value) * {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1}[unit]


def simulate(loom, model, args, max_bytes=None):
    """Runs `loom simulate MODEL --train --top 1 ARGS` and parses what it printed. With
    max_bytes, the run's address space is capped there: a simulation that needs more fails
    with "out of memory" instead of starving the machine."""
    cmd = [loom, "simulate", model, "--train", "--top", "1"] + list(args)

    def cap():
        if max_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (max_bytes, max_bytes))

    start = time.monotonic()
    run = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=cap)
    result = {"wall": time.monotonic() - start, "ok": run.returncode == 0,
              "text": run.stdout + run.stderr, "cmd": cmd}
    if not result["ok"]:
        if max_bytes and ("out of memory" in result["text"] or "bad_alloc" in result["text"]
                          or run.returncode < 0):
            result["text"] += "\nout of memory: more than %.0f GiB of address space" % (
                max_bytes / 2**30)
        return result
    text = result["text"]
    step = re.search(r"^predicted step ([0-9.]+ [mun]?s) per device: compute ([0-9.]+ [mun]?s), "
                     r"communication ([0-9.]+ [mun]?s)", text, re.M)
    memory = re.search(r"^memory per device ([0-9.]+ [KMGT]?i?B) \((\d+) bytes\)", text, re.M)
    mesh = re.search(r"on mesh \[(.*?)\] \((\d+) devices\)", text)
    cluster = re.search(r"^cluster \S+ \((\d+) nodes?\)", text, re.M)
    pipeline = re.search(r"^pipeline: (\d+) stages, (\S+) schedule(?: \((\d+) chunks per "
                         r"stage\))? over (\d+) micro-batches", text, re.M)
    zero = re.search(r"^optimizer sharding: ZeRO-(\d)", text, re.M)
    if not (step and memory and mesh):
        result.update(ok=False, text="unparsed report:\n" + text)
        return result
    result.update(
        step=seconds(step.group(1)), compute=seconds(step.group(2)),
        comm=seconds(step.group(3)), memory=gib(memory.group(1)),
        memory_bytes=int(memory.group(2)), mesh=mesh.group(1).replace(" ", ""),
        devices=int(mesh.group(2)), nodes=int(cluster.group(1)) if cluster else None,
        stages=int(pipeline.group(1)) if pipeline else 1,
        schedule=(pipeline.group(2) + ("x%s" % pipeline.group(3) if pipeline.group(3) else ""))
        if pipeline else "-",
        micro=int(pipeline.group(4)) if pipeline else 1,
        zero=int(zero.group(1)) if zero else 0,
        chose=re.findall(r"^loom: (the plan of .*|--stages auto chose .*|"
                         r"--stages auto: submeshes of different sizes.*)$", text, re.M))
    return result
