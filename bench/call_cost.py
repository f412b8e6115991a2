#!/usr/bin/env python3
"""Mean host-side cost of AlltoAllV calls from a `RMACC_DEBUG=INFO RMACC_DEBUG_SUBSYS=COLL` log:
time queued before the progress thread took the call, the count exchange (and its bytes per
rank: control plane sent + received + read from node-mates), plan + enqueue, ops per rank, and
backend stream calls per call (all, and those on the user stream) where the log has them."""
import re
import sys

pat = re.compile(r"queued ([0-9.]+) us, count exchange ([0-9.]+) us(?: \(([0-9]+) B[^)]*\))?, "
                 r"plan\+enqueue ([0-9.]+) us(?:, ([0-9]+) ops)?"
                 r"(?:, backend calls ([0-9]+) \(user stream ([0-9]+)\))?")
rows = [tuple(float(g) if g is not None else float("nan") for g in m.groups())
        for line in open(sys.argv[1], errors="replace") for m in [pat.search(line)] if m]
if not rows:
    sys.exit("no call-cost lines in " + sys.argv[1])
rows = rows[len(rows) // 10:]  # the first tenth is warm-up (plan cache misses, mappings)
mean = [sum(r[i] for r in rows) / len(rows) for i in range(7)]
line = ("per call, mean over %d rank-calls: queued %.1f us, count exchange %.1f us (%.0f B), "
        "plan+enqueue %.1f us, %.1f ops" % (len(rows), *mean[:5]))
if mean[5] == mean[5]:  # not NaN: the log counts backend calls
    line += ", %.1f backend calls (user stream %.1f)" % (mean[5], mean[6])
# Medians too: on a loaded machine a descheduled peer makes a few exchanges take milliseconds
# and the mean follows them.
med = [sorted(r[i] for r in rows)[len(rows) // 2] for i in (1, 3)]
line += "; medians: count exchange %.1f us, plan+enqueue %.1f us" % tuple(med)
print(line)
