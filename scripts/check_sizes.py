#!/usr/bin/env python3
"""Checks the size limits of Loom's sources: no file over 800 lines, no
function over 150 (a function's lines from its head's `{` to its `}`).

Usage: check_sizes.py [ROOT]        (exit 1 and one line per excess)
       check_sizes.py --self-test   (the check finds planted excesses)

Functions are found by brace depth over the source with comments, strings
and preprocessor lines removed: a brace block opened outside any function
whose head is not a namespace, class, struct, enum, union or initializer
is a function (or a lambda at namespace scope) and counts whole.
"""
import os
import re
import sys
import tempfile

FILE_LIMIT = 800
FUNCTION_LIMIT = 150
TOPS = ("common", "runtime", "dialects", "passes", "compiler", "tools")
SUFFIXES = (".cpp", ".h", ".cu", ".cuh")
# Tables that are data, not code (the exception): none yet.
EXEMPT = set()

def strip(text):
    # drop comments, strings and chars, keep newlines
    out=[];i=0;n=len(text)
    while i<n:
        c=text[i]
        if text.startswith("//",i):
            j=text.find("\n",i); i=n if j<0 else j; continue
        if text.startswith("/*",i):
            j=text.find("*/",i+2); seg=text[i:j+2]; out.append("\n"*seg.count("\n")); i=j+2; continue
        if text.startswith('R"(',i):
            j=text.find(')"',i); seg=text[i:j+2]; out.append('""'+"\n"*seg.count("\n")); i=j+2; continue
        if c in "\"'":
            j=i+1
            while j<n and text[j]!=c:
                j+=2 if text[j]=="\\" else 1
            out.append(c+c); i=j+1; continue
        out.append(c); i+=1
    return "".join(out)
def functions(path):
    raw=open(path,errors="replace").read()
    raw="\n".join("" if l.lstrip().startswith("#") else l for l in raw.split("\n"))
    t=strip(raw)
    stack=[];head_start=0;line=1;res=[]
    for i,c in enumerate(t):
        if c=="\n": line+=1
        elif c in ";": head_start=i+1
        elif c=="{":
            head=t[head_start:i].strip()
            container=re.match(r'(template\s*<[^{]*>\s*)?(namespace|struct|class|enum|union|extern)\b',head) is not None or head.endswith("=")
            infn=any(k=="fn" for k,_,_ in stack)
            kind="blk" if infn else ("ctr" if container or not head else "fn")
            stack.append((kind,line,head.split("\n")[-1][:60] if head else ""))
            head_start=i+1
        elif c=="}":
            if stack:
                k,l0,h=stack.pop()
                if k=="fn": res.append((line-l0+1,l0,h))
            head_start=i+1
    return res


def excesses(root):
    found = []
    for top in TOPS:
        for base, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith(SUFFIXES):
                    continue
                path = os.path.join(base, name)
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                if rel in EXEMPT:
                    continue
                with open(path, errors="replace") as f:
                    lines = f.read().count("\n")
                if lines > FILE_LIMIT:
                    found.append(f"{rel}: {lines} lines (the limit is {FILE_LIMIT})")
                for length, line, head in functions(path):
                    if length > FUNCTION_LIMIT:
                        found.append(f"{rel}:{line}: a function of {length} lines "
                                     f"(the limit is {FUNCTION_LIMIT}): {head.strip()}")
    return found


def self_test():
    body = "  x += 1;\n" * (FUNCTION_LIMIT + 1)
    planted = {
        "compiler/Long.cpp": "namespace a {\nint f(int x) {\n" + body + "  return x;\n}\n}\n",
        "runtime/Big.h": "// line\n" * (FILE_LIMIT + 1),
        "runtime/Fine.cpp": "namespace a::b {\nstruct S {\n  int g() {\n    return 1;\n  }\n};\n"
                            "const char *s = \"{{{\";\n}\n",
    }
    with tempfile.TemporaryDirectory() as root:
        for rel, text in planted.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as f:
                f.write(text)
        found = excesses(root)
    flagged = sorted({v.split(":", 1)[0] for v in found})
    if flagged != ["compiler/Long.cpp", "runtime/Big.h"] or len(found) != 2:
        print("self-test: found", found)
        return 1
    print("self-test: the planted long function and long file found, nothing else")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    root = argv[1] if len(argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..")
    found = excesses(root)
    for v in found:
        print(v)
    if found:
        print(f"{len(found)} excess(es) over the size limits")
        return 1
    print(f"sizes: no file over {FILE_LIMIT} lines, no function over {FUNCTION_LIMIT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
