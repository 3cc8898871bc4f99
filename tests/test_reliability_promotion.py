"""Type promotion follows Paddle (and PyTorch): an integer or bool tensor meeting a floating
tensor takes the floating tensor's dtype.

NumPy's rule widens int64 + float32 to float64: a float64 tensor out of nowhere, twice the
memory, and one AMP never casts (an int input to ``Linear`` inside ``auto_cast`` ran in
float64). The promotion happens in ``apply`` before AMP decides an op's dtype, so AMP sees the
promoted op. Python numbers stay weak constants, as before: ``x * 2.5`` keeps ``x``'s dtype.
"""

from __future__ import annotations

import operator

import numpy as np
import pytest

import minitorch_amp as mt
import minitorch_amp.nn.functional as F
from minitorch_amp import amp, nn

F16, F32 = np.dtype("float16"), np.dtype("float32")

VALUES = {"int": [1, 2, 3], "bool": [True, False, True], "float": [0.5, 1.5, 2.0]}

# (a, b, result): an integer or bool with a floating dtype gives the floating dtype
INT_WITH_FLOAT = [
    ("int64", "float32", "float32"),
    ("int32", "float32", "float32"),
    ("int64", "float16", "float16"),
    ("int32", "float16", "float16"),
    ("bool", "float16", "float16"),
    ("bool", "float32", "float32"),
    ("int64", "float64", "float64"),
]
# where NumPy's rule is already Paddle's
SAME_AS_NUMPY = [
    ("int32", "int64", "int64"),
    ("bool", "int32", "int32"),
    ("float16", "float32", "float32"),
    ("float32", "float64", "float64"),
]

BINARY = {
    "add": operator.add,
    "subtract": operator.sub,
    "multiply": operator.mul,
    "divide": operator.truediv,
    "pow": operator.pow,
}


def tensor(dtype: str, stop_gradient: bool = True) -> mt.Tensor:
    kind = "bool" if dtype == "bool" else "int" if dtype.startswith("int") else "float"
    return mt.to_tensor(np.array(VALUES[kind], dtype=dtype), stop_gradient=stop_gradient)


# integer division and integer powers are their own questions, not promotion's
CASES = [
    (op, *case)
    for op in BINARY
    for case in INT_WITH_FLOAT + SAME_AS_NUMPY
    if not (op in ("divide", "pow") and case[2].startswith("int"))
]


@pytest.mark.parametrize(("op", "a", "b", "result"), CASES)
def test_binary_ops_give_paddles_dtype_in_either_order(op, a, b, result):
    fn = BINARY[op]
    for x, y in ((a, b), (b, a)):
        with np.errstate(divide="ignore"):  # x / False is inf, here as in NumPy
            out = fn(tensor(x), tensor(y))
            # the same values as computing in the result dtype from the start
            want = fn(tensor(x).numpy().astype(result), tensor(y).numpy().astype(result))
        assert out.dtype == np.dtype(result), (op, x, y)
        np.testing.assert_array_equal(out.numpy(), want)


def test_functions_and_methods_promote_like_the_operators():
    ids, w = tensor("int64"), tensor("float32")
    assert mt.add(ids, w).dtype == F32
    assert mt.multiply(w, ids).dtype == F32
    assert mt.pow(ids, w).dtype == F32
    assert ids.pow(w).dtype == F32


def test_python_numbers_stay_weak_constants():
    assert (tensor("float16") * 2.5).dtype == F16
    assert (2.5 + tensor("float16")).dtype == F16
    assert (tensor("float32") + 1).dtype == F32
    assert (tensor("int64") + 1).dtype == np.dtype("int64")
    assert (tensor("int32") * 2).dtype == np.dtype("int32")


def test_matmul_linear_and_the_joining_ops_promote_integer_inputs():
    ids = mt.to_tensor(np.arange(6).reshape(2, 3))
    w, b = mt.ones([3, 2]), mt.ones([2])
    want = ids.numpy().astype("float32") @ w.numpy()
    for out in (mt.matmul(ids, w), ids @ w, F.linear(ids, w), F.linear(ids, w, b) - 1):
        assert out.dtype == F32
        np.testing.assert_array_equal(out.numpy(), want)
    layer = nn.Linear(3, 2)
    assert layer(ids).dtype == F32
    x = mt.ones([2, 3])
    assert mt.where(ids > 2, ids, x).dtype == F32
    assert mt.concat([ids, x]).dtype == F32
    assert mt.stack([x, ids]).dtype == F32
    np.testing.assert_array_equal(mt.concat([ids, x]).numpy()[:2], ids.numpy())


def test_the_floating_input_gets_its_gradient_in_its_own_dtype():
    for dtype in ("float32", "float16"):
        ids, w = tensor("int64"), tensor(dtype, stop_gradient=False)
        out = ids * w
        assert out.dtype == np.dtype(dtype)
        out.sum().backward()
        assert w.grad.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(w.grad.numpy(), [1, 2, 3])
        assert ids.grad is None


def test_auto_cast_sees_the_promoted_op():
    mt.seed(0)
    ids = mt.to_tensor(np.arange(6).reshape(2, 3))
    layer = nn.Linear(3, 2, bias_attr=False)
    with amp.auto_cast():
        out = layer(ids)  # white: float16, like a float32 input
        same = layer(ids.astype("float32"))
        assert (ids + tensor("float32")[:1]).dtype == F32  # gray with a float32 input
        assert (tensor("int64") + tensor("float16")).dtype == F16  # gray, all float16
    assert out.dtype == F16
    np.testing.assert_array_equal(out.numpy(), same.numpy())
    with amp.auto_cast(level="O2", use_promote=False):  # every non-black op in float16
        assert (tensor("int64") + tensor("float32")).dtype == F16
        assert mt.matmul(ids, mt.ones([3, 2])).dtype == F16


def test_integer_only_ops_stay_integer_and_are_never_cast_by_amp():
    ids = tensor("int64")
    with amp.auto_cast(level="O2", use_promote=False):
        assert (ids + ids).dtype == np.dtype("int64")
        assert (ids * tensor("bool")).dtype == np.dtype("int64")
        assert F.embedding(ids, mt.ones([4, 2])).dtype == F32  # ids index, never promoted
