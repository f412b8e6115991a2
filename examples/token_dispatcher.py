#!/usr/bin/env python3
"""A Megatron-style MoE token dispatcher written only against torch.distributed, run on two
process groups of the same ranks in one run: the job's own backend (NCCL on GPUs, gloo on
CPUs) and backend="rmacc" (after `import rmacc.distributed`). The dispatcher's code is the
same for both; only the group differs. Prints the time per step of each and checks that
their outputs are identical.

Step: route (top-k) -> permute tokens by expert -> count exchange (all_to_all_single of the
per-expert counts) -> dispatch (all_to_all_single with the splits those counts give) ->
experts (an MLP each, on the rows grouped by expert) -> combine (the reverse all_to_all_single)
-> unpermute, weighted by the gates.

    torchrun --nproc-per-node 8 examples/token_dispatcher.py          # GPUs: nccl vs rmacc
    python3 examples/token_dispatcher.py --nproc 4 --nodes 2          # CPU: gloo vs rmacc,
                                                                      # ranks spawned here
(PYTHONPATH=build/python when rmacc is not installed.)
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

import rmacc.distributed  # noqa: F401 - registers backend "rmacc"
import rmacc.local


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tokens", type=int, default=1024, help="tokens per rank")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--ffn", type=int, default=512)
    p.add_argument("--experts", type=int, default=16, help="a multiple of the ranks")
    p.add_argument("--topk", type=int, default=2)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--nproc", type=int, default=4, help="ranks to spawn without torchrun")
    p.add_argument("--nodes", type=int, default=2, help="emulated nodes without torchrun")
    return p.parse_args()


class TokenDispatcher:
    """Expert parallelism over `group`: every rank holds experts/world experts."""

    def __init__(self, a, group, device, dtype):
        self.group, self.a = group, a
        self.world, rank = dist.get_world_size(group), dist.get_rank(group)
        self.e_local = a.experts // self.world
        g = torch.Generator().manual_seed(1234)  # the same weights on every rank
        self.router = torch.randn(a.hidden, a.experts, generator=g).to(device, dtype)
        w1 = torch.randn(a.experts, a.hidden, a.ffn, generator=g) / a.hidden ** 0.5
        w2 = torch.randn(a.experts, a.ffn, a.hidden, generator=g) / a.ffn ** 0.5
        mine = slice(rank * self.e_local, (rank + 1) * self.e_local)
        self.w1, self.w2 = w1[mine].to(device, dtype), w2[mine].to(device, dtype)

    def permute(self, x):
        probs = F.softmax(x.float() @ self.router.float(), dim=-1)
        gates, experts = torch.topk(probs, self.a.topk)
        flat = experts.reshape(-1)
        order = torch.argsort(flat, stable=True)  # (token, k) slots sorted by expert
        return gates, flat, order, x[order // self.a.topk]

    def count_exchange(self, flat):
        """Rows this rank sends to each expert, and receives from each (rank, local expert)."""
        per_expert = torch.bincount(flat, minlength=self.a.experts)
        from_each = torch.empty_like(per_expert)
        dist.all_to_all_single(from_each, per_expert, group=self.group)
        return per_expert, from_each.view(self.world, self.e_local)

    def experts(self, received, counts):
        # Rows arrive by source rank, then by expert: group them by expert for the MLPs.
        expert_of_row = torch.repeat_interleave(
            torch.arange(self.e_local, device=received.device).repeat(self.world),
            counts.reshape(-1))
        by_expert = torch.argsort(expert_of_row, stable=True)
        grouped = received[by_expert]
        out = torch.empty_like(grouped)
        start = 0
        for e, rows in enumerate(counts.sum(0).tolist()):
            part = grouped[start:start + rows]
            out[start:start + rows] = F.gelu(part @ self.w1[e]) @ self.w2[e]
            start += rows
        result = torch.empty_like(out)
        result[by_expert] = out
        return result

    def step(self, x):
        gates, flat, order, permuted = self.permute(x)
        per_expert, counts = self.count_exchange(flat)
        send = per_expert.view(self.world, self.e_local).sum(1).tolist()
        recv = counts.sum(1).tolist()
        received = x.new_empty(sum(recv), x.shape[1])
        dist.all_to_all_single(received, permuted, recv, send, group=self.group)   # dispatch
        expert_out = self.experts(received, counts)
        back = torch.empty_like(permuted)
        dist.all_to_all_single(back, expert_out, send, recv, group=self.group)     # combine
        y = torch.zeros(x.shape, dtype=torch.float32, device=x.device)             # unpermute
        y.index_add_(0, order // self.a.topk, back.float() * gates.reshape(-1)[order, None])
        return y.to(x.dtype)


def timed(step, iters, device, group):
    out = step()  # warm-up: communicators, plans
    if device.type == "cuda":
        torch.cuda.synchronize()
    dist.barrier(group=group)
    t0 = time.perf_counter()
    for _ in range(iters):
        out = step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    t = torch.tensor([(time.perf_counter() - t0) / iters], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)  # the slowest rank's step
    return out, t.item()


def main(a):
    cuda = torch.cuda.is_available() and os.environ.get("DISPATCH_DEVICE", "cuda") == "cuda"
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if a.experts % world:
        raise SystemExit("--experts %d must be a multiple of the %d ranks" % (a.experts, world))
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    dtype = torch.bfloat16 if cuda else torch.float32
    groups = {dist.get_backend(): dist.group.WORLD,
              "rmacc": dist.new_group(list(range(world)), backend="rmacc")}
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(a.tokens, a.hidden, generator=g).to(device, dtype)
    outs, times = {}, {}
    for name, group in groups.items():
        d = TokenDispatcher(a, group, device, dtype)
        outs[name], times[name] = timed(lambda: d.step(x), a.iters, device, groups["rmacc"])
    ref, ours = outs.values()
    ok = torch.tensor([int(torch.equal(ref, ours))], device=device)
    dist.all_reduce(ok, op=dist.ReduceOp.MIN)
    if rank == 0:
        print("token dispatcher: %d ranks, %s %s, %d tokens/rank, hidden %d, E=%d top-%d"
              % (world, device.type, str(dtype)[6:], a.tokens, a.hidden, a.experts, a.topk))
        for name, t in times.items():
            print("  backend=%-6s %8.3f ms/step" % (name, t * 1e3))
        print("  outputs identical: %s" % bool(ok.item()))
    dist.barrier()
    dist.destroy_process_group()
    if not ok.item():
        raise SystemExit("rank %d: the two backends' outputs differ" % rank)


if __name__ == "__main__":
    args = parse()
    rmacc.local.run_main(main, args, args.nproc, args.nodes, {"DISPATCH_DEVICE": "cpu"})
