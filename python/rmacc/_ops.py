"""Registers rmacc::all_to_all_single as a torch custom op (PyTorch >= 2.4), so that
torch.compile graphs can hold the call: Communicator.all_to_all_single routes through it while
compiling. The op names its communicator by Communicator.id; its fake implementation does
nothing (the op only writes `output`, whose shape the caller chose)."""
from typing import List, Optional

import torch

from . import communicator


def register():
    library = getattr(torch, "library", None)
    if library is None or not hasattr(library, "custom_op"):
        return False  # older PyTorch: the plain method only

    @library.custom_op("rmacc::all_to_all_single", mutates_args=("output",))
    def all_to_all_single(output: torch.Tensor, input: torch.Tensor,
                          output_split_sizes: Optional[List[int]],
                          input_split_sizes: Optional[List[int]], comm_id: int) -> None:
        communicator.comm_by_id(comm_id).all_to_all_single(
            output, input, output_split_sizes, input_split_sizes)

    @all_to_all_single.register_fake
    def _(output, input, output_split_sizes, input_split_sizes, comm_id):
        return None

    communicator.custom_op_registered = True
    return True


REGISTERED = register()
