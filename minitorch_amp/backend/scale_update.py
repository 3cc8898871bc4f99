"""The loss scale's update on the device: Paddle's dynamic rule, one step, in place.

The third of dynamic loss scaling's functions (the first two, the inverse and the unscale, are
in ``backend/loss_scaling.py``, which also registers ``cuda/amp.cu``): on CuPy arrays of shape
[1] one thread of ``cuda/amp.cu``'s ``update_loss_scaling``; on NumPy ``[1]`` arrays plain
Python on the values; anything else, the array expressions below, the kernel's twin.
"""

from __future__ import annotations

import numpy as np

from . import kernels
from .device import get_array_module
from .dtypes import bool_, float32, int32
from .loss_scaling import _fits_one_thread_kernel

__all__ = ["update_loss_scaling"]


def update_loss_scaling(
    found_inf,
    scale,
    good_steps,
    bad_steps,
    at_floor,
    *,
    incr_every_n_steps: int,
    decr_every_n_nan_or_inf: int,
    incr_ratio: float,
    decr_ratio: float,
    min_loss_scaling: float,
    max_loss_scaling: float = float("inf"),
) -> None:
    """One step of the dynamic loss-scale rule, in place on the scale and the counters.

    Paddle's dygraph rule, plus a floor (and an optional ceiling), then the count of
    overflowing updates at the floor (beyond Paddle; GradScaler warns when it grows long)::

        if found_inf:
            good = 0; bad += 1
            if bad == decr_every_n_nan_or_inf:      # consecutive bad steps
                scale = min(scale, max(scale * decr_ratio, min_loss_scaling)); bad = 0
        else:
            bad = 0; good += 1
            if good == incr_every_n_steps:
                grown = min(scale * incr_ratio, max_loss_scaling)
                if isfinite(grown): scale = grown   # never grow into inf
                good = 0
        at_floor = at_floor + 1 if found_inf and scale <= min_loss_scaling else 0

    NOTE: an overflow never grows the scale. Paddle's ``max(scale * decr_ratio, 1)`` alone
    lifts a scale that already sits below the floor (``init_loss_scaling=0.25``, a PyTorch
    checkpoint at 2**-7) up to the floor; here such a scale holds instead (PyTorch, which has
    no floor, would halve it). The floor test reads the scale just updated. The ratios and
    bounds are rounded to float32 first; the int32 counters wrap at 2**31 like NumPy's int32.

    Written with ``xp.where`` so that no Python branch reads a device value: the GPU version
    is a single-thread kernel and the host never waits.

    Args:
        found_inf: bool [1], did this step's gradients overflow.
        scale: float32 [1], the loss scale (updated).
        good_steps, bad_steps: int32 [1], the step counters (updated).
        at_floor: int32 [1], overflowing updates at the floor in a row (updated).

    Example:
        >>> import numpy as np
        >>> scale = np.array([4.0], "float32")
        >>> good, bad, at_floor = (np.zeros(1, "int32") for _ in range(3))
        >>> kw = dict(incr_every_n_steps=2, decr_every_n_nan_or_inf=1, incr_ratio=2.0,
        ...           decr_ratio=0.25, min_loss_scaling=1.0)
        >>> for inf in (False, False, True, True, True):
        ...     update_loss_scaling(np.array([inf]), scale, good, bad, at_floor, **kw)
        ...     print(scale, good, at_floor)
        [4.] [1] [0]
        [8.] [0] [0]
        [2.] [0] [0]
        [1.] [0] [1]
        [1.] [0] [2]
    """
    xp = get_array_module(scale)
    counters = (good_steps, bad_steps, at_floor)
    state = ((found_inf, bool_), (scale, float32), *((c, int32) for c in counters))
    if xp is not np and kernels.enabled() and _fits_one_thread_kernel(state):
        # NOTE: an int32 counter never passes 2**31, so clamping the counts keeps "never".
        counts = tuple(
            np.int64(min(n, 2**62)) for n in (incr_every_n_steps, decr_every_n_nan_or_inf)
        )
        with np.errstate(over="ignore"):  # a finite max above float32's range becomes inf
            bounds = tuple(
                np.float32(v) for v in (incr_ratio, decr_ratio, min_loss_scaling, max_loss_scaling)
            )
        with scale.device:
            args = (found_inf, scale, *counters, *counts, *bounds)
            kernels.launch("amp.cu", "update_loss_scaling", (1,), (1,), args)
        return
    if xp is np and all(a.shape == (1,) and a.dtype == dtype for a, dtype in state):
        _update_on_the_host(
            found_inf, scale, *counters, incr_every_n_steps, decr_every_n_nan_or_inf,
            incr_ratio, decr_ratio, min_loss_scaling, max_loss_scaling,
        )  # fmt: skip
        return
    f32 = scale.dtype.type
    bad = xp.where(found_inf, bad_steps + 1, 0)
    good = xp.where(found_inf, 0, good_steps + 1)
    decrease = found_inf & (bad == decr_every_n_nan_or_inf)
    increase = ~found_inf & (good == incr_every_n_steps)
    shrunk = xp.minimum(scale, xp.maximum(scale * f32(decr_ratio), f32(min_loss_scaling)))
    with np.errstate(over="ignore"):  # growing into inf is caught just below
        grown = xp.minimum(scale * f32(incr_ratio), f32(max_loss_scaling))
    increase_ok = increase & xp.isfinite(grown)
    scale[...] = xp.where(decrease, shrunk, xp.where(increase_ok, grown, scale))
    bad_steps[...] = xp.where(decrease, 0, bad)
    good_steps[...] = xp.where(increase, 0, good)
    at_floor[...] = xp.where(found_inf & (scale <= f32(min_loss_scaling)), at_floor + 1, 0)


def _update_on_the_host(
    found_inf, scale, good_steps, bad_steps, at_floor, incr_every, decr_every, incr_ratio,
    decr_ratio, min_scale, max_scale,
) -> None:  # fmt: skip
    """:func:`update_loss_scaling` on NumPy ``[1]`` arrays, with Python branches on the values
    (free to read on the host): the same float32 roundings and int32 wrap-around, in ~10 µs
    instead of the ~25 array operations (~50 µs) of the branch-free form."""
    f32 = np.float32
    s = scale[0]
    good, bad, floor = int(good_steps[0]), int(bad_steps[0]), int(at_floor[0])
    if found_inf[0]:
        good, bad = 0, _int32(bad + 1)
        if bad == decr_every:
            # never above s (a scale under the floor holds); NaN propagates, as in where
            s = np.minimum(s, np.maximum(s * f32(decr_ratio), f32(min_scale)))
            bad = 0
    else:
        good, bad = _int32(good + 1), 0
        if good == incr_every:
            with np.errstate(over="ignore"):  # growing into inf is refused just below
                grown = np.minimum(s * f32(incr_ratio), f32(max_scale))
            if np.isfinite(grown):
                s = grown
            good = 0
    floor = _int32(floor + 1) if found_inf[0] and s <= f32(min_scale) else 0
    scale[0], good_steps[0], bad_steps[0], at_floor[0] = s, good, bad, floor


def _int32(n: int) -> int:
    """``n`` wrapped into int32's range, as NumPy's int32 arithmetic wraps."""
    return (n + 2**31) % 2**32 - 2**31
