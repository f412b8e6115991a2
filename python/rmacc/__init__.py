"""rmacc for PyTorch: AlltoAllV with torch.distributed.all_to_all_single's semantics, over
librmacc's C API (ctypes; no dependency on libtorch's C++ ABI).

    comm = rmacc.Communicator()          # after torch.distributed.init_process_group
    comm.all_to_all_single(out, inp, output_split_sizes, input_split_sizes)
"""
import os as _os
import sys as _sys

# CUDA loads a kernel's module at its first launch by default, and that load waits for the
# whole device to go idle: with a call still waiting for a late peer (or for its device counts)
# nothing moves again (docs/decisions.md#eager-module-loading). Eager loading, chosen before
# CUDA starts, takes that away; a CUDA_MODULE_LOADING the user set wins, and the library warns
# when it finds lazy loading.
if "CUDA_MODULE_LOADING" not in _os.environ:
    _torch = _sys.modules.get("torch")
    if _torch is None or not _torch.cuda.is_initialized():
        _os.environ["CUDA_MODULE_LOADING"] = "EAGER"
# rmacc's internal CUDA streams wait on stream memory operations: each needs a hardware queue
# of its own, or a wait can block the work it waits for (docs/configuration.md). CUDA reads the
# number of queues once, when it starts, so it is chosen here, as tools/rmacc-run does; a value
# the user set wins (the library warns below 16).
if "CUDA_DEVICE_MAX_CONNECTIONS" not in _os.environ:
    _torch = _sys.modules.get("torch")
    if _torch is None or not _torch.cuda.is_initialized():
        _os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "32"

from ._lib import RmaccError, version, path as library_path
from .communicator import Communicator
from .memory import empty
from . import _ops  # noqa: F401 - registers rmacc::all_to_all_single

__all__ = ["Communicator", "RmaccError", "empty", "version", "library_path"]
