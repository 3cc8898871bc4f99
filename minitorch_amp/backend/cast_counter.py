"""How many casts happened, and why: for tests, benchmarks and people learning AMP.

Reasons:

* ``autocast``: ``auto_cast`` cast an input that is not a parameter (an activation, data).
* ``weight``: ``auto_cast`` cast a leaf parameter (a cast-cache miss under O1).
* ``cache_hit``: ``auto_cast`` reused a parameter's cached low-precision copy (no cast ran).
* ``optimizer``: an optimizer wrote a parameter's low-precision copy from its fp32 master
  weight (optimize-cast: once per parameter per update under O2).

Only forward casts are counted; the cast back of a gradient in backward is part of the cast op.
"""

from __future__ import annotations

REASONS = ("autocast", "weight", "cache_hit", "optimizer")

_counts = dict.fromkeys(REASONS, 0)


def count_cast(reason: str, n: int = 1) -> None:
    """Record ``n`` casts for ``reason`` (one of :data:`REASONS`)."""
    if reason not in _counts:
        raise ValueError(f"unknown cast reason {reason!r}; use one of {REASONS}")
    _counts[reason] += n


def cast_counts() -> dict[str, int]:
    """A snapshot of the counts by reason, e.g. ``{'autocast': 3, 'weight': 3, ...}``."""
    return dict(_counts)


def reset_cast_counts() -> None:
    """Set every count back to zero."""
    for reason in _counts:
        _counts[reason] = 0
