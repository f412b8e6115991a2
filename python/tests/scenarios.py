"""What each rank runs (ranks.py starts them). Every scenario takes the device and returns a
small picklable result; a failed check raises.

Data: element k of the block that rank `src` sends to rank `dst` is (src*31 + dst*7 + 3k) mod M,
so a row delivered to the wrong place or rank shows. The expected output is built from those
blocks with torch.cat (each rank knows the whole split matrix: it comes from a shared seed),
and float32 calls are also compared with torch.distributed's own all_to_all_single.
"""
import os
import time

import torch
import torch.distributed as dist

import rmacc
from rmacc import communicator as rmacc_communicator
from rmacc._args import DTYPES

PATTERNS = ("random", "zero", "skewed", "equal")
TRAILING = ((), (3,), (2, 5))


def split_matrix(n, pattern, seed, rows=5):
    """S[i][j] = rows rank i sends to rank j."""
    g = torch.Generator().manual_seed(seed)
    if pattern == "equal":
        return [[rows] * n for _ in range(n)]
    s = torch.randint(0, rows + 1, (n, n), generator=g)
    if pattern == "zero":
        s = s * (torch.rand((n, n), generator=g) > 0.5)
        s[0, :] = 0          # rank 0 sends nothing
        s[:, n - 1] = 0      # the last rank receives nothing
    elif pattern == "skewed":  # MoE-like: most rows go to one hot rank, a few to the rest
        s = torch.randint(0, 2, (n, n), generator=g)
        s[:, seed % n] = 8 * rows
    return s.tolist()


def block(src, dst, rows, trailing, dtype, device):
    m = 127 if dtype in (torch.int8, torch.bfloat16) else 251
    k = torch.arange(rows * _prod(trailing), dtype=torch.int64).view(rows, *trailing)
    v = (src * 31 + dst * 7 + 3 * k) % m
    v = (v % 2 == 1) if dtype == torch.bool else v.to(dtype)
    return v.to(device)


def _prod(shape):
    p = 1
    for s in shape:
        p *= s
    return p


def same(a, b):
    """Bitwise equality, for every dtype (some have no == on every device)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))


def poisoned(shape, dtype, device):
    t = torch.empty(shape, dtype=dtype, device=device)
    t.view(torch.uint8).fill_(0x5A)
    return t


def make_case(comm, s, trailing, dtype, device):
    """(input, expected output, input splits, output splits) of this rank for matrix s."""
    r, n = comm.rank, comm.size
    inp = torch.cat([block(r, j, s[r][j], trailing, dtype, device) for j in range(n)])
    expected = torch.cat([block(i, r, s[i][r], trailing, dtype, device) for i in range(n)])
    # The input splits back into the blocks it was made of (torch.split is the reference).
    for j, part in enumerate(torch.split(inp, [s[r][j] for j in range(n)])):
        assert same(part, block(r, j, s[r][j], trailing, dtype, device))
    return inp, expected, [s[r][j] for j in range(n)], [s[i][r] for i in range(n)]


def check_properties(comm, nodes):
    n, per_node = dist.get_world_size(), dist.get_world_size() // nodes
    got = (comm.rank, comm.size, comm.local_rank, comm.local_size, comm.node, comm.num_nodes)
    want = (dist.get_rank(), n, dist.get_rank() % per_node, per_node,
            dist.get_rank() // per_node, nodes)
    assert got == want, "properties %s, expected %s" % (got, want)


def run_single(comm, device, s, trailing, dtype, equal, what):
    inp, expected, isplits, osplits = make_case(comm, s, trailing, dtype, device)
    out = poisoned(expected.shape, dtype, device)
    if equal:
        comm.all_to_all_single(out, inp)
    else:
        comm.all_to_all_single(out, inp, osplits, isplits)
    assert same(out, expected), "%s: output differs from the reference" % what
    if dtype == torch.float32 and (device.type == "cpu" or dist.get_backend() == "nccl"):
        # and from torch.distributed's own all_to_all_single (gloo: CPU tensors, NCCL: CUDA)
        ref = poisoned(expected.shape, dtype, device)
        dist.all_to_all_single(ref, inp, None if equal else osplits, None if equal else isplits)
        assert same(out, ref), "%s: output differs from torch.distributed's" % what


def correctness(device):
    """Every dtype, the four split patterns, trailing shapes; all_to_all; rmacc.empty;
    barrier; the custom op under torch.compile when PyTorch has it; close semantics."""
    nodes = int(os.environ["RMACC_TEST_NODES"])
    calls = 0
    with rmacc.Communicator(device=device) as comm:
        check_properties(comm, nodes)
        n = comm.size
        dtypes = sorted(DTYPES, key=str)
        for i, dtype in enumerate(dtypes):
            pattern, trailing = PATTERNS[i % 4], TRAILING[i % 3]
            s = split_matrix(n, pattern, seed=i)
            run_single(comm, device, s, trailing, dtype, pattern == "equal",
                       "%s %s %s" % (dtype, pattern, trailing))
            calls += 1
        for j, (pattern, trailing) in enumerate((p, t) for p in PATTERNS for t in TRAILING):
            s = split_matrix(n, pattern, seed=100 + j)
            run_single(comm, device, s, trailing, torch.float32, pattern == "equal",
                       "float32 %s %s" % (pattern, trailing))
            calls += 1
        s = split_matrix(n, "random", seed=7, rows=3000)  # ~3 K rows x 16: several hundred KiB
        run_single(comm, device, s, (16,), torch.float32, False, "large random")
        comm.barrier()
        lists(comm, device)
        device_splits(comm, device)
        rmacc_memory(comm, device)
        compiled(comm, device)
        calls += 4
        if device.type == "cuda":
            cuda_graph(comm, device)
            calls += 1
    comm.close()  # a second close does nothing
    deferred_close(device)
    return calls


def device_splits(comm, device):
    """all_to_all_v: the splits are a tensor on the device, read when the stream reaches the
    call; received rows are packed in source-rank order and their counts returned."""
    r, n = comm.rank, comm.size
    s = split_matrix(n, "random", seed=77)
    inp = torch.cat([block(r, j, s[r][j], (2,), torch.float32, device) for j in range(n)])
    total = sum(s[i][r] for i in range(n))
    out = poisoned((total + 5, 2), torch.float32, device)
    splits = torch.tensor([s[r][j] for j in range(n)], dtype=torch.int64, device=device)
    got = comm.all_to_all_v(out, inp, splits)
    comm.synchronize()
    assert got.tolist() == [s[i][r] for i in range(n)], (got.tolist(), r)
    expect = torch.cat([block(i, r, s[i][r], (2,), torch.float32, device) for i in range(n)])
    assert same(out[:total], expect), "all_to_all_v rows"
    if device.type == "cpu":
        # The CUDA path's count conversion (tensor operations into per-stream arrays) runs on
        # the host backend too: twice, so that the second call reuses the first one's arrays,
        # with int32 splits, rows of one element and the counts returned kept by the caller.
        kept = []
        for seed, dtype, width in ((78, torch.int64, 2), (79, torch.int32, 1), (80, torch.int64, 1)):
            s = split_matrix(n, "random", seed=seed)
            inp = torch.cat([block(r, j, s[r][j], (width,), torch.float32, device)
                             for j in range(n)])
            total = sum(s[i][r] for i in range(n))
            out = poisoned((total + 3, width), torch.float32, device)
            splits = torch.tensor([s[r][j] for j in range(n)], dtype=dtype)
            got = comm._all_to_all_v_device(out, inp, splits, width, DTYPES[torch.float32],
                                            comm._handle, None)
            kept.append((got, [s[i][r] for i in range(n)]))
            expect = torch.cat([block(i, r, s[i][r], (width,), torch.float32, device)
                                for i in range(n)])
            assert same(out[:total], expect), "all_to_all_v rows, tensor conversion %d" % seed
        for got, want in kept:
            assert got.tolist() == want, (got.tolist(), want)


def cuda_graph(comm, device):
    """all_to_all_v and all_to_all_single captured in torch.cuda.graph, replayed with splits and
    data that device work changes before each replay: each replay is a call of its own."""
    r, n = comm.rank, comm.size
    rows = 40
    inp = torch.zeros(n * rows, 2, device=device)
    splits = torch.zeros(n, dtype=torch.int64, device=device)
    out = poisoned((n * rows, 2), torch.float32, device)
    fixed_in = torch.zeros(n * 3, device=device)
    fixed_out = torch.zeros(n * 3, device=device)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        got = comm.all_to_all_v(out, inp, splits)
        comm.all_to_all_single(fixed_out, fixed_in)
    for rep in range(5):
        s = split_matrix(n, "random", seed=300 + rep, rows=rows // n)
        inp[:sum(s[r])].copy_(torch.cat([block(r, j, s[r][j], (2,), torch.float32, device)
                                         for j in range(n)]))
        splits.copy_(torch.tensor(s[r], dtype=torch.int64))
        fixed_in.copy_(torch.arange(n * 3, dtype=torch.float32) + 1000 * r + 100 * rep)
        graph.replay()
        comm.synchronize()
        assert got.tolist() == [s[i][r] for i in range(n)], ("replay", rep, got.tolist())
        total = sum(s[i][r] for i in range(n))
        expect = torch.cat([block(i, r, s[i][r], (2,), torch.float32, device) for i in range(n)])
        assert same(out[:total], expect), "all_to_all_v replay %d rows" % rep
        want = torch.cat([torch.arange(3, dtype=torch.float32) + 3 * r + 1000 * i + 100 * rep
                          for i in range(n)]).to(device)
        assert same(fixed_out, want), "all_to_all_single replay %d" % rep
    del graph


def lists(comm, device):
    """all_to_all: lists of tensors of any shape; element counts agree pairwise."""
    r, n = comm.rank, comm.size
    s = split_matrix(n, "random", seed=42)
    inputs = [block(r, j, s[r][j], (3,), torch.int32, device) for j in range(n)]
    outputs = [poisoned((s[i][r] * 3,), torch.int32, device) for i in range(n)]  # flat shapes
    comm.all_to_all(outputs, inputs)
    for i in range(n):
        assert same(outputs[i], block(i, r, s[i][r], (3,), torch.int32, device).reshape(-1)), \
            "all_to_all: block from rank %d" % i


def rmacc_memory(comm, device):
    """Tensors in rmaccMemAlloc memory (the zero-copy path) work as input and output, and
    their memory goes back when they die."""
    s = split_matrix(comm.size, "skewed", seed=3)
    inp, expected, isplits, osplits = make_case(comm, s, (4,), torch.bfloat16, device)
    a = rmacc.empty(tuple(inp.shape), dtype=torch.bfloat16, comm=comm)
    b = rmacc.empty(tuple(expected.shape), dtype=torch.bfloat16, comm=comm)
    assert a.device == device, "rmacc.empty on %s, expected %s" % (a.device, device)
    # An empty tensor takes no rmaccMemAlloc block (with 2 ranks, skewed splits leave one empty).
    blocks = (a.numel() > 0) + (b.numel() > 0)
    assert comm._blocks == blocks, "%d live rmacc.empty blocks, expected %d" % (comm._blocks, blocks)
    a.copy_(inp)
    b.view(torch.uint8).fill_(0x5A)
    comm.all_to_all_single(b, a, osplits, isplits)
    assert same(b, expected), "rmacc.empty tensors: output differs"
    del a, b
    assert comm._blocks == 0, "rmacc.empty memory was not released"


def compiled(comm, device):
    """torch.compile holds the call as the rmacc::all_to_all_single custom op."""
    if not rmacc_communicator.custom_op_registered:
        return
    s = split_matrix(comm.size, "random", seed=11)
    inp, expected, isplits, osplits = make_case(comm, s, (2,), torch.float32, device)

    def step(out, x):
        comm.all_to_all_single(out, x * 2, osplits, isplits)
        return out + 1

    out = poisoned(expected.shape, torch.float32, device)
    got = torch.compile(step, backend="aot_eager", fullgraph=True)(out, inp)
    assert same(got, expected * 2 + 1), "torch.compile: output differs"


def deferred_close(device):
    """close() with an rmacc.empty tensor alive: the communicator takes no calls, the memory
    stays valid until the tensor dies, and then the communicator is destroyed."""
    comm = rmacc.Communicator(device=device)
    t = rmacc.empty((64,), dtype=torch.int64, comm=comm)
    comm.close()
    try:
        comm.barrier()
        raise AssertionError("a closed communicator took a call")
    except RuntimeError:
        pass
    t.fill_(7)
    assert int(t.sum()) == 7 * 64 and comm._handle is not None
    del t
    assert comm._handle is None, "the communicator outlived its last rmacc.empty tensor"


def _expect(exc, words, fn):
    try:
        fn()
    except exc as e:
        for w in words:
            assert w in str(e), "%s raised %r, which does not name %r" % (exc.__name__, e, w)
        return
    except Exception as e:  # noqa: BLE001 - report what came instead
        raise AssertionError("expected %s naming %s, got %r" % (exc.__name__, words, e))
    raise AssertionError("expected %s naming %s, nothing raised" % (exc.__name__, words))


def argument_errors(comm, device):
    """Bad arguments raise before anything is sent: no rank enters the collective (n >= 2)."""
    n = comm.size
    x = torch.zeros(2 * n, 3, device=device)
    y = torch.zeros(2 * n, 3, device=device)
    other = torch.device("cpu") if device.type == "cuda" else torch.device("meta")
    a2a = comm.all_to_all_single
    _expect(TypeError, ["input"], lambda: a2a(y, [1.0] * 2 * n))
    _expect(TypeError, ["output"], lambda: a2a("y", x))
    _expect(TypeError, ["output", "input"], lambda: a2a(y.double(), x))
    _expect(TypeError, ["input", "complex"], lambda: a2a(y.to(torch.complex64),
                                                         x.to(torch.complex64)))
    transposed = torch.zeros(3, 2 * n, device=device).t()
    _expect(ValueError, ["output", "contiguous"], lambda: a2a(transposed, x))
    _expect(ValueError, ["input", "contiguous"], lambda: a2a(y, x[:, :2]))
    elsewhere = torch.zeros(2 * n, 3, device=other)
    _expect(ValueError, ["input", str(other.type)], lambda: a2a(y, elsewhere))
    _expect(ValueError, ["output_split_sizes", "entries"], lambda: a2a(y, x, [2] * (n + 1), None))
    _expect(ValueError, ["input_split_sizes", "sums"], lambda: a2a(y, x, None, [1] * n))
    _expect(TypeError, ["input_split_sizes[0]"], lambda: a2a(y, x, None, [2.0] + [2] * (n - 1)))
    _expect(ValueError, ["output_split_sizes[0]", "negative"],
            lambda: a2a(y, x, [-1, 2 * n + 1] + [0] * (n - 2), None))
    _expect(ValueError, ["output_split_sizes", "divide"],
            lambda: a2a(torch.zeros(2 * n + 1, 3, device=device), x))
    _expect(ValueError, ["input", "dimension"], lambda: a2a(y, torch.tensor(1.0, device=device)))
    _expect(ValueError, ["row"], lambda: a2a(torch.zeros(2 * n, 4, device=device), x))
    _expect(ValueError, ["input_list"], lambda: comm.all_to_all([x] * n, [x] * (n + 1)))
    _expect(TypeError, ["output_list"], lambda: comm.all_to_all(x, [x] * n))
    _expect(ValueError, ["shape"], lambda: rmacc.empty((4, -1), comm=comm))


def errors(device):
    """Argument errors on every rank; then splits that disagree between ranks: RmaccError on
    every rank with no output written; the communicator still works afterwards."""
    with rmacc.Communicator(device=device) as comm:
        r, n = comm.rank, comm.size
        argument_errors(comm, device)
        s = split_matrix(n, "random", seed=5)
        s[0][1] = max(s[0][1], 2)
        run_single(comm, device, s, (2,), torch.float32, False, "after argument errors")
        inp, expected, isplits, osplits = make_case(comm, s, (2,), torch.float32, device)
        if r == 0:  # rank 0 sends one row less to rank 1 and one more to itself
            isplits[1] -= 1
            isplits[0] += 1
        out = poisoned(expected.shape, torch.float32, device)
        try:
            comm.all_to_all_single(out, inp, osplits, isplits)
            comm.synchronize()  # CUDA: the mismatch is found on the stream
            raise AssertionError("mismatched splits: no RmaccError on rank %d" % r)
        except rmacc.RmaccError as e:
            assert isinstance(e, RuntimeError) and e.code == 5, repr(e)  # rmaccInvalidUsage
            message = str(e)
        assert same(out, poisoned(expected.shape, torch.float32, device)), \
            "a rejected call wrote the output"
        run_single(comm, device, s, (2,), torch.float32, False, "after the mismatch")
        return message


def dead_peer(device):
    """The last rank dies after one good call; the others' next call raises RmaccError within
    RMACC_TIMEOUT_S (plus slack for a loaded machine), never hangs."""
    comm = rmacc.Communicator(device=device)
    n = comm.size
    s = split_matrix(n, "random", seed=9)
    run_single(comm, device, s, (), torch.float32, False, "before the death")
    if comm.rank == n - 1:
        os._exit(3)
    inp, expected, isplits, osplits = make_case(comm, s, (), torch.float32, device)
    out = poisoned(expected.shape, torch.float32, device)
    start = time.monotonic()
    try:
        for _ in range(3):  # the first call may still complete if it raced the exit
            comm.all_to_all_single(out, inp, osplits, isplits)
            comm.synchronize()
        raise AssertionError("no error with a dead peer")
    except rmacc.RmaccError as e:
        elapsed = time.monotonic() - start
        limit = float(os.environ["RMACC_TIMEOUT_S"]) + 30
        assert elapsed < limit, "the error took %.1f s (limit %.0f s): %s" % (elapsed, limit, e)
    comm.abort()
    return elapsed


def moe_work(device):
    """examples/moe_dispatch.py's two steps under torch.profiler: the GEMM FLOPs each does
    (summed over its matrix products), and those of one dense pass of the expert MLP over the
    no-sync step's worst-case receive buffer. A work count, not a time: the machine's load
    cannot move it."""
    import argparse
    import importlib.util
    from torch.profiler import profile
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                        "moe_dispatch.py")
    spec = importlib.util.spec_from_file_location("moe_dispatch", path)
    moe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(moe)
    a = argparse.Namespace(tokens=64, hidden=32, ffn=64, experts=16, topk=2)
    world = dist.get_world_size()
    layer = moe.Layer(a, dist.get_rank(), world, device, torch.float32)
    x = torch.randn(a.tokens, a.hidden, generator=torch.Generator().manual_seed(dist.get_rank()))
    flops = {}
    with rmacc.Communicator(device=device) as comm:
        steps = (("sync", lambda: layer.step(x, comm.all_to_all_single)),
                 ("no_sync", lambda: layer.step_no_sync(x, comm)))
        for name, step in steps:
            with profile(with_flops=True) as prof:
                y = step()
            flops[name] = sum(e.flops for e in prof.key_averages())
            flops[name + "_out"] = y
    assert torch.allclose(flops.pop("sync_out"), flops.pop("no_sync_out"), rtol=1e-4, atol=1e-4)
    capacity = world * a.tokens * a.topk
    flops["dense_pass"] = 4 * capacity * a.hidden * a.ffn  # two GEMMs, 2 FLOPs a multiply-add
    flops["router"] = 2 * a.tokens * a.hidden * a.experts
    flops["experts_per_rank"] = a.experts // world
    return flops
