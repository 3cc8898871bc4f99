"""Paddle's autograd behaviours where PyTorch differs (issue 26), as Paddle's own tests expect.

* ``Tensor.backward()`` on a tensor of several elements seeds it with ones (PyTorch refuses);
* ``grad(..., create_graph=True)`` returns tensors with ``stop_gradient=False``, even a
  gradient that is a constant of the graph (``d(2x)/dx``);
* a ``[1]`` gradient for a 0-D output is accepted by ``grad``, ``autograd.backward`` and
  ``Tensor.backward`` (Paddle's ``paddle.grad`` predates 0-D tensors).
"""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt


def leaf(values, dtype="float32"):
    return mt.to_tensor(values, dtype=dtype, stop_gradient=False)


# ---- backward() on a non-scalar ----------------------------------------------------------------
def test_backward_of_a_matrix_without_grad_tensor_is_the_backward_of_its_sum():
    x = leaf([[1.0, 2.0], [3.0, 4.0]])
    (x * x * 3.0).backward()
    np.testing.assert_array_equal(x.grad.numpy(), 6.0 * x.numpy())


def test_backward_of_a_non_scalar_float16_result_seeds_float16_ones():
    x = leaf([1.0, 2.0], dtype="float16")
    (x * 2.0).backward()
    assert x.grad.dtype == np.float16
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])


def test_backward_of_a_non_scalar_with_create_graph_can_be_differentiated_again():
    x = leaf([1.0, 2.0])
    (x * x * x).backward(create_graph=True)  # x.grad = 3 x^2, recorded
    (d2,) = mt.grad(x.grad.sum(), x)
    np.testing.assert_array_equal(d2.numpy(), [6.0, 12.0])


# ---- grad(create_graph=True) returns differentiable tensors ----------------------------------
@pytest.mark.parametrize(
    "f",
    [lambda x: x * x, lambda x: x * 2.0, lambda x: x.sum()],
    ids=["depends-on-x", "constant-gradient", "sum"],
)
def test_grad_with_create_graph_returns_tensors_that_do_not_stop_gradient(f):
    x = leaf([1.0, 2.0])
    (dx,) = mt.grad(f(x), x, create_graph=True)
    assert dx.stop_gradient is False
    (plain,) = mt.grad(f(x), x)
    assert plain.stop_gradient is True


def test_grad_with_create_graph_of_a_tensor_by_itself_does_not_touch_grad_outputs():
    x = leaf([1.0, 2.0])
    y = x * 2.0
    v = mt.to_tensor([3.0, 4.0])  # stop_gradient=True, and it must stay so
    (dy,) = mt.grad(y, y, grad_outputs=v, create_graph=True)
    assert dy.stop_gradient is False and v.stop_gradient is True
    np.testing.assert_array_equal(dy.numpy(), [3.0, 4.0])


# ---- a [1] gradient for a 0-D output ------------------------------------------------------------
def test_grad_accepts_a_one_element_grad_outputs_for_a_0d_output():
    x = leaf([1.0, 2.0])
    out = (x * x).sum()
    assert out.shape == []
    (dx,) = mt.grad(out, x, grad_outputs=mt.to_tensor([2.0]))
    np.testing.assert_array_equal(dx.numpy(), [4.0, 8.0])


def test_grad_with_create_graph_differentiates_through_a_one_element_grad_outputs():
    x = leaf([1.0, 2.0])
    v = leaf([2.0])
    (dx,) = mt.grad((x * x).sum(), x, grad_outputs=v, create_graph=True)  # 2 x v
    (dv,) = mt.grad(dx.sum(), v)
    np.testing.assert_array_equal(dv.numpy(), [6.0])
    assert dv.shape == [1]


def test_backward_and_autograd_backward_accept_a_one_element_gradient_for_a_0d_output():
    x = leaf([1.0, 2.0])
    (x * x).sum().backward(grad_tensor=mt.to_tensor([2.0]))
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 8.0])
    x.clear_grad()
    mt.autograd.backward([(x * x).sum()], [mt.to_tensor([3.0])])
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 12.0])


def test_other_shape_mismatches_are_still_refused():
    x = leaf([1.0, 2.0])
    with pytest.raises(ValueError, match=r"\[2\].*\[\]"):
        mt.grad((x * x).sum(), x, grad_outputs=mt.to_tensor([2.0, 3.0]))
    with pytest.raises(ValueError, match=r"\[\].*\[1\]"):
        (x[:1] * 2.0).backward(grad_tensor=mt.to_tensor(2.0))  # 0-D for a [1]: no
    assert x.grad is None
