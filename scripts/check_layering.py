#!/usr/bin/env python3
"""Checks that Loom's #include lines point down the phase diagram.

    common/    the layout algebra and the plan format: no MLIR, no LLVM,
               nothing of Loom but common/;
    runtime/   runs plans: common/ and runtime/, no MLIR or LLVM;
    dialects/  the loom dialect: common/ and dialects/ (and MLIR);
    compiler/, passes/
               the compiler: anything below it; of runtime/ only the
               driver (the CLI's run, explain, export and calibrate
               commands execute plans). Inside it, passes/ sits between
               what it builds on (compiler/cost, search, analysis, plan,
               onnx: nothing of passes/ and nothing above it) and what
               runs it (compiler/pipeline, driver, explain and the
               registration: passes/ includes none of them);
    tools/     one-line mains over the libraries;
    python/    the Python package's extension, beside the driver: the
               compiler as a library (compiler/pipeline, compiler/explain)
               and the runtime.

Usage: check_layering.py [ROOT]     (exit 1 and one line per violation)
       check_layering.py --self-test (the check finds planted violations)
"""
import os
import re
import sys
import tempfile

SOURCE_SUFFIXES = (".h", ".cpp", ".cu", ".cuh", ".td", ".inc")
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')
LOOM_TOP = ("common", "runtime", "dialects", "passes", "compiler", "tools", "python")
EXTERNAL_IR = ("mlir/", "llvm/", "llvm-c/")
# The compiler below passes/ (the passes build on it) and above it (it runs
# or reports on the passes).
BELOW_PASSES = ("compiler/cost/", "compiler/search/", "compiler/analysis/",
                "compiler/plan/", "compiler/onnx/")
ABOVE_PASSES = ("compiler/pipeline/", "compiler/driver/", "compiler/explain/",
                "compiler/Registration.")


def allowed(source, target):
    """None if `source` (a path relative to the root) may include `target`,
    else why not."""
    top = source.split("/", 1)[0]
    is_ir = target.startswith(EXTERNAL_IR)
    target_top = target.split("/", 1)[0] if "/" in target else ""
    if top == "common":
        if is_ir:
            return "common/ has no MLIR or LLVM"
        if target_top in LOOM_TOP and target_top != "common":
            return "common/ includes nothing of Loom but common/"
    elif top == "runtime":
        if is_ir:
            return "the runtime has no MLIR or LLVM"
        if target_top in LOOM_TOP and target_top not in ("common", "runtime"):
            return "the runtime includes only common/ and runtime/"
    elif top == "dialects":
        if target_top in LOOM_TOP and target_top not in ("common", "dialects"):
            return "the dialect includes only common/ and dialects/"
    elif top in ("compiler", "passes"):
        if target_top == "tools":
            return "nothing includes a tool"
        if target_top == "runtime" and not source.startswith("compiler/driver/"):
            return "of the compiler, only the driver includes the runtime"
        if source.startswith(BELOW_PASSES) and (
                target_top == "passes" or target.startswith(ABOVE_PASSES)):
            return "what passes/ builds on includes no pass, nothing above"
        if top == "passes" and target_top == "compiler" and \
                not target.startswith(BELOW_PASSES):
            return ("passes/ includes of the compiler only what it builds on "
                    "(cost, search, analysis, plan, onnx)")
    elif top == "python":
        # The Python package is a front end beside the driver: the compiler
        # as a library (pipeline/, explain/) and the runtime, nothing deeper.
        if target_top == "tools":
            return "nothing includes a tool"
        if target_top in ("passes", "dialects") or (
                target_top == "compiler" and
                not target.startswith(("compiler/pipeline/", "compiler/explain/"))):
            return ("the Python package includes of the compiler only its "
                    "library (compiler/pipeline, compiler/explain)")
    return None


def violations(root):
    found = []
    for top in LOOM_TOP:
        for base, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith(SOURCE_SUFFIXES):
                    continue
                path = os.path.join(base, name)
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        why = allowed(rel, m.group(1))
                        if why:
                            found.append(f"{rel}:{number}: includes "
                                         f"\"{m.group(1)}\": {why}")
    return found


def self_test():
    planted = {
        "runtime/Bad.cpp": '#include "compiler/driver/Commands.h"\n',
        "runtime/BadIr.h": "#include <mlir/IR/Operation.h>\n",
        "common/layout/Bad.h": '#include "runtime/Tensor.h"\n',
        "dialects/Bad.cpp": '#include "passes/Passes.h"\n',
        "compiler/plan/Bad.cpp": '#include "runtime/Executor.h"\n',
        "compiler/analysis/Bad.h": '#include "passes/Passes.h"\n',
        "passes/sharding/Bad.cpp": '#include "compiler/pipeline/Compiler.h"\n',
        "passes/sharding/Good.cpp": '#include "compiler/cost/CostModel.h"\n',
        "compiler/explain/Good.cpp": '#include "passes/pipeline/Pipeline.h"\n',
        "compiler/driver/Good.cpp": '#include "runtime/Executor.h"\n',
        "runtime/Good.cpp": '#include "common/plan/plan.pb.h"\n',
        "python/src/Bad.cpp": '#include "passes/Passes.h"\n',
        "python/src/Good.cpp": '#include "compiler/pipeline/Compiler.h"\n',
    }
    with tempfile.TemporaryDirectory() as root:
        for rel, text in planted.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as f:
                f.write(text)
        found = violations(root)
    bad = sorted(r for r in planted if "/Bad" in r)
    flagged = sorted({v.split(":", 1)[0] for v in found})
    if flagged != bad:
        print(f"self-test: flagged {flagged}, expected {bad}")
        return 1
    print(f"self-test: the {len(bad)} planted violations found, nothing else")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    root = argv[1] if len(argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..")
    found = violations(root)
    for v in found:
        print(v)
    if found:
        print(f"{len(found)} include(s) against the layering "
              "(scripts/check_layering.py says which way each may point)")
        return 1
    print("layering: every #include points down the phase diagram")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
