#!/usr/bin/python3
"""Plots rmacc-sim's sweep (lab/sim/sim.sh): busbw per GPU against node count, one panel per
traffic case, the three schedules beside the network bound N/(N-1) x NIC (as busbw), and prints
the table bench/results/ quotes (with the most of the traffic's own bound the busiest proxy thread
allows: its node bound over that thread's CPU time). Usage: sim_plot.py sweep.jsonl out.png"""
import json
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
cases = []
for r in rows:
    if r["case"] not in cases:
        cases.append(r["case"])
data = defaultdict(dict)  # (case, schedule or "rmacc+host") -> nodes -> row
for r in rows:
    key = r["schedule"] if r.get("variant", "network") == "network" else r["schedule"] + "+host"
    data[(r["case"], key)][r["nodes"]] = r

fig, axes = plt.subplots(1, len(cases), figsize=(4.2 * len(cases), 4), sharey=True)
if len(cases) == 1:
    axes = [axes]
styles = {"rmacc": ("C0", "o", "-"), "rmacc+host": ("C0", "x", ":"),
          "direct": ("C3", "s", "-"), "pxn": ("C2", "^", "-")}
for ax, case in zip(axes, cases):
    for sched, (color, marker, line) in styles.items():
        pts = sorted(data[(case, sched)].items())
        if pts:
            ax.plot([n for n, _ in pts], [r["busbw"] for _, r in pts], color=color,
                    marker=marker, linestyle=line, label=sched)
    pts = sorted(data[(case, "rmacc")].items())
    ranks = lambda r: r["nodes"] * r["gpus"]
    ax.plot([n for n, _ in pts],
            [r["bound_algbw"] * (ranks(r) - 1) / ranks(r) for _, r in pts], "k--",
            label="bound N/(N-1) x NIC, as busbw")
    ax.set_xscale("log", base=2)
    ax.set_title(case)
    ax.set_xlabel("nodes (x 8 GPUs)")
    ax.grid(True, alpha=0.3)
axes[0].set_ylabel("predicted busbw per GPU (GB/s)")
axes[0].legend(fontsize=8)
fig.suptitle("rmacc-sim: 50 GB/s NIC per GPU, cross-rail penalised (22.7 GB/s)")
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)

print("| case | nodes | bound | rmacc | / bound | direct | pxn | rmacc + host cost | host-bound "
      "| proxy allows |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|")
nan = {"busbw": float("nan"), "host_bound": None}
for case in cases:
    for n, r in sorted(data[(case, "rmacc")].items()):
        d = data[(case, "direct")].get(n, nan)["busbw"]
        p = data[(case, "pxn")].get(n, nan)["busbw"]
        h = data[(case, "rmacc+host")].get(n, nan)
        ranks = r["nodes"] * r["gpus"]
        bound = r["bound_algbw"] * (ranks - 1) / ranks
        hb = {True: "yes", False: "no", None: "-"}[h["host_bound"]]
        busy = r.get("proxy_thread_busy_us", 0)
        allows = f"{min(1.0, r['node_bound_us'] / busy):.2f}" if busy else "-"
        print(f"| {case} | {n} | {bound:.1f} | {r['busbw']:.1f} | {r['algbw'] / r['bound_algbw']:.2f} | "
              f"{d:.1f} | {p:.1f} | {h['busbw']:.1f} | {hb} | {allows} |")
