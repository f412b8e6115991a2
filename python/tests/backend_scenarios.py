"""What each rank runs for test_backend.py: the default group is backend="rmacc"
(rmacc.distributed), and a gloo (CPU) or NCCL (CUDA) group over the same ranks is the
reference each rmacc call is compared with, on the same data. Data and split patterns come
from scenarios.py (element k of the block src -> dst is a function of src, dst and k).
"""
import os
import tempfile
import time

import torch
import torch.distributed as dist

import rmacc
import rmacc.distributed
from rmacc._process_group import RmaccProcessGroup
from scenarios import PATTERNS, TRAILING, block, poisoned, same, split_matrix

DTYPES = (torch.float32, torch.bfloat16, torch.int64, torch.uint8)


def _reference_backend(device):
    return "nccl" if device.type == "cuda" else "gloo"


def _case(group, s, trailing, dtype, device):
    """(input, expected output, input splits, output splits) of this rank in `group`, whose
    group ranks index the split matrix s."""
    r, n = dist.get_rank(group), dist.get_world_size(group)
    inp = torch.cat([block(r, j, s[r][j], trailing, dtype, device) for j in range(n)])
    expected = torch.cat([block(i, r, s[i][r], trailing, dtype, device) for i in range(n)])
    return inp, expected, [s[r][j] for j in range(n)], [s[i][r] for i in range(n)]


def _compare(group, ref, s, trailing, dtype, device, equal, what, async_op=False):
    """One dist.all_to_all_single on the rmacc group and on the reference group."""
    inp, expected, isplits, osplits = _case(group, s, trailing, dtype, device)
    outs = []
    # gloo (PyTorch 1.13) has no bfloat16: such calls are checked against the expected only.
    unsupported = device.type == "cpu" and dtype == torch.bfloat16
    for g in (group,) if unsupported else (group, ref):
        out = poisoned(expected.shape, dtype, device)
        if equal:
            work = dist.all_to_all_single(out, inp, group=g, async_op=async_op)
        else:
            work = dist.all_to_all_single(out, inp, osplits, isplits, group=g, async_op=async_op)
        if async_op:
            assert work is not None, "async_op=True returned no work"
            work.wait()
            if device.type == "cpu":
                assert work.is_completed(), "%s: a finished CPU call is not completed" % what
        outs.append(out)
    if device.type == "cuda":
        torch.cuda.synchronize()
    assert same(outs[0], expected), "%s: rmacc's output differs from the expected" % what
    assert unsupported or same(outs[0], outs[1]), "%s: rmacc's output differs from %s's" % (
        what, dist.get_backend(ref))


def _rmacc_pg(group):
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    assert isinstance(pg, RmaccProcessGroup), "group %r is not rmacc's" % pg
    return pg


def backend_correctness(device):
    """Random / zero / skewed / equal splits, trailing shapes, dtypes, splits None, async_op,
    all_to_all, on the world group and on a subgroup (new_group(backend="rmacc")), each call
    against gloo / NCCL on the same data. Returns the number of compared calls."""
    n, rank = dist.get_world_size(), dist.get_rank()
    nodes = int(os.environ["RMACC_TEST_NODES"])
    assert dist.get_backend() == "rmacc", dist.get_backend()
    ref = dist.new_group(list(range(n)), backend=_reference_backend(device))
    calls = 0
    for i, (pattern, trailing) in enumerate((p, t) for p in PATTERNS for t in TRAILING):
        dtype = DTYPES[i % len(DTYPES)]
        _compare(None, ref, split_matrix(n, pattern, seed=i), trailing, dtype, device,
                 pattern == "equal", "%s %s %s" % (pattern, trailing, dtype))
        calls += 1
    # The rmacc communicator did those calls (not the inner group), over the emulated nodes.
    comm = rmacc.distributed.communicator()
    assert comm is _rmacc_pg(None)._comm and comm.device == device, comm
    assert (comm.size, comm.num_nodes) == (n, nodes), comm
    for pattern in ("random", "skewed"):
        _compare(None, ref, split_matrix(n, pattern, seed=50), (3,), torch.float32, device,
                 False, "async %s" % pattern, async_op=True)
        calls += 1
    big = split_matrix(n, "random", seed=7, rows=2000)  # a few hundred KiB per rank
    _compare(None, ref, big, (16,), torch.float32, device, False, "large")
    calls += 1
    calls += _lists(None, ref, device)
    calls += _subgroup(device)
    _finish(ref)
    return calls


def _finish(ref):
    """Every rank is done with its calls before any closes its communicators (a rank that
    leaves first would fail the others' communicators, which then say so on stderr)."""
    dist.barrier(group=ref)
    c10d = dist.distributed_c10d
    pg_map = c10d._world.pg_map if hasattr(c10d, "_world") else c10d._pg_map
    for pg in list(pg_map):
        if isinstance(pg, RmaccProcessGroup):
            pg.shutdown()


def _lists(group, ref, device):
    """dist.all_to_all (lists of tensors of any shape) against the reference."""
    n, r = dist.get_world_size(group), dist.get_rank(group)
    s = split_matrix(n, "random", seed=42)
    inputs = [block(r, j, s[r][j], (3,), torch.int32, device) for j in range(n)]
    results = []
    # gloo has no all_to_all (of lists): there, the expected blocks are the only reference.
    for g in (group,) if device.type == "cpu" else (group, ref):
        outputs = [poisoned((s[i][r], 3), torch.int32, device) for i in range(n)]
        dist.all_to_all(outputs, inputs, group=g)
        results.append(outputs)
    for i in range(n):
        want = block(i, r, s[i][r], (3,), torch.int32, device)
        assert same(results[0][i], want), "all_to_all: block from rank %d" % i
        assert same(results[0][i], results[-1][i]), "all_to_all differs from the reference"
    return 1


def _subgroup(device):
    """A group of every rank but rank 0 (new_group(backend="rmacc")); ranks outside it get no
    group, as with any backend."""
    n = dist.get_world_size()
    if n < 3:
        return 0
    members = list(range(1, n))
    sub = dist.new_group(members, backend="rmacc")
    ref = dist.new_group(members, backend=_reference_backend(device))
    if dist.get_rank() == 0:
        return 0
    assert dist.get_backend(sub) == "rmacc"
    m = len(members)
    for seed, pattern in enumerate(("random", "zero", "skewed")):
        _compare(sub, ref, split_matrix(m, pattern, seed=200 + seed), (2,), torch.float32,
                 device, False, "subgroup %s" % pattern)
    comm = rmacc.distributed.communicator(sub)
    assert comm.size == m and comm.rank == dist.get_rank(sub), comm
    return 3


def backend_delegated(device):
    """Every other collective of an rmacc group gives what the reference group gives (gloo on
    CPU: what it does not support raises the same way there)."""
    n, r = dist.get_world_size(), dist.get_rank()
    ref = dist.new_group(list(range(n)), backend=_reference_backend(device))
    checked = []

    def both(name, fn):
        got = []
        for g in (None, ref):
            try:
                got.append(("ok", fn(g)))
            except RuntimeError as e:
                got.append(("error", type(e).__name__))
        assert got[0][0] == got[1][0], "%s: rmacc group %s, reference %s" % (name, got[0], got[1])
        if got[0][0] == "ok":
            a, b = got[0][1], got[1][1]
            assert len(a) == len(b) and all(same(x, y) for x, y in zip(a, b)), \
                "%s: %s, reference %s" % (name, a, b)
        checked.append((name, got[0][0]))

    def x(k=0):
        return (torch.arange(6, dtype=torch.float32) + 10 * r + k).to(device)

    def all_reduce(g):
        t = x()
        dist.all_reduce(t, group=g)
        return [t]

    def all_reduce_async(g):
        t = x(1)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=g, async_op=True).wait()
        return [t]

    def all_gather(g):
        out = [torch.zeros(6, device=device) for _ in range(n)]
        dist.all_gather(out, x(), group=g)
        return out

    def broadcast(g):
        t = x()
        dist.broadcast(t, src=n - 1, group=g)
        return [t]

    def reduce(g):
        t = x()
        dist.reduce(t, dst=0, group=g)
        return [t] if r == 0 else []

    def gather(g):
        out = [torch.zeros(6, device=device) for _ in range(n)] if r == 0 else None
        dist.gather(x(), out, dst=0, group=g)
        return out or []

    def scatter(g):
        t = torch.zeros(6, device=device)
        dist.scatter(t, [x(k) for k in range(n)] if r == 0 else None, src=0, group=g)
        return [t]

    def reduce_scatter(g):
        t = torch.zeros(6, device=device)
        dist.reduce_scatter(t, [x(k) for k in range(n)], group=g)
        return [t]

    def send_recv(g):  # a ring: even ranks send first
        t, got = x(), torch.zeros(6, device=device)
        nxt, prv = (r + 1) % n, (r - 1) % n
        ops = [lambda: dist.send(t, nxt, group=g), lambda: dist.recv(got, prv, group=g)]
        for op in (ops if r % 2 == 0 else ops[::-1]):
            op()
        return [got]

    def isend_irecv(g):
        t, got = x(2), torch.zeros(6, device=device)
        works = [dist.isend(t, (r + 1) % n, group=g), dist.irecv(got, (r - 1) % n, group=g)]
        for w in works:
            w.wait()
        return [got]

    def objects(g):
        out = [None] * n
        dist.all_gather_object(out, {"rank": r}, group=g)
        assert out == [{"rank": i} for i in range(n)], out
        obj = [("from", r)]
        dist.broadcast_object_list(obj, src=0, group=g)
        assert obj == [("from", 0)], obj
        return []

    def barrier(g):
        dist.barrier(group=g)
        return []

    for fn in (all_reduce, all_reduce_async, all_gather, broadcast, reduce, gather, scatter,
               reduce_scatter, send_recv, isend_irecv, objects, barrier):
        both(fn.__name__, fn)
    # all_to_all_single on CPU tensors of a CUDA rmacc group goes to the inner gloo group.
    if device.type == "cuda":
        t = torch.arange(4 * n, dtype=torch.float32) + 100 * r
        out = torch.zeros_like(t)
        dist.all_to_all_single(out, t)
        want = torch.cat([torch.arange(4 * r, 4 * r + 4, dtype=torch.float32) + 100 * i
                          for i in range(n)])
        assert same(out, want), "CPU all_to_all_single on a CUDA rmacc group"
    return checked


def _stderr_of(fn):
    """fn()'s exception (or None) and what the process wrote to file descriptor 2 meanwhile
    (librmacc's log goes there)."""
    with tempfile.TemporaryFile() as f:
        saved = os.dup(2)
        os.dup2(f.fileno(), 2)
        try:
            try:
                fn()
                error = None
            except Exception as e:  # noqa: BLE001 - returned to the caller
                error = e
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        return error, f.read().decode(errors="replace")


def backend_errors(device):
    """Splits that disagree between ranks: dist.all_to_all_single raises RmaccError on every
    rank, in rows and once (nothing on stderr), nothing is written, the group still works;
    bad arguments raise on the rank that passed them."""
    n, r = dist.get_world_size(), dist.get_rank()
    ref = dist.new_group(list(range(n)), backend=_reference_backend(device))
    s = split_matrix(n, "random", seed=5)
    s[0][1] = max(s[0][1], 2)
    _compare(None, ref, s, (2,), torch.float32, device, False, "before the mismatch")
    inp, expected, isplits, osplits = _case(None, s, (2,), torch.float32, device)
    if r == 0:  # rank 0 sends one row less to rank 1 and one more to itself
        isplits[1] -= 1
        isplits[0] += 1
    out = poisoned(expected.shape, torch.float32, device)

    def call():
        dist.all_to_all_single(out, inp, osplits, isplits)
        if device.type == "cuda":
            rmacc.distributed.communicator().synchronize()

    error, log = _stderr_of(call)
    assert isinstance(error, rmacc.RmaccError), "rank %d: expected RmaccError, got %r" % (r, error)
    assert error.code == 5, repr(error)  # rmaccInvalidUsage
    # The lowest mismatched pair is reported: rank 0 -> 0 (one row more) or 0 -> 1 (one less).
    wants = ["rank 0 sends %d rows of 2 elements to rank %d, which expects %d" % (sent, dst, want)
             for dst, sent, want in ((0, s[0][0] + 1, s[0][0]), (1, s[0][1] - 1, s[0][1]))]
    assert any(w in str(error) for w in wants), "%r says neither of %r" % (str(error), wants)
    assert "mismatch" not in log, "the mismatch was printed too:\n%s" % log
    assert same(out, poisoned(expected.shape, torch.float32, device)), "a rejected call wrote"
    _compare(None, ref, s, (2,), torch.float32, device, False, "after the mismatch")
    try:
        dist.all_to_all_single(out, inp, [1] * n, isplits)
        raise AssertionError("output_split_sizes that do not sum to the rows: no error")
    except ValueError as e:
        assert "output_split_sizes" in str(e), e
    _finish(ref)
    return str(error)


def backend_dead_peer(device):
    """The last rank dies after one good call; the others' next call raises within the group's
    timeout (ranks.run gives the group 5 s and leaves RMACC_TIMEOUT_S unset: the backend
    passes the group's timeout on to librmacc)."""
    n, r = dist.get_world_size(), dist.get_rank()
    s = split_matrix(n, "random", seed=9)
    inp, expected, isplits, osplits = _case(None, s, (), torch.float32, device)
    out = poisoned(expected.shape, torch.float32, device)
    dist.all_to_all_single(out, inp, osplits, isplits)
    assert same(out, expected), "before the death"
    assert os.environ.get("RMACC_TIMEOUT_S") == "5", os.environ.get("RMACC_TIMEOUT_S")
    if r == n - 1:
        os._exit(3)
    start = time.monotonic()
    try:
        for _ in range(3):  # the first call may still complete if it raced the exit
            dist.all_to_all_single(out, inp, osplits, isplits)
            if device.type == "cuda":
                rmacc.distributed.communicator().synchronize()
        raise AssertionError("no error with a dead peer")
    except rmacc.RmaccError as e:
        elapsed = time.monotonic() - start
        assert elapsed < 5 + 30, "the error took %.1f s: %s" % (elapsed, e)
    rmacc.distributed.communicator().abort()
    return elapsed


def backend_compiled(device):
    """torch.compile(fullgraph=True) of the functional all_to_all_single on an rmacc group
    (PyTorch 2.x; None where this PyTorch has no functional collectives)."""
    try:
        import torch.distributed._functional_collectives as fc
    except ImportError:
        return None
    if not hasattr(fc, "all_to_all_single") or not hasattr(torch, "compile"):
        return None
    n, r = dist.get_world_size(), dist.get_rank()
    s = split_matrix(n, "random", seed=11)
    inp, expected, isplits, osplits = _case(None, s, (2,), torch.float32, device)
    group = dist.distributed_c10d._get_default_group()
    # Dynamo takes process groups of exactly torch's ProcessGroup type only; a group's name
    # (a string, resolved to the group at run time) traces for any group.
    name = fc._resolve_group_name(group) if hasattr(fc, "_resolve_group_name") else \
        group.group_name

    def step(x):
        y = fc.all_to_all_single(x * 2, osplits, isplits, name)
        return fc.wait_tensor(y) + 1 if hasattr(fc, "wait_tensor") else y + 1

    got = torch.compile(step, fullgraph=True)(inp)
    assert same(got, expected * 2 + 1), "torch.compile: output differs"
    return True


def backend_cuda_graph(device):
    """dist.all_to_all_single on an rmacc group captured in torch.cuda.graph (rmacc's graph
    path: the communicator's call on the capturing stream), replayed with new data."""
    n, r = dist.get_world_size(), dist.get_rank()
    rows = 3
    inp = torch.zeros(n * rows, device=device)
    out = poisoned((n * rows,), torch.float32, device)
    dist.all_to_all_single(out, inp)  # warm-up: makes the communicator outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        dist.all_to_all_single(out, inp)
    for rep in range(4):
        inp.copy_(torch.arange(n * rows, dtype=torch.float32) + 1000 * r + 100 * rep)
        graph.replay()
        rmacc.distributed.communicator().synchronize()
        want = torch.cat([torch.arange(rows, dtype=torch.float32) + rows * r + 1000 * i + 100 * rep
                          for i in range(n)]).to(device)
        assert same(out, want), "replay %d" % rep
    return True
