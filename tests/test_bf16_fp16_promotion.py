"""concat, stack and where promote bfloat16 the way ``+`` does (``backend.dtypes.result_type``).

NumPy knows no common dtype of bfloat16 (an ``ml_dtypes`` dtype) and float16: ``a + h`` was
float32 (ml_dtypes' ufunc loops), but ``np.concatenate``, ``np.stack`` and ``np.where`` raised
NumPy's raw ``DTypePromotionError``. The joining ops now cast to the library's rule first:
bfloat16 with float16 is float32, with an integer or bool bfloat16, with float32 or float64
the wider one; each input's gradient comes back in its own dtype.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp.backend import dtypes

PARTNERS = ["float16", "float32", "float64", "int32", "int64", "bool", "bfloat16"]
EXPECTED = {
    "float16": "float32",
    "float32": "float32",
    "float64": "float64",
    "int32": "bfloat16",
    "int64": "bfloat16",
    "bool": "bfloat16",
    "bfloat16": "bfloat16",
}
VALUES = {"bool": [True, False, True]}  # every other dtype holds 1, 2 and 3 exactly


def tensor(dtype: str, stop_gradient: bool = True) -> mt.Tensor:
    values = np.array(VALUES.get(dtype, [1, 2, 3])).astype(dtypes.convert_dtype(dtype))
    floating = dtypes.is_floating(dtype)
    return mt.to_tensor(values, stop_gradient=stop_gradient or not floating)


def _join(op: str, a: mt.Tensor, b: mt.Tensor) -> mt.Tensor:
    if op == "where":
        return mt.where(mt.to_tensor(np.array([True, False, True])), a, b)
    return getattr(mt, op)([a, b], axis=0)


def _expected_values(op: str, a: mt.Tensor, b: mt.Tensor) -> np.ndarray:
    x, y = (t.numpy().astype(np.float64) for t in (a, b))
    return {
        "concat": np.concatenate([x, y]),
        "stack": np.stack([x, y]),
        "where": np.where([True, False, True], x, y),
    }[op]


@pytest.mark.parametrize("op", ["concat", "stack", "where"])
@pytest.mark.parametrize("partner", PARTNERS)
@pytest.mark.parametrize("bf16_first", [True, False], ids=["bf16-first", "bf16-second"])
def test_joining_bfloat16_promotes_like_add(op, partner, bf16_first):
    pair = [tensor("bfloat16"), tensor(partner)]
    a, b = pair if bf16_first else pair[::-1]
    out = _join(op, a, b)
    assert str(out.dtype) == EXPECTED[partner] == str((a + b).dtype)
    assert out.dtype == dtypes.result_type(a.dtype, b.dtype)
    np.testing.assert_array_equal(out.numpy().astype(np.float64), _expected_values(op, a, b))


@pytest.mark.parametrize("op", ["concat", "stack", "where"])
@pytest.mark.parametrize("partner", ["float16", "float32", "float64"])
def test_each_input_gets_its_gradient_in_its_own_dtype(op, partner):
    a, b = tensor("bfloat16", stop_gradient=False), tensor(partner, stop_gradient=False)
    out = _join(op, a, b)
    (out * mt.arange(out.size, dtype=str(out.dtype)).reshape(out.shape)).sum().backward()
    assert a.grad.dtype == a.dtype and b.grad.dtype == b.dtype
    if op == "where":  # the condition [True, False, True] picks a, b, a
        expected_a, expected_b = [0.0, 0.0, 2.0], [0.0, 1.0, 0.0]
    else:  # the weights 0 .. 5: a holds the first three places, b the last three
        expected_a, expected_b = [0.0, 1.0, 2.0], [3.0, 4.0, 5.0]
    np.testing.assert_array_equal(a.grad.numpy().astype(np.float64), expected_a)
    np.testing.assert_array_equal(b.grad.numpy().astype(np.float64), expected_b)


def test_three_inputs_take_the_rule_of_all_of_them():
    bf16, f16, f32, i64 = (tensor(d) for d in ("bfloat16", "float16", "float32", "int64"))
    assert mt.concat([bf16, f16, i64]).dtype == mt.float32
    assert mt.stack([i64, bf16, f16, f32]).dtype == mt.float32
    assert mt.concat([bf16, i64, bf16]).dtype == mt.bfloat16
    assert mt.concat([f16, tensor("float64"), bf16]).dtype == mt.float64


def test_where_with_python_numbers_keeps_the_tensors_dtype():
    condition = mt.to_tensor(np.array([True, False, True]))
    assert mt.where(condition, tensor("bfloat16"), tensor("float16")).dtype == mt.float32
    assert mt.where(condition, tensor("float16"), 0.5).dtype == mt.float16
    assert mt.where(condition, 0.5, tensor("float32")).dtype == mt.float32


@pytest.mark.parametrize("tensor_first", [True, False], ids=["tensor-first", "number-first"])
def test_where_of_bfloat16_and_a_python_float_stays_bfloat16(tensor_first):
    condition = mt.to_tensor(np.array([True, False, True]))
    bf16 = tensor("bfloat16", stop_gradient=False)
    number = 1 + 2**-8 + 2**-30  # rounds once to 1 + 2**-7 (through float32: 1.0, wrongly)
    if tensor_first:
        out = mt.where(condition, bf16, number)
    else:
        out = mt.where(mt.to_tensor(np.array([False, True, False])), number, bf16)
    assert out.dtype == mt.bfloat16  # was float64: NumPy promotes the float with ml_dtypes'
    np.testing.assert_array_equal(out.numpy().astype(np.float64), [1.0, 1 + 2**-7, 3.0])
    out.sum().backward()
    assert bf16.grad.dtype == mt.bfloat16 and bf16.grad.tolist() == [1.0, 0.0, 1.0]
    assert mt.where(condition, bf16, 2).dtype == mt.bfloat16  # a Python int: already so
