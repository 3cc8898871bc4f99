"""``F.normalize``, ``F.rms_norm``/``nn.RMSNorm``, ``F.leaky_relu``/``nn.LeakyReLU`` and
``F.silu``/``nn.SiLU``: against PyTorch, their AMP dtypes, float16 numerics and errors.

The op catalogue checks the ops (``p_norm``, ``rms_norm``, ``leaky_relu``, ``silu``) against
NumPy and finite differences; ``normalize`` is a composition (``p_norm``, ``clip``,
``divide``, as Paddle's), so its backward is checked here.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numeric_grad import numeric_grad

import minitorch_amp as mt
import minitorch_amp.nn.functional as F
from minitorch_amp import amp, nn
from minitorch_amp.amp import debugging

RNG = np.random.default_rng(0)


def leaf(a) -> mt.Tensor:
    t = mt.to_tensor(a)
    t.stop_gradient = False
    return t


def grad_of(fn, a, upstream) -> tuple[np.ndarray, np.ndarray]:
    """``fn(leaf(a))`` and the gradient of ``sum(out * upstream)`` with respect to ``a``."""
    x = leaf(a)
    out = fn(x)
    out.backward(mt.to_tensor(upstream))
    return out.numpy(), x.grad.numpy()


def torch_grad_of(torch, fn, a, upstream):
    x = torch.from_numpy(a).requires_grad_()
    out = fn(x)
    out.backward(torch.from_numpy(upstream))
    return out.detach().numpy(), x.grad.numpy()


def assert_same(ours, theirs, tol=1e-12):
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


# ---- normalize -----------------------------------------------------------------------------------
@pytest.mark.parametrize("p", [1, 2, 3, 1.5, float("inf")])
@pytest.mark.parametrize("axis", [1, -1, 0])
def test_normalize_matches_pytorch_forward_and_backward(p, axis):
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((3, 4, 2))
    x[0, :, 0] = 0.0  # a zero vector along axis 1: divided by epsilon, gradient 1 / epsilon
    up = RNG.standard_normal(x.shape)
    ours = grad_of(lambda t: F.normalize(t, p=p, axis=axis), x, up)
    theirs = torch_grad_of(torch, lambda t: torch.nn.functional.normalize(t, p, axis), x, up)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-9, atol=1e-12)  # 1e12 at the zeros


@settings(max_examples=20)
@given(
    shape=st.lists(st.integers(1, 3), min_size=1, max_size=3),
    p=st.sampled_from([1.0, 2.0, 3.0]),
    seed=st.integers(0, 2**32 - 1),
)
def test_normalize_backward_matches_finite_differences(shape, p, seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.3, 2.0, shape) * rng.choice([-1.0, 1.0], shape)  # away from |x|'s kink
    axis = int(rng.integers(-len(shape), len(shape)))
    up = rng.standard_normal(shape)
    _, got = grad_of(lambda t: F.normalize(t, p=p, axis=axis), x, up)

    def loss(a):
        return float(np.sum(F.normalize(mt.to_tensor(a), p=p, axis=axis).numpy() * up))

    np.testing.assert_allclose(got, numeric_grad(loss, [x])[0], rtol=1e-6, atol=1e-7)


def test_normalize_is_paddles_composition_and_keeps_float16_under_o1():
    x = mt.to_tensor(RNG.standard_normal((2, 3)), dtype="float16")
    with debugging.collect_operator_stats() as stats, amp.auto_cast(level="O1"):
        out = F.normalize(x)
    # Paddle's list names 'pnorm', not its op 'p_norm': the norm follows its input
    assert out.dtype == mt.float16
    assert {name for name, c in stats.counts.items() if c["fp16"]} == {"p_norm", "clip", "divide"}
    want = x.numpy().astype(np.float64)
    want /= np.linalg.norm(want, axis=1, keepdims=True)
    np.testing.assert_allclose(out.numpy().astype(np.float64), want, rtol=2e-3, atol=2e-3)


def test_float16_norm_sums_in_float32():
    x = mt.full([4096], 1.0, dtype="float16")  # a float16 sum of squares would stop at 2048
    np.testing.assert_allclose(F.normalize(x, axis=0).numpy(), np.full(4096, 1 / 64), rtol=1e-3)


def test_a_zero_vector_normalizes_to_zero_with_gradient_upstream_over_epsilon():
    x = np.zeros((2, 3))
    x[1] = [3.0, 0.0, 4.0]
    out, grad = grad_of(lambda t: F.normalize(t, epsilon=1e-6), x, np.ones((2, 3)))
    np.testing.assert_array_equal(out[0], 0.0)
    np.testing.assert_allclose(grad[0], 1e6)  # the clip passes nothing to the norm
    np.testing.assert_allclose(grad[1], (1 - x[1] * x[1].sum() / 25) / 5, atol=1e-15)


def test_normalize_rejects_an_axis_out_of_range():
    with pytest.raises(ValueError, match=r"axis 2 is out of range for a tensor with 2 dims"):
        F.normalize(mt.ones([2, 3]), axis=2)


# ---- rms_norm ------------------------------------------------------------------------------------
def test_rms_norm_layer_matches_pytorch_forward_and_backward():
    torch = pytest.importorskip("torch")
    x, up = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((2, 3, 4))
    w = RNG.uniform(0.5, 1.5, 4)
    ours_layer = nn.RMSNorm(4, epsilon=1e-6)
    ours_layer.weight.set_value(w.astype(np.float32))
    ours_layer.to(dtype="float64")
    xt = leaf(x)
    out = ours_layer(xt)
    out.backward(mt.to_tensor(up))
    theirs = torch.nn.RMSNorm(4, eps=1e-6, dtype=torch.float64)
    with torch.no_grad():
        theirs.weight.copy_(torch.from_numpy(w.astype(np.float32).astype(np.float64)))
    tx = torch.from_numpy(x).requires_grad_()
    want = theirs(tx)
    want.backward(torch.from_numpy(up))
    assert_same(
        (out.numpy(), xt.grad.numpy(), ours_layer.weight.grad.numpy()),
        (want.detach().numpy(), tx.grad.numpy(), theirs.weight.grad.numpy()),
    )


def test_functional_rms_norm_over_two_axes_matches_pytorch():
    torch = pytest.importorskip("torch")
    x, w = RNG.standard_normal((2, 3, 4)), RNG.uniform(0.5, 1.5, (3, 4))
    got = F.rms_norm(mt.to_tensor(x), [3, 4], mt.to_tensor(w), eps=1e-3).numpy()
    want = torch.nn.functional.rms_norm(torch.from_numpy(x), [3, 4], torch.from_numpy(w), 1e-3)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-12, atol=1e-12)


def test_float16_rms_norm_statistics_are_float32():
    x = mt.full([2, 8], 300.0, dtype="float16")  # 300**2 overflows float16
    out = F.rms_norm(x, 8)
    assert out.dtype == mt.float16
    np.testing.assert_allclose(out.numpy(), np.ones((2, 8)), rtol=1e-3)


def test_rms_norm_is_float32_at_o1_and_follows_x_at_o2_like_layer_norm():
    x, w = mt.ones([2, 4], dtype="float16"), mt.ones([4])
    with amp.auto_cast(level="O1"):
        assert F.rms_norm(x, 4, w).dtype == mt.float32
    with amp.auto_cast(level="O2"):
        assert F.rms_norm(x, 4, w).dtype == mt.float16  # only x is looked at
    assert w.dtype == mt.float32


def test_rms_norm_layer_parameters_and_options():
    norm = nn.RMSNorm([2, 3])
    assert list(norm.state_dict()) == ["weight"] and norm.weight.shape == [6]
    np.testing.assert_array_equal(norm.weight.numpy(), np.ones(6))
    assert nn.RMSNorm(3, weight_attr=False).parameters() == []
    assert nn.RMSNorm(3, elementwise_affine=False).weight is None
    assert nn.RMSNorm(3, eps=1e-3)._epsilon == 1e-3
    assert repr(nn.RMSNorm(3)) == "RMSNorm(normalized_shape=[3], epsilon=1e-05)"


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: F.rms_norm(mt.ones([2, 3]), 4),
            r"input of shape \[2, 3\] does not end with .*\[4\]",
        ),
        (lambda: F.rms_norm(mt.ones([2, 3]), 3, mt.ones([4])), r"weight of shape \[4\] does not"),
        (lambda: nn.RMSNorm(0), r"normalized_shape"),
        (lambda: nn.RMSNorm(3, epsilon=-1.0), r"epsilon must be >= 0"),
    ],
)
def test_rms_norm_bad_arguments_raise_clear_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# ---- leaky_relu and silu -------------------------------------------------------------------------
def test_leaky_relu_matches_pytorch_including_the_gradient_at_zero():
    torch = pytest.importorskip("torch")
    x = np.array([-2.0, -0.5, 0.0, 0.5, 3.0])
    up = RNG.standard_normal(5)
    ours = grad_of(lambda t: F.leaky_relu(t, 0.2), x, up)
    theirs = torch_grad_of(torch, lambda t: torch.nn.functional.leaky_relu(t, 0.2), x, up)
    assert_same(ours, theirs)


def test_leaky_relu_gradient_at_zero_is_the_slope():
    _, grad = grad_of(lambda t: F.leaky_relu(t, 0.2), np.zeros(3), np.ones(3))
    np.testing.assert_array_equal(grad, [0.2, 0.2, 0.2])  # Paddle and PyTorch


def test_silu_matches_pytorch_and_does_not_overflow():
    torch = pytest.importorskip("torch")
    x = np.array([-800.0, -20.0, -1.0, 0.0, 1.0, 20.0, 800.0])
    up = RNG.standard_normal(x.shape)
    ours = grad_of(F.silu, x, up)
    theirs = torch_grad_of(torch, torch.nn.functional.silu, x, up)
    assert_same(ours, theirs)
    with np.errstate(all="raise"):
        F.silu(mt.to_tensor([-1000.0, 1000.0], dtype="float16"))


def test_activation_layers_and_their_amp_category():
    x = mt.to_tensor([-1.0, 2.0])
    np.testing.assert_allclose(nn.LeakyReLU(0.5)(x).numpy(), [-0.5, 2.0])
    np.testing.assert_allclose(nn.SiLU()(x).numpy(), F.silu(x).numpy())
    assert repr(nn.LeakyReLU()) == "LeakyReLU(negative_slope=0.01)"
    half = mt.ones([3], dtype="float16")
    with amp.auto_cast(level="O1"):  # gray: they follow their input
        assert F.leaky_relu(half).dtype == F.silu(half).dtype == mt.float16
