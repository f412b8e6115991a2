"""Checks the arguments of the collectives and turns torch's split sizes (rows of dim 0) into
the C API's element counts and displacements. Everything here runs before anything is sent:
a bad argument raises TypeError/ValueError naming it, on this rank only."""
import ctypes
import itertools
import math
import re

import torch

# rmaccDataType_t values (include/rmacc.h)
_INT8, _UINT8, _INT32, _UINT32, _INT64, _UINT64, _F16, _F32, _F64, _BF16 = range(10)

DTYPES = {
    torch.int8: _INT8, torch.uint8: _UINT8, torch.bool: _UINT8,  # bool travels as bytes
    torch.int32: _INT32, torch.int64: _INT64,
    torch.float16: _F16, torch.float32: _F32, torch.float64: _F64, torch.bfloat16: _BF16,
}
# Newer PyTorch has unsigned 32/64-bit tensors; the C API carries them as they are.
for _name, _code in (("uint32", _UINT32), ("uint64", _UINT64)):
    if hasattr(torch, _name):
        DTYPES[getattr(torch, _name)] = _code


def rmacc_dtype(t, name):
    try:
        return DTYPES[t.dtype]
    except KeyError:
        raise TypeError("%s: dtype %s is not supported by rmacc (supported: %s)" % (
            name, t.dtype, ", ".join(sorted(str(d) for d in DTYPES)))) from None


def check_tensor(t, name, device, cuda_index=None):
    """cuda_index: the GPU's index, or -1 for the CPU: compared without making a torch.device
    (a tenth of the time); None compares devices."""
    if not isinstance(t, torch.Tensor):
        raise TypeError("%s must be a torch.Tensor, not %s" % (name, type(t).__name__))
    if cuda_index is None:
        wrong = t.device != device
    else:  # get_device() is -1 on the CPU and on other devices (meta) alike
        wrong = not t.is_cpu if cuda_index < 0 else t.get_device() != cuda_index
    if wrong:
        raise ValueError("%s is on %s, but this communicator works on %s"
                         % (name, t.device, device))
    if not t.is_contiguous():
        raise ValueError("%s must be contiguous (call .contiguous() first)" % name)
    if t.dim() == 0:
        raise ValueError("%s must have at least one dimension (splits are rows of dim 0)" % name)


def row_elements(t):
    rows = t.shape[0]
    return t.numel() // rows if rows else math.prod(t.shape[1:])


def check_splits(splits, rows, size, name, tensor_name):
    """Returns the split sizes as a list of ints, from None (equal split) or a sequence."""
    if splits is None:
        if rows % size:
            raise ValueError("%s is None, so %s's dim 0 (%d) must divide by the group size %d"
                             % (name, tensor_name, rows, size))
        return [rows // size] * size
    if type(splits) is list and len(splits) == size and all(type(s) is int for s in splits) \
            and min(splits) >= 0 and sum(splits) == rows:
        return splits  # the common case, checked quickly (the loop below names what is wrong)
    if isinstance(splits, torch.Tensor):
        splits = splits.tolist()
    try:
        splits = list(splits)
    except TypeError:
        raise TypeError("%s must be a sequence of ints or None, not %s"
                        % (name, type(splits).__name__)) from None
    if len(splits) != size:
        raise ValueError("%s has %d entries, the group has %d ranks" % (name, len(splits), size))
    for i, s in enumerate(splits):
        if isinstance(s, bool) or not isinstance(s, int):
            try:
                s = int(s.__index__())  # numpy integers, SymInt
            except (AttributeError, TypeError):
                raise TypeError("%s[%d] is %r, not an int" % (name, i, s)) from None
            splits[i] = s
        if s < 0:
            raise ValueError("%s[%d] is %d, negative" % (name, i, s))
    if sum(splits) != rows:
        raise ValueError("%s sums to %d rows, but %s has %d rows in dim 0"
                         % (name, sum(splits), tensor_name, rows))
    return splits


def size_arrays(n):
    """A ctypes size_t[n] array; displacement arrays rely on element 0 staying 0."""
    return (ctypes.c_size_t * n)()


def fill_counts(counts_out, displs_out, splits, row):
    """Writes element counts and displacements for splits in rows of `row` elements into two
    size_arrays (librmacc copies them during the call, so they can be reused at once)."""
    counts = splits if row == 1 else [s * row for s in splits]
    counts_out[:] = counts
    displs_out[1:] = list(itertools.accumulate(counts[:-1]))


def counts_and_displs(splits, row, n):
    """New arrays of element counts and displacements (see fill_counts)."""
    counts, displs = size_arrays(n), size_arrays(n)
    fill_counts(counts, displs, splits, row)
    return counts, displs


_MISMATCH = re.compile(r"sends (\d+) elements to rank (\d+), which expects (\d+)")


def in_rows(message, row):
    """librmacc tells a count mismatch in elements; a PyTorch caller splits in rows of dim 0
    (`row` elements each, this rank's): say it in rows, and which split sizes disagree."""
    m = _MISMATCH.search(message)
    if not m or row <= 0:
        return message
    sent, dst, expected = int(m.group(1)), int(m.group(2)), int(m.group(3))
    if sent % row or expected % row:
        return message
    src = re.search(r"rank (\d+) sends", message)
    rows = "rows" if row == 1 else "rows of %d elements" % row
    text = "sends %d %s to rank %d, which expects %d" % (sent // row, rows, dst, expected // row)
    hint = " (input_split_sizes[%d] on rank %s disagrees with output_split_sizes[%s] on rank %d)" \
        % (dst, src.group(1), src.group(1), dst) if src else ""
    return message[:m.start()] + text + message[m.end():] + hint
