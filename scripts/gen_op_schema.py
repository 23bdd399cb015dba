#!/usr/bin/python3
"""Generates common/ops/OpSchema.inc, the loom ops' attribute schema, from
the dialect's ODS (dialects/LoomOps.td and the files it includes).

ODS is the one definition of an op's attributes: their names, kinds and
whether they may be absent. The runtime cannot read ODS (it links no MLIR
or LLVM), so this script turns the records that `llvm-tblgen --dump-json`
prints into a plain C++ table that common/ops/OpRules.cpp includes. The
generated file is checked in (the GPU bundle builds without LLVM tools);
the ctest `op-schema` regenerates it and fails when the checked-in copy is
stale, and the build target `loom-op-schema` rewrites it.

  gen_op_schema.py --tblgen LLVM_TBLGEN --mlir-include DIR --source ROOT
                   [--check FILE | --output FILE]
"""

import argparse
import json
import subprocess
import sys

# ODS attribute constraint -> (the rules' AttrKind, absent allowed).
KINDS = {
    "I64Attr": ("Int", False),
    "F32Attr": ("Float", False),
    "F64Attr": ("Float", False),
    "BoolAttr": ("Bool", False),
    "UnitAttr": ("Bool", True),
    "StrAttr": ("String", False),
    "DenseI64ArrayAttr": ("Ints", False),
}
# Attributes a plan never carries (a constant's value is the value's data).
SKIPPED = {"ElementsAttr"}


def attribute_kind(records, name):
    """(kind, optional) of the attribute constraint `name`, or None if it is
    not an attribute; exits on an attribute kind plans cannot carry."""
    record = records[name]
    supers = record.get("!superclasses", [])
    if "Attr" not in supers:
        return None
    optional = False
    while "OptionalAttr" in supers or "DefaultValuedAttr" in supers:
        optional = True
        name = record["baseAttr"]["def"]
        record = records[name]
        supers = record.get("!superclasses", [])
    if name in SKIPPED:
        return "skip"
    if name not in KINDS:
        sys.exit(f"gen_op_schema.py: attribute constraint '{name}' has no "
                 "kind in plans; add it to KINDS")
    kind, absent = KINDS[name]
    return kind, optional or absent


def schema(records):
    """{op name without 'loom.': [(attribute, kind, optional)]}."""
    ops = {}
    for def_name in records["!instanceof"]["Op"]:
        record = records[def_name]
        dialect = record.get("opDialect", {}).get("def")
        if dialect != "Loom_Dialect":
            continue
        attrs = []
        for arg in record["arguments"]["args"]:
            constraint, arg_name = arg[0]["def"], arg[1]
            kind = attribute_kind(records, constraint)
            if kind is None or kind == "skip":
                continue
            attrs.append((arg_name, kind[0], kind[1]))
        ops[record["opName"]] = sorted(attrs)
    return ops


def render(ops):
    lines = [
        "// The loom ops' attribute schema, generated from the dialect's ODS",
        "// (dialects/LoomOps.td) by scripts/gen_op_schema.py. Do not edit: the",
        "// ctest `op-schema` fails when this file is stale, and",
        "// `cmake --build build --target loom-op-schema` rewrites it.",
        "//",
        "// {op, {{attribute, kind, optional}, ...}}",
        "",
    ]
    for op in sorted(ops):
        entries = ", ".join(
            f'{{"{name}", AttrKind::{kind}, {"true" if optional else "false"}}}'
            for name, kind, optional in ops[op])
        lines.append(f'{{"{op}", {{{entries}}}}},')
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tblgen", required=True)
    parser.add_argument("--mlir-include", required=True)
    parser.add_argument("--source", required=True)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--check")
    group.add_argument("--output")
    args = parser.parse_args()
    dump = subprocess.run(
        [args.tblgen, "--dump-json", "-I", args.mlir_include, "-I",
         args.source, f"{args.source}/dialects/LoomOps.td"],
        check=True, capture_output=True, text=True).stdout
    text = render(schema(json.loads(dump)))
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
        return 0
    with open(args.check) as f:
        current = f.read()
    if current != text:
        print(f"{args.check} is stale: the dialect's ODS changed. Run "
              "`cmake --build build --target loom-op-schema` and commit it.")
        return 1
    print(f"{args.check} matches the dialect's ODS ({len(text.splitlines())} "
          "lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
