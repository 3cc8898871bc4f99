"""Tools for property-testing float16 code: edge-value strategies, tolerances, ULPs, bits.

Three modules, importable on any machine (no GPU needed):

* :mod:`~minitorch_amp.testing.fp16`: the float16 landmarks as constants (``SMALLEST_SUBNORMAL``
  ``2**-24``, ``SMALLEST_NORMAL`` ``2**-14``, ``MAX`` 65504, ``OVERFLOW_THRESHOLD`` 65520, ...);
  :mod:`~minitorch_amp.testing.bf16` the bfloat16 ones (``MAX`` 3.3895e38, ``EPSILON`` 2**-7).
* :mod:`~minitorch_amp.testing.assertions` (NumPy only): :func:`assert_close` with per-dtype
  tolerances, :func:`ulp_distance`, :func:`assert_bit_equal`.
* :mod:`~minitorch_amp.testing.strategies` (needs Hypothesis): :func:`fp16_values`,
  :func:`fp32_values_near_fp16_edges`, :func:`bf16_values`, :func:`fp32_values_near_bf16_edges`,
  :func:`tensors`, :func:`shapes`,
  :func:`broadcastable_shapes`, :func:`gradient_magnitudes`.

The strategies are re-exported here too, but loaded only when first used, so that
``import minitorch_amp.testing`` works without Hypothesis installed.

Example:
    >>> import numpy as np
    >>> from minitorch_amp.testing import assert_bit_equal, fp16
    >>> x = np.float32([fp16.OVERFLOW_THRESHOLD, 65519.996, fp16.UNDERFLOW_THRESHOLD])
    >>> with np.errstate(over="ignore"):  # 65520 overflows to inf: the point here
    ...     assert_bit_equal(x.astype(np.float16), np.float16([np.inf, fp16.MAX, 0.0]))
"""

from . import bf16, fp16
from .assertions import DEFAULT_TOLERANCES, as_numpy, assert_bit_equal, assert_close, ulp_distance

_STRATEGIES = (
    "BF16_EDGE_VALUES",
    "bf16_values",
    "fp32_values_near_bf16_edges",
    "FP16_EDGE_VALUES",
    "broadcastable_shapes",
    "fp16_values",
    "fp32_values_near_fp16_edges",
    "gradient_magnitudes",
    "shapes",
    "tensors",
)


def __getattr__(name: str):
    """Load :mod:`.strategies` (and Hypothesis) on first use of a strategy or the module."""
    if name in _STRATEGIES or name == "strategies":
        import importlib

        strategies = importlib.import_module(f"{__name__}.strategies")
        return strategies if name == "strategies" else getattr(strategies, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted([*__all__, "strategies"])


__all__ = [
    "DEFAULT_TOLERANCES",
    "as_numpy",
    "assert_bit_equal",
    "assert_close",
    "bf16",
    "fp16",
    "ulp_distance",
    *_STRATEGIES,
]
