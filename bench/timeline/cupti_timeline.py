#!/usr/bin/env python3
"""One call of a loop, from the CUPTI traces of bench/timeline/cupti_trace.cc (one
trace-<pid>.jsonl per process): a timeline of every backend call on every thread and every
copy, memset and kernel on the GPU, and a summary of where the microseconds go.

Usage: cupti_timeline.py DIR [--anchor NAME] [--call N] [--skip FRACTION]

The loop's iterations are found without markers: an anchor is an API call the calling thread
(the process's main thread) makes once per iteration (default: the first of cuGraphLaunch,
cuStreamBatchMemOp, cuLaunchKernel that it makes at least 3 times; prefixes match). Iteration
i runs from anchor i to anchor i+1; the first FRACTION (default 0.1) are warm-up. The timeline
shows the median iteration (or --call N) of every process, on one clock; GPU work belongs to an
iteration when an API call made in it (on any thread) issued it. The summary gives medians
over all iterations, and the kernels the iterations launched (a zero-SM path launches none)."""
import argparse
import glob
import json
import os
import statistics
import sys

DEFAULT_ANCHORS = ["cuGraphLaunch", "cudaGraphLaunch", "cuStreamBatchMemOp", "cuLaunchKernel", "cudaLaunchKernel"]
COPY_KINDS = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
              8: "DtoD", 9: "HtoH", 10: "PtoP"}


class Process:
    def __init__(self, path):
        self.pid, self.rank, self.cmd = None, None, ""
        self.apis, self.gpu, self.threads = [], [], {}
        for line in open(path, errors="replace"):
            try:
                r = json.loads(line)
            except ValueError:
                continue  # a process killed mid-line
            k = r["k"]
            if k == "process":
                self.pid, self.rank, self.cmd = r["pid"], r["rank"], r["cmd"]
            elif k == "api":
                self.apis.append(r)
            elif k in ("memcpy", "memset", "kernel"):
                self.gpu.append(r)
            elif k == "thread":
                self.threads[r["tid"]] = r["name"]
        self.apis.sort(key=lambda r: r["start"])
        mark_depth(self.apis)
        self.by_corr = {}
        for g in self.gpu:
            self.by_corr.setdefault(g["corr"], []).append(g)

    def label(self):
        return "r%s" % self.rank if self.rank is not None else "p%s" % self.pid

    def thread(self, tid):
        if tid == self.pid:
            return "caller"
        return "%s/%d" % (self.threads.get(tid, "thread"), tid)


def mark_depth(apis):
    """depth 0: a call made by the program; >0: a driver call inside a runtime call."""
    open_ends = {}
    for r in apis:
        stack = open_ends.setdefault(r["tid"], [])
        while stack and stack[-1] <= r["start"]:
            stack.pop()
        r["depth"] = len(stack)
        stack.append(r["end"])


def gpu_name(g):
    if g["k"] == "kernel":
        return "kernel " + g["name"][:60]
    if g["k"] == "memset":
        return "memset %d B" % g["bytes"]
    return "memcpy %s %d B" % (COPY_KINDS.get(g["copy"], str(g["copy"])), g["bytes"])


def choose_anchor(proc, wanted):
    main = [r for r in proc.apis if r["tid"] == proc.pid]
    for name in ([wanted] if wanted else DEFAULT_ANCHORS):
        hits = [r for r in main if r["name"].startswith(name)]
        if len(hits) >= 3:
            return name, hits
    return None, []


def iterations(proc, anchors):
    starts = [a["start"] for a in anchors]
    wins = [(starts[i], starts[i + 1]) for i in range(len(starts) - 1)]
    out, j = [], 0
    for lo, hi in wins:
        while j < len(proc.apis) and proc.apis[j]["start"] < lo:
            j += 1
        k = j
        while k < len(proc.apis) and proc.apis[k]["start"] < hi:
            k += 1
        apis = proc.apis[j:k]
        gpu = [g for a in apis for g in proc.by_corr.get(a["corr"], [])]
        out.append({"lo": lo, "hi": hi, "apis": apis, "gpu": gpu})
    return out


def summarise(proc, its):
    """Medians over iterations: period, each thread's time in API calls by name, GPU work."""
    rows = {}

    def add(key, i, us):
        rows.setdefault(key, [[0.0, 0] for _ in its])[i][0] += us
        rows[key][i][1] += 1

    for i, it in enumerate(its):
        for a in it["apis"]:
            if a["depth"] == 0:
                add((proc.thread(a["tid"]), a["name"]), i, (a["end"] - a["start"]) / 1e3)
        for g in it["gpu"]:
            add(("gpu s%d" % g["stream"], " ".join(gpu_name(g).split(" ")[:2])), i,
                (g["end"] - g["start"]) / 1e3)
    period = statistics.median((it["hi"] - it["lo"]) / 1e3 for it in its)
    table = []
    for (where, name), per in rows.items():
        table.append((where, name, statistics.median(p[1] for p in per), statistics.median(p[0] for p in per)))
    table.sort(key=lambda r: (r[0] != "caller", r[0], -r[3]))
    spans = [(max(g["end"] for g in it["gpu"]) - min(g["start"] for g in it["gpu"])) / 1e3
             for it in its if it["gpu"]]
    kernels = {}
    for it in its:
        for g in it["gpu"]:
            if g["k"] == "kernel":
                kernels[g["name"]] = kernels.get(g["name"], 0) + 1
    return period, table, statistics.median(spans) if spans else 0.0, kernels


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir")
    p.add_argument("--anchor", help="API name (prefix) the caller makes once per iteration")
    p.add_argument("--call", type=int, help="iteration to show (default: the median one)")
    p.add_argument("--skip", type=float, default=0.1, help="warm-up fraction skipped")
    args = p.parse_args()
    procs = [Process(f) for f in sorted(glob.glob(os.path.join(args.dir, "trace-*.jsonl")))]
    procs = [x for x in procs if x.apis]
    if not procs:
        sys.exit("no traces with API records in " + args.dir)
    procs.sort(key=lambda x: (x.rank is None, x.rank if x.rank is not None else x.pid))
    shown = []
    for proc in procs:
        name, anchors = choose_anchor(proc, args.anchor)
        if not anchors:
            print("# %s: no anchor (%s) made 3 times on the caller's thread" % (proc.label(), args.anchor or DEFAULT_ANCHORS))
            continue
        its = iterations(proc, anchors)
        its = its[int(len(its) * args.skip):]
        if not its:
            continue
        period, table, span, kernels = summarise(proc, its)
        print("# %s (pid %s): %s; anchor %s, %d iterations, median period %.1f us, median GPU span %.1f us"
              % (proc.label(), proc.pid, proc.cmd.strip()[:100], name, len(its), period, span))
        print("#   %-28s %-34s %8s %10s" % ("where", "what", "n/iter", "us/iter"))
        for where, what, n, us in table:
            print("#   %-28s %-34s %8.1f %10.2f" % (where, what[:34], n, us))
        print("#   kernels launched in these iterations: %s" %
              (", ".join("%s x%d" % (k[:60], v) for k, v in sorted(kernels.items())) or "none"))
        pick = args.call if args.call is not None else len(its) // 2
        shown.append((proc, its[min(pick, len(its) - 1)]))
    if not shown:
        sys.exit(1)
    t0 = min(it["lo"] for _, it in shown)
    print("\n# one iteration (index %s), all processes on one clock; us from the first anchor"
          % (args.call if args.call is not None else "median"))
    print("%9s %9s  %-4s %-26s %s" % ("start", "dur", "proc", "where", "what"))
    events = []
    for proc, it in shown:
        for a in it["apis"]:
            events.append((a["start"], a["end"], proc.label(), proc.thread(a["tid"]), "  " * a["depth"] + a["name"]))
        for g in it["gpu"]:
            events.append((g["start"], g["end"], proc.label(), "gpu s%d" % g["stream"], gpu_name(g)))
    for s, e, who, where, what in sorted(events):
        print("%9.2f %9.2f  %-4s %-26s %s" % ((s - t0) / 1e3, (e - s) / 1e3, who, where[:26], what))


if __name__ == "__main__":
    main()
