#!/usr/bin/env python3
"""comm.all_to_all_single (rmacc) against dist.all_to_all_single (NCCL on GPUs, gloo on CPUs)
in the same run, per size (bytes each rank sends) and split pattern; then the cost the Python
layer adds per call over the raw C call.

    torchrun --nproc-per-node 2 bench/torch_a2a.py                     # GPUs, 64 KiB..1 GiB
    python3 bench/torch_a2a.py --nproc 4 --nodes 2 -e 16M              # CPU ranks spawned here
(PYTHONPATH=build/python when rmacc is not installed.)

Columns as nccl-tests: time is the slowest rank's mean per call, algbw = bytes sent per rank /
time, busbw = algbw * (n-1)/n; ratio = torch time / rmacc time (rmacc busbw / torch busbw). Every configuration is
checked once: rmacc's output must equal torch's.
"""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist

import rmacc
import rmacc.local
from rmacc import _lib
from rmacc._args import counts_and_displs, DTYPES


def size_arg(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].upper() in units \
        else int(text)


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-b", "--min-bytes", type=size_arg, default=64 << 10)
    p.add_argument("-e", "--max-bytes", type=size_arg, default=None,
                   help="default 1G on GPUs, 16M on CPUs")
    p.add_argument("-f", "--factor", type=int, default=4)
    p.add_argument("-n", "--iters", type=int, default=20)
    p.add_argument("-w", "--warmup", type=int, default=5)
    p.add_argument("--patterns", default="uniform,zipf")
    p.add_argument("--zipf", type=float, default=1.1, help="Zipf exponent over destinations")
    p.add_argument("--rmacc-mem", action="store_true",
                   help="buffers from rmacc.empty (zero-copy) instead of torch's allocator")
    p.add_argument("--overhead-iters", type=int, default=2000)
    p.add_argument("--nproc", type=int, default=4, help="ranks to spawn without torchrun")
    p.add_argument("--nodes", type=int, default=2, help="emulated nodes without torchrun")
    return p.parse_args()


def splits_for(pattern, rows, n, rank, s):
    """Rows this rank sends to each destination: equal, or Zipf over destinations ranked
    from a rank-dependent start (so every rank has another hot destination)."""
    if pattern == "uniform":
        w = [1.0] * n
    else:
        w = [0.0] * n
        for k in range(n):
            w[(rank + k) % n] = 1.0 / (k + 1) ** s
    total = sum(w)
    out = [int(rows * x / total) for x in w]
    out[rank] += rows - sum(out)
    return out


def exchange(splits, device):
    t = torch.tensor(splits, dtype=torch.int64, device=device)
    r = torch.empty_like(t)
    dist.all_to_all_single(r, t)
    return r.tolist()


def bench_one(comm, a, device, dtype, nbytes, pattern):
    n, esize = comm.size, torch.empty((), dtype=dtype).element_size()
    rows = max(n, nbytes // esize // 64)  # rows of 64 elements
    isplits = splits_for(pattern, rows, n, comm.rank, a.zipf)
    osplits = exchange(isplits, device)
    make = (lambda shape: rmacc.empty(shape, dtype=dtype, comm=comm)) if a.rmacc_mem else \
        (lambda shape: torch.empty(shape, dtype=dtype, device=device))
    inp = make((rows, 64))
    inp.copy_(torch.randn(rows, 64).to(dtype))
    out_r, out_t = make((sum(osplits), 64)), torch.empty(sum(osplits), 64, dtype=dtype,
                                                         device=device)
    calls = {"rmacc": lambda: comm.all_to_all_single(out_r, inp, osplits, isplits),
             "torch": lambda: dist.all_to_all_single(out_t, inp, osplits, isplits)}
    times = {}
    for name in ("rmacc", "torch", "rmacc", "torch"):  # interleaved, the second pass counts
        fn = calls[name]
        for _ in range(a.warmup):
            fn()
        sync(device)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(a.iters):
            fn()
        sync(device)
        t = torch.tensor([(time.perf_counter() - t0) / a.iters], device=device)  # NCCL: on the GPU
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        times[name] = t.item()
    ok = torch.tensor([int(torch.equal(out_r, out_t))], device=device)
    dist.all_reduce(ok, op=dist.ReduceOp.MIN)
    return rows * 64 * esize, times, bool(ok.item())


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def overhead(comm, a, device):
    """What the Python layer adds to the C call, one row per peer:
    - the argument work alone (comm._a2a_args: checks, split sizes to counts), timed on its
      own, which is the direct measure;
    - comm.all_to_all_single against the raw ctypes call of rmaccAlltoAllv with prebuilt
      arguments, interleaved (on CUDA both only enqueue; on the host backend both include the
      whole transfer, so their difference is noisy);
    - the floor of any ctypes call (rmaccTypeSize)."""
    n = comm.size
    inp = torch.zeros(n, 1, device=device)
    out = torch.zeros(n, 1, device=device)
    splits = [1] * n
    sc, sd = counts_and_displs(splits, 1, n)
    rc, rd = counts_and_displs(splits, 1, n)
    code, handle, lib = DTYPES[torch.float32], comm._handle, _lib.lib
    stream = comm._stream()
    ip, op = inp.data_ptr(), out.data_ptr()
    wrapped, raw = [], []
    for i in range(a.overhead_iters):
        t0 = time.perf_counter()
        comm.all_to_all_single(out, inp, splits, splits)
        t1 = time.perf_counter()
        if lib.rmaccAlltoAllv(ip, sc, sd, op, rc, rd, code, handle, stream) != 0:
            raise RuntimeError("raw rmaccAlltoAllv failed")
        t2 = time.perf_counter()
        wrapped.append(t1 - t0)
        raw.append(t2 - t1)
        if device.type == "cuda" and i % 64 == 63:
            torch.cuda.synchronize()  # keep the stream's queue short
    sync(device)
    floor, prep = [], []
    for _ in range(a.overhead_iters):
        t0 = time.perf_counter()
        lib.rmaccTypeSize(code)
        t1 = time.perf_counter()
        comm._a2a_args(out, inp, splits, splits)
        t2 = time.perf_counter()
        floor.append(t1 - t0)
        prep.append(t2 - t1)
    med = [statistics.median(x) * 1e6 for x in (wrapped, raw, floor, prep)]
    t = torch.tensor(med, device=device)  # NCCL reduces device tensors only
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


def main(a):
    cuda = torch.cuda.is_available() and os.environ.get("BENCH_DEVICE", "cuda") == "cuda"
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())
    dist.init_process_group("nccl" if cuda else "gloo")
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    dtype = torch.bfloat16 if cuda else torch.float32
    max_bytes = a.max_bytes or ((1 << 30) if cuda else (16 << 20))
    with rmacc.Communicator(device=device) as comm:
        n = comm.size
        if comm.rank == 0:
            print("# torch_a2a: %d ranks, %d node(s), %s, %s, torch %s backend, %s buffers" % (
                n, comm.num_nodes, device.type, str(dtype)[6:], dist.get_backend(),
                "rmacc.empty" if a.rmacc_mem else "torch"))
            print("# %-7s %12s %11s %9s %9s %11s %9s %9s %6s %5s" % (
                "pattern", "bytes/rank", "rmacc us", "algbw", "busbw", "torch us", "algbw",
                "busbw", "ratio", "ok"))
        for pattern in a.patterns.split(","):
            nbytes = a.min_bytes
            while nbytes <= max_bytes:
                size, t, ok = bench_one(comm, a, device, dtype, nbytes, pattern)
                if comm.rank == 0:
                    bw = {k: size / v / 1e9 for k, v in t.items()}
                    bus = {k: v * (n - 1) / n for k, v in bw.items()}
                    print("  %-7s %12d %11.1f %9.2f %9.2f %11.1f %9.2f %9.2f %6.2f %5s" % (
                        pattern, size, t["rmacc"] * 1e6, bw["rmacc"], bus["rmacc"],
                        t["torch"] * 1e6, bw["torch"], bus["torch"],
                        t["torch"] / t["rmacc"], "yes" if ok else "NO"))  # 1 rank: bus 0
                if not ok:
                    raise SystemExit("rmacc's output differs from torch's")
                nbytes *= a.factor
        wrapped, raw, floor, prep = overhead(comm, a, device)
        if comm.rank == 0:
            print("# Python layer per call, medians of %d (slowest rank): argument work %.2f us "
                  "(what it adds to the C call); end to end comm.all_to_all_single %.2f us vs "
                  "raw ctypes rmaccAlltoAllv %.2f us (difference %.2f us); a trivial ctypes "
                  "call %.2f us" % (a.overhead_iters, prep, wrapped, raw, wrapped - raw, floor))
    dist.destroy_process_group()


if __name__ == "__main__":
    args = parse()
    rmacc.local.run_main(main, args, args.nproc, args.nodes, {"BENCH_DEVICE": "cpu"})
