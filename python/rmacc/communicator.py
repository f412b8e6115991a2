"""rmacc.Communicator: an rmacc communicator over the ranks of a torch.distributed group.

Backend rule (RMACC_BACKEND is read once per process, when its first communicator is made):
the first Communicator of a process decides. A communicator for CPU tensors runs the host
backend, one for CUDA tensors the CUDA backend; if RMACC_BACKEND is unset (or `auto`) the
package sets it accordingly, and if it is set to the other backend the constructor raises
ValueError. A later Communicator for the other kind of device raises ValueError too.
"""
import atexit
import ctypes
import itertools
import os
import threading
import weakref

import torch
import torch.distributed as dist

from . import _lib
from ._args import (check_splits, check_tensor, counts_and_displs, fill_counts, in_rows,
                    rmacc_dtype, row_elements, size_arrays)
from ._lib import RmaccError, check, lib

_process_backend = None  # "host" or "cuda": fixed by the first communicator of the process
_backend_lock = threading.Lock()
_ids = itertools.count(1)
custom_op_registered = False  # set by _ops.register()
_by_id = weakref.WeakValueDictionary()  # comm id -> Communicator, for the torch custom op
_open = weakref.WeakSet()  # communicators to destroy at interpreter exit


def resolve_device(device, group):
    """CPU or one CUDA device. None: CUDA (the current device) when the group's torch backend
    is NCCL, CPU otherwise."""
    if device is None:
        backend = str(dist.get_backend(group)).lower()
        device = "cuda" if "nccl" in backend else "cpu"
    device = torch.device(device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError("device %s: CUDA is not available in this process" % device)
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
    elif device.type != "cpu":
        raise ValueError("device %s: rmacc works on CPU or CUDA tensors" % device)
    return device


def claim_backend(device):
    """Makes this process's rmacc backend match `device` (see the module comment)."""
    global _process_backend
    want = "cuda" if device.type == "cuda" else "host"
    with _backend_lock:
        if _process_backend is None:
            env = os.environ.get("RMACC_BACKEND", "").strip().lower()
            if env in ("", "auto"):
                os.environ["RMACC_BACKEND"] = want  # read by librmacc at its first communicator
            elif env != want:
                raise ValueError("device %s needs rmacc's %s backend, but RMACC_BACKEND=%s"
                                 % (device, want, os.environ["RMACC_BACKEND"]))
            _process_backend = want
        elif _process_backend != want:
            raise ValueError(
                "device %s needs rmacc's %s backend, but this process already uses the %s "
                "backend (it is chosen once per process, by the first Communicator)"
                % (device, want, _process_backend))


def _group_src(group):
    """Global rank of the group's rank 0 (torch.distributed wants global ranks as src)."""
    if group is None or group is dist.group.WORLD:
        return 0
    for fn in ("get_global_rank", "_get_global_rank"):
        f = getattr(dist, fn, None) or getattr(dist.distributed_c10d, fn, None)
        if f is not None:
            return f(group, 0)
    raise RuntimeError("cannot map group rank 0 to a global rank in this PyTorch")


def _share_unique_id(group, rank, device):
    """Rank 0 makes the unique id; the group broadcasts it. The first byte says whether rank
    0 succeeded, so that the others fail at once instead of waiting for a rendezvous."""
    uid = _lib.UniqueId()
    failure = None
    if rank == 0:
        try:
            check(lib.rmaccGetUniqueId(ctypes.byref(uid)), "rmaccGetUniqueId")
        except RmaccError as e:
            failure = e
    payload = bytes([failure is None]) + bytes(uid)
    buf = torch.tensor(list(payload), dtype=torch.uint8)
    if "nccl" in str(dist.get_backend(group)).lower():
        buf = buf.to(device if device.type == "cuda" else torch.device("cuda"))
    dist.broadcast(buf, src=_group_src(group), group=group)
    data = bytes(buf.cpu().tolist())
    if failure is not None:
        raise failure
    if not data[0]:
        raise RmaccError(4, "rank 0 could not create the unique id (see its error)",
                         "rmaccGetUniqueId")
    ctypes.memmove(ctypes.byref(uid), data[1:], _lib.UNIQUE_ID_BYTES)
    return uid


class Communicator:
    """Collective over a torch.distributed process group (the default group when None):
    every rank of the group must construct it. See the module comment for `device`."""

    def __init__(self, group=None, device=None):
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("rmacc.Communicator needs torch.distributed: call "
                               "torch.distributed.init_process_group first")
        self._handle = None
        self._closed = True
        self.group = group
        device = resolve_device(device, group)
        claim_backend(device)
        rank, size = dist.get_rank(group), dist.get_world_size(group)
        if rank < 0:
            raise ValueError("this process is not a member of the group")
        self._start(_share_unique_id(group, rank, device), rank, size, device)

    @classmethod
    def _from_unique_id(cls, uid, rank, size, device):
        """A communicator whose unique id came some other way (rmacc.distributed: through the
        process group's store); `device` is resolved and claimed by the caller."""
        comm = cls.__new__(cls)
        comm._handle = None
        comm._closed = True
        comm.group = None
        comm._start(uid, rank, size, device)
        return comm

    def _start(self, uid, rank, size, device):
        self._lock = threading.Lock()
        self._blocks = 0  # live rmacc.empty allocations: destroying waits for them
        self.device = device
        handle = ctypes.c_void_p()
        if self.device.type == "cuda":
            # librmacc's CUDA backend takes the device current at init; the caller's current
            # device comes back afterwards.
            with torch.cuda.device(self.device):
                torch.cuda.synchronize()  # the device's primary context exists and is current
                code = lib.rmaccCommInitRank(ctypes.byref(handle), size, uid, rank)
        else:
            code = lib.rmaccCommInitRank(ctypes.byref(handle), size, uid, rank)
        check(code, "rmaccCommInitRank")
        self._handle = handle
        self._closed = False
        self._query()
        # Count arrays reused by every all_to_all_single (building new ones costs µs per call).
        # Like an NCCL communicator, one communicator is not for concurrent use by threads.
        self._counts = [size_arrays(self.size) for _ in range(4)]
        self._filled = None  # (send splits, receive splits, row) the count arrays hold
        self._alltoallv = lib.rmaccAlltoAllv
        self._dynamic = getattr(lib, "rmaccAlltoAllvDynamic", None)
        self._workspaces = {}  # stream -> all_to_all_v's count arrays (_dynamic_workspace)
        self._splits_shape = torch.Size((self.size,))
        self._int64s = ctypes.c_int64 * self.size
        self._cuda_index = None
        self._device_index = -1  # check_tensor: the GPU index, -1 for the CPU
        if self.device.type != "cuda":
            self._stream = lambda: None  # host backend: the call returns when done
        else:
            self._cuda_index = self.device.index if self.device.index is not None \
                else torch.cuda.current_device()
            self._device_index = self._cuda_index
            # The current stream's handle without a torch.cuda.Stream object (~3 us less a call
            # on an H200 host); the _stream method where this PyTorch lacks the raw getter.
            raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
            if raw is not None:
                self._stream = lambda index=self._cuda_index: raw(index)
        self.id = next(_ids)
        _by_id[self.id] = self
        _open.add(self)

    def _query(self):
        v = [ctypes.c_int() for _ in range(6)]
        check(lib.rmaccCommUserRank(self._handle, ctypes.byref(v[0])), "rmaccCommUserRank",
              self._handle)
        check(lib.rmaccCommCount(self._handle, ctypes.byref(v[1])), "rmaccCommCount", self._handle)
        check(lib.rmaccCommLocalInfo(self._handle, *[ctypes.byref(x) for x in v[2:]]),
              "rmaccCommLocalInfo", self._handle)
        (self.rank, self.size, self.local_rank, self.local_size, self.node,
         self.num_nodes) = (x.value for x in v)

    # --- lifetime -----------------------------------------------------------------------

    def close(self):
        """Destroys the communicator (once; later calls do nothing). If tensors from
        rmacc.empty(comm=self) are still alive, the destruction waits until the last one is
        freed, so that their memory stays valid; the communicator takes no calls either way."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._blocks:
                return  # _block_freed destroys it
        self._destroy()

    def abort(self):
        """Stops the communicator at once (also releasing peers blocked on it), without
        waiting for work in flight. Tensors from rmacc.empty(comm=self) become invalid."""
        with self._lock:
            if self._handle is None:
                return
            handle, self._handle, self._closed = self._handle, None, True
        check(lib.rmaccCommAbort(handle), "rmaccCommAbort")

    def _destroy(self):
        with self._lock:
            handle, self._handle = self._handle, None
        if handle is not None:
            check(lib.rmaccCommDestroy(handle), "rmaccCommDestroy")

    def __del__(self):
        # A communicator dropped without close() would leave its threads running. Only a
        # communicator without live rmacc.empty tensors can get here (they hold it).
        try:
            if getattr(self, "_handle", None) is not None:
                self._closed = True
                self._destroy()
        except Exception:  # noqa: BLE001 - never raise from a finaliser
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _live(self):
        if self._closed:
            raise RuntimeError("this rmacc communicator is closed")
        return self._handle

    def _stream(self):  # CUDA without the raw getter (__init__ sets the others)
        return torch.cuda.current_stream(self.device).cuda_stream

    # --- collectives --------------------------------------------------------------------

    def all_to_all_single(self, output, input, output_split_sizes=None, input_split_sizes=None):
        """torch.distributed.all_to_all_single's semantics: input_split_sizes[j] rows of dim 0
        go to rank j, output_split_sizes[i] rows arrive from rank i, in rank order; None means
        equal splits. CUDA tensors: enqueued on the current stream, returns at once (a
        mismatch between ranks is then raised by synchronize()). CPU: returns when done."""
        if _compiling() and custom_op_registered:
            return torch.ops.rmacc.all_to_all_single(
                output, input, output_split_sizes, input_split_sizes, self.id)
        args = self._a2a_args(output, input, output_split_sizes, input_split_sizes)
        rc = self._alltoallv(*args)
        if rc:
            raise RmaccError(rc, in_rows(_lib.last_error(rc, args[7]), self._filled[2]),
                             "all_to_all_single")

    def _a2a_args(self, output, input, output_split_sizes, input_split_sizes):
        """Checks all_to_all_single's arguments; returns rmaccAlltoAllv's (bench/torch_a2a.py
        times this alone: it is what the Python layer adds to the C call)."""
        handle = self._live()
        check_tensor(output, "output", self.device, self._device_index)
        check_tensor(input, "input", self.device, self._device_index)
        if output.dtype != input.dtype:
            raise TypeError("output is %s but input is %s: they must have the same dtype"
                            % (output.dtype, input.dtype))
        code = rmacc_dtype(input, "input")
        row = row_elements(input)
        if row_elements(output) != row:
            raise ValueError("a row of output (dim 0) holds %d elements, one of input %d: the "
                             "trailing dimensions must hold as many elements"
                             % (row_elements(output), row))
        n = self.size
        osplits = check_splits(output_split_sizes, output.shape[0], n, "output_split_sizes",
                               "output")
        isplits = check_splits(input_split_sizes, input.shape[0], n, "input_split_sizes", "input")
        sc, sd, rc, rd = self._counts
        # A MoE layer calls with the same splits again and again: the arrays already hold them.
        last = self._filled
        if last is None or row != last[2] or isplits != last[0] or osplits != last[1]:
            fill_counts(sc, sd, isplits, row)
            fill_counts(rc, rd, osplits, row)
            self._filled = (isplits[:], osplits[:], row)
        return (input.data_ptr(), sc, sd, output.data_ptr(), rc, rd, code, handle,
                self._stream())

    def all_to_all(self, output_list, input_list):
        """torch.distributed.all_to_all's semantics: input_list[j] goes to rank j and
        output_list[i] receives rank i's tensor. Tensors may have any shapes (their element
        counts must agree pairwise between ranks) and need not be contiguous."""
        handle = self._live()
        n = self.size
        for name, lst in (("output_list", output_list), ("input_list", input_list)):
            if not isinstance(lst, (list, tuple)):
                raise TypeError("%s must be a list of tensors, not %s" % (name, type(lst).__name__))
            if len(lst) != n:
                raise ValueError("%s has %d tensors, the group has %d ranks" % (name, len(lst), n))
            for i, t in enumerate(lst):
                if not isinstance(t, torch.Tensor):
                    raise TypeError("%s[%d] must be a torch.Tensor" % (name, i))
                if t.device != self.device:
                    raise ValueError("%s[%d] is on %s, this communicator works on %s"
                                     % (name, i, t.device, self.device))
        dtype = input_list[0].dtype
        for name, lst in (("output_list", output_list), ("input_list", input_list)):
            for i, t in enumerate(lst):
                if t.dtype != dtype:
                    raise TypeError("%s[%d] is %s, input_list[0] is %s: all tensors must share "
                                    "one dtype" % (name, i, t.dtype, dtype))
        code = rmacc_dtype(input_list[0], "input_list[0]")
        flat_in = torch.cat([t.reshape(-1) for t in input_list])
        out_sizes = [t.numel() for t in output_list]
        flat_out = torch.empty(sum(out_sizes), dtype=flat_in.dtype, device=self.device)
        sc, sd = counts_and_displs([t.numel() for t in input_list], 1, n)
        rc, rd = counts_and_displs(out_sizes, 1, n)
        check(lib.rmaccAlltoAllv(flat_in.data_ptr(), sc, sd, flat_out.data_ptr(), rc, rd, code,
                                 handle, self._stream()), "all_to_all", handle)
        for t, part in zip(output_list, torch.split(flat_out, out_sizes)):
            t.copy_(part.view(t.shape))

    def all_to_all_v(self, output, input, input_splits):
        """DESIGN.md §4.1: input_splits (rows of dim 0 per destination) is a tensor on the
        communicator's device, read when the stream reaches the call; received blocks are
        packed into output in source-rank order. Returns the rows received from each rank, as
        a new int64 tensor on the device, written before later work on the stream runs.
        Under torch.cuda.graph each replay reads input_splits anew.
        Needs rmaccAlltoAllvDynamic (not in every librmacc yet)."""
        if self._dynamic is None:
            raise NotImplementedError(
                "all_to_all_v needs rmaccAlltoAllvDynamic (DESIGN.md §4.1), which %s does not "
                "export yet; use all_to_all_single with host split sizes" % _lib.path)
        handle = self._live()
        check_tensor(output, "output", self.device, self._device_index)
        check_tensor(input, "input", self.device, self._device_index)
        check_tensor(input_splits, "input_splits", self.device, self._device_index)
        if output.dtype != input.dtype:
            raise TypeError("output is %s but input is %s: they must have the same dtype"
                            % (output.dtype, input.dtype))
        if input_splits.shape != self._splits_shape or input_splits.dtype.is_floating_point:
            raise ValueError("input_splits must be an integer tensor of shape (%d,), not %s %s"
                             % (self.size, input_splits.dtype, tuple(input_splits.shape)))
        code = rmacc_dtype(input, "input")
        row = row_elements(input)
        if row_elements(output) != row:
            raise ValueError("output's rows hold %d elements, input's %d"
                             % (row_elements(output), row))
        if self._cuda_index is None:
            return self._all_to_all_v_host(output, input, input_splits, row, code, handle)
        return self._all_to_all_v_device(output, input, input_splits, row, code, handle,
                                         self._stream())

    def _all_to_all_v_device(self, output, input, input_splits, row, code, handle, stream):
        """all_to_all_v's counts converted by tensor operations on the stream, which rmacc's
        call then reads when the stream reaches it (CUDA; also right on the host backend)."""
        sc, sd, prefix, rcounts, rd = self._dynamic_workspace(stream)
        # Splits in rows to counts in elements, and their exclusive prefix sum (sd[0] stays 0):
        # size_t and int64 share a layout. In place, so no tensor is made for them per call.
        if row == 1 and input_splits.dtype == torch.int64:
            sc = input_splits
        else:
            torch.mul(input_splits, row, out=sc)
        torch.cumsum(sc, 0, out=prefix)  # = sd[1:], a view made once
        rc = self._dynamic(input.data_ptr(), sc.data_ptr(), sd.data_ptr(), output.data_ptr(),
                           output.numel(), rcounts.data_ptr(), rd.data_ptr(), code, handle,
                           stream)
        if rc:
            raise RmaccError(rc, _lib.last_error(rc, handle), "all_to_all_v")
        # A new tensor: the caller may keep it past the next call.
        if row > 1:
            return torch.div(rcounts, row, rounding_mode="floor")
        return rcounts.clone()  # rows of one element (or of none: counts all 0)

    def _all_to_all_v_host(self, output, input, input_splits, row, code, handle):
        """all_to_all_v on the host backend, which reads the counts during the call, from host
        memory: they are converted here, in the count arrays all_to_all_single uses, rather than
        by tensor operations (each costs microseconds on a CPU)."""
        splits = input_splits.tolist()
        sc, sd, _, rd = self._counts
        last = self._filled
        if last is None or row != last[2] or splits != last[0]:
            fill_counts(sc, sd, splits, row)
        # The call writes the receive arrays: all_to_all_single must refill them.
        self._filled = (splits, None, row)
        # The received counts go straight into the tensor returned, then from elements to rows.
        got = torch.empty(self._splits_shape, dtype=torch.int64)
        ptr = got.data_ptr()
        code = self._dynamic(input.data_ptr(), sc, sd, output.data_ptr(), output.numel(), ptr,
                             rd, code, handle, None)
        if code:
            raise RmaccError(code, in_rows(_lib.last_error(code, handle), row), "all_to_all_v")
        if row > 1:
            counts = self._int64s.from_address(ptr)
            counts[:] = [c // row for c in counts]
        return got

    def _dynamic_workspace(self, stream):
        """all_to_all_v's arrays (int64, as size_t): send counts, send displacements (n + 1
        entries, the first 0) and a view of all but their first, receive counts and
        displacements (elements). Kept per stream:
        calls on one stream are ordered, so the next call rewrites them only after the stream
        ran the last. A call being captured into a CUDA graph gets arrays of its own, from the
        graph's memory, which every replay reads and writes anew."""
        capturing = stream is not None and torch.cuda.is_current_stream_capturing()
        ws = None if capturing else self._workspaces.get(stream)
        if ws is None:
            n = self.size
            buf = torch.zeros(4 * n + 1, dtype=torch.int64, device=self.device)
            ws = (buf[:n], buf[n:2 * n + 1], buf[n + 1:2 * n + 1], buf[2 * n + 1:3 * n + 1],
                  buf[3 * n + 1:])
            if not capturing:
                self._workspaces[stream] = ws
        return ws

    def barrier(self):
        """Every rank has entered before any leaves. CUDA: enqueued on the current stream."""
        handle = self._live()
        check(lib.rmaccBarrier(handle, self._stream()), "barrier", handle)

    def synchronize(self):
        """Waits for this communicator's work on the current stream (CUDA) and raises the
        error of any completed call that failed (e.g. splits that disagreed between ranks)."""
        handle = self._live()
        rc = lib.rmaccStreamSynchronize(handle, self._stream())
        if rc:  # the failed call was most likely the last all_to_all_single: its rows
            row = self._filled[2] if self._filled else 1
            raise RmaccError(rc, in_rows(_lib.last_error(rc, handle), row), "synchronize")

    def __repr__(self):
        state = "closed" if self._closed else "rank %d/%d, node %d/%d, local %d/%d" % (
            self.rank, self.size, self.node, self.num_nodes, self.local_rank, self.local_size)
        return "rmacc.Communicator(%s, %s)" % (self.device, state)

    # --- rmacc.empty bookkeeping (memory.py) -----------------------------------------

    def _block_allocated(self):
        with self._lock:
            self._blocks += 1

    def _block_freed(self):
        with self._lock:
            self._blocks -= 1
            destroy = self._closed and self._blocks == 0 and self._handle is not None
        if destroy:
            self._destroy()


def _never():
    return False


# torch.compile traces the call into the rmacc::all_to_all_single custom op (_ops.py).
_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None) or _never


def comm_by_id(comm_id):
    comm = _by_id.get(comm_id)
    if comm is None:
        raise ValueError("no live rmacc communicator has id %d" % comm_id)
    return comm


@atexit.register
def _close_all():
    # At exit nothing can use rmacc.empty tensors any more: destroy even with live blocks.
    for comm in list(_open):
        comm._closed = True
        try:
            comm._destroy()
        except RmaccError:
            pass
