#!/usr/bin/python3
"""Kills `loom run --save` with SIGKILL at random moments of its save and checks that a
loadable checkpoint always remains: the previous one or the new one, never a mix.

The GPT (models/gpt.onnx, AdamW: 111 tensors with the moments), partitioned over
dp=2 x tp=2 with ZeRO-3 on four thread ranks, trains one step from the checkpoint root
and saves into the same root: every rank writes its own shards, and rank 0 commits. The script waits until the save has
begun (its temporary directory appears in the root), then sends SIGKILL after a delay
drawn uniformly from [0, 1.2 x the duration of an uninterrupted save], so the kills
land while files are written and flushed, at the rename, while `latest` is replaced,
and just after. After each kill, an independent reader (this script) resolves
root/latest, parses its manifest and checks every file's size and CRC-32, and the
step must be the previous checkpoint's or the next; then `loom run --resume root`
must load it. Prints how many kills left the old checkpoint and how many the new.

At least one kill must land inside a save, or the test proved nothing: a kill counts as
inside when the process still ran, its save had begun, and the checkpoint left is the
previous one (the new one was not committed yet). The count is printed.

Usage: kill_during_save.py --loom build/tools/loom/loom --source . [--kills 20] [--seed 0]
"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "python", "loom"))
from checkpoint import read_checkpoint  # noqa: E402  (numpy alone, loaded by path)


def verify(root):
    """(step, None) when root/latest is a complete checkpoint, else (None, why)."""
    latest = os.path.join(root, "latest")
    if not os.path.islink(latest):
        return None, "no latest link"
    directory = os.path.join(root, os.readlink(latest))
    try:
        with open(os.path.join(directory, "manifest.json")) as f:
            manifest = json.load(f)
        if manifest.get("format") != 3 or not manifest.get("tensors"):
            return None, f"{directory}: manifest format {manifest.get('format')!r}"
        step, _ = read_checkpoint(directory)
    except (OSError, ValueError, KeyError) as e:
        return None, f"{directory}: {e}"
    return step, None


def run(cmd):
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{result.stdout}{result.stderr}")
    return result.stdout


def saving(root, since):
    """Whether a save has begun in `root` since `since` (time.time_ns()): a temporary
    directory made (or written) after it. One a killed save left is older, and would
    otherwise start the clock before the save does."""
    try:
        with os.scandir(root) as entries:
            return any(e.name.startswith(".tmp-") and e.stat().st_mtime_ns >= since
                       for e in entries)
    except OSError:
        return False


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--loom", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    work = tempfile.mkdtemp(prefix="loom-kill-")
    try:
        plan = os.path.join(work, "gpt.plan")
        run([args.loom, "compile", os.path.join(args.source, "models", "gpt.onnx"),
             "--batch", "2", "--train", "--optimizer", "adamw", "--mesh", "dp=2,tp=2",
             "--strategy", os.path.join(args.source, "models", "gpt_megatron.json"),
             "--zero", "3", "-o", plan])
        root = os.path.join(work, "ckpt")
        step = [args.loom, "run", plan, "--threads", "1", "--steps", "1",
                "--save", root]
        run(step)
        # An uninterrupted save's duration: from its temporary directory to the exit.
        durations = []
        for _ in range(3):
            since = time.time_ns()
            proc = subprocess.Popen(step + ["--resume", root], stdout=subprocess.DEVNULL)
            while proc.poll() is None and not saving(root, since):
                time.sleep(0.0002)
            began = time.monotonic()
            proc.wait()
            durations.append(time.monotonic() - began)
        save_seconds = sorted(durations)[1]
        previous, why = verify(root)
        if why:
            raise SystemExit(f"before the kills: {why}")
        kept_old = kept_new = during = inside = 0
        for kill in range(args.kills):
            since = time.time_ns()
            proc = subprocess.Popen(step + ["--resume", root], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            while proc.poll() is None and not saving(root, since):
                time.sleep(0.0002)
            began = saving(root, since)
            time.sleep(rng.uniform(0, 1.2 * save_seconds))
            alive = proc.poll() is None
            if alive:
                proc.send_signal(signal.SIGKILL)
            proc.wait()
            during += alive
            got, why = verify(root)
            if why:
                print(f"kill {kill + 1}: no loadable checkpoint: {why}")
                return 1
            if got == previous:
                kept_old += 1
                inside += alive and began
            elif got == previous + 1:
                kept_new += 1
            else:
                print(f"kill {kill + 1}: latest is step {got}, expected {previous} or "
                      f"{previous + 1}")
                return 1
            out = subprocess.run([args.loom, "run", plan, "--threads", "1", "--steps", "1",
                                  "--resume", root], capture_output=True, text=True)
            if out.returncode != 0 or f"step {got + 1} loss" not in out.stdout:
                print(f"kill {kill + 1}: loom run --resume failed:\n{out.stdout}{out.stderr}")
                return 1
            previous = got
        print(f"{args.kills} SIGKILLs during a {save_seconds * 1e3:.0f} ms save "
              f"({during} while the process ran): every time a loadable checkpoint; "
              f"{kept_old} kept the previous one, {kept_new} the new one; "
              f"{inside} landed inside a save (before its commit)")
        if inside == 0:
            print("no kill landed inside a save: the test proved nothing")
            return 1
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
