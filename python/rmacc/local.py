"""Runs a script's ranks on this machine without torchrun: one forked process per rank over
emulated nodes (RMACC_HOSTNAME), CPU tensors, gloo carrying the unique id, libfabric's tcp
provider on loopback between the nodes. For examples and benchmarks on machines without GPUs
(Debian's torchrun for PyTorch 1.13 fails under Python 3.11)."""
import multiprocessing
import os
import socket


def _child(main, args, env):
    os.environ.update(env)
    import torch
    torch.set_num_threads(1)
    main(args)


def run_main(main, args, nproc, nodes, extra_env=None):
    """Calls main(args) once per rank (as torchrun would: RANK, WORLD_SIZE, LOCAL_RANK,
    MASTER_ADDR/PORT set) when this process is not a rank already; raises SystemExit naming
    the ranks that failed."""
    if "RANK" in os.environ:
        main(args)
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for r in range(nproc):
        env = {"RANK": str(r), "WORLD_SIZE": str(nproc), "LOCAL_RANK": str(r),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
               "RMACC_HOSTNAME": "node%d" % (r * nodes // nproc),
               "FI_PROVIDER": "tcp", "FI_TCP_IFACE": "lo", "RMACC_NET_PROVIDER": "tcp"}
        env.update(extra_env or {})
        p = multiprocessing.get_context("fork").Process(target=_child, args=(main, args, env))
        p.start()
        procs.append(p)
    for p in procs:
        p.join()
    bad = [r for r, p in enumerate(procs) if p.exitcode]
    if bad:
        raise SystemExit("ranks %s failed" % bad)


def init_job(backend=None):
    """torch.distributed for a job of one process when no launcher set it up (no RANK in the
    environment): rank 0 of 1 over a loopback store; under torchrun, the launcher's job. backend:
    None for NCCL when CUDA is available, else gloo. For benchmarks and examples at one rank."""
    import torch
    import torch.distributed as dist
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if "RANK" not in os.environ:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        os.environ.update({"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0",
                           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    dist.init_process_group(backend)
