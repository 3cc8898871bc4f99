"""Hypothesis strategies of model inputs: where in a dtype's range does a model break?

Three kinds, each for a different question (all draw float32 Tensors, as a data loader
gives them; ``auto_cast`` does the narrowing):

* :func:`log_uniform_tensors`: "is the model finite for inputs of any size the dtype holds?"
  Magnitudes log-uniform over the dtype's whole range, subnormals and the values next to
  ``MAX`` included. Shrinks towards 1.0 (exponent 0), so a failure shrinks to the smallest
  binade that still fails.
* :func:`scaled_batches`: "from which size on does a real batch break it?" One real batch
  times a scale ``low * 2**(k / steps_per_octave)``; ``k`` shrinks towards 0, so the shrunk
  counterexample is the smallest failing scale on that grid: within ``2**(1/steps)`` of the
  threshold when failing is monotone in the scale (``2**(1/16)``: 4.4%).
* :func:`adversarial_tensors`: "does the worst direction break it?" Inputs built to defeat
  cancellation (``all_positive``: a dot product or a sum reaches its largest value) or to
  dominate a row (``one_large``: one element of size ``magnitude``, the rest small: softmax,
  max-subtraction, norms).

Example:
    >>> from hypothesis import find, settings
    >>> import minitorch_amp as mt
    >>> big = lambda t: t.numpy().max() > 1e4
    >>> same = settings(database=None, derandomize=True)  # the same example on every machine
    >>> x = find(log_uniform_tensors((2, 3), "float16"), big, settings=same)
    >>> float(x.numpy().max())
    16384.0
"""

from __future__ import annotations

import math

import numpy as np

try:
    from hypothesis import strategies as st
    from hypothesis.extra import numpy as hnp
except ImportError as exc:  # pragma: no cover - the kit's other modules work without it
    raise ImportError(
        "minitorch_amp.testing.model_strategies needs Hypothesis: pip install hypothesis"
    ) from exc

from ..autograd.tensor import Tensor
from . import bf16, fp16

__all__ = ["adversarial_tensors", "log_uniform_tensors", "scaled_batches"]

# (smallest subnormal exponent, largest exponent, MAX) of each dtype the properties know
_RANGES = {
    "float16": (-24, 15, fp16.MAX),
    "bfloat16": (-133, 127, bf16.MAX),
}
ADVERSARIAL_KINDS = ("all_positive", "one_large")


def _dtype_range(dtype) -> tuple[int, int, float]:
    if not isinstance(dtype, str) or dtype.lower() not in _RANGES:
        raise ValueError(f"dtype must be 'float16' or 'bfloat16', got {dtype!r}")
    return _RANGES[dtype.lower()]


def _shape(shape) -> tuple[int, ...]:
    if isinstance(shape, int):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or not all(isinstance(s, int) for s in shape):
        raise TypeError(f"shape must be a tuple of ints such as (8, 16), got {shape!r}")
    return tuple(shape)


def log_uniform_tensors(
    shape,
    dtype: str = "float16",
    *,
    low_exp: int | None = None,
    high_exp: int | None = None,
    signed: bool = True,
) -> st.SearchStrategy[Tensor]:
    """float32 Tensors of ``shape`` with ``|x| = m * 2**e``: ``e`` uniform in
    ``[low_exp, high_exp]`` (default: ``dtype``'s smallest subnormal to its largest binade),
    ``m`` in ``[1, 2)`` with 23 bits, and ``|x|`` capped at ``dtype``'s ``MAX``.

    For float16 that is ``2**-24`` (subnormal) to 65504; for bfloat16 ``2**-133`` to 3.39e38
    (below ``2**-126`` float32 itself is subnormal and keeps fewer bits). Shrinks to 1.0.

    Each element's ``e`` is its own draw; like every Hypothesis draw it favours the value it
    shrinks to (0, where the range holds it), so ``e == 0`` comes up a few times as often as
    another exponent: about 10% of the elements over float16's 40 binades.
    """
    lowest, highest, top = _dtype_range(dtype)
    low = lowest if low_exp is None else low_exp
    high = highest if high_exp is None else high_exp
    if low > high:
        raise ValueError(f"low_exp {low} must not exceed high_exp {high}")
    shape = _shape(shape)
    # NOTE: one (exponent, mantissa, sign) draw per element. Three arrays drawn one after the
    # other with the default fill gave most elements one fill value: half the exponents were 0.
    sign = st.booleans() if signed else st.just(False)
    element = st.tuples(st.integers(low, high), st.integers(0, 2**23 - 1), sign)
    size = math.prod(shape)

    def build(parts) -> Tensor:
        drawn = np.array(parts, dtype=np.int64).reshape(*shape, 3)
        e, m, negative = drawn[..., 0], drawn[..., 1], drawn[..., 2]
        magnitude = np.minimum((1.0 + m * 2.0**-23) * np.exp2(e.astype(np.float64)), top)
        return Tensor._wrap(np.where(negative == 1, -magnitude, magnitude).astype(np.float32))

    return st.lists(element, min_size=size, max_size=size).map(build)


def scaled_batches(
    batch, *, low: float = 2.0**-8, high: float = 2.0**24, steps_per_octave: int = 16
) -> st.SearchStrategy[Tensor]:
    """``batch * scale`` with ``scale = low * 2**(k / steps_per_octave)`` for an integer ``k``
    from 0 to where the scale reaches ``high``; ``k`` shrinks towards 0 (the smallest scale).

    Use it to find the smallest scale of real data at which a model overflows: the shrunk
    counterexample is within a factor ``2**(1 / steps_per_octave)`` above the true threshold
    when a larger scale never fails less. Read the scale back as
    ``abs(x).max() / abs(batch).max()``.
    """
    if isinstance(batch, Tensor):
        batch = batch.numpy()
    if not isinstance(batch, np.ndarray) or batch.dtype.kind != "f":
        raise TypeError(f"batch must be a floating Tensor or NumPy array, got {batch!r:.60}")
    if not (0 < low < high) or not isinstance(steps_per_octave, int) or steps_per_octave < 1:
        raise ValueError(
            f"need 0 < low < high and steps_per_octave >= 1, got low={low}, high={high}, "
            f"steps_per_octave={steps_per_octave!r}"
        )
    base = batch.astype(np.float64)
    last = math.ceil(math.log2(high / low) * steps_per_octave)

    def build(k: int) -> Tensor:
        with np.errstate(over="ignore"):  # past float32's range the input is inf: as asked
            scaled = (base * (low * 2.0 ** (k / steps_per_octave))).astype(np.float32)
        return Tensor._wrap(scaled)

    return st.integers(0, last).map(build)


def adversarial_tensors(
    shape, magnitude, *, kinds=ADVERSARIAL_KINDS, background: float = 1.0
) -> st.SearchStrategy[Tensor]:
    """float32 Tensors of ``shape`` in a worst-case direction, of size ``magnitude``.

    Args:
        shape: the tensor's shape.
        magnitude: a float, or a strategy of floats (``scaled``: e.g. ``st.sampled_from``).
        kinds: which directions to draw from:

            * ``'all_positive'``: every element in ``[magnitude / 2, magnitude]``; nothing
              cancels, so sums and dot products reach their largest values (shrinks to all
              equal to ``magnitude``).
            * ``'one_large'``: one element ``+-magnitude`` at a drawn position, the others in
              ``[-background, background]`` (shrinks to the first element, the rest 0).
        background: the size of the small elements of ``'one_large'``.
    """
    shape = _shape(shape)
    unknown = [k for k in kinds if k not in ADVERSARIAL_KINDS]
    if unknown or not kinds:
        raise ValueError(f"kinds must be some of {ADVERSARIAL_KINDS}, got {kinds!r}")
    sizes = magnitude if isinstance(magnitude, st.SearchStrategy) else st.just(float(magnitude))
    size = int(np.prod(shape))
    fractions = hnp.arrays(np.float64, shape, elements=st.floats(0, 0.5))
    small = hnp.arrays(np.float64, shape, elements=st.floats(-background, background))

    @st.composite
    def draw(draw) -> Tensor:
        m = draw(sizes)
        kind = draw(st.sampled_from(kinds))
        if kind == "all_positive":
            values = m * (1.0 - draw(fractions))
        else:
            values = draw(small).reshape(-1)
            if size:  # an empty tensor has no element to make large
                values[draw(st.integers(0, size - 1))] = m * draw(st.sampled_from([1, -1]))
            values = values.reshape(shape)
        return Tensor._wrap(values.astype(np.float32))

    return draw()
