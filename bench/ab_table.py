"""bench/ab.sh's table: per shape and message size, the median time of build A's runs and of
build B's (rank 0's rmacc-perf rows), their ratio, each build's range (fastest-slowest run:
where the ranges overlap, the difference is within the machine's drift), and #wrong summed over
each build's runs.

Usage: python3 bench/ab_table.py OUT_DIR "4:2 2:2"
"""
import glob
import re
import statistics
import sys

# [0]   size   count   type   time   algbw   busbw   #wrong
ROW = re.compile(r"^\[0\]\s+(\d+)\s+\d+\s+\S+\s+([\d.]+)\s+[\d.]+\s+[\d.]+\s+(\d+)")


def runs(out, side, shape):
    n, nodes = shape.split(":")
    times, wrong = {}, {}
    for path in sorted(glob.glob(f"{out}/ab-{side}-{n}x{nodes}-*.log")):
        for line in open(path, errors="replace"):
            m = ROW.match(line)
            if m:
                size = int(m.group(1))
                times.setdefault(size, []).append(float(m.group(2)))
                wrong[size] = wrong.get(size, 0) + int(m.group(3))
    return times, wrong


def spread(times):
    return f"{min(times):.0f}-{max(times):.0f}" if times else "-"


def main():
    out, shapes = sys.argv[1], sys.argv[2].split()
    print("| shape | bytes | A median us | B median us | A / B | A range | B range | runs A, B "
          "| #wrong A, B |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---|")
    for shape in shapes:
        (ta, wa), (tb, wb) = runs(out, "a", shape), runs(out, "b", shape)
        for size in sorted(set(ta) | set(tb)):
            a = statistics.median(ta[size]) if size in ta else float("nan")
            b = statistics.median(tb[size]) if size in tb else float("nan")
            print(f"| {shape.replace(':', 'x')} | {size} | {a:.1f} | {b:.1f} | {a / b:.2f} | "
                  f"{spread(ta.get(size))} | {spread(tb.get(size))} | "
                  f"{len(ta.get(size, []))}, {len(tb.get(size, []))} | "
                  f"{wa.get(size, '-')}, {wb.get(size, '-')} |")


if __name__ == "__main__":
    main()
