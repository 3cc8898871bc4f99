"""A hook's result keeps the gradient's dtype and shape (PyTorch raises too).

Before, a hook returning float16 or int64 for a float32 gradient was cast back silently, and a
float64 result on a leaf became its ``.grad``. Now it raises, naming the hook and both dtypes.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt


# ---- a hook's result keeps the gradient's dtype and shape ----------------------------------
@pytest.mark.parametrize("dtype", ["float16", "int64", "float64"])
def test_a_hook_returning_another_dtype_raises_naming_the_hook_and_both_dtypes(dtype):
    x = mt.to_tensor([1.0, 2.0], stop_gradient=False)

    def widen_or_narrow(grad):
        return grad.astype(dtype)

    x.register_hook(widen_or_narrow)
    with pytest.raises(TypeError) as info:
        (x * 2.0).sum().backward()
    message = str(info.value)
    assert "widen_or_narrow" in message and dtype in message and "float32" in message
    assert x.grad is None  # before: float16/int64 cast back silently, float64 kept as .grad


def test_a_hook_on_a_result_returning_another_dtype_raises_too():
    x = mt.to_tensor([1.0, 2.0], stop_gradient=False)
    h = x * x
    h.register_hook(lambda g: g.astype("float16"))
    with pytest.raises(TypeError, match=r"<lambda>.*float16.*float32"):
        (h * 2.0).sum().backward()
    assert x.grad is None


def test_a_hook_returning_another_dtype_under_create_graph_raises_too():
    x = mt.to_tensor([1.0, 2.0], stop_gradient=False)
    x.register_hook(lambda g: g.astype("float64"))
    with pytest.raises(TypeError, match="float64"):
        mt.grad((x * x).sum(), x, create_graph=True)


def test_a_hook_returning_another_shape_raises_naming_the_hook_and_both_shapes():
    x = mt.to_tensor([1.0, 2.0], stop_gradient=False)

    def broadcast_it(grad):
        return mt.ones([3, 2])

    x.register_hook(broadcast_it)
    with pytest.raises(ValueError, match=r"broadcast_it.*\[3, 2\].*\[2\]"):
        (x * 2.0).sum().backward()
    assert x.grad is None


def test_a_float16_hook_result_for_a_float16_gradient_is_kept():
    x = mt.to_tensor(np.array([1.0, 2.0], "float16"), stop_gradient=False)
    x.register_hook(lambda g: g * 2.0)  # a Python float is weak: float16 stays float16
    (x * 3.0).sum().backward()
    assert x.grad.dtype == np.float16
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 6.0])
