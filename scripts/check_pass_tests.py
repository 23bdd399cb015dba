#!/usr/bin/env python3
"""Checks that every pass declared in passes/Passes.td has a summary, a
description with its IR before and after, and a lit test that runs it
through loom-opt: a RUN line of some test under test/lit naming
loom-opt and -PASS-ARGUMENT (or --PASS-ARGUMENT).

Usage: check_pass_tests.py [ROOT]   (exit 1 and the passes without one)
"""
import os
import re
import sys


def declared_passes(root):
    with open(os.path.join(root, "passes", "Passes.td")) as f:
        return re.findall(r'Pass<"([a-z0-9-]+)"', f.read())


def undocumented_passes(root):
    """Passes whose Passes.td entry lacks a summary or a description with
    an IR example (a ``` block)."""
    with open(os.path.join(root, "passes", "Passes.td")) as f:
        text = f.read()
    missing = []
    for m in re.finditer(r'Pass<"([a-z0-9-]+)"[^{]*\{(.*?)\n\}\n', text,
                         re.S):
        body = m.group(2)
        if "let summary" not in body or "```" not in body:
            missing.append(m.group(1))
    return missing


def run_lines(root):
    lines = []
    for base, _, files in os.walk(os.path.join(root, "test", "lit")):
        for name in files:
            if not name.endswith((".mlir", ".test")):
                continue
            with open(os.path.join(base, name), errors="replace") as f:
                text = f.read()
            # A RUN line continued with a trailing backslash is one command.
            command = ""
            for line in text.splitlines():
                m = re.match(r"\s*//\s*RUN:(.*)", line)
                if not m:
                    continue
                command += m.group(1)
                if command.rstrip().endswith("\\"):
                    command = command.rstrip()[:-1]
                    continue
                lines.append((name, command))
                command = ""
    return lines


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..")
    runs = run_lines(root)
    missing = []
    for name in declared_passes(root):
        flag = re.compile(r"loom-opt\b[^|]*\s--?" + re.escape(name) +
                          r"(\s|=|$)")
        if not any(flag.search(command) for _, command in runs):
            missing.append(name)
    for name in missing:
        print(f"passes/Passes.td: pass '{name}' has no lit test running "
              f"it through loom-opt (a RUN line with loom-opt -{name})")
    undocumented = undocumented_passes(root)
    for name in undocumented:
        print(f"passes/Passes.td: pass '{name}' needs a summary and a "
              "description with its IR before and after (a ``` block)")
    if missing or undocumented:
        return 1
    print(f"pass tests: each of the {len(declared_passes(root))} passes in "
          "Passes.td has a loom-opt lit test")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
