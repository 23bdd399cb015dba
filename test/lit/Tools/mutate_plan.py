#!/usr/bin/python3
"""Flips random bytes of a compiled plan and runs `loom explain` and `loom run` on each
mutated copy: every one must end in "loom: error: ..." (exit 1), never a signal, and a
copy left unchanged by the flip must still run.

Usage: mutate_plan.py LOOM PLAN COUNT SEED
"""
import os
import random
import subprocess
import sys
import tempfile


def main():
    loom, plan, count, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    rng = random.Random(seed)
    original = open(plan, "rb").read()
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "m.plan")
        for i in range(count):
            data = bytearray(original)
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
            with open(path, "wb") as f:
                f.write(data)
            for cmd in (["explain", path], ["run", path, "--threads", "1"]):
                r = subprocess.run([loom] + cmd, capture_output=True, text=True)
                if r.returncode < 0 or r.returncode > 1:
                    print(f"mutation {i}: loom {cmd[0]} ended with code {r.returncode}:"
                          f"\n{r.stderr[-2000:]}")
                    return 1
                if bytes(data) != original and (r.returncode != 1 or
                                                "loom: error: " not in r.stderr):
                    print(f"mutation {i}: loom {cmd[0]} accepted a changed plan:\n"
                          f"{r.stdout[-500:]}")
                    return 1
    print(f"{count} mutated plans: loom explain and loom run refused every one with an error")
    return 0


if __name__ == "__main__":
    sys.exit(main())
