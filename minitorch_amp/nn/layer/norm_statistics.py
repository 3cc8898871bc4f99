"""Re-estimating batch norm's running statistics from clean batches.

A batch norm in training mode updates its running mean and variance in the forward pass, so a
step that a GradScaler skips (an inf activation) still writes inf or NaN into them, and
``momentum`` keeps that for good. :func:`reestimate_batch_norm` recomputes them: each batch
norm's statistics are reset, then the model runs forward over the given batches with each
batch weighted equally (PyTorch's ``torch.optim.swa_utils.update_bn`` does the same).
"""

from __future__ import annotations

from collections.abc import Iterable

from ...autograd.grad_mode import no_grad
from ...autograd.tensor import Tensor
from .norm import _BatchNormBase

__all__ = ["reestimate_batch_norm"]


def reestimate_batch_norm(model, batches: Iterable) -> int:
    """Recompute every batch norm's running statistics of ``model`` as the plain average of
    their batch statistics over ``batches``.

    For batch ``k`` (from 0) each batch norm uses ``momentum = k / (k + 1)``, so after ``n``
    batches ``_mean`` is the mean of the ``n`` batch means, and ``_variance`` of the biased
    batch variances. Only the batch norms are put in training mode while it runs, under
    ``no_grad``; every other layer keeps its mode (call ``model.eval()`` first to have dropout
    off), no parameter or gradient changes, and modes and momenta are restored after. A batch
    norm with ``use_global_stats=True`` is left as it is (it never uses batch statistics).

    Args:
        model: a Layer holding batch norms.
        batches: inputs for ``model``: Tensors, or tuples and lists whose first element is the
            input (``(x, label)`` from a DataLoader).

    Returns:
        The number of batches used.

    Raises:
        ValueError: no batches, or no batch norm in ``model``; the statistics are unchanged.
            A forward pass that raises also leaves them as they were.

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp import nn
        >>> bn = nn.BatchNorm1D(2)
        >>> _ = bn.eval()
        >>> reestimate_batch_norm(bn, [mt.to_tensor([[1.0, 2.0], [3.0, 2.0]]),
        ...                            mt.to_tensor([[5.0, 2.0], [7.0, 2.0]])])
        2
        >>> bn._mean.numpy(), bn._variance.numpy(), bn.training
        (array([4., 2.], dtype=float32), array([1., 0.], dtype=float32), False)
    """
    norms = [layer for layer in model.sublayers(include_self=True) if _reestimable(layer)]
    if not norms:
        raise ValueError(
            f"reestimate_batch_norm: no batch norm in {type(model).__name__} uses batch "
            "statistics; nothing to re-estimate"
        )
    saved = [
        (n.training, n._momentum, n._mean._data.copy(), n._variance._data.copy()) for n in norms
    ]
    count = 0
    try:
        with no_grad():
            for norm in norms:  # reset: 0 * inf would be NaN
                norm.training = True
                norm._mean._data[...], norm._variance._data[...] = 0.0, 1.0
            for count, batch in enumerate(batches, start=1):
                for norm in norms:
                    norm._momentum = (count - 1) / count  # 0 first: the old values are dropped
                model(batch if isinstance(batch, Tensor) else batch[0])
        if count == 0:
            raise ValueError("reestimate_batch_norm: no batches; the statistics are unchanged")
    except BaseException:
        for norm, (_, _, mean, variance) in zip(norms, saved):
            norm._mean._data[...] = mean
            norm._variance._data[...] = variance
        raise
    finally:
        for norm, (training, momentum, _, _) in zip(norms, saved):
            norm.training, norm._momentum = training, momentum
    return count


def _reestimable(layer) -> bool:
    """A batch norm that, in training mode, normalises with (and updates) batch statistics."""
    return isinstance(layer, _BatchNormBase) and not (
        getattr(layer, "_use_global_stats", None) or getattr(layer, "_global_stats", False)
    )
