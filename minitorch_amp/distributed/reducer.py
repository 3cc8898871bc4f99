"""Gradient synchronisation after backward: fp32 buckets, all-reduced or reduce-scattered.

Gradients are packed into float32 *buckets* (a float16 grad is widened on the way in), so one
collective moves many small tensors and the sum over ranks is taken in fp32 whatever the
grads' dtype; each averaged value is rounded once on the way back.

* :class:`AllReduceGrads` (``DataParallel``, sharding level ``'os'``): every rank ends with
  the average of every gradient.
* :class:`ReduceScatterGrads` (sharding level ``'os_g'``): each bucket is laid out by owner,
  rank 0's parameters first, and reduce-scattered with one block per rank (blocks of unequal
  length, no padding), so each rank receives only the averaged gradients of the parameters
  it owns; the others' gradients are dropped (memory / N).

Buckets follow the parameters in reverse order, as backward produces their gradients, and
hold at most ``bucket_bytes`` of float32 (the first, the last layers', ``first_bucket_bytes``).
"""

from __future__ import annotations

import numpy as np

from ..autograd.tensor import Tensor
from ..backend import device as _device
from ..backend.comm import ReduceOp


def make_buckets(params: list, bucket_bytes: int, first_bucket_bytes: int) -> list[list]:
    """Split ``params`` (reversed) into runs of at most the given float32 bytes (>= 1 each)."""
    buckets, current, size = [], [], 0
    limit = first_bucket_bytes
    for p in reversed(params):
        nbytes = 4 * int(np.prod(p.shape, dtype=np.int64))
        if current and size + nbytes > limit:
            buckets.append(current)
            current, size, limit = [], 0, bucket_bytes
        current.append(p)
        size += nbytes
    if current:
        buckets.append(current)
    return buckets


def _numel(p) -> int:
    return int(np.prod(p.shape, dtype=np.int64))


def _set_grad(param, values) -> None:
    """Write ``values`` (float32, flat) into ``param``'s grad, creating it if missing."""
    grad = param._grad
    if grad is None:
        param._grad = Tensor._wrap(values.reshape(param._data.shape).astype(param._data.dtype))
    else:
        grad._data[...] = values.reshape(grad._data.shape)  # rounded once to the grad's dtype


class AllReduceGrads:
    """Average every gradient over the ranks, bucket by bucket.

    Args:
        params: the trainable parameters, in model order.
        comm: the communicator.
        bucket_bytes, first_bucket_bytes: bucket sizes (float32 bytes).
        find_unused_parameters: first agree (one small all-reduce) on which parameters got a
            gradient on some rank; the rest keep ``grad None``. Without it, a parameter with
            no gradient on a rank counts as a zero gradient there.
    """

    def __init__(self, params, comm, bucket_bytes, first_bucket_bytes, find_unused_parameters):
        self.params, self.comm = list(params), comm
        self.find_unused = bool(find_unused_parameters)
        self.buckets = make_buckets(self.params, bucket_bytes, first_bucket_bytes)
        self._buffers: dict[int, object] = {}

    def _buffer(self, index: int, size: int, like):
        buf = self._buffers.get(index)
        if buf is None or buf.size != size or _device.place_of(buf) != _device.place_of(like):
            xp = _device.get_array_module(like)
            buf = _device.to_place(xp.zeros(size, dtype=np.float32), _device.place_of(like))
            self._buffers[index] = buf
        return buf

    def _used(self) -> set[int] | None:
        """ids of the parameters that have a gradient on some rank (None: treat all as used)."""
        if not self.find_unused:
            return None
        flags = np.array([p._grad is not None for p in self.params], dtype=np.uint8)
        self.comm.all_reduce(flags, ReduceOp.MAX, caller="the unused-parameter flags")
        return {id(p) for p, used in zip(self.params, flags) if used}

    def sync(self) -> None:
        """Replace every gradient by its average over the ranks."""
        if self.comm.size == 1:
            return  # a world of one: the gradients are already the average
        used = self._used()
        for index, bucket in enumerate(self.buckets):
            if used is not None:
                bucket = [p for p in bucket if id(p) in used]
                if not bucket:
                    continue
            sizes = [_numel(p) for p in bucket]
            buf = self._buffer(index, sum(sizes), bucket[0]._data)
            offset = 0
            for p, n in zip(bucket, sizes):
                part = buf[offset : offset + n]
                if p._grad is None:
                    part[...] = 0
                else:
                    part[...] = p._grad._data.reshape(-1)  # widened to float32
                offset += n
            self.comm.all_reduce(buf, ReduceOp.AVG, caller=f"gradient bucket {index}")
            offset = 0
            for p, n in zip(bucket, sizes):
                _set_grad(p, buf[offset : offset + n])
                offset += n


class ReduceScatterGrads(AllReduceGrads):
    """Each rank keeps only the averaged gradients of the parameters it owns.

    Args:
        owner: ``id(param) -> rank`` (see ``sharding.partition``).
    """

    def __init__(self, params, comm, bucket_bytes, first_bucket_bytes, find_unused_parameters,
                 owner: dict):  # fmt: skip
        super().__init__(params, comm, bucket_bytes, first_bucket_bytes, find_unused_parameters)
        self.owner = owner

    def sync(self) -> None:
        if self.comm.size == 1:
            return
        used, size, me = self._used(), self.comm.size, self.comm.rank
        for index, bucket in enumerate(self.buckets):
            if used is not None:
                bucket = [p for p in bucket if id(p) in used]
                if not bucket:
                    continue
            # Lay the bucket out by owner, rank 0's parameters first; block r is rank r's.
            blocks = [[p for p in bucket if self.owner[id(p)] == r] for r in range(size)]
            counts = [sum(_numel(p) for p in b) for b in blocks]
            buf = self._buffer(index, sum(counts), bucket[0]._data)
            offset = 0
            for p in (p for b in blocks for p in b):
                n = _numel(p)
                part = buf[offset : offset + n]
                if p._grad is None:
                    part[...] = 0
                else:
                    part[...] = p._grad._data.reshape(-1)
                offset += n
            mine = self.comm.reduce_scatter(
                buf, ReduceOp.AVG, counts=counts, caller=f"gradient bucket {index}"
            )
            offset = 0
            for p in blocks[me]:
                n = _numel(p)
                _set_grad(p, mine[offset : offset + n])
                offset += n
            for r, params in enumerate(blocks):
                if r != me:
                    for p in params:
                        p._grad = None  # not ours: the owner holds the average
