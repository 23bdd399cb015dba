#!/usr/bin/env python3
"""Flags Python oracles that compare errors by hand instead of through test/oracle.py.

`err > tol` and `max(worst, err)` both let NaN through (`nan > tol` is
False, `max(0.0, nan)` is 0.0), so a test that computes NaN passes. The
check walks the AST of every Python file under test/, scripts/, bench/,
python/ and examples/ (but test/oracle.py, the helper itself) and flags

  - a comparison (<, <=, >, >=) of an error-like operand (a name, attribute
    or subscript key with a word such as err, error, diff, rel, worst,
    delta, gap; or abs(...) of a difference) against a tolerance-like one
    (a name with a word such as tol, rtol, eps, bound, limit, threshold, or
    a float constant);
  - max(...)/min(...) (and numpy's maximum/minimum/fmax/fmin) with an
    error-like argument.

A reviewed use that is no numeric oracle (a timing ratio in a benchmark)
carries `# oracle: ok (<reason>)` on one of its lines.

Usage: check_oracles.py [ROOT]          (exit 1 and one line per flag)
       check_oracles.py --file PATH...  (the flags of these files only)
       check_oracles.py --self-test     (planted cases are found, clean ones not)
"""
import ast
import os
import re
import sys
import tempfile

SCANNED = ("test", "scripts", "bench", "python", "examples")
EXEMPT = ("test/oracle.py",)  # the helper: the one place errors are compared
ERROR_WORDS = {"err", "errs", "error", "errors", "diff", "diffs", "difference",
               "differences", "rel", "relative", "worst", "delta", "deltas", "gap",
               "deviation", "discrepancy", "mismatch", "residual", "drift"}
TOLERANCE_WORDS = {"tol", "rtol", "atol", "tolerance", "tolerances", "eps", "epsilon",
                   "bound", "bounds", "limit", "threshold", "thresh", "margin"}
REDUCTIONS = {"max", "min", "maximum", "minimum", "fmax", "fmin"}
OPT_OUT = re.compile(r"#\s*oracle:\s*ok\s*\(\s*[^)\s][^)]*\)")
WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def words(identifier):
    """The lower-case words of snake_case or camelCase `identifier`."""
    return {w.lower() for part in identifier.split("_") for w in WORD.findall(part)}


def identifiers(node):
    """The identifiers naming an operand: a name, an attribute's name, a
    subscript's base and string key."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, ast.Subscript):
        key = node.slice.value if isinstance(node.slice, ast.Constant) else None
        return identifiers(node.value) + ([key] if isinstance(key, str) else [])
    return []


def is_error_like(node):
    if any(words(i) & ERROR_WORDS for i in identifiers(node)):
        return True
    # abs(x - y), np.abs(a - b).max(): a difference's magnitude.
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ("max", "item") and \
                isinstance(func.value, ast.Call):
            return is_error_like(func.value)
        name = func.id if isinstance(func, ast.Name) else \
            func.attr if isinstance(func, ast.Attribute) else ""
        if name in ("abs", "absolute", "fabs") and node.args:
            return any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Sub)
                       for n in ast.walk(node.args[0]))
    return False


def is_tolerance_like(node):
    """A float constant, or an expression with a tolerance-named operand."""
    for n in ast.walk(node):
        if isinstance(n, ast.Constant) and isinstance(n.value, float):
            return True
        if any(words(i) & TOLERANCE_WORDS for i in identifiers(n)):
            return True
    return False


def flags_in(source, rel):
    """[(line, what)] for one file's text."""
    try:
        tree = ast.parse(source, rel)
    except SyntaxError as e:
        return [(e.lineno or 0, f"cannot parse: {e.msg}")]
    lines = source.splitlines()

    def opted_out(node):
        end = getattr(node, "end_lineno", node.lineno) or node.lineno
        return any(OPT_OUT.search(lines[k - 1]) for k in range(node.lineno, end + 1)
                   if 0 < k <= len(lines))

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left] + node.comparators
            for op, left, right in zip(node.ops, operands, operands[1:]):
                if not isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)):
                    continue
                if (is_error_like(left) and is_tolerance_like(right)) or \
                        (is_error_like(right) and is_tolerance_like(left)):
                    if not opted_out(node):
                        found.append((node.lineno, "an error compared with a tolerance "
                                      f"by hand: `{ast.unparse(node)}`"))
                    break
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else \
                func.attr if isinstance(func, ast.Attribute) else ""
            if name in REDUCTIONS and any(is_error_like(a) for a in node.args) and \
                    not opted_out(node):
                found.append((node.lineno, "errors reduced by hand (NaN is lost): "
                              f"`{ast.unparse(node)}`"))
    return sorted(found)


def scanned_files(root):
    for top in SCANNED:
        for base, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(base, name)
                    rel = os.path.relpath(path, root).replace(os.sep, "/")
                    if rel not in EXEMPT:
                        yield path, rel


def flags_of(paths_and_names):
    out = []
    for path, rel in paths_and_names:
        with open(path, encoding="utf-8", errors="replace") as f:
            source = f.read()
        out += [f"{rel}:{line}: {what}" for line, what in flags_in(source, rel)]
    return out


def self_test():
    planted = {
        "test/e2e/bad_compare.py": "def check(err, tol):\n    return err > tol\n",
        "test/e2e/bad_worst.py": "worst = 0.0\nerr = 1.0\nworst = max(worst, err)\n",
        "scripts/bad_abs.py": "ok = abs(x - y) <= rtol * abs(x)\n",
        "bench/bad_subscript.py": "if result['rel_error'] >= 1e-5:\n    pass\n",
        "test/e2e/good.py": ("import oracle\n"
                             "r = oracle.compare(a, b, rtol=1e-5)\n"
                             "if len(errors) > 0 and count > 3:\n    pass\n"
                             "scale = max(abs(x), 1e-30)\n"),
        "bench/good_opt_out.py": "if ratio_err > 1.5:  # oracle: ok (a timing ratio)\n"
                                 "    pass\n",
        "bench/bad_empty_opt_out.py": "if err > 1.5:  # oracle: ok ()\n    pass\n",
    }
    with tempfile.TemporaryDirectory() as root:
        for rel, text in planted.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as f:
                f.write(text)
        found = flags_of(scanned_files(root))
    bad = sorted(r for r in planted if "/bad" in r)
    flagged = sorted({v.split(":", 1)[0] for v in found})
    if flagged != bad:
        print(f"self-test: flagged {flagged}, expected {bad}")
        for v in found:
            print("  " + v)
        return 1
    print(f"self-test: the {len(bad)} planted hand-made oracles found, nothing else")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if argv[1:2] == ["--file"]:
        found = flags_of((p, p) for p in argv[2:])
    else:
        root = argv[1] if len(argv) > 1 else os.path.join(
            os.path.dirname(os.path.abspath(__file__)), "..")
        found = flags_of(scanned_files(root))
    for v in found:
        print(v)
    if found:
        print(f"{len(found)} hand-made error comparison(s): use test/oracle.py's compare, "
              "assert_close or Worst, or mark a reviewed non-oracle use "
              "`# oracle: ok (<reason>)`")
        return 1
    print("oracles: every error comparison goes through test/oracle.py")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
