#!/usr/bin/python3
"""`loom run --backend cuda` and `loom calibrate --backend cuda` on a machine without
a CUDA device: each must fail with exit status 1 and the one-line error
"loom: error: no CUDA device: <why>", without a crash. Skipped (exit 77) where a
CUDA device is present."""
import argparse
import os
import subprocess
import sys
import tempfile


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--loom", required=True)
    parser.add_argument("--source", required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        plan = os.path.join(work, "mlp.plan")
        subprocess.run([args.loom, "compile", os.path.join(args.source, "models", "mlp.onnx"),
                        "--batch", "4", "-o", plan], check=True, capture_output=True)
        commands = [
            [args.loom, "run", plan, "--backend", "cuda"],
            [args.loom, "calibrate", "--backend", "cuda", "--quick", "-o",
             os.path.join(work, "p.json")],
        ]
        for cmd in commands:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            if r.returncode == 0:
                print("skipped: a CUDA device is present (the command succeeded)")
                return 77
            lines = r.stderr.strip().splitlines()
            if r.returncode != 1 or len(lines) != 1 or \
                    not lines[0].startswith("loom: error: no CUDA device: "):
                print(f"FAIL loom {cmd[1]}: exit {r.returncode}, stderr:\n{r.stderr}")
                return 1
            print(f"ok   loom {cmd[1]} --backend cuda: {lines[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
