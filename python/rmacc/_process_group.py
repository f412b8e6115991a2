"""The torch.distributed process group of backend "rmacc" (rmacc.distributed registers it).

all_to_all_single (alltoall_base) and all_to_all (alltoall) on tensors of the group's rmacc
device run on an rmacc communicator; every other collective, and those two on tensors of the
other device, go to an inner group made from the same store: NCCL for CUDA tensors, gloo for
CPU tensors. The rmacc device is CUDA when this process has CUDA and PyTorch has NCCL, else
the CPU (rmacc picks one backend per process, so one group cannot run both).

The communicator is made at the group's first rmacc call, as NCCL makes its communicators,
on the device of that call's tensors: the rendezvous then needs every rank of the group, which
a collective has anyway. Rank 0's unique id goes through the group's store.
"""
import ctypes
import os

import torch
import torch.distributed as dist

from . import _lib
from ._lib import RmaccError
from ._work import DoneWork, StreamWork
from .communicator import Communicator, claim_backend

_c10d = torch._C._distributed_c10d
_ID_KEY = "rmacc/unique_id"  # in the group's store, which torch already prefixes per group

# Collectives the inner groups serve (the names torch.distributed calls in 1.13 and 2.x).
DELEGATED = (
    "allreduce", "allreduce_coalesced", "allgather", "allgather_coalesced", "_allgather_base",
    "allgather_into_tensor_coalesced", "broadcast", "reduce", "gather", "scatter",
    "reduce_scatter", "_reduce_scatter_base", "reduce_scatter_tensor_coalesced", "send",
    "recv", "recv_anysource", "_start_coalescing", "_end_coalescing",
)


def _first_tensor(values):
    for v in values:
        if isinstance(v, torch.Tensor):
            return v
        if isinstance(v, (list, tuple)):
            t = _first_tensor(v)
            if t is not None:
                return t
    return None


def _inner_nccl(store, rank, size, timeout):
    opts = _c10d.ProcessGroupNCCL.Options()
    opts._timeout = timeout
    return _c10d.ProcessGroupNCCL(dist.PrefixStore("rmacc/nccl/", store), rank, size, opts)


def _share_id(store, rank):
    """Rank 0 makes the unique id and puts it in the store; the others read it (the store's
    get waits for it, up to the store's timeout). The first byte says whether rank 0
    succeeded, so that the others fail at once instead of waiting for a rendezvous."""
    uid = _lib.UniqueId()
    if rank == 0:
        code = _lib.lib.rmaccGetUniqueId(ctypes.byref(uid))
        store.set(_ID_KEY, bytes([code == _lib.SUCCESS]) + bytes(uid))
        _lib.check(code, "rmaccGetUniqueId")
        return uid
    data = bytes(store.get(_ID_KEY))
    if not data[:1] == b"\x01" or len(data) != 1 + _lib.UNIQUE_ID_BYTES:
        raise RmaccError(4, "rank 0 of the group could not create rmacc's unique id (see its "
                         "error)", "rmaccGetUniqueId")
    ctypes.memmove(ctypes.byref(uid), data[1:], _lib.UNIQUE_ID_BYTES)
    return uid


class RmaccProcessGroup(dist.ProcessGroup):
    """What dist.init_process_group / dist.new_group(backend="rmacc") return."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self._store, self._rank, self._size, self._timeout = store, rank, size, timeout
        self._comm = None
        self._cpu = _c10d.ProcessGroupGloo(dist.PrefixStore("rmacc/gloo/", store), rank, size,
                                           timeout)
        self._cuda = None
        if torch.cuda.is_available() and dist.is_nccl_available():
            self._cuda = _inner_nccl(store, rank, size, timeout)
        self.rmacc_device_type = "cpu" if self._cuda is None else "cuda"
        self._rmacc_cuda = self._cuda is not None

    # --- what torch.distributed asks of every process group ---------------------------

    def getBackendName(self):
        return "rmacc"

    def name(self):
        return "rmacc"

    def rank(self):
        return self._rank

    def size(self):
        return self._size

    def __repr__(self):
        return "RmaccProcessGroup(rank %d of %d, rmacc on %s, %s)" % (
            self._rank, self._size, self.rmacc_device_type, self._comm or "no communicator yet")

    # --- the communicator ---------------------------------------------------------------

    def communicator(self, device=None):
        """This group's rmacc.Communicator (made now if it does not exist: every rank of the
        group must then call). device: the rmacc device's tensors' device (default: the
        current CUDA device, or the CPU)."""
        if device is None:
            device = torch.device("cpu") if self.rmacc_device_type == "cpu" else \
                torch.device("cuda", torch.cuda.current_device())
        elif device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        if self._comm is not None:
            if self._comm.device != device:
                raise ValueError("this rmacc group's communicator works on %s, not on %s "
                                 "(one device per group, as with NCCL)"
                                 % (self._comm.device, device))
            return self._comm
        if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
            raise RuntimeError("the first rmacc call of a group makes its communicator, which "
                               "cannot happen inside CUDA graph capture: make one call (or call "
                               "rmacc.distributed.communicator(group)) before capturing")
        if "RMACC_TIMEOUT_S" not in os.environ:
            # librmacc reads it at its first use in the process: the group's timeout then.
            os.environ["RMACC_TIMEOUT_S"] = "%g" % self._timeout.total_seconds()
        claim_backend(device)
        self._comm = Communicator._from_unique_id(_share_id(self._store, self._rank),
                                                  self._rank, self._size, device)
        return self._comm

    def _inner(self, tensor):
        if tensor is not None and tensor.device.type == "cuda" or \
                tensor is None and self._cuda is not None:
            if self._cuda is None:
                raise RuntimeError("this rmacc group has no NCCL group for CUDA tensors "
                                   "(CUDA or NCCL was not available when it was made)")
            return self._cuda
        return self._cpu

    def _is_rmacc(self, tensor):
        # is_cuda / is_cpu: a tenth of the time of tensor.device.type, once a call.
        return tensor.is_cuda if self._rmacc_cuda else tensor.is_cpu

    def _work(self, comm, result):
        return StreamWork(comm, result) if self._rmacc_cuda else DoneWork(result)

    # --- rmacc's collectives -------------------------------------------------------------

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        if not self._is_rmacc(output):
            return self._inner(output).alltoall_base(output, input, output_split_sizes,
                                                     input_split_sizes, *_opts(opts))
        comm = self._comm
        if comm is None:
            comm = self.communicator(output.device)
        # torch.distributed passes [] for None (equal splits).
        comm.all_to_all_single(output, input, output_split_sizes or None,
                               input_split_sizes or None)
        return self._work(comm, [output])

    def alltoall(self, output_tensors, input_tensors, opts=None):
        if not output_tensors or not self._is_rmacc(output_tensors[0]):
            return self._inner(_first_tensor(output_tensors)).alltoall(
                output_tensors, input_tensors, *_opts(opts))
        comm = self._comm or self.communicator(output_tensors[0].device)
        comm.all_to_all(output_tensors, input_tensors)
        return self._work(comm, output_tensors)

    def barrier(self, opts=None):
        # PyTorch 2.x says on which device (BarrierOptions.device); 1.13 does not: NCCL's
        # group where there is one, as an NCCL job's barrier would be.
        device = getattr(opts, "device", None)
        inner = self._cpu if device is not None and device.type == "cpu" else self._inner(None)
        return inner.barrier(*_opts(opts))

    def monitored_barrier(self, *args, **kwargs):
        return self._cpu.monitored_barrier(*args, **kwargs)

    # --- lifetime -------------------------------------------------------------------------

    def shutdown(self):
        """Destroys the communicator (dist.destroy_process_group; also safe to call twice)."""
        comm, self._comm = self._comm, None
        if comm is not None:
            comm.close()

    def abort(self):
        comm, self._comm = self._comm, None
        if comm is not None:
            comm.abort()


def _opts(opts):
    return () if opts is None else (opts,)


def _delegate(name):
    def call(self, *args, **kwargs):
        return getattr(self._inner(_first_tensor(args)), name)(*args, **kwargs)
    call.__name__ = name
    call.__doc__ = "Served by the inner NCCL (CUDA tensors) or gloo (CPU tensors) group."
    return call


for _name in DELEGATED:
    setattr(RmaccProcessGroup, _name, _delegate(_name))
