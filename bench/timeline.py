#!/usr/bin/env python3
"""Prints one call of a RMACC_TRACE_FILE trace as a timeline across ranks: stream ops (lane,
op, peer, bytes) and the proxies' network hops ("net put": release seen -> completed;
"net recv": a signal arrived). Usage: timeline.py TRACE_PREFIX CALL
(TRACE_PREFIX: the files' common prefix, e.g. out/trace-4x2.)"""
import glob
import json
import sys


def load(prefix):
    events = []
    for path in sorted(p for p in glob.glob(prefix + "*") if not p.endswith(".log")):
        text = open(path).read().rstrip().rstrip(",")
        if not text.endswith("]"):
            text += "]"  # a rank killed before it closed its file
        events += json.loads(text)
    return events


def main():
    prefix, call = sys.argv[1], int(sys.argv[2])
    events = load(prefix)
    ops = [e for e in events if e["args"]["call"] == call]
    if not ops:
        sys.exit("no ops of call %d" % call)
    t0 = min(e["ts"] for e in ops)
    t1 = max(e["ts"] + e["dur"] for e in ops)
    net = [e for e in events if e["tid"] == "net" and t0 <= e["ts"] <= t1]
    print("call %d: %.1f us from the first op to the last, %d ranks" %
          (call, t1 - t0, len({e["pid"] for e in ops})))
    for e in sorted(ops + net, key=lambda e: e["ts"]):
        a = e["args"]
        print("%8.1f %8.1f  r%-2d %-9s %-8s peer %-3d %9d B" %
              (e["ts"] - t0, e["dur"], e["pid"], e["tid"], e["name"], a["peer"], a["bytes"]))


if __name__ == "__main__":
    main()
