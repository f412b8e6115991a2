#!/usr/bin/env python3
"""The GPU peer figures measured in the same run as rmacc-perf (bench/gpu.sh):

- copy-engine ceiling: cudaMemcpy peer bandwidth between GPU 0 and GPU 1 (or a device-to-
  device copy on one GPU), one way;
- NCCL: torch.distributed.all_to_all_single over the same per-rank sizes, one process per GPU,
  printed as an nccl-tests style table (busbw = algbw * (n-1)/n).

NCCL needs one GPU per rank, so the NCCL table needs at least 2 GPUs.
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1].upper() in mult else int(s)


def sizes(lo, hi, factor):
    s = lo
    while s <= hi:
        yield s
        s *= factor


def copy_ceiling(lo, hi, factor, iters):
    n = torch.cuda.device_count()
    dst_dev = 1 if n > 1 else 0
    print(f"# copy-engine ceiling: cuda:0 -> cuda:{dst_dev} (one way)")
    print(f"# {'size':>12} {'time(us)':>10} {'GB/s':>8}")
    for size in sizes(lo, hi, factor):
        a = torch.empty(size, dtype=torch.uint8, device="cuda:0")
        b = torch.empty(size, dtype=torch.uint8, device=f"cuda:{dst_dev}")
        for _ in range(3):
            b.copy_(a, non_blocking=True)
        torch.cuda.synchronize(0)
        torch.cuda.synchronize(dst_dev)
        t0 = time.perf_counter()
        for _ in range(iters):
            b.copy_(a, non_blocking=True)
        torch.cuda.synchronize(0)
        torch.cuda.synchronize(dst_dev)
        t = (time.perf_counter() - t0) / iters
        print(f"  {size:>12} {t * 1e6:>10.2f} {size / t / 1e9:>8.2f}")
        del a, b


def nccl_worker(rank, world, lo, hi, factor, iters, warmup, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    if rank == 0:
        print(f"# NCCL {torch.cuda.nccl.version()} all_to_all_single, {world} ranks")
        print(f"# {'size':>12} {'count':>12} {'type':>6} {'time(us)':>10} {'algbw':>8} {'busbw':>8}")
    for size in sizes(lo, hi, factor):
        count = size // 4
        inp = torch.randn(count, device="cuda")
        out = torch.empty_like(inp)
        for _ in range(warmup):
            dist.all_to_all_single(out, inp)
        torch.cuda.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_to_all_single(out, inp)
        torch.cuda.synchronize()
        t = torch.tensor([(time.perf_counter() - t0) / iters], device="cuda")
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        t = t.item()
        algbw = size / t / 1e9
        if rank == 0:
            print(f"  {size:>12} {count:>12} {'float':>6} {t * 1e6:>10.2f} {algbw:>8.2f} {algbw * (world - 1) / world:>8.2f}")
        del inp, out
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("-b", default="1K")
    p.add_argument("-e", default="1G")
    p.add_argument("-f", type=int, default=4)
    p.add_argument("-n", type=int, default=20)
    p.add_argument("-w", type=int, default=5)
    a = p.parse_args()
    lo, hi = parse_size(a.b), parse_size(a.e)
    copy_ceiling(lo, hi, a.f, a.n)
    world = torch.cuda.device_count()
    if world < 2:
        print("# NCCL table skipped: NCCL needs one GPU per rank and this machine has", world)
        return
    mp.spawn(nccl_worker, args=(world, lo, hi, a.f, a.n, a.w, 29500 + os.getpid() % 1000), nprocs=world)


if __name__ == "__main__":
    sys.exit(main())
