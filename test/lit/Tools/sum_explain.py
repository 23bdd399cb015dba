"""Reads `loom explain` output on stdin and checks that the per-node compute
and communication times and collective counts add up to the totals (each
printed value is rounded, so the sums may differ from the totals by up to
half a unit in the last printed place per node)."""

import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import oracle  # noqa: E402  (test/oracle.py)

UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
TIME = r"([0-9.]+) (s|ms|us)"


def seconds(value, unit):
    return float(value) * UNITS[unit]


def resolution(value, unit):
    decimals = len(value.split(".")[1]) if "." in value else 0
    return 0.5 * 10 ** -decimals * UNITS[unit]


text = sys.stdin.read()
total = re.search(r"^predicted step " + TIME + r" per device: compute " + TIME +
                  r", communication " + TIME + r" \(([0-9]+) collectives", text, re.M)
if not total:
    sys.exit("no totals line")
compute_total = seconds(total.group(3), total.group(4))
comm_total = seconds(total.group(5), total.group(6))
collectives_total = int(total.group(7))

compute = comm = compute_slack = comm_slack = 0.0
collectives = 0
in_table = False
for line in text.splitlines():
    if line.startswith("  node "):
        in_table = True
        continue
    if not in_table or not line.startswith("  "):
        continue
    # The two times are the first two "<number> <unit>" pairs after the
    # layouts; a node's name and ops contain no such pair.
    times = list(re.finditer(TIME + r"(?= )", line + " "))
    if len(times) < 2:
        sys.exit("unparsed node line: " + line)
    c, m = times[0], times[1]
    compute += seconds(c.group(1), c.group(2))
    compute_slack += resolution(c.group(1), c.group(2))
    comm += seconds(m.group(1), m.group(2))
    comm_slack += resolution(m.group(1), m.group(2))
    count = re.match(r" \(([0-9]+)\)", line[m.end():])
    collectives += int(count.group(1)) if count else 0

ok = True
for name, got, want, slack in (("compute", compute, compute_total, compute_slack),
                               ("communication", comm, comm_total, comm_slack)):
    # The total is rounded too: half a unit of its own last place.
    if oracle.compare(got, want, rtol=0.5e-3, atol=slack + 1e-7, name=name):
        print(name, "sums to the total")
    else:
        ok = False
        print(name, "sums to", got, "but the total is", want)
if collectives == collectives_total:
    print("collectives sum to the total")
else:
    ok = False
    print("collectives sum to", collectives, "but the total is", collectives_total)
sys.exit(0 if ok else 1)
