"""The byte counts `loom compile` prints, derived without it, for recompute.test.

  compile_bytes.py state MODEL.onnx PROGRAM.mlir
      prints the bytes of parameters and constants a device holds, as the plan
      emitter counts them (compiler/plan/PlanEmitter.cpp, addValue: every
      parameter, buffer, optimizer-state and constant value, each padded to 64
      bytes): the ONNX file's initializers (read with the onnx package) plus the
      constants of the compiled program (`loom compile --emit-mlir`), which are
      the model's Constant nodes that remain tensors after import (shape
      operands are folded into attributes) and those the training graph adds.
      Only for programs without optimizer state or buffers (SGD, no batch norm).

  compile_bytes.py smaller WITHOUT.txt WITH.txt
      reads the "N bytes of activations" of two `loom compile` summaries and
      prints whether the second is strictly smaller; exit status 1 when not.
"""
import re
import sys

ALIGNMENT = 64  # compiler/plan/MemoryPlan.h, kAlignment
ELEMENT_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i1": 1}


def padded(n):
    return (max(n, 1) + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def initializer_bytes(model_path):
    import onnx
    from onnx import numpy_helper
    model = onnx.load(model_path)
    return sum(padded(numpy_helper.to_array(t).nbytes) for t in model.graph.initializer), \
        len(model.graph.initializer)


def constant_bytes(program_path):
    """The constants of the program: `loom.constant ... : tensor<AxBxT>`."""
    total = count = 0
    with open(program_path) as f:
        for line in f:
            m = re.search(r"= loom\.constant .*: tensor<((?:\d+x)*)(\w+)>", line)
            if not m:
                continue
            elements = 1
            for d in m.group(1).split("x")[:-1]:
                elements *= int(d)
            total += padded(elements * ELEMENT_BYTES[m.group(2)])
            count += 1
    return total, count


def state(model_path, program_path):
    with open(program_path) as f:
        text = f.read()
    if "loom.state" in text or "loom.buffer" in text:
        sys.exit("compile_bytes.py state: the program has optimizer state or buffers, "
                 "which it does not count")
    params, n_params = initializer_bytes(model_path)
    consts, n_consts = constant_bytes(program_path)
    if n_consts == 0:
        sys.exit(f"compile_bytes.py state: no loom.constant in {program_path}")
    print(params + consts)
    print(f"{n_params} initializers, {params} bytes; {n_consts} constants, {consts} bytes",
          file=sys.stderr)


def activations(summary_path):
    with open(summary_path) as f:
        m = re.search(r"(\d+) bytes of activations", f.read())
    if not m:
        sys.exit(f"compile_bytes.py: no 'N bytes of activations' in {summary_path}")
    return int(m.group(1))


def smaller(without_path, with_path):
    a, b = activations(without_path), activations(with_path)
    if not b < a:
        print(f"activations NOT smaller: {a} bytes without, {b} with")
        return 1
    print(f"activations smaller: {a} bytes without, {b} with")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "state":
        state(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "smaller":
        sys.exit(smaller(sys.argv[2], sys.argv[3]))
    else:
        sys.exit(__doc__)
