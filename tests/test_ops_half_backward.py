"""Every op's backward in half precision, against a float64 oracle of the same rounded inputs.

test_ops.py checks backward on float64 inputs (against finite differences), where computing
in the wrong precision cannot show. Here the inputs and the upstream gradient are rounded to
the half dtype first; the oracle is the float64 backward of exactly those rounded values
(itself held to finite differences in test_ops.py), so every difference is rounding done by
the half-precision backward. An op that accumulates in float32 and rounds once is within a
unit roundoff or two; one that computes in float16 is off by hundreds (softmax) or thousands
(layer_norm) of them.

Tolerances are in units of the dtype's unit roundoff ``u`` (half an ulp at 1; 2**-11 for
float16), relative to each element, with magnitudes below the smallest normal counted as that
normal (subnormals have a fixed absolute spacing). The numbers come from measuring 600
hypothesis examples per entry with the code as it is; each allowance is about twice the
largest error seen.

Operands are given equal shapes: with broadcasting, an input's gradient is a sum of per-element
gradients that were each rounded to float16 before summing, and that sum can cancel to
anything (PyTorch's fp16 backward does the same); test_ops.py covers broadcasting in float64.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from op_catalogue import CATALOGUE, Entry

import minitorch_amp as mt
from minitorch_amp.autograd import Tensor

# The half dtypes under test: (unit roundoff u, smallest normal). bfloat16 joins with its own
# (2**-8, 2**-126) once the backend has it.
HALF = {"float16": (2.0**-11, 2.0**-14)}

DEFAULT_U = 4  # measured: at most 3.2 u (gelu_tanh; divide 2.4, pow 2.7, most ops 1.0)
ALLOWANCE_U = {  # entry -> allowed error in u, where the measured maximum is above 3.2 u
    # tanh's backward is g * (1 - y*y) with y the float16 output: near |y| = 1 the difference
    # cancels (measured 15.5 u).
    "tanh": 32,
    "sigmoid": 12,  # g * y * (1 - y) from the float16 output y (measured 5.6 u)
    # float32 sums of terms much larger than the result (measured 5.8 u and 8.3 u)
    "layer_norm": 12,
    "batch_norm_train": 16,
}
DIFFERENTIABLE = [e for e in CATALOGUE if e.differentiable]
SEEDS = st.integers(0, 2**32 - 1)


def _same_shapes(entry: Entry, spec):
    """``spec`` with every broadcasting operand given the full shape (no un-broadcast sums)."""
    if entry.broadcasts:
        full = max(spec, key=len)
        return (full,) * len(spec)
    if entry.name == "matmul":  # batch dims only where both operands have them, and equal
        x, y, tx, ty = spec
        batch = x[:-2] if len(x) > 2 and x[:-2] == y[:-2] else ()
        return (batch + x[-2:] if len(x) > 1 else x, batch + y[-2:] if len(y) > 1 else y, tx, ty)
    return spec


def _grads(entry: Entry, case, arrays, upstream) -> list[np.ndarray]:
    leaves = []
    for a in arrays:
        t = Tensor._wrap(a)
        t.stop_gradient = False
        leaves.append(t)
    out = entry.fn(*leaves, **case.attrs)
    out.backward(grad_tensor=upstream.astype(out.dtype))
    for i, leaf in enumerate(leaves):
        assert leaf.grad is not None, f"input {i} got no gradient"
        assert leaf.grad.dtype == arrays[i].dtype, "the gradient comes back in the input's dtype"
    return [leaf.grad.numpy() for leaf in leaves]


def assert_within_roundoff(got, oracle, u: float, smallest_normal: float, allowed: float, what):
    """``|got - oracle| <= allowed * u * max(|oracle|, smallest_normal)``, element by element."""
    got = got.astype(np.float64)
    error = np.abs(got - oracle) / np.maximum(np.abs(oracle), smallest_normal) / u
    worst = np.unravel_index(np.argmax(error), error.shape) if error.size else None
    assert not error.size or error[worst] <= allowed, (
        f"{what}: {error[worst]:.1f} u off at {worst} (got {got[worst]!r}, float64 oracle "
        f"{oracle[worst]!r}); allowed {allowed} u"
    )


@pytest.mark.parametrize("dtype", list(HALF))
@pytest.mark.parametrize("entry", DIFFERENTIABLE, ids=lambda e: e.name)
@given(data=st.data())
def test_half_backward_matches_float64_of_the_same_rounded_inputs(entry, dtype, data):
    spec = _same_shapes(entry, data.draw(entry.spec, label="spec"))
    case = entry.make(np.random.default_rng(data.draw(SEEDS, label="seed")), spec)
    rounded = [a.astype(dtype) for a in case.inputs]
    out = entry.fn(*[mt.to_tensor(a) for a in rounded], **case.attrs)
    upstream = np.random.default_rng(0).standard_normal(out.shape).astype(dtype)

    half = _grads(entry, case, rounded, upstream)
    oracle = _grads(entry, case, [a.astype(np.float64) for a in rounded], upstream)

    u, smallest_normal = HALF[dtype]
    allowed = ALLOWANCE_U.get(entry.name, DEFAULT_U)
    for i, (got, want) in enumerate(zip(half, oracle)):
        assert_within_roundoff(got, want, u, smallest_normal, allowed, f"input {i}")
