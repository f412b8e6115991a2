#!/usr/bin/env python3
"""cupti_timeline.py over synthetic traces of two processes: it finds the iterations by the
anchor, attributes GPU work by correlation id, and names the kernels launched."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def trace(path, pid, rank, kernel):
    rows = [{"k": "process", "pid": pid, "rank": rank, "cmd": "prog"},
            {"k": "thread", "tid": pid + 1, "name": "progress"}]
    corr = 0
    for i in range(20):
        t = 1_000_000 + i * 40_000 + rank * 500  # one iteration every 40 us
        corr += 1
        rows.append({"k": "api", "d": "drv", "name": "cuStreamBatchMemOp_v2", "tid": pid,
                     "start": t, "end": t + 3_000, "corr": corr, "ret": 0})
        corr += 1
        rows.append({"k": "api", "d": "drv", "name": "cuMemcpyAsync", "tid": pid + 1,
                     "start": t + 10_000, "end": t + 14_000, "corr": corr, "ret": 0})
        rows.append({"k": "memcpy", "copy": 8, "bytes": 1024, "start": t + 15_000,
                     "end": t + 17_000, "dev": 0, "stream": 7, "corr": corr, "graph": 0})
        if kernel:
            rows.append({"k": "kernel", "name": "ncclDevKernel", "start": t + 15_000,
                         "end": t + 16_000, "dev": 0, "stream": 7, "corr": corr, "graph": 0})
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def main():
    with tempfile.TemporaryDirectory() as d:
        trace(os.path.join(d, "trace-100.jsonl"), 100, 0, False)
        trace(os.path.join(d, "trace-200.jsonl"), 200, 1, True)
        out = subprocess.run([sys.executable, os.path.join(HERE, "cupti_timeline.py"), d],
                             capture_output=True, text=True, check=True).stdout
    assert "18 iterations, median period 40.0 us" in out, out
    assert "kernels launched in these iterations: none" in out, out
    assert "ncclDevKernel x18" in out, out
    assert "memcpy DtoD 1024 B" in out, out
    lines = [l for l in out.splitlines() if not l.startswith("#") and "progress/101" in l and "cuMemcpyAsync" in l]
    assert lines and float(lines[0].split()[1]) == 4.0, out
    print("ok")


if __name__ == "__main__":
    main()
