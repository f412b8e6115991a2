#!/usr/bin/env python3
"""Mean host-side cost of AlltoAllV calls from a `RMACC_DEBUG=INFO RMACC_DEBUG_SUBSYS=COLL` log:
time queued before the progress thread took the call, the count exchange (and its bytes per
rank: control plane sent + received + read from node-mates), plan + enqueue, ops per rank."""
import re
import sys

pat = re.compile(r"queued ([0-9.]+) us, count exchange ([0-9.]+) us(?: \(([0-9]+) B[^)]*\))?, "
                 r"plan\+enqueue ([0-9.]+) us(?:, ([0-9]+) ops)?")
rows = [tuple(float(g) if g is not None else float("nan") for g in m.groups())
        for line in open(sys.argv[1], errors="replace") for m in [pat.search(line)] if m]
if not rows:
    sys.exit("no call-cost lines in " + sys.argv[1])
rows = rows[len(rows) // 10:]  # the first tenth is warm-up (plan cache misses, mappings)
mean = [sum(r[i] for r in rows) / len(rows) for i in range(5)]
print("per call, mean over %d rank-calls: queued %.1f us, count exchange %.1f us (%.0f B), "
      "plan+enqueue %.1f us, %.1f ops" % (len(rows), *mean))
