"""The torch.distributed Work objects the rmacc process group returns for its own collectives
(all_to_all_single, all_to_all); the delegated collectives return their inner group's works.

NCCL's semantics, which these follow: wait() does not block the host; it makes the caller's
current CUDA stream wait for the collective. rmacc enqueues the call on the stream that was
current at the call, so wait() on that same stream has nothing to add (and adds nothing to a
CUDA graph being captured); on another stream it waits for an event recorded on the call's
stream. A CPU call (host backend) is complete when it returns.
"""
import torch
import torch.distributed as dist

_Work = getattr(dist, "Work", None) or torch._C._distributed_c10d.Work


def _future_of(result):
    fut = torch.futures.Future()
    fut.set_result(result)
    return fut


class _RmaccWork(_Work):
    """What both works answer alike: errors are raised by the call or by synchronize(), so a
    work never holds one."""

    def __init__(self, result):
        super().__init__()
        self._result = result  # the output tensors

    def is_success(self):
        return True

    def exception(self):
        return None

    def result(self):
        return self._result


class DoneWork(_RmaccWork):
    """A collective that finished before the call returned (CPU tensors)."""

    def wait(self, timeout=None):
        return True

    def is_completed(self):
        return True

    def synchronize(self):
        pass

    def get_future(self):
        return _future_of(self._result)


class StreamWork(_RmaccWork):
    """A collective that `comm` enqueued on the stream current at the call. Only its raw
    handle is kept (making a torch.cuda.Stream costs microseconds a call); wait() and the others,
    rarer, wrap it when they need it."""

    def __init__(self, comm, result):
        super().__init__(result)
        self._comm = comm
        self._raw = comm._stream()  # the stream the call went on, as comm's call saw it

    def _stream(self):
        return torch.cuda.ExternalStream(self._raw, device=self._comm.device)

    def wait(self, timeout=None):
        # torch.distributed waits on every call made without async_op: the common case, the
        # same stream, is told from the raw handles alone.
        if self._comm._stream() != self._raw:
            event = torch.cuda.Event()
            event.record(self._stream())
            torch.cuda.current_stream(self._comm.device).wait_event(event)
        return True

    def is_completed(self):
        return self._stream().query()  # conservative: later work on the stream counts too

    def synchronize(self):
        """Blocks the host until the stream has run the call; raises the error of a call that
        failed on the stream (e.g. split sizes that disagree between ranks)."""
        with torch.cuda.stream(self._stream()):
            self._comm.synchronize()

    def get_future(self):
        self.synchronize()
        return _future_of(self._result)
