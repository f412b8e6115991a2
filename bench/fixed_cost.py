#!/usr/bin/env python3
"""The small-call table of bench/gpu.sh's `fixed` step: medians over its alternated turns.

Reads OUT/fixed-*.log (rank 0's nccl-tests style rows, rmacc-perf and nccl-perf alike) and
prints, per size, the median time of each series and the ratios the small-call targets name:
rmacc at one rank against NCCL's kernel path at one rank, AlltoAll at 8 B per peer against the
one-way put+signal, AlltoAllV (host and device counts) against AlltoAll at equal bytes.
Usage: fixed_cost.py OUT
"""
import glob
import os
import re
import statistics
import sys

ROW = re.compile(r"^\[0\]\s+(\d+)\s+\d+\s+\S+\s+([0-9.]+)\s")


def tables(path):
    """{path label: {size: us}} of one log; nccl-perf prints a table per path (kernel, ce)."""
    out, label = {}, "rmacc"
    for line in open(path, errors="replace"):
        m = re.search(r"# nccl-perf path: (\w+)", line)
        if m:
            label = m.group(1)
        m = ROW.match(line)
        if m:
            out.setdefault(label, {})[int(m.group(1))] = float(m.group(2))
    return out


def main(out):
    series = {}  # series name -> size -> [us per turn]
    for path in sorted(glob.glob(os.path.join(out, "*fixed-*.log"))):
        m = re.match(r"(?:perf-)?fixed-(.+)-(\d+)\.log$", os.path.basename(path))
        if not m:
            continue
        for label, rows in tables(path).items():
            name = m.group(1) if label == "rmacc" else f"{m.group(1)}-{label}"
            for size, us in rows.items():
                series.setdefault(name, {}).setdefault(size, []).append(us)
    med = {n: {s: statistics.median(v) for s, v in rows.items()} for n, rows in series.items()}
    turns = max((len(v) for rows in series.values() for v in rows.values()), default=0)
    print(f"# medians of {turns} alternated turns (us per call)")
    for name in sorted(med):
        print(f"{name:24s} " + "  ".join(f"{s}:{t:.2f}" for s, t in sorted(med[name].items())))

    def ratio(a, b, label):
        if a in med and b in med:
            common = sorted(set(med[a]) & set(med[b]))
            print(f"# {label}: " + "  ".join(f"{s}:{med[a][s] / med[b][s]:.2f}x" for s in common))
    ratio("1rank", "nccl-1rank-kernel", "rmacc 1 rank / NCCL kernel path 1 rank")
    ratio("1rank", "nccl-1rank-ce", "rmacc 1 rank / NCCL CE path 1 rank")
    ratio("v-1x2", "1x2", "AlltoAllV host counts / AlltoAll, 1 x 2")
    ratio("dyn-1x2", "v-1x2", "AlltoAllV device counts / host counts, 1 x 2")
    if "8B" in med and "putsignal" in med:
        a, p = list(med["8B"].values())[0], list(med["putsignal"].values())[0]
        print(f"# AlltoAll 8 B per peer / one-way 8 B put+signal, 1 x 2: {a:.2f} / {p:.2f} = {a / p:.2f}x")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/rmacc-out")
