"""rmacc for PyTorch: AlltoAllV with torch.distributed.all_to_all_single's semantics, over
librmacc's C API (ctypes; no dependency on libtorch's C++ ABI).

    comm = rmacc.Communicator()          # after torch.distributed.init_process_group
    comm.all_to_all_single(out, inp, output_split_sizes, input_split_sizes)
"""
from ._lib import RmaccError, version, path as library_path
from .communicator import Communicator
from .memory import empty
from . import _ops  # noqa: F401 - registers rmacc::all_to_all_single

__all__ = ["Communicator", "RmaccError", "empty", "version", "library_path"]
