#!/usr/bin/env python3
"""Mean host-side cost of AlltoAllV calls from a `RMACC_DEBUG=INFO RMACC_DEBUG_SUBSYS=COLL` log:
time queued before the progress thread took the call, the count exchange, plan + enqueue."""
import re
import sys

pat = re.compile(r"queued ([0-9.]+) us, count exchange ([0-9.]+) us, plan\+enqueue ([0-9.]+) us")
rows = [tuple(map(float, m.groups())) for line in open(sys.argv[1], errors="replace")
        for m in [pat.search(line)] if m]
if not rows:
    sys.exit("no call-cost lines in " + sys.argv[1])
rows = rows[len(rows) // 10:]  # the first tenth is warm-up (plan cache misses, mappings)
mean = [sum(r[i] for r in rows) / len(rows) for i in range(3)]
print("per call, mean over %d rank-calls: queued %.1f us, count exchange %.1f us, "
      "plan+enqueue %.1f us" % (len(rows), *mean))
