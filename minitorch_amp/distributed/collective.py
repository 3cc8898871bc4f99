"""Collectives on Tensors, Paddle's signatures: every rank calls them, in the same order.

Each one first checks that every rank passed the same collective, dtype and shape (and
``src``), as the communicator does for every collective, the library's own included. If
not, every rank raises ``CollectiveMismatchError`` saying what each passed, and nothing is
sent. A rank that never arrives makes the others raise ``CollectiveTimeoutError`` (at once,
``RankExitedError``, when it has exited). They work on the tensors' data in place and are
not recorded by autograd.
"""

from __future__ import annotations

import contextlib

from ..autograd.tensor import Tensor
from ..backend import device as _device
from ..backend.comm import ReduceOp
from .env import check_group, world

__all__ = ["ReduceOp", "all_gather", "all_reduce", "broadcast", "reduce_scatter"]

_OPS = (ReduceOp.SUM, ReduceOp.MAX, ReduceOp.MIN, ReduceOp.PROD, ReduceOp.AVG)


class Task:
    """What ``sync_op=False`` returns: the work is already done when it is returned."""

    def wait(self) -> bool:
        return True

    def is_completed(self) -> bool:
        return True


def _done(sync_op: bool):
    return None if sync_op else Task()


@contextlib.contextmanager
def _arguments(what: str):
    """Check a collective's arguments inside; a refusal is said to the other ranks first.

    NOTE: a rank that raised before its collective's descriptor exchange would leave the
    others waiting in theirs, to be paired with its *next* collective. So a refusing rank
    exchanges a descriptor saying so: where every rank refused, each raises its error;
    where only some did, every rank raises the same ``CollectiveMismatchError`` (on a
    refusing rank caused by its error), and the next collective works.
    """
    try:
        yield
    except (TypeError, ValueError) as exc:
        world().check("check", caller=f"{what}: arguments refused")  # raises on a mismatch
        raise exc


def _tensor(value, what: str) -> Tensor:
    if not isinstance(value, Tensor):
        raise TypeError(f"{what} must be a Tensor, got {type(value).__name__}")
    return value


def _op(op) -> int:
    if op not in _OPS or isinstance(op, bool):
        raise ValueError(f"op must be one of ReduceOp.SUM, MAX, MIN, PROD, AVG; got {op!r}")
    return int(op)


def all_reduce(tensor: Tensor, op=ReduceOp.SUM, group=None, sync_op: bool = True):
    """Reduce ``tensor`` over all ranks, in place: every rank ends with the result.

    float16 is reduced in float32 and rounded once; ``AVG`` is the sum divided by the
    number of ranks (integer tensors: floor division).

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp import distributed as dist
        >>> _ = dist.init_parallel_env()
        >>> x = mt.to_tensor([1.0, 2.0])
        >>> dist.all_reduce(x)  # one rank: the sum is x itself
        >>> x.numpy()
        array([1., 2.], dtype=float32)
    """
    with _arguments("all_reduce"):
        check_group(group)
        tensor, op = _tensor(tensor, "all_reduce: tensor"), _op(op)
    world().all_reduce(tensor._data, op)  # checked first, as every collective
    return _done(sync_op)


def broadcast(tensor: Tensor, src: int = 0, group=None, sync_op: bool = True):
    """Copy rank ``src``'s ``tensor`` into ``tensor`` on every other rank, in place."""
    with _arguments("broadcast"):
        check_group(group)
        tensor = _tensor(tensor, "broadcast: tensor")
        if isinstance(src, bool) or not isinstance(src, int):
            raise TypeError(f"broadcast: src must be a rank number, got {src!r}")
    comm = world()
    comm.broadcast(tensor._data, src)  # checks src (one verdict everywhere), then its range
    return _done(sync_op)


def all_gather(tensor_list: list, tensor: Tensor, group=None, sync_op: bool = True):
    """Append every rank's ``tensor`` to ``tensor_list`` (which must be a list), rank order."""
    with _arguments("all_gather"):
        check_group(group)
        tensor = _tensor(tensor, "all_gather: tensor")
        if not isinstance(tensor_list, list):
            raise TypeError(
                f"all_gather: tensor_list must be a list to fill, got {type(tensor_list).__name__}"
            )
    comm = world()
    gathered = comm.all_gather(tensor._data)
    tensor_list.extend(Tensor._wrap(gathered[r]) for r in range(comm.size))
    return _done(sync_op)


def reduce_scatter(tensor: Tensor, tensor_list: list, op=ReduceOp.SUM, group=None,
                   sync_op: bool = True):  # fmt: skip
    """``tensor = reduce over ranks of tensor_list[rank]``: rank r gets block r of the sum.

    ``tensor_list`` holds one tensor per rank, all shaped and typed like ``tensor``.
    """
    comm = world()
    with _arguments("reduce_scatter"):
        check_group(group)
        tensor, op = _tensor(tensor, "reduce_scatter: tensor"), _op(op)
        if not isinstance(tensor_list, (list, tuple)) or len(tensor_list) != comm.size:
            got = len(tensor_list) if isinstance(tensor_list, (list, tuple)) else tensor_list
            raise ValueError(
                f"reduce_scatter: tensor_list must hold one tensor per rank ({comm.size}), "
                f"got {got!r}"
            )
        parts = [_tensor(t, f"reduce_scatter: tensor_list[{i}]") for i, t in enumerate(tensor_list)]
        for i, part in enumerate(parts):
            if part.shape != tensor.shape or part._data.dtype != tensor._data.dtype:
                raise ValueError(
                    f"reduce_scatter: tensor_list[{i}] is {part._data.dtype} {part.shape} but "
                    f"the output tensor is {tensor._data.dtype} {tensor.shape}; they must match"
                )
    stacked = _device.get_array_module(tensor._data).stack([p._data for p in parts])
    block = comm.reduce_scatter(stacked, op)
    tensor._data[...] = block[0]
    return _done(sync_op)
