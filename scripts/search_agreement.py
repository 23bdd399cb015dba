#!/usr/bin/python3
"""Whether the strategy search's prediction agrees with the plan it emits.

Under --mode auto, `loom simulate` prints the emitted plan's explanation
(what `loom explain PLAN` prints): its "predicted step" and "memory per
device", and beside them what the search counted and predicted for the same
plan ("the search counted M (B bytes) and predicted S"). This script
compiles (no training, no weights for the shape-only GPTs) every
configuration of bench/search_time.py, the GPT-3 ones again under
--precision bf16, the 12-layer GPT under Megatron's split (1.25 GB, no
ZeRO), and each bundled model (models/*.onnx) on dp=2 x tp=2, and prints
per configuration
the search's step and memory, the plan's, and search/plan. It exits 1 when
any ratio is outside [1 - tolerance, 1 + tolerance] (default 10%) or a
configuration fails to compile.

Usage: scripts/search_agreement.py [--loom PATH] [--only TEXT] [--bundled]
                                    [--exclude NAME,...] [--tolerance T]
"""

import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test"))
from oracle import within  # noqa: E402
TIME = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


def quantity(text, units):
    value, unit = text.split()
    return float(value) * units[unit]


def rounding(text, units):
    """Half a unit in the last printed place of "<number> <unit>"."""
    value, unit = text.split()
    decimals = len(value.split(".")[1]) if "." in value else 0
    return 0.5 * 10 ** -decimals * units[unit]


def parse(text):
    """{plan_step, plan_bytes, search_step, search_bytes, step_slack,
    memory_slack} from an explanation, or None."""
    step = re.search(r"^predicted step ([0-9.]+ (?:s|ms|us|ns)) per device", text, re.M)
    memory = re.search(r"^memory per device [^(]*\(([0-9]+) bytes\).*?; the search counted "
                       r"[0-9.]+ [KMGT]?i?B \(([0-9]+) bytes\) and predicted "
                       r"([0-9.]+ (?:s|ms|us|ns))$", text, re.M)
    if not step or not memory:
        return None
    return {
        "plan_step": quantity(step.group(1), TIME),
        "plan_bytes": float(memory.group(1)),
        "search_step": quantity(memory.group(3), TIME),
        "search_bytes": float(memory.group(2)),
        # The printed times are rounded: a step's ratio is judged up to that.
        "step_slack": rounding(step.group(1), TIME) + rounding(memory.group(3), TIME),
        "memory_slack": 0.0,
    }


def generate(out, layers, d, heads, vocab, seq):
    subprocess.run([sys.executable, os.path.join(ROOT, "models", "gpt_shapes.py"),
                    "--layers", str(layers), "--d-model", str(d), "--heads", str(heads),
                    "--vocab", str(vocab), "--seq", str(seq), "-o", out],
                   check=True, stdout=subprocess.DEVNULL)


def configurations(tmp, bundled_only):
    """(name, loom simulate arguments after the model, model path)."""
    cases = []
    if not bundled_only:
        gpt12 = os.path.join(tmp, "gpt12.onnx")
        gpt3 = os.path.join(tmp, "gpt3.onnx")
        generate(gpt12, 12, 768, 12, 50257, 1024)
        generate(gpt3, 96, 12288, 96, 50257, 2048)
        adamw = ["--train", "--optimizer", "adamw"]
        # bench/search_time.py's configurations.
        cases += [
            ("GPT 12L d768, ample memory", gpt12,
             ["--batch", "64", "--mesh", "dp=2,tp=4"] + adamw),
            ("GPT 12L d768, 1.5 GB/device", gpt12,
             ["--batch", "2", "--mesh", "dp=2,tp=4", "--memory-limit", "1500000000"] + adamw),
            # Megatron inside the node (test/lit/Partition/auto-gpt12.test):
            # its peak is the forward's, at the LM head's all-reduce.
            ("GPT 12L d768, 1.25 GB/device, no ZeRO", gpt12,
             ["--batch", "2", "--mesh", "dp=2,tp=4", "--zero", "0",
              "--memory-limit", "1250000000"] + adamw),
        ]
        for precision in ("f32", "bf16"):
            cases += [
                ("GPT-3 175B, 80 GB/device, " + precision, gpt3,
                 ["--batch", "1536", "--mesh", "dp=128,tp=8", "--precision", precision] + adamw),
                ("GPT-3 175B, unlimited, " + precision, gpt3,
                 ["--batch", "1536", "--mesh", "dp=128,tp=8", "--precision", precision,
                  "--memory-limit", str(4 * 10 ** 12)] + adamw),
            ]
    for model in sorted(glob.glob(os.path.join(ROOT, "models", "*.onnx"))):
        name = os.path.basename(model)[:-len(".onnx")]
        cases.append(("%s dp2 x tp2" % name, model,
                      ["--batch", "8", "--mesh", "dp=2,tp=2", "--train"]))
    # The small LM: the bundled GPT under a memory limit, where the
    # search splits its weights over tp.
    cases.append(("gpt dp2 x tp2, 6 MB", os.path.join(ROOT, "models", "gpt.onnx"),
                  ["--batch", "8", "--mesh", "dp=2,tp=2", "--train", "--zero", "0",
                   "--memory-limit", "6000000"]))
    return cases


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loom", default=os.path.join(ROOT, "build", "tools", "loom", "loom"))
    parser.add_argument("--only", help="only the configurations whose name contains this")
    parser.add_argument("--exclude", default="",
                        help="comma-separated configurations (by the start of their "
                             "name) left out and listed as left out")
    parser.add_argument("--bundled", action="store_true",
                        help="only the bundled models (a few seconds in all)")
    parser.add_argument("--tolerance", type=float, default=0.1)
    args = parser.parse_args()
    bad, left_out = [], []
    excluded = [e for e in args.exclude.split(",") if e]
    with tempfile.TemporaryDirectory() as tmp:
        print("%-32s %11s %11s %6s %11s %11s %6s" % ("configuration", "search step", "plan step",
                                                    "ratio", "search mem", "plan mem", "ratio"))
        for name, model, extra in configurations(tmp, args.bundled):
            if args.only and args.only not in name:
                continue
            if any(name.startswith(e) for e in excluded):
                left_out.append(name)
                continue
            cmd = [args.loom, "simulate", model, "--mode", "auto", "--top", "1"] + extra
            run = subprocess.run(cmd, capture_output=True, text=True)
            parsed = parse(run.stdout) if run.returncode == 0 else None
            if not parsed:
                print("%-32s failed: %s" % (name, (run.stdout + run.stderr).strip()[-300:]))
                bad.append(name)
                continue
            ratios = []
            for what in ("step", "bytes"):
                search, plan = parsed["search_" + what], parsed["plan_" + what]
                slack = parsed["step_slack" if what == "step" else "memory_slack"]
                ratio = search / plan if plan > 0 else float("inf")
                ratios.append(ratio)
                # NaN or a missing figure is a disagreement.
                if not within(abs(search - plan), args.tolerance * plan + slack):
                    bad.append(name) if name not in bad else None
            mark = "  <-- outside" if name in bad else ""
            print("%-32s %11.4g %11.4g %6.3f %11.4g %11.4g %6.3f%s" % (
                name, parsed["search_step"], parsed["plan_step"], ratios[0],
                parsed["search_bytes"], parsed["plan_bytes"], ratios[1], mark))
            sys.stdout.flush()
    print("step in seconds, memory in bytes per device; ratio: search over plan")
    if left_out:
        print("left out (--exclude): " + "; ".join(left_out))
    if bad:
        print("the search and its plan disagree by more than %g%%: %s"
              % (100 * args.tolerance, "; ".join(bad)))
        sys.exit(1)
    print("the search and its plan agree within %g%%" % (100 * args.tolerance))


if __name__ == "__main__":
    main()
