"""``DataParallel``: the same model on every rank, each rank a slice of the batch.

At wrap time the ranks check that their models have the same parameters (shapes and dtypes)
and copy rank 0's parameters and buffers to everyone. After each ``backward()`` the
gradients are averaged over the ranks in float32 buckets (``reducer.py``), so every rank then
takes the same optimizer step and the models stay identical. With ``GradScaler`` the
overflow flag is OR-ed over the ranks too, so every rank skips the same steps.
"""

from __future__ import annotations

import contextlib
import weakref
import zlib

from ..autograd import engine
from ..autograd.grad_mode import is_grad_enabled
from ..backend.comm import CollectiveMismatchError
from ..nn.layer.layers import Layer
from .env import check_group, world
from .reducer import AllReduceGrads

__all__ = ["DataParallel"]

_MB = 1024 * 1024
WRAPPING = "wrapping a model"  # what the model check says it is, next to another collective


class DataParallel(Layer):
    """Wrap ``layers`` for data-parallel training (Paddle's ``paddle.DataParallel``).

    Args:
        layers: the model (a Layer), identical in structure on every rank.
        strategy: unused (Paddle compatibility).
        comm_buffer_size: bucket size in MB of float32 gradients (default 25).
        last_comm_buffer_size: size in MB of the first bucket reduced, which holds the
            last layers' gradients (default 1).
        find_unused_parameters: agree across ranks on which parameters got a gradient, so
            parameters unused in a step keep ``grad None`` (one extra small all-reduce).
        group: must be None (all ranks).

    Use ``amp.decorate`` on the model *before* wrapping it (as in Paddle). ``state_dict()``
    is the wrapped model's, without a prefix, so checkpoints load into the bare model.

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp import distributed as dist, nn
        >>> _ = dist.init_parallel_env()  # under mpiexec: one per rank
        >>> model = dist.DataParallel(nn.Linear(3, 2))
        >>> loss = model(mt.ones([4, 3])).mean()
        >>> loss.backward()  # the grads are now averaged over the ranks
        >>> model.weight.grad.shape
        [3, 2]
    """

    _is_data_parallel = True  # amp.decorate refuses a wrapped model

    def __init__(self, layers, strategy=None, comm_buffer_size=25, last_comm_buffer_size=1,
                 find_unused_parameters=False, group=None, _grad_sync=None):  # fmt: skip
        check_group(group)
        if not isinstance(layers, Layer):
            raise TypeError(f"DataParallel wraps a Layer, got {type(layers).__name__}")
        for name, value in (("comm_buffer_size", comm_buffer_size),
                            ("last_comm_buffer_size", last_comm_buffer_size)):  # fmt: skip
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"DataParallel: {name} must be a positive number of MB")
        comm = world()
        super().__init__()
        self._layers = layers
        self._comm = comm
        params = [p for p in layers.parameters() if not p.stop_gradient]
        sync_params_buffers(layers, comm)
        self._grad_sync = _grad_sync or AllReduceGrads(
            params,
            comm,
            int(comm_buffer_size * _MB),
            int(last_comm_buffer_size * _MB),
            find_unused_parameters,
        )
        self._require_sync = True
        self._sync_after_backward = False
        _active.add(self)
        if _sync_after_backward not in engine.post_backward_hooks:
            engine.post_backward_hooks.append(_sync_after_backward)

    def forward(self, *inputs, **kwargs):
        if is_grad_enabled():
            self._sync_after_backward = self._require_sync
        return self._layers(*inputs, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Skip the gradient all-reduce for backwards of forwards run inside (accumulation).

        The next backward outside ``no_sync`` averages everything accumulated so far.
        """
        previous, self._require_sync = self._require_sync, False
        try:
            yield
        finally:
            self._require_sync = previous

    def _after_backward(self) -> None:
        """Average the gradients after the backward of a forward; while that backward kept
        its graph, after the next one too.

        NOTE: a second backward of one forward (a graph kept with ``retain_graph=True``)
        adds each rank's own gradient to the average: averaging again gives
        avg(g1) + avg(g2), where stopping after the first left the ranks apart. Staying
        armed for good would sync this model at other models' backwards."""
        if self._sync_after_backward:
            self._sync_after_backward = engine.graph_kept
            self._grad_sync.sync()

    # The checkpoint is the wrapped model's (Paddle's DataParallel does the same).
    def state_dict(self, *args, **kwargs):
        return self._layers.state_dict(*args, **kwargs)

    def set_state_dict(self, *args, **kwargs):
        return self._layers.set_state_dict(*args, **kwargs)

    set_dict = load_dict = set_state_dict

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            layers = self.__dict__.get("_sub_layers", {}).get("_layers")
            if layers is None:
                raise
            return getattr(layers, name)  # model.weight works as on the bare model


def check_same_model(layers: Layer, comm) -> list:
    """Raise ``CollectiveMismatchError`` (a ValueError) on every rank unless all ranks' models
    have the same parameters and buffers (number, shapes, dtypes); returns them, parameters
    first. It is a checked collective: a rank doing something else raises too."""
    tensors = [*layers.parameters(), *[b for b in layers.buffers() if b is not None]]
    signature = ";".join(f"{t.shape}:{t._data.dtype}" for t in tensors).encode()
    try:
        comm.check("check", None, len(tensors), WRAPPING, zlib.crc32(signature))
    except CollectiveMismatchError as err:
        if set(err.calls) != {WRAPPING}:
            raise  # some rank was not wrapping a model: the usual listing says what it did
        counts = ", ".join(f"rank {r}: {int(row[2])} tensors" for r, row in enumerate(err.table))
        raise CollectiveMismatchError(
            "the ranks built different models: their parameters and buffers differ in number, "
            f"shape or dtype ({counts}). Build the same model on every rank (and decorate it "
            "the same way) before wrapping it.",
            err.table,
        ) from None
    return tensors


def sync_params_buffers(layers: Layer, comm) -> None:
    """Check that every rank's model matches rank 0's, then copy rank 0's values everywhere."""
    for i, t in enumerate(check_same_model(layers, comm)):
        comm.broadcast(t._data, 0, caller=f"{WRAPPING}: tensor {i}")


# Every live DataParallel; one engine hook serves them all (dropped models leave nothing).
_active: weakref.WeakSet = weakref.WeakSet()


def _sync_after_backward() -> None:
    for model in list(_active):
        model._after_backward()
