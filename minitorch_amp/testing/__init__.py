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

FP8 (issue 28): :mod:`~minitorch_amp.testing.fp8` holds both formats' landmarks
(``fp8.E4M3.MAX`` 448, ``fp8.E5M2.OVERFLOW_THRESHOLD`` 61440, ...);
:mod:`~minitorch_amp.testing.fp8_assertions` (NumPy only) :func:`assert_fp8_close` and
:func:`fp8_error_in_ulps` in FP8 ulps, :func:`fp8_ulp_distance`, :func:`assert_fp8_bit_equal`;
:mod:`~minitorch_amp.testing.fp8_strategies` (needs Hypothesis) :func:`fp8_values` and
:func:`fp32_values_near_fp8_edges`.

Whole models under AMP (issue 29; see docs/testing.md, "Whole models under AMP"):

* :mod:`~minitorch_amp.testing.model_properties` (NumPy only): :func:`check_finite_under_amp`
  (no inf/NaN forward or backward; names the first op that made one, beside the float32
  run's same op) and :func:`check_close_to_fp32` (layer by layer; names the first layer past
  the bound), for one example; :mod:`~minitorch_amp.testing.training_properties`:
  :func:`check_loss_scale_stream` (skipped steps change nothing, skip streaks and the scale
  stay bounded).
* :mod:`~minitorch_amp.testing.model_search` (needs Hypothesis): the same as searches that
  shrink: :func:`assert_finite_under_amp`, :func:`assert_close_to_fp32`,
  :func:`assert_loss_scale_healthy`.
* :mod:`~minitorch_amp.testing.model_strategies` (needs Hypothesis): model inputs:
  :func:`log_uniform_tensors`, :func:`scaled_batches`, :func:`adversarial_tensors`.

The strategies and the model tools are re-exported here too, but loaded only when first used,
so that ``import minitorch_amp.testing`` works without Hypothesis installed (and
``from minitorch_amp.testing import *`` there brings everything but the Hypothesis tools).

Example:
    >>> import numpy as np
    >>> from minitorch_amp.testing import assert_bit_equal, fp16
    >>> x = np.float32([fp16.OVERFLOW_THRESHOLD, 65519.996, fp16.UNDERFLOW_THRESHOLD])
    >>> with np.errstate(over="ignore"):  # 65520 overflows to inf: the point here
    ...     assert_bit_equal(x.astype(np.float16), np.float16([np.inf, fp16.MAX, 0.0]))
"""

from . import bf16, fp8, fp16
from .assertions import DEFAULT_TOLERANCES, as_numpy, assert_bit_equal, assert_close, ulp_distance
from .fp8_assertions import (
    assert_fp8_bit_equal,
    assert_fp8_close,
    fp8_error_in_ulps,
    fp8_ulp_distance,
)

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


# name -> the module that defines it, imported on first use
_MODEL_TOOLS = {
    "AmpDivergenceError": "model_properties",
    "AmpNotFiniteError": "model_properties",
    "check_close_to_fp32": "model_properties",
    "check_finite_under_amp": "model_properties",
    "LossScaleError": "training_properties",
    "check_loss_scale_stream": "training_properties",
    "assert_close_to_fp32": "model_search",
    "assert_finite_under_amp": "model_search",
    "assert_loss_scale_healthy": "model_search",
    "adversarial_tensors": "model_strategies",
    "log_uniform_tensors": "model_strategies",
    "scaled_batches": "model_strategies",
}
_MODULES = ("strategies", "model_properties", "model_search", "model_strategies")
# FP8 strategies (issue 28), loaded like the others: fp8_strategies needs Hypothesis
_FP8_STRATEGIES = ("FP8_EDGE_VALUES", "fp32_values_near_fp8_edges", "fp8_values")


def __getattr__(name: str):
    """Load a strategy or model tool (and Hypothesis, where it needs it) on first use."""
    import importlib

    if name in _STRATEGIES or name == "strategies":
        strategies = importlib.import_module(f"{__name__}.strategies")
        return strategies if name == "strategies" else getattr(strategies, name)
    if name in _MODEL_TOOLS:
        return getattr(importlib.import_module(f"{__name__}.{_MODEL_TOOLS[name]}"), name)
    if name in _MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _FP8_STRATEGIES:
        return getattr(importlib.import_module(f"{__name__}.fp8_strategies"), name)
    if name == "fp8_strategies":
        return importlib.import_module(f"{__name__}.fp8_strategies")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted([*__all__, *_MODULES, "fp8_strategies"])


def _hypothesis_installed() -> bool:
    """Whether ``import hypothesis`` can work here (found, not imported: that stays lazy)."""
    import importlib.util

    try:
        return importlib.util.find_spec("hypothesis") is not None
    except (ImportError, ValueError):  # a blocked or half-imported module
        return False


_SEARCH_MODULES = ("model_search", "model_strategies")  # the model tools that need Hypothesis
_NEEDS_HYPOTHESIS = (
    *_STRATEGIES,
    *(name for name, module in _MODEL_TOOLS.items() if module in _SEARCH_MODULES),
    *_FP8_STRATEGIES,
)
# ``from minitorch_amp.testing import *`` brings the Hypothesis tools only where it can load
# them: a star import loads every name in __all__, and one ImportError would fail it all.
__all__ = [
    "DEFAULT_TOLERANCES",
    "as_numpy",
    "assert_bit_equal",
    "assert_close",
    "bf16",
    "fp16",
    "ulp_distance",
    *(name for name in _MODEL_TOOLS if name not in _NEEDS_HYPOTHESIS),
    "assert_fp8_bit_equal",
    "assert_fp8_close",
    "fp8",
    "fp8_error_in_ulps",
    "fp8_ulp_distance",
    *(_NEEDS_HYPOTHESIS if _hypothesis_installed() else ()),
]
