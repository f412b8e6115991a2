"""rmacc as a torch.distributed backend: `import rmacc.distributed` registers "rmacc".

    import rmacc.distributed
    dist.init_process_group(backend="rmacc")                 # or
    ep_group = dist.new_group(ranks, backend="rmacc")
    dist.all_to_all_single(out, inp, out_splits, in_splits, group=ep_group)   # on rmacc

all_to_all_single and all_to_all run on rmacc; every other collective of the group on an inner
NCCL (CUDA tensors) or gloo (CPU tensors) group made from the same store (_process_group.py).
Device-mapped strings such as "cpu:gloo,cuda:rmacc" work on PyTorch versions that take them.
The rendezvous uses the store PyTorch hands the backend; rank, size and timeout come from the
group (the timeout becomes RMACC_TIMEOUT_S unless that is set; librmacc reads it once per
process).
"""
import inspect

import torch.distributed as dist

from ._process_group import RmaccProcessGroup

BACKEND = "rmacc"


def _create(store, rank, size, timeout):
    return RmaccProcessGroup(store, rank, size, timeout)


def _register():
    if BACKEND.upper() in getattr(dist.Backend, "_plugins", {}):
        return  # registered by an earlier import (e.g. of a second copy of the module)
    kwargs = {}
    # PyTorch 2.x maps backends to devices; both serve "rmacc" (CPU tensors through gloo
    # where the group's rmacc device is CUDA).
    if "devices" in inspect.signature(dist.Backend.register_backend).parameters:
        kwargs["devices"] = ["cpu", "cuda"]
    dist.Backend.register_backend(BACKEND, _create, **kwargs)


def communicator(group=None):
    """The rmacc.Communicator of an rmacc group (the default group when None), made now if
    it does not exist yet (every rank of the group must then call): for rmacc's own calls
    (all_to_all_v, rmacc.empty) on the group's ranks, or to make it before CUDA graph capture."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    if not isinstance(pg, RmaccProcessGroup):
        raise ValueError("%r is not an rmacc process group (backend %s)"
                         % (pg, dist.get_backend(group)))
    return pg.communicator()


_register()

__all__ = ["BACKEND", "RmaccProcessGroup", "communicator"]
