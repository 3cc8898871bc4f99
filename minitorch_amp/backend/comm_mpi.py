"""The MPI and NCCL communicators of ``backend.comm`` (mpi4py; ``cupy.cuda.nccl``)."""

from __future__ import annotations

import atexit
import contextlib
import sys
import time

import numpy as np

from . import device as _device
from .comm import (
    _GOODBYE,
    TIMEOUT_ENV,
    CollectiveTimeoutError,
    Comm,
    DistributedError,
    RankExitedError,
    ReduceOp,
)


class MPIComm(Comm):
    """MPI through mpi4py; every wait polls a non-blocking request against the timeout."""

    backend = "mpi"

    def __init__(self, timeout: float, mpi=None):
        self.MPI = mpi or _import_mpi()
        self.comm = self.MPI.COMM_WORLD
        super().__init__(self.comm.Get_rank(), self.comm.Get_size(), timeout)
        self._failed: tuple | None = None  # (error class, why the world broke), or None
        self._ops = {
            ReduceOp.SUM: self.MPI.SUM,
            ReduceOp.MAX: self.MPI.MAX,
            ReduceOp.MIN: self.MPI.MIN,
            ReduceOp.PROD: self.MPI.PROD,
        }
        # Goodbyes: a rank that exits sends every other rank [its rank, the number of
        # collectives it started], on a communicator of their own (no collective can match).
        self._started = 0  # collectives this rank has started (one wait each)
        self._left: dict[int, int] = {}  # rank that exited -> collectives it had started
        self._notes = self.comm.Dup()
        self._note = np.zeros(2, dtype=np.int64)
        self._note_request = self._notes.Irecv(self._note, self.MPI.ANY_SOURCE, _GOODBYE)
        atexit.register(self._say_goodbye)

    def wait(self, request, what) -> None:
        """Poll ``request`` until it completes; raise after ``timeout`` seconds, or at once when
        a rank this collective waits for has exited (:class:`RankExitedError`). ``what``
        names the wait in the error: a string, or a function that makes it only then.

        After either, the world is broken for good: the lost request stays posted and would
        pair with a late rank's next collective. Later waits raise at once, and this process
        ends the whole job (``MPI_Abort``) when it exits, even through ``sys.exit`` or a caught
        error: ``mpiexec`` would otherwise keep waiting for the rank that hung.
        """
        if self._failed:
            kind, why = self._failed
            said = "timed out" if kind is CollectiveTimeoutError else "failed"
            raise kind(f"an earlier collective {said}: {why}")
        self._started += 1
        if request.Test():
            return
        start = time.monotonic()
        spins = 0
        while not request.Test():
            spins += 1
            if spins <= 200:  # spin briefly (small messages finish in microseconds), then nap
                continue
            time.sleep(0.0002)
            # NOTE: a rank that left after taking part in this collective is no reason to
            # stop: its part may still be on its way (goodbyes travel apart from the data).
            gone = [r for r, started in self._read_goodbyes().items() if started < self._started]
            if gone:
                what = what() if callable(what) else what
                self._break(
                    RankExitedError,
                    f"rank {gone[0]} exited while rank {self.rank} waited in {what}: it had "
                    f"started {self._left[gone[0]]} collectives, and this is rank {self.rank}'s "
                    f"collective #{self._started}. Every rank must call the same collectives; "
                    "a rank that ends its script early leaves the others waiting for it. "
                    "This process cannot recover; restart the job.",
                )
            if time.monotonic() - start > self.timeout:
                what = what() if callable(what) else what
                self._break(
                    CollectiveTimeoutError,
                    f"rank {self.rank} waited {self.timeout:g} s in {what} for the other "
                    f"{self.size - 1} rank(s): one of them died, hung, or did not call it. "
                    "This process cannot recover; restart the job (the timeout is "
                    f"init_parallel_env(timeout=...) or {TIMEOUT_ENV}).",
                )

    def _break(self, kind: type, why: str) -> None:
        """Mark the world broken, end the job when this process exits, raise ``kind``."""
        self._failed = (kind, why)
        atexit.register(self._abort_at_exit)
        raise kind(why)

    def _read_goodbyes(self) -> dict[int, int]:
        """The ranks that have exited so far, with the number of collectives each started."""
        while self._note_request and self._note_request.Test():
            self._left[int(self._note[0])] = int(self._note[1])
            self._note_request = self._notes.Irecv(self._note, self.MPI.ANY_SOURCE, _GOODBYE)
        return self._left

    def _say_goodbye(self) -> None:
        """At exit, tell every other rank that this one has left, and after how many
        collectives. MPICH does not end the job when one rank finalizes, so without this a
        rank still waiting for it would wait for the whole timeout."""
        if self._failed or not self._note_request:  # broken (the abort ends all) or closed
            return
        note = np.array([self.rank, self._started], dtype=np.int64)
        sends = [self._notes.Isend(note, r, _GOODBYE) for r in range(self.size) if r != self.rank]
        deadline = time.monotonic() + 1.0  # a 16-byte message is sent eagerly: at once
        while not self.MPI.Request.Testall(sends) and time.monotonic() < deadline:
            time.sleep(0.001)
        if self._note_request:  # nothing more to hear: withdraw the posted receive
            self._note_request.Cancel()
            self._note_request.Wait()

    def close(self) -> None:
        """Leave the world: the other ranks are told, as at exit."""
        self._say_goodbye()
        atexit.unregister(self._say_goodbye)

    def _abort_at_exit(self) -> None:
        sys.stderr.write(
            f"minitorch_amp.distributed: rank {self.rank} exits after a collective failed; "
            f"aborting all {self.size} ranks.\n"
        )
        sys.stderr.flush()
        self.abort(1)

    def exchange(self, values: np.ndarray, what: str = "an exchange") -> np.ndarray:
        values = np.ascontiguousarray(values, dtype=np.int64)
        table = np.empty((self.size, values.size), dtype=np.int64)
        self.wait(self.comm.Iallgather(values, table), what)
        return table

    def _raw(self, kind: str, array, arg: int, counts=None):
        # CuPy arrays travel via the host (NOTE: ascontiguousarray makes a 0-d array 1-d)
        host = np.ascontiguousarray(_device.asnumpy(array)).reshape(array.shape)
        if kind == "all_reduce":
            out = host
            request = self.comm.Iallreduce(self.MPI.IN_PLACE, out, op=self._ops[arg])
            self.wait(request, "all_reduce")
        elif kind == "reduce_scatter" and counts is not None:
            out = np.empty(counts[self.rank], dtype=host.dtype)
            request = self.comm.Ireduce_scatter(host, out, list(counts), op=self._ops[arg])
            self.wait(request, "reduce_scatter")
        elif kind == "reduce_scatter":
            out = np.empty((host.shape[0] // self.size, *host.shape[1:]), dtype=host.dtype)
            request = self.comm.Ireduce_scatter_block(host, out, op=self._ops[arg])
            self.wait(request, "reduce_scatter")
        elif kind == "broadcast":
            out = host
            self.wait(self.comm.Ibcast([_bytes(out), self.MPI.BYTE], root=arg), "broadcast")
        else:  # all_gather
            out = np.empty((self.size, *host.shape), dtype=host.dtype)
            send, recv = [_bytes(host), self.MPI.BYTE], [_bytes(out), self.MPI.BYTE]
            self.wait(self.comm.Iallgather(send, recv), "all_gather")
        on_gpu = _device.get_array_module(array) is not np
        if kind in ("all_reduce", "broadcast"):  # in place
            if out is not array:
                array[...] = _device.to_place(out, _device.place_of(array)) if on_gpu else out
            return array
        return _device.to_place(out, _device.place_of(array)) if on_gpu else out

    def _barrier(self) -> None:
        self.wait(self.comm.Ibarrier(), "barrier")

    def gather_object(self, obj, root: int = 0):
        import pickle

        self.check("gather_object", None, root)
        payload = np.frombuffer(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), np.uint8)
        sizes = self.exchange(np.array([payload.size]), "gather_object (the sizes)")[:, 0]
        recv = None
        if self.rank == root:
            buffer = np.empty(int(sizes.sum()), np.uint8)
            offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
            recv = [buffer, (sizes.tolist(), offsets.tolist()), self.MPI.BYTE]
        self.stats[("gather_object", "bytes")] += int(payload.size)
        self.wait(self.comm.Igatherv([payload, self.MPI.BYTE], recv, root=root), "gather")
        if self.rank != root:
            return None
        return [pickle.loads(buffer[o : o + s].tobytes()) for o, s in zip(offsets, sizes)]

    def abort(self, code: int = 1) -> None:
        """End every rank (``MPI_Abort``), once ``mpiexec`` has this rank's output."""
        _drain_output()
        self.comm.Abort(code)


class NCCLComm(MPIComm):
    """NCCL between GPUs (one per rank) for CuPy arrays; MPI for the control messages.

    NCCL calls are queued on the current CUDA stream and return at once: nothing here waits
    for the GPU. Host (NumPy) arrays still go through MPI.
    """

    backend = "nccl"

    def __init__(self, timeout: float, mpi=None):
        super().__init__(timeout, mpi)
        cupy = _device.cupy
        from cupy.cuda import nccl

        self.nccl = nccl
        uid = nccl.get_unique_id() if self.rank == 0 else None
        uid = self.comm.bcast(uid, root=0)
        self.nccl_comm = nccl.NcclCommunicator(self.size, uid, self.rank)
        self._cupy = cupy
        self._nccl_ops = {
            ReduceOp.SUM: nccl.NCCL_SUM,
            ReduceOp.MAX: nccl.NCCL_MAX,
            ReduceOp.MIN: nccl.NCCL_MIN,
            ReduceOp.PROD: nccl.NCCL_PROD,
        }
        self._nccl_types = {
            "uint8": nccl.NCCL_UINT8,
            "int32": nccl.NCCL_INT32,
            "int64": nccl.NCCL_INT64,
            "float16": nccl.NCCL_FLOAT16,
            "float32": nccl.NCCL_FLOAT32,
            "float64": nccl.NCCL_FLOAT64,
        }

    def _raw(self, kind: str, array, arg: int, counts=None):
        if not isinstance(array, self._cupy.ndarray):
            return super()._raw(kind, array, arg, counts)
        cp = self._cupy
        work = cp.ascontiguousarray(array)
        raw = work.view(cp.uint8) if work.dtype == cp.bool_ else work
        if kind in ("broadcast", "all_gather"):  # byte copies, whatever the dtype
            raw = raw.reshape(-1).view(cp.uint8)
        ntype = self._nccl_types[raw.dtype.name]
        stream = cp.cuda.get_current_stream().ptr
        if kind == "reduce_scatter" and counts is not None:
            # NCCL has no unequal-block reduce-scatter: one reduce per block, to its rank,
            # grouped so NCCL runs them as one operation.
            out = cp.empty(counts[self.rank], dtype=raw.dtype)
            offsets = np.cumsum([0, *counts])
            self.nccl.groupStart()
            for root, (start, n) in enumerate(zip(offsets[:-1], counts)):
                send = raw.data.ptr + int(start) * raw.itemsize
                recv = out.data.ptr if root == self.rank else send  # used on the root only
                self.nccl_comm.reduce(send, recv, n, ntype, self._nccl_ops[arg], root, stream)
            self.nccl.groupEnd()
            return out
        if kind == "reduce_scatter":
            out = cp.empty((work.shape[0] // self.size, *work.shape[1:]), dtype=raw.dtype)
            self.nccl_comm.reduceScatter(
                raw.data.ptr, out.data.ptr, out.size, ntype, self._nccl_ops[arg], stream
            )
            return out
        if kind == "all_gather":
            out = cp.empty((self.size, *work.shape), dtype=work.dtype)
            self.nccl_comm.allGather(raw.data.ptr, out.data.ptr, raw.size, ntype, stream)
            return out
        if kind == "all_reduce":
            self.nccl_comm.allReduce(
                raw.data.ptr, raw.data.ptr, raw.size, ntype, self._nccl_ops[arg], stream
            )
        else:
            self.nccl_comm.bcast(raw.data.ptr, raw.size, ntype, arg, stream)
        if work is not array:  # a non-contiguous input: write the result back
            array[...] = work
        return array

    def close(self) -> None:
        super().close()
        self.nccl_comm.destroy()


def _bytes(array: np.ndarray) -> np.ndarray:
    """A uint8 view of a contiguous array: broadcast and gather copy bytes, whatever the dtype."""
    return array.reshape(-1).view(np.uint8)


def _drain_output(limit: float = 1.0) -> None:
    """Flush stdout and stderr, then wait (``limit`` seconds at most) until they are read.

    NOTE: ``MPI_Abort`` makes ``mpiexec`` kill every rank at once, and what is still on its
    way (in the pipe to the proxy, or between the proxy and ``mpiexec``) is lost: without this
    wait, the traceback saying why the job died went missing in about one abort in eight.
    """
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, OSError, ValueError):  # replaced or closed
            stream.flush()
    try:
        import array
        import fcntl
        import termios
    except ImportError:  # not POSIX: nothing to wait for
        return
    unread, deadline = array.array("i", [0]), time.monotonic() + limit
    for fd in (1, 2):
        while time.monotonic() < deadline:
            try:
                fcntl.ioctl(fd, termios.FIONREAD, unread)  # bytes not yet read from the pipe
            except OSError:  # not a pipe
                break
            if unread[0] == 0:
                break
            time.sleep(0.005)
    time.sleep(0.1)  # and a moment for the proxy to pass it on to mpiexec


def _import_mpi():
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise DistributedError(
            f"this process was started by mpiexec but mpi4py is missing ({exc}); install "
            "the 'dist' extra from the repository root: python -m pip install -e '.[dist]'"
        ) from exc
    return MPI
