#!/usr/bin/env python3
"""One mixture-of-experts layer step with expert parallelism, its two all-to-alls through
rmacc and through torch.distributed in the same run: the outputs must be identical.

Router (top-k over E experts) -> permute tokens by expert -> exchange the routed counts ->
dispatch (all_to_all_single with the routed split sizes) -> group by local expert -> expert MLP
-> combine (the reverse all_to_all_single) -> unpermute, weighted by the router's gates.

The same step without a host synchronisation runs too (Layer.step_no_sync): the split sizes
stay on the device, rmacc's all_to_all_v reads them on the stream and returns the received
counts as a device tensor; nothing calls .tolist() or .item(). Its output matches the others
to rounding (its expert GEMMs run batched over tiles of a worst-case-sized buffer, so their
shapes differ; Layer.experts_tiled).

    torchrun --nproc-per-node 2 examples/moe_dispatch.py          # GPUs: NCCL vs rmacc
    python3 examples/moe_dispatch.py --nproc 4 --nodes 2          # CPU: gloo vs rmacc, ranks
                                                                  # spawned here, 2 emulated nodes
    torchrun --nproc-per-node 1 examples/moe_dispatch.py --decode # decode step in CUDA graphs

--decode: a decode-shaped step (128 tokens per rank, hidden 7168, bf16, top-8 of 16 experts by
default), the no-sync step captured in a CUDA graph and replayed, once with rmacc's all_to_all_v
and once with NCCL (torch.distributed), which under a graph can only move fixed sizes: every peer
gets a slot of tokens x top-k rows (the most one rank can send it), as in a graph-captured NCCL
MoE layer (PaddedAllToAll). It prints ms per step of both, from the same run; on CPUs both steps
run without graphs (gloo).
(PYTHONPATH=build/python when rmacc is not installed.)
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

import rmacc
import rmacc.distributed  # noqa: F401 - registers backend "rmacc" (--backend rmacc)
import rmacc.local


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--decode", action="store_true",
                   help="the decode-shaped step in CUDA graphs, rmacc against NCCL")
    p.add_argument("--tokens", type=int, help="tokens per rank (default 512, --decode 128)")
    p.add_argument("--hidden", type=int, help="default 256, --decode 7168")
    p.add_argument("--ffn", type=int, help="default 512, --decode 2048")
    p.add_argument("--experts", type=int, default=16, help="E, a multiple of the ranks")
    p.add_argument("--topk", type=int, help="default 2, --decode 8")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--nproc", type=int, default=4, help="ranks to spawn without torchrun")
    p.add_argument("--nodes", type=int, default=2, help="emulated nodes without torchrun")
    p.add_argument("--backend", choices=("communicator", "rmacc"), default="communicator",
                   help="rmacc's side: rmacc.Communicator's methods, or dist.all_to_all_single "
                        "on a backend=\"rmacc\" group (the layer then calls torch.distributed "
                        "only)")
    a = p.parse_args()
    defaults = dict(tokens=128, hidden=7168, ffn=2048, topk=8) if a.decode else \
        dict(tokens=512, hidden=256, ffn=512, topk=2)
    for k, v in defaults.items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    return a


class Layer:
    """Router and experts; every rank builds the same weights and keeps its own experts."""

    def __init__(self, a, rank, world, device, dtype):
        g = torch.Generator().manual_seed(1234)
        self.e_local = a.experts // world
        self.first = rank * self.e_local
        self.router = torch.randn(a.hidden, a.experts, generator=g).to(device, dtype)
        w1 = torch.randn(a.experts, a.hidden, a.ffn, generator=g) / a.hidden ** 0.5
        w2 = torch.randn(a.experts, a.ffn, a.hidden, generator=g) / a.ffn ** 0.5
        mine = slice(self.first, self.first + self.e_local)
        self.w1, self.w2 = w1[mine].to(device, dtype), w2[mine].to(device, dtype)
        self.a, self.world = a, world

    def route(self, x):
        """Top-k routing, then the (token, k) slots sorted by expert: (gates, order, permuted)."""
        gates, experts = torch.topk(F.softmax(x.float() @ self.router.float(), dim=-1), self.a.topk)
        flat = experts.reshape(-1)
        order = torch.argsort(flat, stable=True)
        return gates, flat, order, x[order // self.a.topk]

    def unpermute(self, x, gates, order, back):
        y = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
        y.index_add_(0, order // self.a.topk, back.float() * gates.reshape(-1)[order].unsqueeze(1))
        return y.to(x.dtype)

    def step(self, x, a2a):
        """x: (tokens, hidden). a2a(output, input, output_splits, input_splits)."""
        a, world, el = self.a, self.world, self.e_local
        gates, flat, order, permuted = self.route(x)
        per_expert = torch.bincount(flat, minlength=a.experts)
        # Routed counts: how many rows each source sends to each of my experts.
        recv_counts = torch.empty_like(per_expert)
        a2a(recv_counts, per_expert, None, None)
        send_splits = per_expert.view(world, el).sum(1).tolist()
        counts = recv_counts.view(world, el)
        recv_splits = counts.sum(1).tolist()
        received = torch.empty(sum(recv_splits), x.shape[1], dtype=x.dtype, device=x.device)
        a2a(received, permuted, recv_splits, send_splits)                    # dispatch
        # Rows arrive by source, then by expert within a source: group them by expert.
        expert_of_row = torch.repeat_interleave(
            torch.arange(el, device=x.device).repeat(world), counts.reshape(-1))
        by_expert = torch.argsort(expert_of_row, stable=True)
        grouped = received[by_expert]
        out = torch.empty_like(grouped)
        for e, rows in enumerate(torch.split(torch.arange(grouped.shape[0], device=x.device),
                                             counts.sum(0).tolist())):
            out[rows] = F.gelu(grouped[rows] @ self.w1[e]) @ self.w2[e]     # expert MLP
        expert_out = torch.empty_like(out)
        expert_out[by_expert] = out
        back = torch.empty_like(permuted)
        a2a(back, expert_out, send_splits, recv_splits)                     # combine
        return self.unpermute(x, gates, order, back)

    def step_no_sync(self, x, comm):
        """step() with the split sizes kept on the device: no host synchronisation."""
        a, world, el = self.a, self.world, self.e_local
        gates, flat, order, permuted = self.route(x)
        # bincount would synchronise (it sizes its output from the data); scatter_add does not.
        per_expert = torch.zeros(a.experts, dtype=torch.int64, device=x.device)
        per_expert.scatter_add_(0, flat, torch.ones_like(flat))
        recv_counts = torch.empty_like(per_expert)
        comm.all_to_all_single(recv_counts, per_expert)                     # equal splits
        # At most every rank's every slot lands here: the buffer's size is known on the host.
        capacity = world * a.tokens * a.topk
        received = torch.empty(capacity, x.shape[1], dtype=x.dtype, device=x.device)
        got = comm.all_to_all_v(received, permuted, per_expert.view(world, el).sum(1))
        # Rows arrive by source, then by expert: row p lies in segment s = (source, expert)
        # where the running count first exceeds p; segments past the last are unused rows.
        ends = torch.cumsum(recv_counts, 0)
        segment = torch.searchsorted(ends, torch.arange(capacity, device=x.device), right=True)
        out = self.experts_tiled(received, segment, recv_counts)
        back = torch.empty_like(permuted)
        comm.all_to_all_v(back, out, got)                                   # combine
        return self.unpermute(x, gates, order, back)


    def tiles(self, capacity):
        """experts_tiled's tile rows and tile count for a buffer of `capacity` rows."""
        tile = max(8, capacity // (2 * self.e_local))
        return tile, capacity // tile + self.e_local  # sum of ceil(rows_e / tile) stays below

    def expert_rows(self):
        """Rows the expert GEMMs of one step cover per rank: step() those received (the
        average, tokens x top-k), step_no_sync() every tile of its worst-case buffer."""
        tile, tiles = self.tiles(self.world * self.a.tokens * self.a.topk)
        return self.a.tokens * self.a.topk, tile * tiles

    def experts_tiled(self, rows, segment, recv_counts):
        """The expert MLP over `rows` when only the device knows how many belong to each
        expert (segment: (source, expert) of each row, world * e_local for unused rows).
        Each expert's rows, padded to whole tiles, go into tiles of one expert each, and one
        batched GEMM runs every tile with its expert's weights: the work of capacity + e_local
        tiles of rows, where a dense pass per expert (every row through every expert's MLP, then
        keep the expert's rows) did e_local times the capacity: 15x this step's time on a CPU."""
        el, cap, hidden = self.e_local, rows.shape[0], rows.shape[1]
        dev = rows.device
        tile, tiles = self.tiles(cap)
        slots = tiles * tile           # slot `slots` is the trash row of unused rows
        expert = torch.where(segment < self.world * el, segment % el, el)
        per_expert = recv_counts.view(self.world, el).sum(0)
        padded = (per_expert + tile - 1) // tile * tile
        order = torch.argsort(expert, stable=True)          # valid rows by expert, unused last
        ex = expert[order]
        e = ex.clamp(max=el - 1)
        first = torch.cumsum(per_expert, 0) - per_expert     # sorted position of each expert's first
        dest = torch.cumsum(padded, 0) - padded              # its first slot
        slot = torch.where(ex < el, dest[e] + torch.arange(cap, device=dev) - first[e], slots)
        x = torch.zeros(slots + 1, hidden, dtype=rows.dtype, device=dev)
        x[slot] = rows[order]
        tile_expert = torch.searchsorted(torch.cumsum(padded, 0),
                                         torch.arange(tiles, device=dev) * tile, right=True)
        tile_expert = tile_expert.clamp(max=el - 1)          # tiles past the last: zeros, unused
        h = F.gelu(torch.bmm(x[:slots].view(tiles, tile, hidden), self.w1[tile_expert]))
        y = torch.cat([torch.bmm(h, self.w2[tile_expert]).view(slots, hidden),
                       torch.zeros(1, hidden, dtype=rows.dtype, device=dev)])
        out = torch.empty_like(rows)
        out[order] = y[slot]
        return out

class PaddedAllToAll:
    """comm.all_to_all_single (equal splits) and comm.all_to_all_v's semantics over
    torch.distributed's all_to_all_single with sizes fixed on the host, as a CUDA graph needs
    them: every peer gets a slot of `capacity` rows, the send side scatters each row into its
    destination's slot and the receive side packs the slots' valid rows in source order, with
    the counts exchanged beside them. Device operations only, no host synchronisation."""

    def __init__(self, world, capacity):
        self.world, self.capacity = world, capacity

    def all_to_all_single(self, output, input):
        dist.all_to_all_single(output, input)

    def all_to_all_v(self, output, input, input_splits):
        n, cap, dev = self.world, self.capacity, input.device
        splits = input_splits.to(torch.int64)
        got = torch.empty_like(splits)
        dist.all_to_all_single(got, splits)
        # Row p goes to rank j, the segment of the running counts it falls in, at slot row
        # p - start_j; rows past the last segment (unused) go to a trash row at the end.
        send = torch.zeros((n * cap + 1,) + input.shape[1:], dtype=input.dtype, device=dev)
        send[_slots(splits, input.shape[0], cap, n * cap)] = input
        slots = torch.empty((n * cap,) + input.shape[1:], dtype=input.dtype, device=dev)
        dist.all_to_all_single(slots, send[:n * cap])
        # Output row q comes from the slot of the source its segment names; rows past the
        # received ones keep what they held.
        src = _slots(got, output.shape[0], cap, n * cap)
        valid = (src < n * cap).view((-1,) + (1,) * (output.dim() - 1))
        output.copy_(torch.where(valid, slots[src.clamp(max=n * cap - 1)], output))
        return got


def _slots(counts, rows, cap, trash):
    """Padded slot of each of `rows` packed rows whose blocks hold `counts` rows; `trash` for
    rows past the last block."""
    p = torch.arange(rows, device=counts.device)
    ends = torch.cumsum(counts, 0)
    seg = torch.searchsorted(ends, p, right=True)
    s = seg.clamp(max=counts.shape[0] - 1)
    return torch.where(seg < counts.shape[0], s * cap + p - (ends - counts)[s], trash)


def exchange_only(layer, x, lib):
    """The step's communication alone, as a function of `lib` (comm or PaddedAllToAll): the
    count exchange, the dispatch of x's routed rows and the combine that sends each received
    row back (so the result must equal the routed rows)."""
    a, world, el = layer.a, layer.world, layer.e_local
    _, flat, _, permuted = layer.route(x)
    per_expert = torch.zeros(a.experts, dtype=torch.int64, device=x.device)
    per_expert.scatter_add_(0, flat, torch.ones_like(flat))
    send_splits = per_expert.view(world, el).sum(1)
    recv_counts = torch.empty_like(per_expert)
    received = torch.empty(world * a.tokens * a.topk, x.shape[1], dtype=x.dtype, device=x.device)
    back = torch.empty_like(permuted)

    def step():
        lib.all_to_all_single(recv_counts, per_expert)
        got = lib.all_to_all_v(received, permuted, send_splits)
        lib.all_to_all_v(back, received, got)
        return back
    return step, permuted


def replayed(step, iters, device):
    """(output, seconds per step) of step captured in a CUDA graph and replayed, each replay
    synchronised as a decode step is before sampling (and rmacc's replays of device-count calls
    may run at most 8 ahead); on CPUs step itself, eagerly."""
    if device.type != "cuda":
        return timed(step, iters, device)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the capture, as torch.cuda.graph asks
        step()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step()

    def run():
        graph.replay()
        return out
    out, t = timed(run, iters, device, sync_each=True)
    return out.clone(), t


def decode(a, layer, x, comm, world, device):
    """Layer.step_no_sync and its communication alone (exchange_only) with rmacc and with NCCL
    (PaddedAllToAll), each captured in a CUDA graph and replayed (eager on CPUs):
    {(what, library): (seconds per step, output, expected output or None)}."""
    libs = (("rmacc", comm), ("torch", PaddedAllToAll(world, a.tokens * a.topk)))
    result = {}
    for name, lib in libs:
        out, t = replayed(lambda lib=lib: layer.step_no_sync(x, lib), a.iters, device)
        result["step", name] = (t, out, None)
        step, want = exchange_only(layer, x, lib)
        out, t = replayed(step, a.iters, device)
        result["exchange", name] = (t, out, want)
    return result


def timed(fn, iters, device, sync_each=False):
    fn()  # warm-up (plans, mappings, NCCL channels)
    if device.type == "cuda":
        torch.cuda.synchronize()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        out = fn()
        if sync_each and device.type == "cuda":
            torch.cuda.synchronize()
    if device.type == "cuda":
        torch.cuda.synchronize()
    t = torch.tensor([(time.perf_counter() - t0) / iters], device=device)  # NCCL: on the GPU
    dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank's step time
    return out, t.item()


def decode_report(a, layer, x, comm, world, rank, device, dtype):
    r = decode(a, layer, x, comm, world, device)
    (t_rmacc, ours, _), (t_torch, theirs, _) = r["step", "rmacc"], r["step", "torch"]
    same = torch.equal(ours, theirs)
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-4
    close = torch.allclose(ours.float(), theirs.float(), rtol=tol, atol=tol)
    exact = all(torch.equal(r["exchange", k][1], r["exchange", k][2]) for k in ("rmacc", "torch"))
    ok = torch.tensor([int(close and exact)], device=device)
    dist.all_reduce(ok, op=dist.ReduceOp.MIN)
    if rank == 0:
        print("moe decode step: %d ranks on %d node(s), %s %s, %d tokens/rank, hidden %d, ffn "
              "%d, E=%d top-%d, %s" % (world, comm.num_nodes, device.type, str(dtype)[6:],
                                       a.tokens, a.hidden, a.ffn, a.experts, a.topk,
                                       "CUDA graph replays" if device.type == "cuda"
                                       else "eager (no CUDA)"))
        slots = "all_to_all_single into slots of %d rows per peer" % (a.tokens * a.topk)
        print("  %-18s %9s %14s" % ("ms/step", "step", "exchange only"))
        print("  %-18s %9.3f %14.3f  (all_to_all_v, device splits)"
              % ("rmacc", t_rmacc * 1e3, r["exchange", "rmacc"][0] * 1e3))
        print("  %-18s %9.3f %14.3f  (%s, %s)"
              % ("torch.distributed", t_torch * 1e3, r["exchange", "torch"][0] * 1e3,
                 dist.get_backend(), slots))
        print("  step outputs identical: %s; within %g: %s; exchange returned every row: %s"
              % (same, tol, close, exact))
    if not ok.item():
        raise SystemExit("rank %d: rmacc's and torch.distributed's decode outputs differ" % rank)


def main(a):
    cuda = torch.cuda.is_available() and os.environ.get("MOE_DEVICE", "cuda") == "cuda"
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    dtype = torch.bfloat16 if cuda else torch.float32
    if a.experts % world:
        raise SystemExit("--experts %d must be a multiple of the %d ranks" % (a.experts, world))
    layer = Layer(a, rank, world, device, dtype)
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(a.tokens, a.hidden, generator=g).to(device, dtype)
    if a.backend == "rmacc":  # the layer's calls are torch.distributed's, on an rmacc group
        group = dist.new_group(list(range(world)), backend="rmacc")

        def ours_a2a(o, i, os_, is_):
            dist.all_to_all_single(o, i, os_, is_, group=group)

        comm = rmacc.distributed.communicator(group)  # for all_to_all_v (no-sync step)
    else:
        comm = rmacc.Communicator(device=device)
        ours_a2a = comm.all_to_all_single
    if a.decode:
        with comm:
            decode_report(a, layer, x, comm, world, rank, device, dtype)
        dist.barrier()
        dist.destroy_process_group()
        return
    with comm:
        ours, t_rmacc = timed(lambda: layer.step(x, ours_a2a), a.iters, device)
        theirs, t_torch = timed(lambda: layer.step(
            x, lambda o, i, os_, is_: dist.all_to_all_single(o, i, os_, is_)), a.iters, device)
        no_sync, t_no_sync = timed(lambda: layer.step_no_sync(x, comm), a.iters, device)
        same = torch.equal(ours, theirs)
        tol = 2e-2 if dtype == torch.bfloat16 else 1e-4
        close = torch.allclose(no_sync.float(), theirs.float(), rtol=tol, atol=tol)
        ok = torch.tensor([int(same and close)], device=device)
        dist.all_reduce(ok, op=dist.ReduceOp.MIN)
        if rank == 0:
            print("moe step: %d ranks on %d node(s), %s %s, %d tokens/rank, hidden %d, "
                  "E=%d top-%d" % (world, comm.num_nodes, device.type, str(dtype)[6:], a.tokens,
                                   a.hidden, a.experts, a.topk))
            print("  rmacc            %8.3f ms/step (%s)" % (
                t_rmacc * 1e3, "dist.all_to_all_single, backend=rmacc" if a.backend == "rmacc"
                else "rmacc.Communicator"))
            print("  rmacc, no sync   %8.3f ms/step (device splits, all_to_all_v)"
                  % (t_no_sync * 1e3))
            print("  torch.distributed %7.3f ms/step (%s)" % (t_torch * 1e3,
                                                            dist.get_backend()))
            print("  outputs identical (rmacc, torch): %s; no-sync output within %g: %s"
                  % (same, tol, close))
            sync_rows, no_sync_rows = layer.expert_rows()
            print("  expert GEMM rows per rank: %d on average with host splits, %d without "
                  "(%.1fx):\n    without host splits the buffer is sized for the worst case "
                  "(every rank's every slot)\n    and the tiled GEMMs cover it; on CPUs that "
                  "work, not communication, is the no-sync step's extra time"
                  % (sync_rows, no_sync_rows, no_sync_rows / sync_rows))
    dist.barrier()
    dist.destroy_process_group()
    if not ok.item():
        raise SystemExit("rank %d: rmacc and torch.distributed outputs differ" % rank)


if __name__ == "__main__":
    args = parse()
    rmacc.local.run_main(main, args, args.nproc, args.nodes, {"MOE_DEVICE": "cpu"})
