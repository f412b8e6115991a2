"""Runs a scenario (a function of scenarios.py) on N real rank processes, spread over emulated
nodes (RMACC_HOSTNAME=node<k>, contiguous blocks of ranks), with a torch.distributed group
(gloo for CPU tensors, NCCL for CUDA) that carries rmacc's unique id.

CPU ranks are forked (torch is imported once, in the parent); CUDA ranks are spawned, since a
forked child cannot use CUDA. Each rank writes its outcome to a file and leaves with os._exit,
so a rank whose peer died cannot hang in torch.distributed's teardown.
"""
import multiprocessing as mp
import os
import pickle
import shutil
import tempfile
import time
import traceback
from datetime import timedelta


def device_kind():
    """cpu, or cuda when RMACC_TEST_DEVICE=cuda (python/tests/run_gpu.sh sets it)."""
    return os.environ.get("RMACC_TEST_DEVICE", "cpu")


def _rank_main(rank, n, nodes, device, workdir, scenario, env, backend, module, pg_timeout_s):
    per_node = n // nodes
    os.environ.update({
        "RMACC_HOSTNAME": "node%d" % (rank // per_node),
        "FI_PROVIDER": "tcp", "FI_TCP_IFACE": "lo", "RMACC_NET_PROVIDER": "tcp",
        "RMACC_TIMEOUT_S": "60", "RMACC_TEST_NODES": str(nodes),
    })
    if device == "cuda":
        os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "32")  # before CUDA starts
    for k, v in env.items():  # None: unset
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    outcome = ("error", "did not finish")
    try:
        import rmacc  # noqa: F401 - before CUDA starts: it picks eager module loading
        import torch
        import torch.distributed as dist
        torch.set_num_threads(1)
        if device == "cuda":
            torch.cuda.set_device(rank % torch.cuda.device_count())
        if backend is None:
            # NCCL carries the id when every rank has its own GPU (it refuses to share one).
            nccl = device == "cuda" and n <= torch.cuda.device_count()
            backend = "nccl" if nccl else "gloo"
        elif backend == "rmacc":
            import rmacc.distributed  # noqa: F401 - registers the backend
        extra = {} if pg_timeout_s is None else {"timeout": timedelta(seconds=pg_timeout_s)}
        dist.init_process_group(backend, init_method="file://" + os.path.join(workdir, "pg"),
                                rank=rank, world_size=n, **extra)
        import importlib
        scenarios = importlib.import_module(module)
        dev = torch.device("cuda", torch.cuda.current_device()) if device == "cuda" else \
            torch.device("cpu")
        result = getattr(scenarios, scenario)(dev)
        outcome = ("ok", result)
    except SystemExit as e:
        os._exit(e.code if isinstance(e.code, int) else 1)
    except BaseException:
        outcome = ("error", traceback.format_exc())
    with open(os.path.join(workdir, "rank%d" % rank), "wb") as f:
        pickle.dump(outcome, f)
    os._exit(0)


# A rank that fails before its peers reach rmacc (in torch.distributed's rendezvous, or CUDA
# refusing a context) leaves them waiting for it with no timeout of rmacc's own; once it has
# left without a good result, the others get this long to fail on their own (their errors say
# more), then the run stops and reports instead of waiting out the whole timeout.
_GRACE_AFTER_A_FAILED_RANK_S = 30


def _failed_early(r, p, workdir, expect_exit):
    if p.is_alive() or r in expect_exit:
        return False
    path = os.path.join(workdir, "rank%d" % r)
    if not os.path.exists(path):
        return True
    with open(path, "rb") as f:
        return pickle.load(f)[0] != "ok"


def _wait_for_ranks(procs, workdir, expect_exit, deadline):
    """Returns when every rank has left, at the deadline, or a grace period after a rank failed."""
    while time.monotonic() < deadline and any(p.is_alive() for p in procs):
        if any(_failed_early(r, p, workdir, expect_exit) for r, p in enumerate(procs)):
            deadline = min(deadline, time.monotonic() + _GRACE_AFTER_A_FAILED_RANK_S)
            for p in procs:
                p.join(max(0.0, deadline - time.monotonic()))
            return
        procs[[p.is_alive() for p in procs].index(True)].join(0.2)


def run(scenario, n, nodes, timeout=240, env=None, expect_exit=None, backend=None,
        module="scenarios", pg_timeout_s=None):
    """Runs `scenario` (a function of `module`) on n ranks over `nodes` emulated nodes. Returns
    {rank: result}; raises AssertionError with every failing rank's traceback. expect_exit:
    {rank: exit code} for ranks the scenario kills on purpose (they leave no result). backend:
    of the default group (None: NCCL for CUDA when every rank has a GPU, else gloo; "rmacc"
    imports rmacc.distributed first); pg_timeout_s: its timeout. env values None unset."""
    device = device_kind()
    expect_exit = expect_exit or {}
    workdir = tempfile.mkdtemp(prefix="rmacc-pytest-")
    ctx = mp.get_context("spawn" if device == "cuda" else "fork")
    try:
        procs = [ctx.Process(target=_rank_main, args=(r, n, nodes, device, workdir, scenario,
                                                      env or {}, backend, module,
                                                      pg_timeout_s), daemon=True)
                 for r in range(n)]
        for p in procs:  # spawned ranks find this folder on the sys.path they inherit
            p.start()
        _wait_for_ranks(procs, workdir, expect_exit, time.monotonic() + timeout)
        hung = [r for r, p in enumerate(procs) if p.is_alive()]
        for r in hung:
            procs[r].kill()
            procs[r].join()
        problems, results = [], {}
        for r, p in enumerate(procs):
            if r in hung:
                problems.append("rank %d: still running (killed)" % r)
                continue
            if r in expect_exit:
                if p.exitcode != expect_exit[r]:
                    problems.append("rank %d: exit code %s, expected %d"
                                    % (r, p.exitcode, expect_exit[r]))
                continue
            path = os.path.join(workdir, "rank%d" % r)
            if not os.path.exists(path):
                problems.append("rank %d: exited with code %s and no result" % (r, p.exitcode))
                continue
            with open(path, "rb") as f:
                status, value = pickle.load(f)
            if status == "ok":
                results[r] = value
            else:
                problems.append("rank %d failed:\n%s" % (r, value))
        if problems:
            raise AssertionError("scenario %s on %d ranks x %d nodes (%s):\n%s"
                                 % (scenario, n, nodes, device, "\n".join(problems)))
        return results
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
