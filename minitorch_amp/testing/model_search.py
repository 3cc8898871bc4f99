"""The model properties as Hypothesis searches: run a property over a strategy of inputs and
fail with the shrunk counterexample.

Each ``assert_*`` takes what its ``check_*`` twin takes
(:mod:`~minitorch_amp.testing.model_properties`,
:mod:`~minitorch_amp.testing.training_properties`), with a Hypothesis strategy where the
twin takes one example, and ``settings`` (a ``hypothesis.settings``; default: the loaded
profile with no deadline). A failure raises the twin's error for the shrunk example, its
``report.examples_run`` counting every input run, shrinking included.

Settings that keep a search fast on a 2-core CPU: ``max_examples`` 50-200 (a threshold on a
``scaled_batches`` grid is found and shrunk in well under 100), ``deadline=None`` (AMP's
first call decorates copies), ``derandomize=True`` for a search whose output a test or a
page shows, and the ``thorough`` profile (``HYPOTHESIS_PROFILE=thorough``) for long runs.
``dtype='float8'`` with ``fp8_recipe=`` searches FP8 training's GEMMs (see
:mod:`~minitorch_amp.testing.model_properties`).

Example:
    >>> import numpy as np
    >>> from hypothesis import settings
    >>> import minitorch_amp as mt
    >>> from minitorch_amp import nn
    >>> from minitorch_amp.testing.model_strategies import scaled_batches
    >>> layer = nn.Linear(4, 3)
    >>> layer.weight.set_value(np.ones((4, 3), "float32"))
    >>> try:
    ...     assert_finite_under_amp(layer, scaled_batches(mt.ones([2, 4])),
    ...                             settings=settings(max_examples=100, derandomize=True))
    ... except AmpNotFiniteError as err:
    ...     print(err.report.op.op, float(err.report.example[0].max()))  # 65520 / 4 = 16380
    linear 16384.0
"""

from __future__ import annotations

import dataclasses

try:
    import hypothesis
    from hypothesis import strategies as st
except ImportError as exc:  # pragma: no cover - the kit's other modules work without it
    raise ImportError(
        "minitorch_amp.testing.model_search needs Hypothesis: pip install hypothesis"
    ) from exc

from .model_properties import (
    AmpDivergenceError,
    AmpNotFiniteError,
    ModelCopies,
    _checked_scale,
    check_close_to_fp32,
    check_finite_under_amp,
)
from .training_properties import LossScaleError, check_loss_scale_stream

__all__ = [
    "AmpDivergenceError",
    "AmpNotFiniteError",
    "LossScaleError",
    "assert_close_to_fp32",
    "assert_finite_under_amp",
    "assert_loss_scale_healthy",
]


def _strategy(inputs, what: str) -> st.SearchStrategy:
    if not isinstance(inputs, st.SearchStrategy):
        raise TypeError(
            f"{what} must be a Hypothesis strategy, got {type(inputs).__name__}; for fixed "
            "examples pass hypothesis.strategies.sampled_from([...]), or call the check_* "
            "function with one example"
        )
    return inputs


def _settings(settings) -> hypothesis.settings:
    """``settings`` (default: the loaded profile, no deadline), one bug reported, and no
    ``explain`` phase: it re-runs the failing example under a line tracer, tens of seconds
    for a model, to list lines a model's failure does not depend on anyway."""
    if settings is None:
        settings = hypothesis.settings(deadline=None)
    if not isinstance(settings, hypothesis.settings):
        raise TypeError(f"settings must be a hypothesis.settings, got {type(settings).__name__}")
    phases = tuple(p for p in settings.phases if p is not hypothesis.Phase.explain)
    return hypothesis.settings(settings, report_multiple_bugs=False, phases=phases)


def _search(inputs, settings, check) -> None:
    """Run ``check(example)`` over ``inputs``; add the number of runs to a failure's report."""
    runs = [0]

    @hypothesis.given(inputs)
    @_settings(settings)
    def prop(x):
        runs[0] += 1
        check(x)

    try:
        prop()
    except (AmpNotFiniteError, AmpDivergenceError) as err:
        err.report = dataclasses.replace(err.report, examples_run=runs[0])
        raise


def assert_finite_under_amp(
    model,
    inputs,
    *,
    level: str = "O1",
    dtype: str = "float16",
    backward: bool = False,
    loss_scale: float | None = None,
    loss_fn=None,
    custom_white_list=None,
    custom_black_list=None,
    fp8_recipe=None,
    settings=None,
) -> None:
    """Search ``inputs`` for one whose AMP forward (or backward) produces inf/NaN.

    Raises:
        AmpNotFiniteError: for the shrunk example; ``report`` names the first op.
    """
    strategy = _strategy(inputs, "inputs")
    loss_scale = _checked_scale(loss_scale)
    copies = ModelCopies(model, level, dtype, custom_white_list, custom_black_list, fp8_recipe)
    kwargs = dict(backward=backward, loss_scale=loss_scale, loss_fn=loss_fn, copies=copies)
    _search(strategy, settings, lambda x: check_finite_under_amp(model, x, **kwargs))


def assert_close_to_fp32(
    model,
    inputs,
    *,
    level: str = "O1",
    dtype: str = "float16",
    rtol=None,
    ulps=None,
    custom_white_list=None,
    custom_black_list=None,
    fp8_recipe=None,
    settings=None,
) -> None:
    """Search ``inputs`` for one where a layer's AMP output leaves float32's by more than
    the bound.

    Raises:
        AmpDivergenceError: for the shrunk example; ``report`` names the first layer.
    """
    strategy = _strategy(inputs, "inputs")
    copies = ModelCopies(model, level, dtype, custom_white_list, custom_black_list, fp8_recipe)
    kwargs = dict(rtol=rtol, ulps=ulps, copies=copies)
    _search(strategy, settings, lambda x: check_close_to_fp32(model, x, **kwargs))


def assert_loss_scale_healthy(model, streams, *, settings=None, **kwargs) -> None:
    """Run :func:`check_loss_scale_stream` on every stream of batches ``streams`` draws
    (e.g. ``st.lists(log_uniform_tensors(...), min_size=4, max_size=12)``); ``kwargs`` are
    its own (``optimizer``, ``scaler``, ``max_skip_streak``, ``scale_band``, ...).

    Raises:
        LossScaleError: for the shrunk stream.
    """
    strategy = _strategy(streams, "streams")
    _search(strategy, settings, lambda batches: check_loss_scale_stream(model, batches, **kwargs))
