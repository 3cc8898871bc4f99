"""The CPU's twins make inf and NaN without a warning: on a GPU they are values (the loss
scaler looks for them), and NumPy would otherwise warn from inside the library."""

from __future__ import annotations

import warnings

import numpy as np

import minitorch_amp as mt
from minitorch_amp.backend import gemm
from minitorch_amp.backend.bias_grad import bias_grad
from minitorch_amp.backend.cast import cast


def quietly(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` with every warning an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn(*args, **kwargs)


def test_the_gemm_twin_overflows_to_inf_quietly():
    a = np.full((2, 4), 200.0, np.float16)  # 4 * 200 * 200 = 160,000: past 65504
    out = quietly(gemm.twin, a, a.T.copy(), bias=np.zeros(2, np.float16))
    assert np.isinf(out).all()
    # the product stored as inf, plus a bias of -inf: NaN, NumPy's "invalid" (the rounding
    # itself is quiet on every path: csrc/float16.c never warns)
    out = quietly(gemm.twin, a, a.T.copy(), bias=np.array([-np.inf, 0.0], np.float16))
    assert np.isnan(out[:, 0]).all() and np.isinf(out[:, 1]).all()


def test_the_bias_gradient_twin_meets_inf_and_nan_quietly():
    grad = np.array([[3e38, np.inf], [3e38, 1.0], [1.0, 2.0]], np.float32)
    relu_out = np.array([[1.0, 0.0], [1.0, 1.0], [1.0, 1.0]], np.float32)  # masks the inf
    gb, gp = quietly(bias_grad, grad, np.float32, np.float16, relu_out=relu_out)
    assert np.isinf(gb[0]) and np.isnan(gb[1])  # 3e38 + 3e38 overflows; inf * 0 is NaN
    assert np.isinf(gp[0, 0])  # 3e38 past float16's largest value


def test_a_plain_cast_overflows_to_inf_quietly():
    out = quietly(cast, np.array([1e6, -7e4], np.float32), np.float16)
    assert out.tolist() == [np.inf, -np.inf]


def test_an_op_in_an_auto_cast_region_overflows_quietly():
    x = mt.full([2, 4], 200.0)
    with mt.amp.auto_cast():
        y = quietly(mt.matmul, x, x.T)
    assert y.dtype == np.float16 and np.isinf(y.numpy()).all()
