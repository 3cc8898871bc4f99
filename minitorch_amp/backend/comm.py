"""Collectives on arrays between processes: MPI (mpi4py) for CPUs and as the launcher, NCCL
(``cupy.cuda.nccl``) between GPUs. ``minitorch_amp.distributed`` puts Tensors on top.

One *world* per process, made by :func:`init` (``distributed.init_parallel_env``):

* ``LocalComm``: not started by ``mpiexec`` (or a world of one): every collective is the
  identity, so the same script runs on one process without MPI installed.
* ``MPIComm``: every rank started by ``mpiexec -n N``. CuPy arrays travel through host copies.
* ``NCCLComm``: CuPy arrays on one GPU per rank; MPI still carries the control messages
  (the NCCL id, the checks below, barriers, objects).

Two promises every communicator keeps, because a distributed bug must not become a hang:

1. **Checked**: every collective, the library's own included (gradient buckets, found_inf,
   the sharded broadcasts, the model check at wrap time), first exchanges a fixed-size
   descriptor (which collective, dtype, shape, root/op, and who called it) with every rank. If
   they differ, every rank raises the same :class:`CollectiveMismatchError` that lists what
   each rank passed, and nothing moved.
2. **Timed**: MPI waits are non-blocking requests polled until ``timeout`` seconds; a rank
   that died, hung or skipped the collective makes the others raise
   :class:`CollectiveTimeoutError`. A rank that exits (its script ends, ``sys.exit``) tells
   the others on its way out, so a rank waiting for it raises :class:`RankExitedError` at
   once. An exception that nobody catches on any rank calls ``MPI_Abort``, so ``mpiexec``
   ends every rank with an error instead of leaving them waiting; so does the exit of a rank
   whose collective failed, even when it caught the error.

Reductions of float16 run in float32 and round once at the end (MPI and NCCL would otherwise
round after every partial sum), so the result does not depend on the number of ranks' order.
Every payload is counted in :attr:`Comm.stats` (by collective and dtype on the wire, the bytes
this rank puts in: its whole input for a reduction or gather, the array for a broadcast's
root only) for the docs and the tests, and so are the checks' descriptors (``'check'``).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import sys
import time
import zlib
from collections import Counter

import numpy as np

from . import device as _device

__all__ = [
    "CollectiveMismatchError",
    "CollectiveTimeoutError",
    "Comm",
    "DistributedError",
    "RankExitedError",
    "ReduceOp",
    "get_world",
    "init",
    "launched_size",
    "shutdown",
]

BACKEND_ENV = "MINITORCH_AMP_DIST_BACKEND"
TIMEOUT_ENV = "MINITORCH_AMP_DIST_TIMEOUT"
DEFAULT_TIMEOUT = 600.0  # seconds a rank waits for the others in one collective
_MAX_DIMS = 8  # dimensions a descriptor carries
_LABEL_BYTES = 48  # who called a collective, as ASCII text in the descriptor
_GOODBYE = 7  # the tag of the note a rank sends the others when it exits


class DistributedError(RuntimeError):
    """Something went wrong between ranks."""


class CollectiveTimeoutError(DistributedError):
    """A collective waited longer than the timeout: another rank died, hung or skipped it."""


class RankExitedError(CollectiveTimeoutError):
    """A collective can never complete: a rank it waits for has exited without calling it.

    A :class:`CollectiveTimeoutError` raised at once instead of after the timeout.
    """


class CollectiveMismatchError(DistributedError, ValueError):
    """Ranks called a collective with different shapes, dtypes, roots or collectives.

    ``calls[r]`` says what rank r called; ``table[r]`` is its descriptor (:func:`describe`).
    """

    def __init__(self, message: str, table=None):
        super().__init__(message)
        self.table = table
        self.calls = [] if table is None else [_explain(row) for row in table]


class ReduceOp:
    """Paddle's reduction codes: ``ReduceOp.SUM`` ... ``ReduceOp.AVG``."""

    SUM = 0
    MAX = 1
    MIN = 2
    PROD = 3
    AVG = 4


OP_NAMES = {0: "SUM", 1: "MAX", 2: "MIN", 3: "PROD", 4: "AVG"}


# Collective codes in a descriptor (0 is "no collective"), and dtype codes.
OPS = ("all_reduce", "broadcast", "all_gather", "reduce_scatter", "barrier", "check",
       "gather_object")  # fmt: skip
_DTYPES = ("bool", "uint8", "int32", "int64", "float16", "float32", "float64")


def launched_size() -> int:
    """How many ranks ``mpiexec`` started (0 when this process was not started by it)."""
    for key in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "PMIX_SIZE"):
        value = os.environ.get(key)
        if value and value.isdigit():
            return int(value)
    return 0


def local_rank() -> int:
    for key in ("MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_LOCAL_RANK"):
        value = os.environ.get(key)
        if value and value.isdigit():
            return int(value)
    return 0


def describe(op: str, array=None, arg: int = 0, caller: str = "", detail: int = 0) -> np.ndarray:
    """The descriptor a collective exchanges before moving data (19 int64, 152 bytes).

    ``[op, dtype, arg, detail, ndim, shape (8), caller (48 ASCII bytes)]``: ``arg`` is the
    reduce op or the root, ``detail`` a checksum the shape does not show (the block lengths of
    an unequal reduce_scatter, a model's signature), ``caller`` who made the call: empty for
    a user's call, else what the library was doing (``'gradient bucket 0'``, ``'found_inf'``).
    """
    dtype, ndim, shape = -1, -1, [-1] * _MAX_DIMS
    if array is not None:
        name = np.dtype(array.dtype).name
        # NOTE: dtypes outside _DTYPES get distinct codes too (100 + NumPy's type number):
        # one shared "unsupported" code would let int8 on one rank meet int16 on another.
        dtype = _DTYPES.index(name) if name in _DTYPES else 100 + np.dtype(array.dtype).num
        ndim = array.ndim
        if ndim > _MAX_DIMS:  # rare: compare the size and the leading dimensions
            shape[0] = int(np.prod(array.shape))
        else:
            shape[:ndim] = array.shape
    head = [OPS.index(op) + 1, dtype, arg, detail, ndim, *shape]
    return np.array(head + _label_words(caller), dtype=np.int64)


@functools.lru_cache(maxsize=1024)
def _label_words(caller: str) -> list:
    """``caller`` as ASCII, cut or padded with zeros to 48 bytes, as 6 int64 words."""
    label = caller.encode("ascii", "replace")[:_LABEL_BYTES].ljust(_LABEL_BYTES, b"\0")
    return np.frombuffer(label, dtype=np.int64).tolist()


def _explain(desc: np.ndarray) -> str:
    """``all_reduce(float32, shape=[4], op=AVG) for gradient bucket 0``, from a descriptor."""
    op = OPS[desc[0] - 1] if desc[0] > 0 else "?"
    caller = desc[5 + _MAX_DIMS :].tobytes().rstrip(b"\0").decode("ascii", "replace")
    if op == "check" and caller:  # a check of the library's own: the caller says it all
        return caller
    text = op
    if desc[1] >= 0:
        dtype = _DTYPES[desc[1]] if desc[1] < len(_DTYPES) else "unsupported dtype"
        ndim = int(desc[4])
        shape = f"{ndim}-d, size {desc[5]}"
        if ndim <= _MAX_DIMS:
            shape = [int(d) for d in desc[5 : 5 + ndim]]
        extra = ""
        if op == "broadcast":
            extra = f", src={desc[2]}"
        elif op in ("all_reduce", "reduce_scatter"):
            extra = f", op={OP_NAMES.get(int(desc[2]), desc[2])}"
        if op == "reduce_scatter" and desc[3]:
            extra += f", blocks #{int(desc[3]) & 0xFFFFFFFF:08x}"
        text = f"{op}({dtype}, shape={shape}{extra})"
    return f"{text} for {caller}" if caller else text


def mismatch_message(table: np.ndarray) -> str:
    """What :class:`CollectiveMismatchError` says: every rank's call, from the descriptors."""
    lines = "; ".join(f"rank {r}: {_explain(row)}" for r, row in enumerate(table))
    ours = ""
    if (table[:, 5 + _MAX_DIMS :] != 0).any():  # some rank was inside the library
        ours = (
            " The calls 'for ...' and the checks are made by minitorch_amp itself (the "
            "gradient sync after backward, GradScaler, a sharded step, wrapping a model): "
            "every rank must run the same steps, on as many batches, with the same settings."
        )
    return (
        f"the ranks called a collective with different arguments ({lines}). Every rank "
        "must call the same collective with the same shape and dtype (and the same src); "
        f"nothing was sent.{ours}"
    )


class Comm:
    """The communicator interface; subclasses move the bytes.

    Every method is a collective: each rank must call it, in the same order. Arrays are
    NumPy or CuPy; ``all_reduce`` and ``broadcast`` work in place.
    """

    backend = "base"

    def __init__(self, rank: int, size: int, timeout: float):
        self.rank, self.size, self.timeout = rank, size, float(timeout)
        self.stats: Counter = Counter()  # (collective, dtype on the wire) -> bytes sent

    # ---- checks ------------------------------------------------------------------------------
    def check(self, op: str, array=None, arg: int = 0, caller: str = "", detail: int = 0):
        """Raise :class:`CollectiveMismatchError` on every rank unless all ranks agree.

        Every collective below calls it first; ``op='check'`` with a ``caller`` is a check of
        the library's own (a sharding level, the start of a sharded step). Returns the table of
        every rank's descriptor.
        """
        mine = describe(op, array, arg, caller, detail)
        if self.size > 1:  # the price of the check: one descriptor per collective
            self.stats[("check", "int64")] += mine.nbytes
        table = self.exchange(mine, lambda: f"{_explain(mine)} (its argument check)")
        if table.tobytes() != mine.tobytes() * self.size:
            raise CollectiveMismatchError(mismatch_message(table), table)
        return table

    def exchange(self, values: np.ndarray, what="an exchange") -> np.ndarray:
        """All ranks' int64 vectors (same length everywhere), as a ``[size, n]`` array.

        ``what`` names the wait in errors (a string, or a function that makes it, if needed).

        NOTE: only :meth:`check` calls it without a check just before: an exchange of another
        length on one rank would meet the descriptors of the others (MPI cannot pair them).
        """
        return values[None].copy()

    def _count(self, op: str, array) -> None:
        self.stats[(op, np.dtype(array.dtype).name)] += int(array.nbytes)

    # ---- collectives on arrays -----------------------------------------------------------
    # Each one checks first; ``caller`` names what the library was doing ('' for a user).
    def all_reduce(self, array, op: int = ReduceOp.SUM, caller: str = ""):
        self.check("all_reduce", array, op, caller)
        return self._reduce_like("all_reduce", array, op)

    def reduce_scatter(self, array, op: int = ReduceOp.SUM, counts=None, caller: str = ""):
        """Reduce ``array`` over ranks; return this rank's block.

        Without ``counts``: ``array`` is ``[size * n, ...]`` and every block is ``[n, ...]``.
        With ``counts`` (one block length per rank, summing to ``array.size``): ``array`` is
        flat and rank r gets ``counts[r]`` elements, so unequal blocks need no padding.
        """
        if counts is not None:
            counts = tuple(int(c) for c in counts)
            blocks = zlib.crc32(np.asarray(counts, dtype=np.int64).tobytes()) or 1
            self.check("reduce_scatter", array, op, caller, blocks)  # the same counts too
            if len(counts) != self.size or sum(counts) != array.size or array.ndim != 1:
                raise ValueError(
                    f"reduce_scatter: counts {counts} must hold one block length per rank "
                    f"({self.size}) and add up to the flat array's {array.size} elements"
                )
        else:
            self.check("reduce_scatter", array, op, caller)
        return self._reduce_like("reduce_scatter", array, op, counts)

    def _reduce_like(self, kind: str, array, op: int, counts=None):
        """float16 in float32, bool as uint8, AVG as SUM then a division; result in place
        (all_reduce) or as a new block (reduce_scatter), in ``array``'s dtype."""
        wire = array
        if array.dtype == np.float16:
            wire = array.astype(np.float32)
        elif array.dtype == np.bool_:
            wire = array.view(np.uint8)
        raw_op = ReduceOp.SUM if op == ReduceOp.AVG else op
        self._count(kind, wire)
        out = self._raw(kind, wire, raw_op, counts)
        if op == ReduceOp.AVG:
            if out.dtype.kind != "f":
                out //= self.size
            else:
                out /= out.dtype.type(self.size)
        if array.dtype == np.bool_:  # NOTE: a uint8 SUM can leave 2 in a bool's byte; make it 1
            out = out != 0
        if kind == "all_reduce":
            if out is not array:
                array[...] = out
            return array
        return out.astype(array.dtype, copy=False)

    def broadcast(self, array, root: int, caller: str = ""):
        self.check("broadcast", array, root, caller)  # every rank sees the same root
        if not 0 <= root < self.size:
            raise ValueError(f"broadcast: src={root} is not a rank; there are {self.size} ranks")
        if self.rank == root:  # only the root sends
            self._count("broadcast", array)
        self._raw("broadcast", array, root)
        return array

    def all_gather(self, array, caller: str = ""):
        """``[size, *array.shape]``: every rank's array, in rank order."""
        self.check("all_gather", array, 0, caller)
        self._count("all_gather", array)
        return self._raw("all_gather", array, 0)

    def barrier(self, caller: str = "") -> None:
        """Return when every rank has called it."""
        self.check("barrier", None, 0, caller)  # NOTE: unchecked, it pairs with anything
        self._barrier()

    def _barrier(self) -> None:
        """Wait for every rank (nothing to wait for in a world of one)."""

    def gather_object(self, obj, root: int = 0):
        """Every rank's picklable ``obj`` as a list on ``root`` (None on the others)."""
        self.check("gather_object", None, root)
        return [obj]

    def _raw(self, kind: str, array, arg: int, counts=None):
        """Move the bytes: ``arg`` is the reduce op or the root; ``counts`` the block lengths
        of a reduce_scatter with unequal blocks. Returns the result array."""
        if kind == "all_gather":
            return array[None].copy()
        return array if kind != "reduce_scatter" else array.copy()

    def close(self) -> None:
        """Release what the communicator holds."""


class LocalComm(Comm):
    """A world of one process: nothing to move, every collective is the identity."""

    backend = "local"

    def __init__(self, timeout: float = DEFAULT_TIMEOUT):
        super().__init__(0, 1, timeout)


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
        host = np.ascontiguousarray(_device.asnumpy(array))  # CuPy arrays travel via the host
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
            "the 'dist' extra: pip install 'minitorch_amp[dist]'"
        ) from exc
    return MPI


def reduce_found_inf(flag):
    """OR a bool overflow flag over all ranks, in place, so every rank skips the same steps.

    GradScaler calls it after unscaling; outside a multi-rank world it does nothing. On NCCL
    the flag stays on the GPU (no host read).
    """
    if _world is not None and _world.size > 1:
        _world.all_reduce(flag, ReduceOp.MAX, caller="found_inf")
    return flag


# ---- the world --------------------------------------------------------------------------
_world: Comm | None = None
_previous_excepthook = None


def get_world() -> Comm | None:
    """The communicator :func:`init` made, or None before it."""
    return _world


def init(backend: str | None = None, timeout: float | None = None) -> Comm:
    """Start this process's world once (later calls return it).

    Args:
        backend: ``'mpi'``, ``'nccl'`` or ``'local'``; default from ``MINITORCH_AMP_DIST_BACKEND``,
            else NCCL when the arrays live on GPUs and there is a GPU per local rank, MPI
            when ``mpiexec`` started several ranks, and local otherwise.
        timeout: seconds to wait for the other ranks in one collective (default from
            ``MINITORCH_AMP_DIST_TIMEOUT``, else 600).
    """
    global _world
    if _world is not None:
        return _world
    timeout = _timeout(timeout)
    name = _choose(backend)
    if name == "local":
        _world = LocalComm(timeout)
        return _world
    if name == "nccl" and _device.current_place().kind == "gpu":
        count = _device.cupy.cuda.runtime.getDeviceCount()
        _device.set_device(f"gpu:{local_rank() % count}")
    _world = (NCCLComm if name == "nccl" else MPIComm)(timeout)
    _install_abort_hook(_world)
    return _world


def shutdown() -> None:
    """Forget the world (tests); the next :func:`init` starts a new one."""
    global _world
    if _world is not None:
        _world.close()
    _world = None


def _timeout(timeout) -> float:
    if timeout is None:
        raw = os.environ.get(TIMEOUT_ENV, "")
        try:
            timeout = float(raw) if raw else DEFAULT_TIMEOUT
        except ValueError:
            raise ValueError(f"{TIMEOUT_ENV}={raw!r} is not a number of seconds") from None
        if not timeout > 0:
            raise ValueError(f"{TIMEOUT_ENV}={raw!r} must be a positive number of seconds")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    return float(timeout)


def _choose(backend) -> str:
    name = backend if backend is not None else os.environ.get(BACKEND_ENV, "").strip().lower()
    if name not in ("", "mpi", "nccl", "local"):
        raise ValueError(
            f"unknown distributed backend {name!r}; use 'mpi', 'nccl' or 'local' (or leave "
            f"{BACKEND_ENV} unset to choose automatically)"
        )
    size = launched_size()
    on_gpu = _device.current_place().kind == "gpu"
    if name == "nccl":
        if not on_gpu:
            raise DistributedError(
                "the NCCL backend needs CuPy and a GPU per rank; this process computes on the "
                "CPU. Use backend='mpi'."
            )
        return name
    if name:
        return name
    if size <= 1:
        return "local"
    if on_gpu and _device.cupy.cuda.runtime.getDeviceCount() >= min(size, _local_size()):
        return "nccl"
    return "mpi"


def _local_size() -> int:
    value = os.environ.get("MPI_LOCALNRANKS") or os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE")
    return int(value) if value and value.isdigit() else launched_size()


def _install_abort_hook(world: Comm) -> None:
    """An exception nobody catches on one rank ends every rank (MPI_Abort), not a hang."""
    global _previous_excepthook
    if world.size <= 1 or _previous_excepthook is not None:
        return
    _previous_excepthook = sys.excepthook

    def hook(kind, value, tb):
        _previous_excepthook(kind, value, tb)
        sys.stderr.write(
            f"minitorch_amp.distributed: rank {world.rank} failed; aborting all "
            f"{world.size} ranks.\n"
        )
        sys.stderr.flush()
        world.abort(1)

    sys.excepthook = hook
