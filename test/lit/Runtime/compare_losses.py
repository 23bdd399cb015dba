#!/usr/bin/python3
"""Compares the losses of the steps two metrics files share.

Usage: compare_losses.py EXPECTED.jsonl GOT.jsonl RTOL [STEPS]
GOT may cover a later part of the run than EXPECTED (a run resumed from a checkpoint): its
steps are matched to EXPECTED's by number. Prints 'N steps agree (worst relative difference
D)' or the first disagreement (exit 1). With STEPS, GOT must hold exactly that many lines (a step run again counts again).
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from oracle import compare_sequences  # noqa: E402  (test/oracle.py)


def losses(path):
    """[(step, loss)] in the file's order (a step run again appears again)."""
    with open(path) as f:
        return [(r["step"], r["loss"]) for r in (json.loads(l) for l in f if l.strip())]


def main():
    expected, got = dict(losses(sys.argv[1])), losses(sys.argv[2])
    rtol = float(sys.argv[3])
    if len(sys.argv) > 4 and len(got) != int(sys.argv[4]):
        print(f"{sys.argv[2]}: {len(got)} steps, expected {sys.argv[4]}")
        return 1
    if not got:
        print(f"{sys.argv[2]}: no steps (nothing would be compared)")
        return 1
    missing = [step for step, _ in got if step not in expected]
    if missing:
        print(f"step {missing[0]}: not in {sys.argv[1]}")
        return 1
    steps = f"{got[0][0]}..{got[-1][0]}"
    result = compare_sequences([loss for _, loss in got], [expected[step] for step, _ in got],
                               rtol=rtol, name=f"losses of steps {steps}")
    if not result.ok:
        print(result.message)
        return 1
    print(f"{len(got)} steps agree (worst relative difference {result.error:.1e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
