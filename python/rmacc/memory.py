"""rmacc.empty: tensors in rmaccMemAlloc memory, which AlltoAllV reads and writes in place
(the zero-copy path; other tensors are staged through rmacc's buffers).

No copy and no C++ extension: on the host backend rmaccMemAlloc returns shared memory, wrapped
with torch.frombuffer over a ctypes array; on CUDA the device pointer is handed to
torch.as_tensor through __cuda_array_interface__. Either way the tensor's storage holds the
owning block, so the memory is freed (rmaccMemFree) when the last view of it dies.
"""
import ctypes
import math

import torch

from . import communicator as _communicator
from ._lib import check, lib


class _Block:
    """One rmaccMemAlloc allocation, freed once when the object dies."""

    def __init__(self, comm, nbytes):
        handle = comm._live()
        ptr = ctypes.c_void_p()
        check(lib.rmaccMemAlloc(handle, ctypes.byref(ptr), nbytes), "rmaccMemAlloc", handle)
        self.comm, self.ptr, self.nbytes = comm, ptr.value, nbytes
        comm._block_allocated()

    def release(self):
        comm, self.comm = self.comm, None
        if comm is None:
            return
        handle = comm._handle
        if handle is not None:  # after abort or interpreter exit the memory is gone already
            lib.rmaccMemFree(handle, ctypes.c_void_p(self.ptr))
        comm._block_freed()


def _host_tensor(block):
    class HostBuffer(ctypes.c_ubyte * block.nbytes):
        def __del__(self):
            self.block.release()

    buf = HostBuffer.from_address(block.ptr)
    buf.block = block
    return torch.frombuffer(buf, dtype=torch.uint8)


class _CudaBuffer:
    def __init__(self, block, device):
        self.block = block
        self.__cuda_array_interface__ = {
            "shape": (block.nbytes,), "typestr": "|u1", "data": (block.ptr, False),
            "version": 2, "strides": None}

    def __del__(self):
        self.block.release()


def empty(shape, dtype=torch.float32, comm=None):
    """An uninitialised tensor of `shape` and `dtype` in `comm`'s rmacc memory (on its
    device). `comm` may be left out when exactly one communicator is open."""
    if comm is None:
        open_comms = [c for c in _communicator._open if not c._closed]
        if len(open_comms) != 1:
            raise ValueError("comm: pass the communicator (%d are open)" % len(open_comms))
        comm = open_comms[0]
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError("shape %s has a negative dimension" % (shape,))
    if not isinstance(dtype, torch.dtype):
        raise TypeError("dtype must be a torch.dtype, not %s" % type(dtype).__name__)
    esize = torch.empty((), dtype=dtype).element_size()
    nbytes = math.prod(shape) * esize
    if nbytes == 0:
        return torch.empty(shape, dtype=dtype, device=comm.device)
    block = _Block(comm, nbytes)
    if comm.device.type == "cuda":
        raw = torch.as_tensor(_CudaBuffer(block, comm.device), device=comm.device)
    else:
        raw = _host_tensor(block)
    return raw.view(dtype).view(shape)
