"""The valid range of each ``GradScaler`` setting, checked once on the host.

The constructor, the setters and ``load_state_dict`` all go through :func:`check_attr`, so
a bad value is refused with one message wherever it comes from, before any state changes.
The kernels never see an unchecked value: the scale lives in a float32 buffer, so it must
stay positive and finite once rounded to float32.

=========================  ==============================================================
setting                    valid values
=========================  ==============================================================
``init_loss_scaling``,     a positive number that float32 holds: from 2**-149 (the
``min_loss_scaling``       smallest subnormal, after rounding) to float32's max
``max_loss_scaling``       any positive number, ``inf`` included (no ceiling)
``incr_ratio``             a finite number > 1
``decr_ratio``             a number in (0, 1)
``incr_every_n_steps``,    an integer >= 1 (not a bool)
``decr_every_n_nan_or_inf``
=========================  ==============================================================

Example:
    >>> check_attr("incr_every_n_steps", 2000), check_attr("decr_ratio", 0.5)
    (2000, 0.5)
    >>> check_attr("incr_ratio", 0.5)
    Traceback (most recent call last):
    ...
    ValueError: incr_ratio must be a finite number > 1, got 0.5
"""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = ["check_attr", "is_int"]


def is_int(value) -> bool:
    """An integer that is not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


_FLOAT32_MAX = float(np.finfo(np.float32).max)
_FLOAT32_TINY = float(np.float32(2.0**-149))  # the smallest positive (subnormal) float32
_FINITE = (
    lambda v: 0 < v < math.inf and 0 < float(np.float32(v)) <= _FLOAT32_MAX,
    f"a positive number that float32 can hold (>= {_FLOAT32_TINY:.3g} after rounding, "
    f"<= {_FLOAT32_MAX:.4g})",
)
_COUNT = (lambda v: is_int(v) and v >= 1, "an integer >= 1")
_RULES = {
    "init_loss_scaling": _FINITE,
    "min_loss_scaling": _FINITE,
    "max_loss_scaling": (lambda v: v > 0, "a positive number (inf allowed)"),
    "incr_ratio": (lambda v: 1 < v < math.inf, "a finite number > 1"),
    "decr_ratio": (lambda v: 0 < v < 1, "a number in (0, 1)"),
    "incr_every_n_steps": _COUNT,
    "decr_every_n_nan_or_inf": _COUNT,
}


def check_attr(name: str, value):
    """``value`` as a float (an int for the two counts) if it is valid for ``name``.

    Raises:
        ValueError: naming the attribute and its valid range, e.g.
            ``incr_ratio must be a finite number > 1, got 0.5``.
    """
    rule, allowed = _RULES[name]
    number = isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
    with np.errstate(over="ignore"):  # 1e39 -> float32 inf is what the rule looks for
        ok = number and rule(value)
    if not ok:
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    return int(value) if rule is _COUNT[0] else float(value)
