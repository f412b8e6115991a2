#!/usr/bin/env python3
"""Checks that no file under src/ includes a header of a layer above its own (issue 16).

The layers, bottom up (DESIGN.md §3): what everything uses (core/: errors, logging, config,
topology); the operating system's shared memory, futexes and peer file descriptors (os/);
the backends, the bootstrap and the pure planner (each on its own: none includes another);
the network; the executor, which runs plans (exec/); the collective call: its arguments, its
three paths, the progress thread, the count exchange, the plan cache (coll/); the communicator
and its windows (comm/); the C API. A file may include headers of its own folder and of lower layers only.

Usage: check-layers.py [SRC_DIR | --self-test]  (default: the src/ beside this script's folder). Exit 1 and
one line per violation when there is one.
"""
import os
import re
import sys

# Lower number = lower layer. Folders of one number must not include each other.
LAYERS = {"core": 0, "os": 1, "backend": 2, "bootstrap": 2, "plan": 2, "net": 3, "exec": 4,
          "coll": 5, "comm": 6, "api": 7}
# Violations tolerated, each with its reason; none today (the engines take an EngineContext,
# not the communicator). A new violation fails the check; an entry no longer needed does too.
KNOWN = set()
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(rel):
    return rel.split("/", 1)[0]


def violations(src):
    found, used = [], set()
    for folder, _, files in os.walk(src):
        for name in files:
            if not name.endswith((".h", ".cc", ".cu")):
                continue
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, src).replace(os.sep, "/")
            mine = layer_of(rel)
            if mine not in LAYERS:
                found.append(f"{rel}: folder '{mine}' has no layer in {sys.argv[0]}")
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            for inc in INCLUDE.findall(text):
                if "/" not in inc or not os.path.exists(os.path.join(src, inc)):
                    continue  # the public header, system or third-party headers
                theirs = layer_of(inc)
                if theirs == mine:
                    continue
                if (rel, inc) in KNOWN:
                    used.add((rel, inc))
                    continue
                if LAYERS.get(theirs, 99) >= LAYERS[mine]:
                    found.append(f"{rel} ({mine}) includes {inc} ({theirs}): a layer above "
                                 "or beside its own")
    for rel, inc in sorted(KNOWN - used):
        found.append(f"{rel} no longer includes {inc}: take it out of KNOWN")
    return found


def self_test():
    """The check must catch an upward include and pass a downward one."""
    import tempfile
    with tempfile.TemporaryDirectory() as src:
        for folder in ("net", "exec"):
            os.makedirs(os.path.join(src, folder))
        open(os.path.join(src, "exec", "x.h"), "w").write('#include "net/y.h"\n')
        open(os.path.join(src, "net", "y.h"), "w").write("")
        down = [v for v in violations(src) if "KNOWN" not in v]
        open(os.path.join(src, "net", "y.h"), "w").write('#include "exec/x.h"\n')
        up = [v for v in violations(src) if "KNOWN" not in v]
    ok = not down and len(up) == 1 and up[0].startswith("net/y.h (net) includes exec/x.h")
    print("self-test", "passed" if ok else f"FAILED: down={down} up={up}")
    return 0 if ok else 1


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    here = os.path.dirname(os.path.abspath(__file__))
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "src")
    found = violations(src)
    for line in sorted(found):
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
