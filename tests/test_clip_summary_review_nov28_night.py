"""What a review of the clippers, ``summary`` and the initializers found (2026-11-28, night).

* the clippers take any real number as their limit (a NumPy scalar too, as Paddle's
  ``float(clip_norm)`` does) and PyTorch's ``foreach=``; ``clip_grad_value_(ps, 0)`` zeroes;
* ``summary`` refuses an ``input_size`` it would misread, before the model runs;
* Paddle's ``Orthogonal``, ``Dirac``, ``Bilinear`` and ``set_global_initializer``.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import nn
from minitorch_amp.nn import initializer as I
from minitorch_amp.nn.clip import ClipGradByGlobalNorm, ClipGradByNorm
from minitorch_amp.nn.parameter import Parameter
from minitorch_amp.nn.utils import clip_grad_norm_, clip_grad_value_


def param_with_grad(grad=(3.0, -4.0)) -> Parameter:
    p = Parameter(np.zeros(len(grad), "float32"))
    p.grad = np.array(grad, "float32")
    return p


# ---- clipping ------------------------------------------------------------------------------------
@pytest.mark.parametrize("limit", [np.float32(1.0), np.int64(1), np.float16(1.0)])
def test_the_paddle_clippers_take_a_numpy_number_as_their_limit(limit):
    p = param_with_grad()
    [(_, g)] = ClipGradByGlobalNorm(limit)([(p, p.grad)])
    np.testing.assert_allclose(g.numpy(), [0.6, -0.8], rtol=1e-6)
    [(_, g)] = ClipGradByNorm(limit)([(p, p.grad)])
    np.testing.assert_allclose(g.numpy(), [0.6, -0.8], rtol=1e-6)


def test_clip_grad_value_takes_a_numpy_number():
    p = param_with_grad()
    clip_grad_value_([p], np.float32(1.0))
    assert p.grad.numpy().tolist() == [1.0, -1.0]


@pytest.mark.parametrize(
    "limit, error",
    [(True, TypeError), ("1.0", TypeError), (float("nan"), ValueError)]
    + [(0, ValueError), (np.float32(-1.0), ValueError)],
)
def test_a_limit_that_is_not_a_positive_number_is_refused(limit, error):
    with pytest.raises(error, match="clip_norm must be a"):
        ClipGradByGlobalNorm(limit)


def test_clip_grad_value_of_zero_zeroes_the_gradients_as_in_torch():
    p = param_with_grad()
    clip_grad_value_([p], 0.0)
    assert p.grad.numpy().tolist() == [0.0, 0.0]


def test_a_negative_clip_value_is_refused_and_the_gradients_are_kept():
    p = param_with_grad()
    with pytest.raises(ValueError, match="non-negative"):
        clip_grad_value_([p], -1.0)
    assert p.grad.numpy().tolist() == [3.0, -4.0]


@pytest.mark.parametrize("foreach", [None, True, False])
def test_clip_grad_norm_and_value_take_torchs_foreach_keyword(foreach):
    p, q = param_with_grad(), param_with_grad()
    assert float(clip_grad_norm_([p], 1.0, foreach=foreach)) == 5.0
    np.testing.assert_allclose(p.grad.numpy(), [0.6, -0.8], rtol=1e-5)
    clip_grad_value_([q], 2.0, foreach=foreach)
    assert q.grad.numpy().tolist() == [2.0, -2.0]


def test_a_foreach_that_is_not_a_bool_is_refused_before_any_write():
    p = param_with_grad()
    with pytest.raises(TypeError, match="foreach must be None, True or False"):
        clip_grad_norm_([p], 1.0, foreach="yes")
    with pytest.raises(TypeError, match="foreach must be None, True or False"):
        clip_grad_value_([p], 1.0, foreach=1)
    assert p.grad.numpy().tolist() == [3.0, -4.0]


# ---- summary -------------------------------------------------------------------------------------
class Recorder(nn.Layer):
    """Takes any inputs, records their shapes."""

    def __init__(self):
        super().__init__()
        self.act = nn.ReLU()
        self.calls = []

    def forward(self, *xs):
        self.calls.append([list(x.shape) for x in xs])
        return self.act(xs[0])


@pytest.mark.parametrize(
    "size, message",
    [
        (np.array([1, 3, 8, 8]), "tuple\\(sizes.tolist\\(\\)\\)"),
        ((1, 4.7), "has the dim 4.7: dims are ints"),
        ((1, True), "dims are ints"),
        ([[1, 4]], "each item of a list input_size .* got list"),
        (((1, 2), 3), "holds 3 beside shapes"),
    ],
)
def test_an_input_size_summary_would_misread_is_refused_before_the_model_runs(size, message):
    net = Recorder()
    with pytest.raises(TypeError, match=message):
        mt.summary(net, size)
    assert net.calls == []


@pytest.mark.parametrize(
    "size, shapes",
    [
        (4, [[4]]),
        ((None, 4), [[1, 4]]),
        ((-1, np.int64(4)), [[1, 4]]),
        ([2, 3], [[2], [3]]),
        ([(1, 2), (None, 3)], [[1, 2], [1, 3]]),
        (((1, 2), (1, 3)), [[1, 2], [1, 3]]),
        (SimpleNamespace(shape=(None, 5)), [[1, 5]]),
        ([SimpleNamespace(shape=[2, 3]), (4,)], [[2, 3], [4]]),
    ],
)
def test_every_documented_form_of_input_size_still_works(size, shapes, capsys):
    net = Recorder()
    mt.summary(net, size)
    assert net.calls == [shapes]


# ---- initializers --------------------------------------------------------------------------------
def made(shape, init, dtype="float32") -> np.ndarray:
    """A parameter created with ``init``, as float64 values."""
    return nn.Layer().create_parameter(shape, attr=init, dtype=dtype).numpy().astype(np.float64)


@pytest.mark.parametrize("dtype, tol", [("float64", 1e-12), ("float32", 1e-5)])
def test_orthogonal_follows_paddles_rows_and_columns_times_gain(dtype, tol):
    mt.seed(0)
    wide = made([10, 15], I.Orthogonal(gain=2.0), dtype)  # Linear(10, 15)'s [in, out] weight
    np.testing.assert_allclose(wide @ wide.T, 4.0 * np.eye(10), atol=tol)  # rows orthonormal
    tall = nn.Linear(15, 10, weight_attr=I.Orthogonal(gain=2.0)).weight.numpy().astype(dtype)
    np.testing.assert_allclose(tall.T @ tall, 4.0 * np.eye(10), atol=1e-5)  # columns
    conv = made([4, 2, 3, 3], I.Orthogonal(), dtype).reshape(4, 18)  # rows = out channels
    np.testing.assert_allclose(conv @ conv.T, np.eye(4), atol=tol)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_orthogonal_in_half_precision_is_the_float32_result_rounded_once(dtype):
    w = made([6, 4], I.Orthogonal(gain=0.5), dtype)
    np.testing.assert_allclose(w.T @ w, 0.25 * np.eye(4), atol=2e-2)


def test_orthogonal_refuses_a_one_dimensional_parameter():
    with pytest.raises(ValueError, match="2 or more dims"):
        made([5], I.Orthogonal())


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_a_dirac_convolution_passes_its_input_through(dtype):
    conv = nn.Conv2D(3, 3, 3, padding=1, weight_attr=I.Dirac(), bias_attr=False)
    x = mt.rand([2, 3, 5, 5])
    np.testing.assert_array_equal(conv(x).numpy(), x.numpy())
    w = made([2, 3, 3], I.Dirac(), dtype)  # Paddle's example: Conv1D(3, 2, 3)
    assert w.tolist() == [[[0, 1, 0], [0, 0, 0], [0, 0, 0]], [[0, 0, 0], [0, 1, 0], [0, 0, 0]]]


def test_dirac_marks_the_centre_of_an_even_kernel_and_repeats_per_group():
    w = made([2, 3, 4], I.Dirac())  # Paddle's example: Conv1D(3, 2, 4), the 1 at index 2
    assert w[0, 0].tolist() == [0, 0, 1, 0] and w[1, 1].tolist() == [0, 0, 1, 0]
    w = made([4, 2, 3, 3, 3], I.Dirac(groups=2))
    ones = [tuple(int(i) for i in ix) for ix in np.argwhere(w == 1)]
    assert ones == [(0, 0, 1, 1, 1), (1, 1, 1, 1, 1), (2, 0, 1, 1, 1), (3, 1, 1, 1, 1)]


@pytest.mark.parametrize(
    "shape, init, message",
    [
        ([3, 3], I.Dirac(), "3, 4 or 5 dims"),
        ([3, 2, 3], I.Dirac(groups=2), "not divisible by groups=2"),
        ([2, 1, 3, 4], I.Bilinear(), "square kernel"),
    ],
)
def test_structured_initializers_refuse_a_shape_they_cannot_fill(shape, init, message):
    with pytest.raises(ValueError, match=message):
        made(shape, init)


BILINEAR_4 = [0.25, 0.75, 0.75, 0.25]  # factor 2: kernel 4, f = 2, c = 0.75
BILINEAR_5 = [1 / 3, 2 / 3, 1.0, 2 / 3, 1 / 3]  # factor 3: kernel 5, f = 3, c = 2/3


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_bilinear_is_the_outer_product_of_the_interpolation_ramp(dtype):
    w = made([2, 1, 4, 4], I.Bilinear(), dtype)
    assert w.shape == (2, 1, 4, 4)
    np.testing.assert_array_equal(w[1, 0], np.outer(BILINEAR_4, BILINEAR_4))  # exact in halves
    w = made([1, 1, 5, 5], I.Bilinear(), dtype)
    rtol = 1e-12 if dtype == "float64" else 1e-2
    np.testing.assert_allclose(w[0, 0], np.outer(BILINEAR_5, BILINEAR_5), rtol=rtol)


@pytest.fixture
def global_initializers():
    yield
    I.set_global_initializer(None)


def test_set_global_initializer_changes_the_defaults_of_later_parameters(global_initializers):
    before = nn.Linear(2, 2)
    I.set_global_initializer(I.Constant(0.5), I.Constant(0.25))
    fc, norm = nn.Linear(2, 2), nn.LayerNorm(2)
    assert np.all(fc.weight.numpy() == 0.5) and np.all(fc.bias.numpy() == 0.25)
    assert np.all(norm.weight.numpy() == 0.5)  # Paddle: before the layer's own default
    assert np.all(nn.Linear(2, 2, weight_attr=I.Constant(2.0)).weight.numpy() == 2.0)
    assert not np.all(before.weight.numpy() == 0.5)
    I.set_global_initializer(None)
    after = nn.Linear(2, 2)
    assert not np.all(after.weight.numpy() == 0.5) and np.all(after.bias.numpy() == 0)


def test_set_global_initializer_refuses_a_non_initializer_and_keeps_the_old_ones(
    global_initializers,
):
    I.set_global_initializer(I.Constant(0.5))
    with pytest.raises(TypeError, match=r"bias_init must be an nn\.initializer object or None"):
        I.set_global_initializer(I.Constant(1.0), "zeros")
    assert np.all(nn.Linear(2, 2).weight.numpy() == 0.5)
