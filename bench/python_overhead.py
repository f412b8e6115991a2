#!/usr/bin/env python3
"""What the Python layer adds to a call: the time of each Python call minus the time of the C
call with the same arguments, built once beforehand (what a C caller passes), issue 49 item 5.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_overhead.py     # one rank, CPU tensors
    PYTHONPATH=build/python python3 bench/python_overhead.py --device cuda  # one rank on a GPU
    torchrun --nproc-per-node 2 bench/python_overhead.py --device cuda

Cases: comm.all_to_all_single with equal splits (None) and with list splits, comm.all_to_all_v
(splits in a tensor), dist.all_to_all_single on a backend="rmacc" group; each against
rmaccAlltoAllv / rmaccAlltoAllvDynamic called through ctypes. On CPU tensors both sides run the
whole (host backend) call, on CUDA both only enqueue it. Python and C alternate in rounds; the
figures are medians over rounds of each round's median call (the slowest rank's).

The null C layer (--c-layer null) swaps both C functions for one that returns at once (compiled
here with cc, declared with the same argument types, so ctypes converts the same arguments):
the difference is then the Python layer's own work, free of the C call's noise, which on a
loaded CPU machine is many times the few microseconds measured (the host backend's call at one
rank takes 40-170 us on a busy 2-core VM). --c-layer real keeps the library. On CUDA the graph
section replays torch.cuda.graph captures of the Python call and of the C call: replay time
per call, which shows what the Python call put into the graph beside rmacc's own nodes.
"""
import argparse
import ctypes
import os
import statistics
import subprocess
import tempfile
import time

import torch
import torch.distributed as dist

import rmacc
import rmacc.distributed
import rmacc.local
from rmacc import _lib
from rmacc._args import DTYPES, counts_and_displs


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--rows", type=int, default=8, help="rows per peer")
    p.add_argument("--row", type=int, default=64, help="elements per row (float32)")
    p.add_argument("--calls", type=int, default=400, help="calls per round and side")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--c-layer", choices=("real", "null", "both"), default="both")
    return p.parse_args()


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def per_call(fn, calls, device):
    """Median seconds of one call of fn over `calls` calls, each timed on its own (a median
    leaves out the calls a busy machine preempted); on CUDA a synchronisation every 32 calls,
    outside the timed part, keeps the stream's queue short."""
    times = []
    clock = time.perf_counter
    for i in range(calls):
        t0 = clock()
        fn()
        times.append(clock() - t0)
        if device.type == "cuda" and i % 32 == 31:
            torch.cuda.synchronize()
    sync(device)
    return statistics.median(times)


def compare(py, c, a, device):
    """Medians over rounds (Python and C alternate, the first side alternating too) of the
    median call, in us, the slowest rank's: (python, c, median of the differences)."""
    for fn in (py, c):  # warm-up: plans, caches
        for _ in range(20):
            fn()
    sync(device)
    tp, tc = [], []
    for r in range(a.rounds):
        order = ((py, tp), (c, tc)) if r % 2 == 0 else ((c, tc), (py, tp))
        for fn, out in order:
            out.append(per_call(fn, a.calls, device))
    diff = [x - y for x, y in zip(tp, tc)]
    med = [statistics.median(v) * 1e6 for v in (tp, tc, diff)]
    t = torch.tensor(med, dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


def null_function():
    """A C function that returns 0 at once, compiled into a temporary library; None without
    a C compiler. Extra arguments are harmless: the caller cleans them up (every C ABI here)."""
    d = tempfile.mkdtemp(prefix="rmacc-null-")
    src, so = os.path.join(d, "null.c"), os.path.join(d, "null.so")
    with open(src, "w") as f:
        f.write("int rmacc_null(void) { return 0; }\n")
    try:
        subprocess.run([os.environ.get("CC", "cc"), "-O2", "-shared", "-fPIC", src, "-o", so],
                       check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return ctypes.CDLL(so).rmacc_null


def c_layer(comm, null):
    """Points the package's and the benchmark's C calls at the library's AlltoAllv functions,
    or (null given) at `null` with the same prototypes."""
    for name in ("rmaccAlltoAllv", "rmaccAlltoAllvDynamic"):
        real = getattr(_lib.lib, "_real_" + name, None) or getattr(_lib.lib, name)
        setattr(_lib.lib, "_real_" + name, real)
        fn = real
        if null is not None:
            fn = ctypes.CFUNCTYPE(real.restype, *real.argtypes)(ctypes.cast(null, ctypes.c_void_p).value)
        setattr(_lib.lib, name, fn)
    # The communicator binds them once (python/rmacc/communicator.py).
    if hasattr(comm, "_alltoallv"):
        comm._alltoallv, comm._dynamic = _lib.lib.rmaccAlltoAllv, _lib.lib.rmaccAlltoAllvDynamic


def replay_per_call(graph, calls, device):
    """Best of 5 runs of `calls` replays, synchronised every 4 (replays of device-count calls
    may run at most 8 ahead of the device): us per replay, both sides alike."""
    graph.replay()
    sync(device)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for i in range(calls):
            graph.replay()
            if i % 4 == 3:
                torch.cuda.synchronize()
        sync(device)
        best = min(best, (time.perf_counter() - t0) / calls)
    return best * 1e6


def capture(fn):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the capture, as torch.cuda.graph asks
        fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    torch.cuda.synchronize()
    return g


def main(a):
    device = torch.device(a.device)
    if device.type == "cuda":
        torch.cuda.set_device(int(__import__("os").environ.get("LOCAL_RANK", 0))
                              % torch.cuda.device_count())
        device = torch.device("cuda", torch.cuda.current_device())
    rmacc.local.init_job("nccl" if device.type == "cuda" else "gloo")
    n = dist.get_world_size()
    group = dist.new_group(list(range(n)), backend="rmacc")
    comm = rmacc.distributed.communicator(group)  # the group's, so the backend case shares it
    lib, handle, code = _lib.lib, comm._handle, DTYPES[torch.float32]
    rows = a.rows * n
    inp = torch.arange(rows * a.row, dtype=torch.float32, device=device).view(rows, a.row)
    out = torch.zeros_like(inp)
    splits = [a.rows] * n
    split_t = torch.tensor(splits, dtype=torch.int64, device=device)
    # The C side's arguments, made once: counts in elements, displacements, raw pointers.
    sc, sd = counts_and_displs(splits, a.row, n)
    ip, op = inp.data_ptr(), out.data_ptr()
    dyn = torch.zeros(4, n, dtype=torch.int64, device=device)
    dyn[0] = split_t * a.row
    dyn[1] = torch.cumsum(dyn[0], 0) - dyn[0]
    dp = [dyn[i].data_ptr() for i in range(4)]
    cap = out.numel()

    def stream():
        return torch.cuda.current_stream().cuda_stream if device.type == "cuda" else None

    s = stream()

    def c_a2a():
        if lib.rmaccAlltoAllv(ip, sc, sd, op, sc, sd, code, handle, s):
            raise RuntimeError("rmaccAlltoAllv failed")

    def c_a2av():
        if lib.rmaccAlltoAllvDynamic(ip, dp[0], dp[1], op, cap, dp[2], dp[3], code, handle, s):
            raise RuntimeError("rmaccAlltoAllvDynamic failed")

    cases = [
        ("comm.all_to_all_single, splits None", lambda: comm.all_to_all_single(out, inp), c_a2a),
        ("comm.all_to_all_single, list splits",
         lambda: comm.all_to_all_single(out, inp, splits, splits), c_a2a),
        ("comm.all_to_all_v, tensor splits", lambda: comm.all_to_all_v(out, inp, split_t),
         c_a2av),
        ("dist.all_to_all_single, rmacc group",
         lambda: dist.all_to_all_single(out, inp, group=group), c_a2a),
    ]
    layers = ["real", "null"] if a.c_layer == "both" else [a.c_layer]
    null = null_function() if "null" in layers else None
    if null is None and "null" in layers:
        layers.remove("null")
        print("# no C compiler (cc): the null C layer is left out")
    if dist.get_rank() == 0:
        print("# python_overhead: %d rank(s), %s tensors, %d rows of %d float32 per peer, "
              "torch %s; us per call, medians of %d rounds of %d calls (slowest rank)"
              % (n, device.type, a.rows, a.row, torch.__version__, a.rounds, a.calls))
        print("%-38s %-7s %10s %10s %10s" % ("call", "C layer", "python", "C", "overhead"))
    for layer in layers:
        c_layer(comm, null if layer == "null" else None)
        for name, py, c in cases:
            tp, tc, d = compare(py, c, a, device)
            if dist.get_rank() == 0:
                print("%-38s %-7s %10.2f %10.2f %10.2f" % (name, layer, tp, tc, d))
        if layer == "real" and n == 1 and not torch.equal(out, inp):
            raise SystemExit("output differs from the input (one rank: its own block)")
    c_layer(comm, None)
    if device.type == "cuda":
        graphs = [("all_to_all_single", lambda: comm.all_to_all_single(out, inp), c_a2a),
                  ("all_to_all_v", lambda: comm.all_to_all_v(out, inp, split_t), c_a2av)]
        if dist.get_rank() == 0:
            print("# CUDA graph replay, us per replay (best of 5 runs of %d, synchronised every 4): "
                  "Python capture, C capture, difference" % a.calls)
        for name, py, c in graphs:
            g_py = capture(py)

            def c_on_capture_stream(c=c):
                nonlocal s
                s = stream()
                c()
            g_c = capture(c_on_capture_stream)
            t = torch.tensor([replay_per_call(g_py, a.calls, device),
                              replay_per_call(g_c, a.calls, device)], device=device)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            if dist.get_rank() == 0:
                print("%-38s %10.2f %10.2f %10.2f" % ("graph: " + name, *t.tolist(),
                                                      t[0].item() - t[1].item()))
            del g_py, g_c
            s = stream()
    comm.synchronize()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(parse())
