"""Kernel checks that hold an op's GPU kernels to the op's own NumPy path, within float32
rounding: LayerNorm (``layer_norm.cu``), softmax (``softmax.cu``), cross-entropy
(``cross_entropy.cu``) and ClipGradByGlobalNorm (``reduction.cu``'s global-norm kernels),
whose twins sum with BLAS or NumPy's pairwise sums where the kernels sum in a fixed tree, and
exact GELU (``elementwise.cu``'s gelu kernels: CUDA's ``erfcf`` against the twin's float32
polynomials). :mod:`minitorch_amp.utils.kernel_check` runs them with the others.

Each check runs the op's forward and backward on arrays moved by ``to_device`` and on NumPy,
and compares what ``to_host`` brings back; with NumPy on both sides (the tests) it holds the
op to itself.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

import numpy as np

Move = Callable[[np.ndarray], object]

__all__ = [
    "cross_entropy_matches",
    "gelu_matches",
    "global_norm_matches",
    "layer_norm_matches",
    "softmax_matches",
]


def layer_norm_matches(to_device: Move, to_host: Move) -> bool:
    """LayerNorm forward and backward over rows of 300 (past a block's 256 threads) with a
    weight and a bias: the kernels sum in their own order, the op's NumPy twin with BLAS, so
    the two agree within float32 rounding (1e-5 of the largest value), not bit for bit."""
    from ..autograd.ops.nn_ops import LayerNorm

    rng = np.random.default_rng(0)
    x, g = (rng.standard_normal((5, 3, 300)).astype(np.float32) for _ in range(2))
    w, b = (rng.standard_normal(300).astype(np.float32) for _ in range(2))

    def run(move):
        ctx = SimpleNamespace(needs_grad=(True, True, True))
        out = LayerNorm.forward(ctx, move(x), move(w), move(b), normalized_shape=(300,))
        return [out, *LayerNorm.backward(ctx, move(g))]

    return all(
        np.allclose(to_host(got), want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
        for got, want in zip(run(to_device), run(np.asarray))
    )


def gelu_matches(to_device: Move, to_host: Move) -> bool:
    """Exact GELU forward and backward in float32 and float16 over both tails: CUDA's erfcf
    against the twin's float32 polynomials, within 1e-5 (float16: its own rounding)."""
    from ..autograd.ops.activation import Gelu

    same = True
    for dtype, tolerance in ((np.float32, 1e-5), (np.float16, 2.0**-10)):
        x = np.linspace(-8, 8, 1001).astype(dtype)
        g = np.cos(np.arange(1001)).astype(dtype)

        def run(move, x=x, g=g):
            ctx = SimpleNamespace(needs_grad=(True,))
            return Gelu.forward(ctx, move(x)), Gelu.backward(ctx, move(g))

        for got, want in zip(run(to_device), run(np.asarray)):
            got = np.asarray(to_host(got), np.float64)
            same = same and np.allclose(got, want.astype(np.float64), tolerance, tolerance)
    return same


def softmax_matches(to_device: Move, to_host: Move) -> bool:
    """Softmax forward and backward over rows of 64 (attention's) and of 300 (past a block's
    256 threads), a row masked with -inf: within float32 rounding of the NumPy op."""
    from ..autograd.ops.activation import Softmax

    rng = np.random.default_rng(0)
    same = True
    for n in (64, 300):
        x = (rng.standard_normal((6, n)) * 4).astype(np.float32)
        x[0, n // 2 :] = -np.inf
        g = rng.standard_normal((6, n)).astype(np.float32)

        def run(move, x=x, g=g):
            ctx = SimpleNamespace(needs_grad=(True,))
            return Softmax.forward(ctx, move(x)), Softmax.backward(ctx, move(g))

        for got, want in zip(run(to_device), run(np.asarray)):
            same = same and np.allclose(to_host(got), want, rtol=2e-5, atol=1e-6)
        # float16 scores (attention's under AMP): read and written as float16 by the kernels
        half = SimpleNamespace(needs_grad=(True,)), SimpleNamespace(needs_grad=(True,))
        got = Softmax.forward(half[0], to_device(x.astype(np.float16)))
        want = Softmax.forward(half[1], x.astype(np.float16))
        wide = np.asarray(to_host(got), np.float32)
        same = same and np.allclose(wide, want.astype(np.float32), rtol=2e-3, atol=1e-7)
    return same


def global_norm_matches(to_device: Move, to_host: Move) -> bool:
    """ClipGradByGlobalNorm over float16, float32 and bfloat16 gradients, one of 18 tiles
    (past one block's finish): the kernels add in their own order and the NumPy path with
    BLAS, so the clipped gradients agree within a unit in the last place of their dtype."""
    import ml_dtypes

    from ..nn.clip import ClipGradByGlobalNorm
    from ..nn.parameter import Parameter

    rng = np.random.default_rng(0)
    shapes = [((64, 33), np.float16), ((5000,), np.float32), ((70000,), ml_dtypes.bfloat16)]
    grads = [(rng.standard_normal(n) * 3).astype(dtype) for n, dtype in shapes]
    params = [Parameter(np.zeros(1, np.float32)) for _ in grads]
    got = ClipGradByGlobalNorm(1.0)(list(zip(params, [to_device(g) for g in grads])))
    want = ClipGradByGlobalNorm(1.0)(list(zip(params, grads)))
    same = True
    for (_, g), (_, w), (_, dtype) in zip(got, want, shapes):
        tolerance = float(np.finfo(np.float32).eps) * 4 if dtype == np.float32 else 2**-7
        g64 = np.asarray(to_host(g._data), np.float64)
        same = same and np.allclose(g64, np.asarray(w._data, np.float64), rtol=tolerance)
    return same


def cross_entropy_matches(to_device: Move, to_host: Move) -> bool:
    """Cross-entropy forward and backward over rows of 300 classes (past a block's 256
    threads) with ignored labels and class weights, 'mean' and 'none' on float32 logits and
    'sum' on float16 ones: within float32 rounding of the NumPy op (float16: its own)."""
    from ..autograd.ops.loss import CrossEntropy

    rng = np.random.default_rng(0)
    x = (rng.standard_normal((7, 300)) * 4).astype(np.float32)
    label = rng.integers(0, 300, 7)
    label[2] = -100
    weight = (rng.random(300) + 0.5).astype(np.float32)
    same = True
    for dtype, reduction, tolerance in (
        (np.float32, "mean", 2e-5),
        (np.float32, "none", 2e-5),
        (np.float16, "sum", 2e-3),
    ):
        logits = x.astype(dtype)
        grad = np.linspace(-1, 1, 7 if reduction == "none" else 1).astype(dtype)

        def run(move, logits=logits, reduction=reduction, grad=grad):
            ctx = SimpleNamespace(needs_grad=(True, False, False))
            out = CrossEntropy.forward(
                ctx, move(logits), move(label), move(weight), reduction=reduction
            )
            g = grad.reshape(out.shape)
            return out, CrossEntropy.backward(ctx, move(g))[0]

        for got, want in zip(run(to_device), run(np.asarray)):
            got = np.asarray(to_host(got), np.float64)
            same = same and np.allclose(got, want.astype(np.float64), tolerance, 1e-6)
    return same
