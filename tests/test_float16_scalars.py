"""A float16 tensor with a Python number computes in float32 and rounds once, as Paddle's and
PyTorch's half-precision kernels do; NumPy would round the number to float16 first."""

import operator

import numpy as np
import pytest

import minitorch_amp as mt

VALUES = np.array([1e-5, 3.0, -2.5, 0.0, 6e-5, 1000.0], dtype=np.float16)
OPS = [operator.add, operator.sub, operator.mul, operator.truediv]


def _rounded_once(op, a, b):
    """``op`` in float32 (a float16 array widened), rounded once to float16."""
    a = a.astype(np.float32) if isinstance(a, np.ndarray) else a
    b = b.astype(np.float32) if isinstance(b, np.ndarray) else b
    with np.errstate(all="ignore"):
        return op(a, b).astype(np.float16)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("number", [1e9, 1e5, 70000, 0.1, 1 / 3, 2049, 0.5, 2])
def test_a_number_meets_float16_in_float32_rounded_once(op, number):
    x = mt.to_tensor(VALUES)
    with np.errstate(all="ignore"):
        left, right = op(x, number).numpy(), op(number, x).numpy()
    assert left.dtype == right.dtype == np.float16
    np.testing.assert_array_equal(left, _rounded_once(op, VALUES, number))
    np.testing.assert_array_equal(right, _rounded_once(op, number, VALUES))


def test_the_examples_paddle_and_pytorch_agree_on():
    x = mt.to_tensor([1e-5, 3.0], dtype="float16")
    assert (x * 1e9).numpy()[0] == np.float16(10016.0)  # not inf: 1e9 is no float16
    assert (x / 1e5).numpy()[1] == np.float16(3e-5)  # not 0
    assert (x * 0.1).numpy()[1] == np.float16(0.30005)  # 3 * 0.1, not 3 * 0.09998


def test_the_gradients_of_multiply_and_divide_by_a_number_follow_the_same_rule():
    w = np.array([1e-4, 2e-3], dtype=np.float16)  # the gradient arriving at x * number
    x = mt.to_tensor([3.0, 1.0], dtype="float16", stop_gradient=False)
    ((x * 1e5) * mt.to_tensor(w)).sum().backward()  # 1e5 is inf in float16: w * inf was inf
    np.testing.assert_array_equal(x.grad.numpy(), _rounded_once(operator.mul, w, 1e5))
    x.clear_grad()
    big = np.array([100.0, 2000.0], dtype=np.float16)
    ((x / 1e5) * mt.to_tensor(big)).sum().backward()  # big / inf was 0
    np.testing.assert_array_equal(x.grad.numpy(), _rounded_once(operator.truediv, big, 1e5))
    assert x.grad.numpy().min() > 0


def test_a_comparison_rounds_the_number_to_float16_first_and_gives_bool():
    x = mt.to_tensor([0.1, 3.0], dtype="float16")  # 0.1 is 0.0999755859375 in float16
    assert (x == 0.1).dtype == np.bool_ and (x == 0.1).numpy().tolist() == [True, False]
    assert (x < 0.1).numpy().tolist() == [False, False]  # as Paddle and PyTorch compare


@pytest.mark.gpu
@pytest.mark.parametrize("op", OPS)
def test_on_the_gpu_a_number_meets_float16_in_float32_in_one_kernel(op):
    from minitorch_amp.backend import device

    if device.cupy is None:
        pytest.skip("needs CuPy and a CUDA device")
    x = mt.to_tensor(VALUES, place="gpu:0")
    with np.errstate(all="ignore"):
        got = op(x, 0.1).numpy(), op(1e5, x).numpy()
    np.testing.assert_array_equal(got[0], _rounded_once(op, VALUES, 0.1))
    np.testing.assert_array_equal(got[1], _rounded_once(op, 1e5, VALUES))


def test_the_gradient_of_a_number_divided_by_float16_stays_in_range():
    x = mt.to_tensor([1000.0, 2000.0], dtype="float16", stop_gradient=False)
    (1e5 / x).sum().backward()  # -1e5 / x**2: -g * 1e5 alone is past float16's range
    np.testing.assert_allclose(x.grad.numpy().astype(np.float32), [-0.1, -0.025], rtol=2e-3)


def test_the_gradient_of_float16_to_a_number_meets_the_number_in_float32():
    x = np.linspace(0.5, 8, 200).astype(np.float16)
    t = mt.to_tensor(x, stop_gradient=False)
    (t ** (1 / 3)).sum().backward()  # d/dx = 1/3 * x ** (1/3 - 1): 1/3 is no float16
    third = _rounded_once(operator.mul, np.ones_like(x), 1 / 3)
    power = _rounded_once(operator.pow, x, 1 / 3 - 1)
    np.testing.assert_array_equal(t.grad.numpy(), _rounded_once(operator.mul, third, power))
