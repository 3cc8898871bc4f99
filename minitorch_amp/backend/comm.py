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

import os
import sys
import zlib
from collections import Counter

import numpy as np

from . import device as _device
from .comm_check import _explain, describe, mismatch_message
from .dtypes import FP8, LOW_PRECISION

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
        """float16, bfloat16 and FP8 in float32 (rounded once on the way back), bool as uint8,
        AVG as SUM then a division; result in place (all_reduce) or as a new block
        (reduce_scatter), in ``array``'s dtype."""
        wire = array
        if array.dtype in LOW_PRECISION or array.dtype in FP8:  # 16- and 8-bit in float32
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

    Raises:
        ValueError: a bad argument, or (once started) one other than the world's.
    """
    global _world
    if _world is not None:
        _same_world(_world, backend, timeout)
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


def _same_world(world: Comm, backend, timeout) -> None:
    """Refuse arguments a started world does not have (it cannot change): checked as a first
    call checks them, then compared."""
    asked = {}
    if backend is not None:
        name = _choose(backend)
        asked["backend"] = (name, world.backend)
    if timeout is not None:
        asked["timeout"] = (_timeout(timeout), world.timeout)
    differ = {key: pair for key, pair in asked.items() if pair[0] != pair[1]}
    if differ:
        said = ", ".join(f"{key}={new!r} (it has {old!r})" for key, (new, old) in differ.items())
        raise ValueError(
            f"the parallel env is already started and cannot change: {said}; call "
            "init_parallel_env() without arguments, or with the ones it was started with"
        )


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


# The MPI and NCCL communicators live beside (they build on Comm, defined above).
from .comm_mpi import MPIComm, NCCLComm  # noqa: E402
