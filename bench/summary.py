#!/usr/bin/env python3
"""The compact summary bench/gpu.sh prints last: rmacc against NCCL in the same run, per size,
and the issue-11 targets. Reads the logs gpu.sh wrote (a directory); a log that is missing or
empty leaves its columns as '-', so a partial run (STEPS=...) still summarises what it has.

  bench/summary.py OUT_DIR

Logs read (all optional):
  perf-alltoall-1node.log      rmacc-perf alltoall, registered windows (-m 1)
  perf-alltoall-1node-m0.log   rmacc-perf alltoall, cudaMalloc buffers (-m 0)
  perf-alltoall-8B.log         rmacc-perf alltoall at 8 bytes per peer
  perf-putsignal-1node.log     its '# 8-byte ping-pong latency' line
  perf-alltoallv-{uniform,zipf}-1node.log
  nccl-peer.log                bench/nccl_peer.py: copy-engine ceiling and torch all_to_all_single
  nccl-perf.log                tools/nccl/nccl_perf.cc: NCCL's C API, kernel and ce paths
  overlap.log                  rmacc-overlap
  cost-*.log                   call_cost.py's input (the summary reruns its arithmetic)
"""
import os
import re
import sys

# An nccl-tests row (rmacc-perf, nccl-perf): size count type time algbw busbw wrong, optionally
# behind rmacc-run's "[0] " prefix. Only rank 0 prints tables.
ROW = re.compile(r"^(?:\[0\] )?\s+(\d+)\s+(\d+)\s+(\w+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)\s*$")
# nccl_peer.py's NCCL rows (no wrong column) and copy-ceiling rows (size time GB/s).
TORCH_ROW = re.compile(r"^\s+(\d+)\s+(\d+)\s+float\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$")
CEIL_ROW = re.compile(r"^\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s*$")
LATENCY = re.compile(r"8-byte ping-pong latency .*: ([\d.]+) us")
COST = re.compile(r"queued ([0-9.]+) us, count exchange ([0-9.]+) us(?: \([^)]*\))?, plan\+enqueue ([0-9.]+) us")


def read(out, name):
    path = os.path.join(out, name)
    if not os.path.exists(path):
        return []
    with open(path, errors="replace") as f:
        return f.read().splitlines()


def perf_table(lines):
    """{size: (time_us, busbw, wrong)} of an rmacc-perf / nccl-perf table."""
    rows = {}
    for line in lines:
        m = ROW.match(line)
        if m:
            rows[int(m.group(1))] = (float(m.group(4)), float(m.group(6)), m.group(7))
    return rows


def nccl_perf_tables(lines):
    """nccl-perf's two tables, split at its '# nccl-perf path: X' lines."""
    tables, path = {}, None
    for line in lines:
        m = re.search(r"# nccl-perf path: (\w+)", line)
        if m:
            path = m.group(1)
            tables[path] = []
        elif path:
            tables[path].append(line)
    return {p: perf_table(t) for p, t in tables.items()}


def nccl_peer(lines):
    """(torch all_to_all_single {size: (time_us, busbw)}, copy ceiling {size: GB/s})."""
    torch_rows, ceiling, section = {}, {}, None
    for line in lines:
        if line.startswith("# copy-engine ceiling"):
            section = "ceiling"
        elif line.startswith("# NCCL"):
            section = "torch"
        m = TORCH_ROW.match(line)
        if section == "torch" and m:
            torch_rows[int(m.group(1))] = (float(m.group(3)), float(m.group(5)))
            continue
        m = CEIL_ROW.match(line)
        if section == "ceiling" and m:
            ceiling[int(m.group(1))] = float(m.group(3))
    return torch_rows, ceiling


def human(size):
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if size >= div and size % div == 0:
            return f"{size // div}{unit}"
    return str(size)


def fmt(v, spec=None):
    if v is None:
        return "-"
    return format(v, spec or (".2f" if abs(v) < 10 else ".1f"))


def ratio(a, b):
    return a / b if a is not None and b else None


def verdict(name, pairs, lo, floor, hi=1 << 62):
    """'target NAME: PASS|FAIL (worst x at size)' over the sizes lo..hi that both sides have."""
    xs = [(a / b, s) for s, (a, b) in sorted(pairs.items()) if lo <= s <= hi and a is not None and b]
    if not xs:
        return f"target {name}: not measured"
    worst, at = min(xs)
    return f"target {name}: {'PASS' if worst >= floor else 'FAIL'} (worst {worst:.2f} at {human(at)})"


def targets(rmacc, m0, kern, ce, torch_rows, ceiling, uni, zipf):
    bw = {s: r[1] for s, r in rmacc.items()}
    both = lambda peer: {s: (bw.get(s), v) for s, v in peer.items()}  # noqa: E731
    return [
        verdict("rmacc >= 1.0 x torch all_to_all_single from 64K", both({s: t[1] for s, t in torch_rows.items()}),
                64 << 10, 1.0),
        verdict("rmacc >= 1.0 x NCCL C API kernel from 16M", both({s: k[1] for s, k in kern.items()}), 16 << 20, 1.0),
        verdict("rmacc >= 1.0 x NCCL C API ce from 16M", both({s: c[1] for s, c in ce.items()}), 16 << 20, 1.0),
        verdict("rmacc >= 1.0 x NCCL C API ce at 1K-1M (small calls)", both({s: c[1] for s, c in ce.items()}),
                1 << 10, 1.0, 1 << 20),
        verdict("rmacc >= 0.95 x copy-engine ceiling from 256M", both(ceiling), 256 << 20, 0.95),
        verdict("rmacc -m 0 >= 0.95 x -m 1 from 1M", {s: (z[1], bw.get(s)) for s, z in m0.items()}, 1 << 20, 0.95),
        verdict("AlltoAllV zipf >= 0.90 x uniform from 16M", {s: (zipf[s][1], u[1]) for s, u in uni.items() if s in zipf},
                16 << 20, 0.90),
    ]


def busbw_table(out):
    rmacc = perf_table(read(out, "perf-alltoall-1node.log"))
    m0 = perf_table(read(out, "perf-alltoall-1node-m0.log"))
    capi = nccl_perf_tables(read(out, "nccl-perf.log"))
    torch_rows, ceiling = nccl_peer(read(out, "nccl-peer.log"))
    kern, ce = capi.get("kernel", {}), capi.get("ce", {})
    sizes = sorted(set(rmacc) | set(kern) | set(ce) | set(torch_rows))
    if not sizes:
        return ["alltoall: no tables found"]
    uni = perf_table(read(out, "perf-alltoallv-uniform-1node.log"))
    zipf = perf_table(read(out, "perf-alltoallv-zipf-1node.log"))
    lines = ["AlltoAll busbw GB/s, same run; x = rmacc / peer (torch: all_to_all_single; kern, ce: NCCL C API;"
             " -m0: rmacc on cudaMalloc buffers; ceil: one-way copy-engine copy)",
             f"{'size':>6} {'rmacc':>8} {'us':>8} {'torch':>7} {'x':>5} {'kern':>7} {'x':>5} {'ce':>7} "
             f"{'x':>5} {'-m0':>7} {'m0/m1':>5} {'ceil':>6} {'x':>5} {'wrong':>5}"]
    for s in sizes:
        r = rmacc.get(s)
        bw = r[1] if r else None
        t = torch_rows.get(s)
        k, c, z = kern.get(s), ce.get(s), m0.get(s)
        cl = ceiling.get(s)
        wrong = ",".join(str(x[2]) for x in (r, k, c, z) if x and x[2] not in ("0", "N/A")) or "0"
        lines.append(
            f"{human(s):>6} {fmt(bw):>8} {fmt(r[0] if r else None):>8} {fmt(t[1] if t else None):>7} "
            f"{fmt(ratio(bw, t[1] if t else None), '.2f'):>5} {fmt(k[1] if k else None):>7} "
            f"{fmt(ratio(bw, k[1] if k else None), '.2f'):>5} {fmt(c[1] if c else None):>7} "
            f"{fmt(ratio(bw, c[1] if c else None), '.2f'):>5} {fmt(z[1] if z else None):>7} "
            f"{fmt(ratio(z[1] if z else None, bw), '.2f'):>5} {fmt(cl):>6} {fmt(ratio(bw, cl), '.2f'):>5} {wrong:>5}")
    return lines + targets(rmacc, m0, kern, ce, torch_rows, ceiling, uni, zipf)


def zipf_table(out):
    uni = perf_table(read(out, "perf-alltoallv-uniform-1node.log"))
    zipf = perf_table(read(out, "perf-alltoallv-zipf-1node.log"))
    sizes = sorted(set(uni) & set(zipf))
    if not sizes:
        return []
    lines = ["AlltoAllV zipf vs uniform, equal bytes per rank (target: zipf/uniform busbw >= 0.90 from 16M)",
             f"{'size':>6} {'uniform':>8} {'zipf':>8} {'z/u':>5}"]
    for s in sizes:
        u, z = uni[s][1], zipf[s][1]
        lines.append(f"{human(s):>6} {u:>8.1f} {z:>8.1f} {fmt(ratio(z, u), '.2f'):>5}")
    return lines


def small_calls(out):
    lines = []
    a2a = perf_table(read(out, "perf-alltoall-8B.log"))
    lat = None
    for line in read(out, "perf-putsignal-1node.log"):
        m = LATENCY.search(line)
        if m:
            lat = float(m.group(1))
    if a2a or lat is not None:
        t = next(iter(a2a.values()))[0] if a2a else None
        x = ratio(t, lat)
        verdict = "-" if x is None else ("PASS" if x <= 2.0 else "FAIL")
        lines.append(f"AlltoAll 8 B per peer: {fmt(t, '.2f')} us; put+signal 8 B one way: {fmt(lat, '.2f')} us; "
                     f"ratio {fmt(x, '.2f')} (target <= 2): {verdict}")
    for name in sorted(os.listdir(out)):
        if not (name.startswith("cost-") and name.endswith(".log")):
            continue
        rows = [tuple(map(float, m.groups())) for line in read(out, name) for m in [COST.search(line)] if m]
        rows = rows[len(rows) // 10:]  # as call_cost.py: the first tenth is warm-up
        if not rows:
            lines.append(f"host cost per call ({name}): no call-cost lines")
            continue
        q, c, p = (sum(r[i] for r in rows) / len(rows) for i in range(3))
        verdict = "PASS" if c + p <= 10.0 else "FAIL"
        lines.append(f"host cost per call ({name[5:-4]}): count exchange {c:.1f} + plan+enqueue {p:.1f} = "
                     f"{c + p:.1f} us (queued {q:.1f}; target <= 10): {verdict}")
    return lines


def overlap_lines(out):
    keep = []
    for line in read(out, "overlap.log"):
        body = line[4:] if line.startswith("[0] ") else line
        if re.match(r"^(# +size|# +\(MiB\)|  +\d+ |# overlap target|# data check|# rmacc-overlap)", body):
            keep.append(body)
    return (["Overlap beside 40 bf16 GEMMs (bench/overlap)"] + keep) if keep else []


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: summary.py OUT_DIR")
    out = argv[1]
    sections = [busbw_table(out), zipf_table(out), small_calls(out), overlap_lines(out)]
    print("\n".join("\n".join(s) + "\n" for s in sections if s), end="")


if __name__ == "__main__":
    main(sys.argv)
