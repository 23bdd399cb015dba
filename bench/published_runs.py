#!/usr/bin/python3
"""Loom's cost model against the runs Megatron-LM published (arXiv 2104.04473): every row
of its Table 1 (GPT, 1.7B to 1008B parameters, on 32 to 3072 A100s) and of its Table 2
(GPT-3 175B and 530B, PTD parallelism against ZeRO-3), simulated with `loom simulate` in
the published configuration. Nothing runs: the models are shape-only GPTs
(models/gpt_shapes.py) and the step is Loom's prediction.

Per row it prints the predicted step, the predicted and the published TFLOP/s per GPU,
their ratio, and the memory per device against the 80 GB of the A100s. The TFLOP/s come
from the step with Megatron's own count of a GPT iteration's FLOPs (with activation
recompute, which all these runs used):

    F = 96 B s l h^2 (1 + s / (6 h) + V / (16 l h))      TFLOP/s per GPU = F / (step * GPUs)

Assumptions, and where each comes from:
  - the published figures, model shapes (heads, hidden, layers), (t, p), GPUs, global
    batch and micro-batch: ../shared/REFERENCES.md, from the paper's Tables 1 and 2 and
    its examples/sc21 scripts; sequence 2048, vocabulary 51200;
  - d = GPUs / (t p); each pipeline runs m = B / (micro-batch * d) micro-batches
    (--micro-batches; without a pipeline the same count is gradient accumulation);
  - schedule: interleaved 1F1B where the paper gives layers per chunk (v = l / (p *
    layers per chunk) chunks per stage: 76.1B 3, 145.6B 2, 310.1B 2, 529.6B 3), else
    1F1B (the paper uses its interleaved schedule throughout; the chunking of 39.1B,
    1008B and Table 2's PTD runs is not in REFERENCES.md, so these are predicted under
    plain 1F1B, which can only be slower);
  - layouts: Megatron's (models/gpt_megatron.json: column- then row-parallel attention
    and MLP over tp, the vocabulary split over tp; --mode data where t = 1), activation recompute per layer
    (--recompute layers), mixed precision as bf16 compute over f32 master weights and
    AdamW state (--precision bf16; the paper trained in fp16, whose A100 peak is the
    same 312 TFLOP/s);
  - ZeRO-3 rows: --mode data --zero 3 (no model parallelism), as the paper's ZeRO-3
    baseline (DeepSpeed) ran;
  - the machine: Loom's built-in 8xA100-80GB profile (datasheet peaks, nccl-tests
    bandwidths: compiler/cost/HardwareProfile.cpp), grown to as many 8-GPU nodes as the
    run needs. The profile's kernel efficiencies are 1 (peaks).

`loom simulate` builds only 2 x stages of a 1F1B or interleaved pipeline's micro-batches
(the schedule's memory peak is reached by then) and predicts the step for all of them, so
the runs with hundreds of micro-batches per pipeline (175B PTD on 384 GPUs: 384) take a few
minutes; each simulation is still capped at --max-gib of address space (default 12) and
reported as out of memory past it.

--auto also runs, for each Table 1 row, `--mode auto --stages auto` on the same GPUs as
a mesh dp=GPUs/8,tp=8 (the search chooses the layouts, pipeline stages, micro-batches,
schedule, recompute and ZeRO level within 80 GB) at the same global batch, and prints its
plan and predicted step against the Megatron configuration's under the same model
("auto/meg." at most 1: the search's plan is no slower).

The criterion, the last line's verdict: every row simulated, its predicted TFLOP/s per GPU
within 30% of the published (the tolerance the issue asked of the ZeRO-3 rows, applied to
all), and with --auto every searched plan no slower than Megatron's configuration and
within 80 GB. Exit status 1 when a row misses it (each named, with by how much), else 0.

Usage: bench/published_runs.py [--loom PATH] [--only SUBSTRING] [--jobs N] [--max-gib G]
                               [--auto]
"""

import argparse
import concurrent.futures
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import loom_simulate  # noqa: E402

ROOT = loom_simulate.ROOT
SEQ, VOCAB = 2048, 51200
LIMIT = 80e9
# |predicted / published TFLOP/s - 1| at most this, on every row: the 30% the issue asked
# of the ZeRO-3 rows (bench/README.md); no tighter figure is stated for the others.
TOLERANCE = 0.30

# name, (heads, hidden, layers), t, p, GPUs, global batch, micro-batch, layers per chunk,
# published TFLOP/s per GPU.
TABLE1 = [
    ("1.7B", (24, 2304, 24), 1, 1, 32, 512, 16, None, 137),
    ("3.6B", (32, 3072, 30), 2, 1, 64, 512, 16, None, 138),
    ("7.5B", (32, 4096, 36), 4, 1, 128, 512, 16, None, 142),
    ("18.4B", (48, 6144, 40), 8, 1, 256, 1024, 8, None, 135),
    ("39.1B", (64, 8192, 48), 8, 2, 512, 1536, 4, None, 138),
    ("76.1B", (80, 10240, 60), 8, 4, 1024, 1792, 2, 5, 140),
    ("145.6B", (96, 12288, 80), 8, 8, 1536, 2304, 2, 5, 148),
    ("310.1B", (128, 16384, 96), 8, 16, 1920, 2160, 1, 3, 155),
    ("529.6B", (128, 20480, 105), 8, 35, 2520, 2520, 1, 1, 163),
    ("1008B", (160, 25600, 128), 8, 64, 3072, 3072, 1, None, 163),
]
GPT3 = (96, 12288, 96)
MT530 = (128, 20480, 105)
# name, shape, kind ("ptd" or "zero3"), t, p, GPUs, global batch, micro-batch, published.
TABLE2 = [
    ("175B PTD", GPT3, "ptd", 8, 12, 384, 1536, 1, 153),
    ("175B PTD", GPT3, "ptd", 8, 12, 768, 1536, 1, 149),
    ("175B PTD", GPT3, "ptd", 8, 12, 1536, 1536, 1, 141),
    ("175B ZeRO-3", GPT3, "zero3", 1, 1, 384, 1536, 4, 144),
    ("175B ZeRO-3", GPT3, "zero3", 1, 1, 768, 1536, 2, 88),
    ("175B ZeRO-3", GPT3, "zero3", 1, 1, 1536, 1536, 1, 44),
    ("530B PTD", MT530, "ptd", 8, 35, 560, 2240, 1, 171),
    ("530B PTD", MT530, "ptd", 8, 35, 1120, 2240, 1, 167),
    ("530B PTD", MT530, "ptd", 8, 35, 2240, 2240, 1, 159),
    ("530B ZeRO-3", MT530, "zero3", 1, 1, 640, 2560, 4, 138),
    ("530B ZeRO-3", MT530, "zero3", 1, 1, 1120, 2240, 2, 98),
    ("530B ZeRO-3", MT530, "zero3", 1, 1, 2240, 2240, 1, 48),
]


def flops(batch, layers, hidden):
    """Megatron's FLOPs of one iteration (with activation recompute)."""
    s, l, h, v = SEQ, layers, hidden, VOCAB
    return 96 * batch * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))


def configuration(t, p, gpus, batch, micro, chunk, layers, zero3):
    """The simulate arguments of one published configuration, and a short description."""
    d = gpus // (t * p)
    m = batch // (micro * d)
    if t * p * d != gpus or micro * d * m != batch:
        raise ValueError("t=%d p=%d does not divide %d GPUs and batch %d" % (t, p, gpus, batch))
    axes = ([("pp", p)] if p > 1 else []) + [("dp", d)] + ([("tp", t)] if t > 1 else [])
    args = ["--batch", str(batch), "--optimizer", "adamw", "--precision", "bf16",
            "--cluster", "8xA100-80GB", "--mesh", ",".join("%s=%d" % a for a in axes),
            "--recompute", "layers"]
    if m > 1:
        args += ["--micro-batches", str(m)]
    schedule = "-"
    if p > 1:
        v = layers // (p * chunk) if chunk else 1
        schedule = "interleaved x%d" % v if v > 1 else "1f1b"
        args += ["--schedule", "interleaved", "--virtual-stages", str(v)] if v > 1 else \
            ["--schedule", "1f1b"]
    if zero3:
        args += ["--mode", "data", "--zero", "3"]
    elif t > 1:
        args += ["--strategy", os.path.join(ROOT, "models", "gpt_megatron.json")]
    else:
        args += ["--mode", "data"]
    return args, "t=%d p=%d d=%d m=%d" % (t, p, d, m), schedule


def auto_args(gpus, batch):
    """`--mode auto --stages auto` on the GPUs of a row, as 8-GPU nodes."""
    return ["--batch", str(batch), "--optimizer", "adamw", "--precision", "bf16",
            "--cluster", "8xA100-80GB", "--mesh", "dp=%d,tp=8" % (gpus // 8),
            "--mode", "auto", "--stages", "auto"]


def rows():
    """Every row: (table, name, shape, simulate args, description, schedule, GPUs, batch,
    published TFLOP/s, kind)."""
    out = []
    for name, shape, t, p, gpus, batch, micro, chunk, published in TABLE1:
        args, desc, sched = configuration(t, p, gpus, batch, micro, chunk, shape[2], False)
        out.append(("1", name, shape, args, desc, sched, gpus, batch, published, "ptd"))
    for name, shape, kind, t, p, gpus, batch, micro, published in TABLE2:
        args, desc, sched = configuration(t, p, gpus, batch, micro, None, shape[2],
                                          kind == "zero3")
        out.append(("2", name, shape, args, desc, sched, gpus, batch, published, kind))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loom", default=loom_simulate.DEFAULT_LOOM)
    parser.add_argument("--only", help="only the rows whose name contains this")
    parser.add_argument("--jobs", type=int, default=1,
                        help="simulations run at once (default 1: each can take many GiB)")
    parser.add_argument("--max-gib", type=float, default=12,
                        help="address space per simulation, GiB (default 12)")
    parser.add_argument("--auto", action="store_true",
                        help="also the search's own plan for each Table 1 row (item 4)")
    args = parser.parse_args()
    todo = [r for r in rows() if not args.only or args.only in r[1]]
    searched = [r for r in todo if args.auto and r[0] == "1"]
    with tempfile.TemporaryDirectory() as tmp:
        models = {}
        for r in todo:
            heads, hidden, layers = r[2]
            if r[2] not in models:
                models[r[2]] = os.path.join(tmp, "gpt_%d_%d_%d.onnx" % (layers, hidden, heads))
                loom_simulate.generate(models[r[2]], layers, hidden, heads, VOCAB, SEQ)
        with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
            results = list(pool.map(
                lambda r: loom_simulate.simulate(args.loom, models[r[2]], r[3],
                                                 max_bytes=int(args.max_gib * 2**30)),
                todo))
            autos = list(pool.map(
                lambda r: loom_simulate.simulate(args.loom, models[r[2]], auto_args(r[6], r[7]),
                                                 max_bytes=int(args.max_gib * 2**30)),
                searched))

    print("Megatron-LM (arXiv 2104.04473) Tables 1 and 2 against Loom's prediction "
          "(8xA100-80GB profile, bf16, seq %d, vocab %d)" % (SEQ, VOCAB))
    head = "%-3s %-12s %-22s %-15s %5s %10s %9s %9s %6s %10s %4s %7s" % (
        "tbl", "model", "t p d m", "schedule", "GPUs", "step pred.", "TF/s pred", "TF/s pub",
        "ratio", "mem/device", "fits", "comm %")
    print(head)
    print("-" * len(head))
    ratios = {}
    failed = []  # the criteria missed: what and by how much
    for r, res in zip(todo, results):
        table, name, shape, _, desc, sched, gpus, batch, published, kind = r
        if not res["ok"]:
            print("%-3s %-12s %-22s failed (%.0f s): %s" % (
                table, name, desc, res["wall"], res["text"].strip().splitlines()[-1][:140]))
            failed.append("%s on %d GPUs: no prediction (simulate failed)" % (name, gpus))
            continue
        predicted = flops(batch, shape[2], shape[1]) / (res["step"] * gpus) / 1e12
        ratio = predicted / published
        ratios.setdefault((table, kind), []).append(ratio)
        if not abs(ratio - 1) <= TOLERANCE:  # oracle: ok (a predicted timing, not numerics)
            failed.append("%s on %d GPUs: ratio %.2f, %.0f%% off" % (
                name, gpus, ratio, 100 * abs(ratio - 1)))
        print("%-3s %-12s %-22s %-15s %5d %8.2f s %9.1f %9d %6.2f %6.1f GiB %4s %6.0f%%" % (
            table, name, desc, sched, gpus, res["step"], predicted, published, ratio,
            res["memory"], "yes" if res["memory_bytes"] <= LIMIT else "NO",
            100 * res["comm"] / res["step"] if res["step"] else 0))
    print("ratio: predicted / published TFLOP/s per GPU (1 is exact; below 1 Loom predicts a "
          "slower step). comm %: the predicted step's communication share.")
    for (table, kind), rs in sorted(ratios.items()):
        print("Table %s %-5s: ratio from %.2f to %.2f over %d rows" % (
            table, kind, min(rs), max(rs), len(rs)))
    if searched:
        failed += print_auto(searched, autos, {r[1]: res for r, res in zip(todo, results)})
    criterion = ("predicted TFLOP/s per GPU within %.0f%% of the published" % (100 * TOLERANCE)
                 + (", and --auto's plan no slower than Megatron's and within 80 GB"
                    if searched else ""))
    if failed:
        print("FAILED: %s: %d missed: %s" % (criterion, len(failed), "; ".join(failed)))
        return 1
    print("passed: %s, on all %d rows" % (criterion, len(todo)))
    return 0


def print_auto(searched, autos, megatron):
    """The search's plan per Table 1 row against Megatron's configuration; the rows that
    miss "no slower than Megatron's, within 80 GB", each with by how much."""
    failed = []
    print()
    print("--mode auto --stages auto on the same GPUs and global batch (mesh dp=GPUs/8,tp=8)")
    head = "%-8s %5s %-34s %10s %10s %10s %4s %8s" % (
        "model", "GPUs", "plan", "step auto", "step meg.", "auto/meg.", "fits", "search s")
    print(head)
    print("-" * len(head))
    for r, res in zip(searched, autos):
        name, gpus = r[1], r[6]
        meg = megatron.get(name)
        if not res["ok"]:
            print("%-8s %5d failed (%.0f s): %s" % (
                name, gpus, res["wall"], res["text"].strip().splitlines()[-1][:140]))
            failed.append("%s --auto: no plan (simulate failed)" % name)
            continue
        plan = "%s%s m=%d%s" % (res["mesh"], "" if res["stages"] == 1 else
                                " pp=%d %s" % (res["stages"], res["schedule"]),
                                res["micro"] or 1, " zero%d" % res["zero"] if res["zero"] else "")
        meg_step = meg["step"] if meg and meg["ok"] else None
        print("%-8s %5d %-34s %8.2f s %s %10s %4s %8.0f" % (
            name, gpus, plan[:34], res["step"],
            "%8.2f s" % meg_step if meg_step else "%10s" % "-",
            "%.2f" % (res["step"] / meg_step) if meg_step else "-",
            "yes" if res["memory_bytes"] <= LIMIT else "NO", res["wall"]))
        if meg_step and not res["step"] <= meg_step:
            failed.append("%s --auto: %.2f of Megatron's step, %.0f%% slower" % (
                name, res["step"] / meg_step, 100 * (res["step"] / meg_step - 1)))
        if not res["memory_bytes"] <= LIMIT:
            failed.append("%s --auto: %.1f GiB per device, over 80 GB" % (name, res["memory"]))
    print("auto/meg.: the search's predicted step over the Megatron configuration's, both "
          "under Loom's model (at most 1: no slower).")
    return failed


if __name__ == "__main__":
    sys.exit(main())
