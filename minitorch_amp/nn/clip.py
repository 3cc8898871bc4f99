"""Gradient clipping: Paddle's ``ClipGradBy*`` objects and PyTorch's ``clip_grad_norm_``.

The Paddle classes are given to an optimizer (``grad_clip=``) and called on the list of
``(param, grad)`` pairs before the update; they return a new list with new gradient tensors
and leave ``param.grad`` alone. Parameters with ``need_clip=False`` are neither counted nor
scaled. ``clip_grad_norm_`` instead scales ``param.grad`` in place (call it between
``backward()`` and ``step()``).

NOTE: norms of float16 gradients are computed in float32. Squaring a float16 value above 256
overflows to inf (65504 is the largest half), so a float16 sum of squares would turn a
perfectly finite gradient into an infinite norm and clip everything to zero.

The clipped gradients go into buffers the clip object keeps, one per parameter, so they have
the same addresses in every step: the optimizer's fused kernel finds its table cached, and a
step with clipping can be captured as a CUDA graph. (The price: one gradient's worth of memory
per clipped parameter stays allocated between steps.) Those buffers, and what a GPU call
keeps for the next one, are in ``clip_reuse.py``.

This module uses only the backend and Tensor (and ``clip_reuse.py``; never the rest of
``minitorch_amp.nn``), so that the optimizers and ``nn`` can both import it.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ..autograd.tensor import Tensor
from ..backend import dtypes as _dtypes
from ..backend import get_array_module, primitives, sync
from ..backend import global_norm as _global_norm
from .clip_reuse import _data, _KeptClip, _Outputs

__all__ = [
    "ClipGradByGlobalNorm",
    "ClipGradByNorm",
    "ClipGradByValue",
    "clip_grad_norm_",
    "clip_grad_value_",
]


def _check_positive(value, what: str, allow_zero: bool = False) -> float:
    """``float(value)`` for a real number (a Python or NumPy int or float, not a bool) that is
    > 0 (>= 0 with ``allow_zero``); anything else, NaN included, is refused."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"{what} must be a number (an int, a float or a NumPy scalar), got {value!r}"
        )
    value = float(value)
    if not (value >= 0 if allow_zero else value > 0):  # (NaN is neither)
        sign = "non-negative" if allow_zero else "positive"
        raise ValueError(f"{what} must be a {sign} number, got {value!r}")
    return value


def _check_foreach(foreach, what: str) -> None:
    """PyTorch's ``foreach=`` (which kernels to use): None, True or False, all the same here."""
    if foreach is not None and not isinstance(foreach, bool):
        raise TypeError(f"{what}: foreach must be None, True or False, got {foreach!r}")


def _norm_dtype(arrays):
    """float64 if any gradient is float64, else float32 (float16 is widened)."""
    return _dtypes.float64 if any(a.dtype == _dtypes.float64 for a in arrays) else _dtypes.float32


def _sum_squares(g, dtype):
    """``sum(g * g)`` accumulated in ``dtype`` (a 0-d array on g's device)."""
    return primitives.sum_squares(g, dtype)


def _scaled(g, scale, out=None):
    """``g * scale`` computed in float32 or wider, written in g's dtype (rounded once)."""
    acc = _dtypes.accumulation_dtype(g.dtype)
    xp = get_array_module(g)
    out = xp.empty_like(g) if out is None else out
    return xp.multiply(g.astype(acc, copy=False), scale, out=out, casting="unsafe")


def _map_clipped(params_grads, clip_one) -> list:
    """The pairs, with ``clip_one(param, grad_array)`` in place of each gradient that is clipped
    (parameters with ``need_clip=False`` and missing gradients pass through)."""
    return [
        (p, g)
        if g is None or not getattr(p, "need_clip", True)
        else (p, Tensor._wrap(clip_one(p, _data(g))))
        for p, g in params_grads
    ]


class ClipGradByGlobalNorm:
    """Scale all gradients together so that their joint L2 norm is at most ``clip_norm``.

    ``global_norm = sqrt(sum over clipped params of sum(g ** 2))``
    ``g = g * clip_norm / max(global_norm, clip_norm)``

    The sums run on the device in float32 (float64 if any gradient is float64); nothing is
    copied to the host.

    Args:
        clip_norm: the largest global norm allowed (> 0).
        group_name: kept for Paddle compatibility.
        auto_skip_clip: Paddle's: when True the global norm is read on the host (a sync on
            a GPU), and when it is not above ``clip_norm`` the pairs come back as they were,
            the gradients not multiplied at all; above it each is scaled by
            ``clip_norm / global_norm``. The values are those of False, whose scale is
            ``1.0`` below the limit (exact), computed on the device without a sync.

    Example:
        >>> import numpy as np
        >>> from minitorch_amp.nn.parameter import Parameter
        >>> from minitorch_amp.nn.clip import ClipGradByGlobalNorm
        >>> p = Parameter(np.zeros(2, dtype="float32"))
        >>> [(_, g)] = ClipGradByGlobalNorm(1.0)([(p, np.array([3.0, 4.0], dtype="float32"))])
        >>> g.numpy()  # the norm was 5
        array([0.6, 0.8], dtype=float32)
    """

    def __init__(
        self, clip_norm: float, group_name: str = "default_group", auto_skip_clip: bool = False
    ):
        self.clip_norm = _check_positive(clip_norm, "ClipGradByGlobalNorm: clip_norm")
        self.group_name = group_name
        if not isinstance(auto_skip_clip, bool):  # (Paddle asserts it)
            raise TypeError(
                "ClipGradByGlobalNorm: auto_skip_clip must be True or False, got "
                f"{auto_skip_clip!r}"
            )
        self.auto_skip_clip = auto_skip_clip
        self._outputs = _Outputs()
        self._kept: dict = {}  # a GPU: per set of pairs, its launches and result (_KeptClip)

    def __call__(self, params_grads):
        if not isinstance(params_grads, (list, tuple)):  # (it is read more than once)
            params_grads = list(params_grads)
        if self.__dict__.get("auto_skip_clip"):  # (a clip pickled before it had the flag)
            return self._clip_if_above(params_grads)
        key = _KeptClip.key(params_grads)
        kept = self.__dict__.setdefault("_kept", {}).get(key)  # (a clip pickled without one)
        if kept is not None and kept.fits(params_grads):
            kept.clip(self.clip_norm)
            return list(kept.result)
        self._kept.pop(key, None)
        pairs = [
            (p, _data(g))
            for p, g in params_grads
            if g is not None and getattr(p, "need_clip", True)
        ]
        if not pairs:
            return list(params_grads)
        clipped = [g for _, g in pairs]
        dtype = _norm_dtype(clipped)
        outs = [self._outputs(p, g) for p, g in pairs]
        done = iter(outs)  # (_map_clipped visits the clipped pairs in this order)
        if _global_norm.applies(clipped, outs):  # a GPU: the same maths, 2 launches a dtype + 1
            clip = _global_norm.plan(clipped, outs)
            clip(self.clip_norm)
            result = _map_clipped(params_grads, lambda p, g: next(done))
            if len(self._kept) >= _KeptClip.SETS:
                self._kept.clear()
            self._kept[key] = _KeptClip(params_grads, clip, result)
            return list(result)
        xp = get_array_module(clipped[0])
        total = sum(_sum_squares(g, dtype) for g in clipped)
        global_norm = xp.sqrt(total)
        scale = dtype.type(self.clip_norm) / xp.maximum(global_norm, dtype.type(self.clip_norm))
        return _map_clipped(params_grads, lambda p, g: _scaled(g, scale, next(done)))

    def _clip_if_above(self, params_grads) -> list:
        """``auto_skip_clip=True`` (Paddle's ``_dygraph_clip``): the pairs unchanged when the
        global norm is not above ``clip_norm`` (NaN is not), else scaled by
        ``clip_norm / global_norm``."""
        clipped = [
            _data(g) for p, g in params_grads if g is not None and getattr(p, "need_clip", True)
        ]
        if not clipped:
            return list(params_grads)
        dtype = _norm_dtype(clipped)
        xp = get_array_module(clipped[0])
        global_norm = xp.sqrt(sum(_sum_squares(g, dtype) for g in clipped))
        limit = dtype.type(self.clip_norm)
        if xp is not np:
            sync.host_read("ClipGradByGlobalNorm(auto_skip_clip=True)")
        if not bool(global_norm > limit):
            return list(params_grads)
        scale = limit / global_norm
        return _map_clipped(params_grads, lambda p, g: _scaled(g, scale, self._outputs(p, g)))

    def __repr__(self) -> str:
        return f"ClipGradByGlobalNorm(global_clip_norm={self.clip_norm})"

    def __getstate__(self):  # a copy of the clip keeps no launches (they hold the arrays)
        return {**self.__dict__, "_kept": {}}


class ClipGradByNorm:
    """Scale each gradient on its own so that its L2 norm is at most ``clip_norm``.

    ``g = g * clip_norm / norm(g)`` when ``norm(g) > clip_norm``, else ``g`` unchanged.

    Example:
        >>> import numpy as np
        >>> from minitorch_amp.nn.parameter import Parameter
        >>> from minitorch_amp.nn.clip import ClipGradByNorm
        >>> p = Parameter(np.zeros(2, dtype="float32"))
        >>> [(_, g)] = ClipGradByNorm(1.0)([(p, np.array([0.0, 2.0], dtype="float32"))])
        >>> g.numpy()
        array([0., 1.], dtype=float32)
    """

    def __init__(self, clip_norm: float):
        self.clip_norm = _check_positive(clip_norm, "ClipGradByNorm: clip_norm")
        self._outputs = _Outputs()

    def __call__(self, params_grads):
        return _map_clipped(params_grads, self._clip)

    def _clip(self, p, g):
        xp = get_array_module(g)
        dtype = _norm_dtype([g])
        norm = xp.sqrt(_sum_squares(g, dtype))
        limit = dtype.type(self.clip_norm)
        scale = xp.where(norm > limit, limit / xp.maximum(norm, limit), dtype.type(1.0))
        return _scaled(g, scale, self._outputs(p, g))

    def __repr__(self) -> str:
        return f"ClipGradByNorm(clip_norm={self.clip_norm})"


class ClipGradByValue:
    """Clamp every gradient element into ``[min, max]`` (``min`` defaults to ``-max``)."""

    def __init__(self, max: float, min: float | None = None):  # noqa: A002 - Paddle's names
        self.max = float(max)
        self.min = -self.max if min is None else float(min)
        if not self.min <= self.max:
            raise ValueError(f"ClipGradByValue: min ({self.min}) must be <= max ({self.max})")
        self._outputs = _Outputs()

    def __call__(self, params_grads):
        return _map_clipped(params_grads, self._clip)

    def _clip(self, p, g):
        lo, hi = g.dtype.type(self.min), g.dtype.type(self.max)  # kernel arguments on a GPU
        return get_array_module(g).clip(g, lo, hi, out=self._outputs(p, g))

    def __repr__(self) -> str:
        return f"ClipGradByValue(min={self.min}, max={self.max})"


def _grads_of(parameters) -> list:
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p._grad._data for p in parameters if p._grad is not None]


def clip_grad_norm_(
    parameters,
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
):
    """Scale the gradients of ``parameters`` in place so their joint norm is <= ``max_norm``.

    ``total = (sum over grads of norm(g) ** p) ** (1 / p)`` (``max |g|`` for ``p = inf``)
    ``g = g * min(1, max_norm / (total + 1e-6))``

    Args:
        parameters: a Tensor or an iterable of Tensors whose ``.grad`` is scaled.
        max_norm: the largest norm allowed.
        norm_type: the ``p`` of the norm: a positive number or ``float('inf')``.
        error_if_nonfinite: raise instead of scaling when the total norm is nan or inf.
        foreach: PyTorch's choice of kernels; None, True or False, accepted with no effect.

    Returns:
        The total norm before clipping, a 0-d float32 Tensor (float64 for float64 grads).

    Raises:
        RuntimeError: ``error_if_nonfinite`` and the norm is not finite; no gradient changes.

    Example:
        >>> import numpy as np
        >>> from minitorch_amp.nn.parameter import Parameter
        >>> from minitorch_amp.nn.clip import clip_grad_norm_
        >>> p = Parameter(np.zeros(2, dtype="float32"))
        >>> p.grad = np.array([3.0, 4.0], dtype="float32")
        >>> float(clip_grad_norm_([p], max_norm=1.0))
        5.0
        >>> p.grad.numpy().round(4)
        array([0.6, 0.8], dtype=float32)
    """
    _check_foreach(foreach, "clip_grad_norm_")
    max_norm = float(max_norm)
    norm_type = float(norm_type)
    if not (norm_type > 0):
        raise ValueError(f"norm_type must be a positive number or inf, got {norm_type}")
    grads = _grads_of(parameters)
    if not grads:
        return Tensor(0.0, dtype="float32")
    dtype = _norm_dtype(grads)
    xp = get_array_module(grads[0])
    if math.isinf(norm_type):
        total = xp.max(xp.stack([xp.abs(g).max().astype(dtype) for g in grads]))
    elif norm_type == 2.0:
        total = xp.sqrt(sum(_sum_squares(g, dtype) for g in grads))
    else:
        powered = [(xp.abs(g.astype(dtype, copy=False)) ** norm_type).sum() for g in grads]
        total = sum(powered) ** (1.0 / norm_type)
    if error_if_nonfinite:
        sync.host_read("clip_grad_norm_(error_if_nonfinite=True)")
    if error_if_nonfinite and not bool(xp.isfinite(total)):
        raise RuntimeError(
            f"the total norm of order {norm_type} of the gradients is {float(total)}, so it "
            "cannot be clipped; no gradient was changed. Find the nan/inf (e.g. with AMP "
            "loss scaling, unscale first) or pass error_if_nonfinite=False to scale anyway"
        )
    coef = xp.minimum(dtype.type(max_norm) / (total + dtype.type(1e-6)), dtype.type(1.0))
    with np.errstate(invalid="ignore"):  # an inf gradient times a 0 coef: NaN, as asked for
        for g in grads:
            g[...] = g * coef if g.dtype == coef.dtype else _scaled(g, coef)
    return Tensor._wrap(xp.asarray(total, dtype=dtype))


def clip_grad_value_(parameters, clip_value: float, foreach: bool | None = None) -> None:
    """Clamp every gradient element of ``parameters`` into ``[-clip_value, clip_value]``.

    ``clip_value`` is a number >= 0 (0 zeroes the gradients, as in PyTorch); ``foreach`` is
    PyTorch's choice of kernels, accepted with no effect.
    """
    _check_foreach(foreach, "clip_grad_value_")
    clip_value = _check_positive(clip_value, "clip_grad_value_: clip_value", allow_zero=True)
    for g in _grads_of(parameters):
        get_array_module(g).clip(g, -clip_value, clip_value, out=g)
