"""The valid range of each ``GradScaler`` setting, checked once on the host, and the two
forms of its state dict (Paddle's keys and PyTorch's).

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

__all__ = [
    "PADDLE_KEYS",
    "TORCH_KEYS",
    "check_attr",
    "check_count",
    "check_flag",
    "from_either_form",
    "is_int",
    "to_torch_keys",
]


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


def check_attr(name: str, value, shown: str | None = None):
    """``value`` as a float (an int for the two counts) if it is valid for ``name``.

    Args:
        name: the setting, under Paddle's name (the key of the rules above).
        value: the value given.
        shown: the name the user gave it under, for the message (PyTorch's
            ``growth_interval`` for ``incr_every_n_steps``); default ``name``.

    Raises:
        ValueError: naming the argument and its valid range, e.g.
            ``incr_ratio must be a finite number > 1, got 0.5``.
    """
    rule, allowed = _RULES[name]
    number = isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
    with np.errstate(over="ignore"):  # 1e39 -> float32 inf is what the rule looks for
        ok = number and rule(value)
    if not ok:
        raise ValueError(f"{shown or name} must be {allowed}, got {value!r}")
    return int(value) if rule is _COUNT[0] else float(value)


def check_count(value, limit: int) -> int:
    """A step counter (``incr_count``, ``decr_count``): an integer in ``[0, limit)``."""
    if not (is_int(value) and 0 <= value < limit):
        raise ValueError(f"must be an integer in [0, {limit}), got {value!r}")
    return int(value)


def check_flag(value) -> bool:
    """``use_dynamic_loss_scaling``: True or False (``1`` and ``"True"`` are not)."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"must be True or False, got {value!r}")
    return bool(value)


# ---- the state dict's two forms -------------------------------------------------------------
PADDLE_KEYS = (
    "scale",  # a float32 array of shape [1]
    "incr_ratio",
    "decr_ratio",
    "incr_every_n_steps",
    "decr_every_n_nan_or_inf",
    "incr_count",
    "decr_count",
    "use_dynamic_loss_scaling",
)
TORCH_KEYS = ("scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker")
_FROM_TORCH = dict(zip(TORCH_KEYS, PADDLE_KEYS[:4] + ("incr_count",)))
# Paddle's settings that PyTorch's scaler lacks, at the values its behaviour fixes: it backs
# off on every overflow (so its count of overflows in a row is 0 after each update) and its
# scale is always dynamic. PyTorch's form carries them, all three, only when one differs.
_TORCH_FIXED = {"decr_every_n_nan_or_inf": 1, "decr_count": 0, "use_dynamic_loss_scaling": True}


def to_torch_keys(state: dict) -> dict:
    """A state dict under Paddle's keys in PyTorch's form (``scale`` a float, as PyTorch's).

    PyTorch's ``load_state_dict`` reads its five keys and ignores the others, so the result
    loads there too.
    """
    out = {key: state[paddle_key] for key, paddle_key in _FROM_TORCH.items()}
    out["scale"] = float(state["scale"][0])
    if any(state[key] != fixed for key, fixed in _TORCH_FIXED.items()):
        out.update({key: state[key] for key in _TORCH_FIXED})
    return out


def from_either_form(state_dict: dict) -> tuple[dict, dict]:
    """``(values, given_as)``: a state dict's values under Paddle's keys, unchecked, and the
    key each was given under. PyTorch's form (any of its own keys present) gets the settings
    it lacks at PyTorch's fixed values, unless it carries them.

    Raises:
        ValueError: a key missing, or one of neither form.
    """
    torch_form = any(key in state_dict for key in TORCH_KEYS[1:])
    expected, optional = (TORCH_KEYS, _TORCH_FIXED) if torch_form else (PADDLE_KEYS, {})
    missing = [key for key in expected if key not in state_dict]
    unexpected = [key for key in state_dict if key not in expected and key not in optional]
    if missing or unexpected:
        raise ValueError(
            f"GradScaler.load_state_dict: missing keys {missing}, unexpected keys "
            f"{unexpected}; expected Paddle's keys {list(PADDLE_KEYS)} or PyTorch's "
            f"{list(TORCH_KEYS)} (optionally with {list(_TORCH_FIXED)}), not a mix. "
            "Nothing was loaded."
        )
    if not torch_form:
        return dict(state_dict), {key: key for key in state_dict}
    given_as = {_FROM_TORCH.get(key, key): key for key in state_dict}
    values = {**_TORCH_FIXED, **{_FROM_TORCH.get(k, k): v for k, v in state_dict.items()}}
    return values, given_as
