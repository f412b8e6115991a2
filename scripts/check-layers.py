#!/usr/bin/env python3
"""Checks that no file under src/ includes a header of a layer above its own (issue 16).

The layers, bottom up (DESIGN.md §3): what everything uses (core/: errors, logging, config,
topology); the operating system's shared memory, futexes and peer file descriptors (os/);
the backends, the bootstrap and the pure planner (each on its own: none includes another);
the network; the executor, which runs plans or records them into graphs (exec/); the
collective call: its arguments, its three paths (enqueued, triggered at replay, in the graph),
the progress thread, the count exchange, the plan cache, target and buffer selection (coll/);
the communicator and its windows (comm/); the C API. A file may include headers of its own
folder and of lower layers only; so coll/ sits between comm/ and {plan/, exec/}.

With --faces, checks instead that no file under any DIR (tools/, lab/, bench/: the code outside
the library other than its tests) includes a header of the library other than include/rmacc.h
and the faces SRC_DIR/faces.h declares; its own headers and tools/perf's harness, which uses
only rmacc.h, are fine. "x.h" and <x.h> both count: SRC_DIR is on the include path of what
links rmacc_internal.

Usage: check-layers.py [SRC_DIR | --self-test | --faces SRC_DIR DIR...]  (default: the src/
beside this script's folder). Exit 1 and one line per violation when there is one.
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
# Quoted and angled: the code outside src/ reaches a library header either way.
ANY_INCLUDE = re.compile(r'^\s*#\s*include\s+(?:"([^"]+)"|<([^>]+)>)', re.M)
FACES = "faces.h"  # under src/: what code outside the library may include (outside_violations)


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
            if rel == FACES:
                continue  # the faces list: not a layer, it names headers of several
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


def faces_of(src):
    with open(os.path.join(src, FACES), encoding="utf-8") as f:
        return set(INCLUDE.findall(f.read()))


def outside_violations(dirs, src):
    """Includes under each of `dirs` that resolve to a library header outside the declared faces."""
    faces, found = faces_of(src), []
    for inc in sorted(faces):
        if not os.path.exists(os.path.join(src, inc)):
            found.append(f"{FACES} declares {inc}, which is not under {src}")
    src = os.path.realpath(src)
    for top in dirs:
        name = os.path.basename(os.path.normpath(top))
        for folder, _, files in os.walk(top):
            for file in sorted(files):
                if file.endswith((".h", ".cc", ".cu")):
                    path = os.path.join(folder, file)
                    rel = name + "/" + os.path.relpath(path, top).replace(os.sep, "/")
                    found += [f"{rel} includes {inc}: not a face of the library (src/{FACES})"
                              for inc in internal_includes(path, src, faces)]
    return found


def internal_includes(path, src, faces):
    """The includes of `path` that name a header under `src` (realpath) not in `faces`."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    folder, bad = os.path.dirname(path), []
    for quoted, angled in ANY_INCLUDE.findall(text):
        inc = quoted or angled
        here = os.path.realpath(os.path.join(folder, inc))
        if quoted and os.path.exists(here) and not here.startswith(src + os.sep):
            continue  # its own header (a sibling)
        if quoted and os.path.exists(here):
            lib = here  # a relative path into src/
        else:
            lib = os.path.realpath(os.path.join(src, inc))
            if not os.path.exists(lib):
                continue  # rmacc.h, the lab's or tools/perf's headers, system headers
        if os.path.relpath(lib, src).replace(os.sep, "/") not in faces:
            bad.append(inc)
    return bad


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
        # The collective floor sits above the executor and below the communicator.
        for folder in ("coll", "comm"):
            os.makedirs(os.path.join(src, folder))
        open(os.path.join(src, "net", "y.h"), "w").write("")
        open(os.path.join(src, "coll", "c.h"), "w").write('#include "exec/x.h"\n')
        open(os.path.join(src, "comm", "m.h"), "w").write('#include "coll/c.h"\n')
        floor_down = [v for v in violations(src) if "KNOWN" not in v]
        open(os.path.join(src, "exec", "x.h"), "w").write('#include "coll/c.h"\n')
        floor_up = [v for v in violations(src) if "KNOWN" not in v]
    ok = not down and len(up) == 1 and up[0].startswith("net/y.h (net) includes exec/x.h")
    ok = ok and not floor_down and len(floor_up) == 1 and floor_up[0].startswith(
        "exec/x.h (exec) includes coll/c.h")
    print("self-test", "passed" if ok else
          f"FAILED: down={down} up={up} floor_down={floor_down} floor_up={floor_up}")
    return 0 if ok and faces_self_test() else 1


def faces_self_test():
    """The faces check must pass a face, its own header and rmacc.h in every folder it is given,
    and catch an internal whether quoted, angled or reached by a relative path."""
    import tempfile
    with tempfile.TemporaryDirectory() as root:
        src, lab, tools = (os.path.join(root, d) for d in ("src", "lab", "tools"))
        for folder in ("src/plan", "src/exec", "lab/sim", "tools"):
            os.makedirs(os.path.join(root, folder))
        open(os.path.join(src, "plan", "plan.h"), "w").write("")
        open(os.path.join(src, "exec", "x.h"), "w").write("")
        open(os.path.join(src, FACES), "w").write('#include "plan/plan.h"\n')
        open(os.path.join(lab, "sim", "own.h"), "w").write("")
        sim, tool = os.path.join(lab, "sim", "a.cc"), os.path.join(tools, "t.cc")
        open(sim, "w").write('#include "own.h"\n#include "plan/plan.h"\n#include "rmacc.h"\n'
                             '#include <string>\n')
        open(tool, "w").write('#include <plan/plan.h>\n')
        clean = outside_violations([lab, tools], src)
        open(sim, "a").write('#include "exec/x.h"\n#include "../../src/exec/x.h"\n')
        open(tool, "a").write('#include <exec/x.h>\n')
        caught = outside_violations([lab, tools], src)
    ok = (not clean and len(caught) == 3 and all("not a face" in v for v in caught)
          and sum(v.startswith("tools/t.cc") for v in caught) == 1)
    print("faces self-test", "passed" if ok else f"FAILED: clean={clean} caught={caught}")
    return ok


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if sys.argv[1:2] == ["--faces"] and len(sys.argv) >= 4:
        found = outside_violations(sys.argv[3:], sys.argv[2])
        for line in found:
            print(line)
        return 1 if found else 0
    here = os.path.dirname(os.path.abspath(__file__))
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "src")
    found = violations(src)
    for line in sorted(found):
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
