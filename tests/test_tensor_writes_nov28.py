"""Writes into a tensor and the shape arguments a review found wrong (2026-11-28).

``x[index] = value`` is Paddle's ``set_value`` op: an in-place write that bumps ``x``'s
version and, when a gradient is involved, continues ``x``'s history through the write.
``sum(x, dtype=)`` casts first. Out-of-range axes raise instead of wrapping. A write into a
view op's result gives it its own array (copy on write) instead of changing the source.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import nn

WEIGHTS = np.arange(1.0, 13.0).reshape(3, 4)  # d(loss)/d(x after the write)


def _leaf(values, dtype="float64"):
    return mt.to_tensor(np.asarray(values, dtype=np.float64), dtype=dtype, stop_gradient=False)


def _sum_to(a, shape):
    """``a`` summed down to ``shape`` (what broadcasting ``shape`` up to ``a`` spread)."""
    a = a.sum(axis=tuple(range(a.ndim - len(shape))))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and a.shape[i] != 1)
    return a.sum(axis=axes, keepdims=True).reshape(shape)


# ---- x[index] = value -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "index, value_shape",
    [
        (1, ()),
        ((slice(None), slice(1, 3)), (3, 2)),
        ((Ellipsis, 0), (3,)),
        ((None, 2), (1, 4)),
        ([0, 2], (4,)),  # broadcast over the two rows: its gradient sums them
        ("mask", (1,)),
        ("int tensor", (2, 1)),
    ],
)
def test_item_assignment_gradients_zero_the_written_positions_and_reach_the_value(
    index, value_shape
):
    w = _leaf(np.linspace(-1.0, 1.0, 12).reshape(3, 4))
    value = _leaf(np.full(value_shape, 7.0))
    x = w * 1.0
    if index == "mask":
        index = x > 0
    elif index == "int tensor":
        index = mt.to_tensor([2, 0])
    key = index.numpy() if isinstance(index, mt.Tensor) else index
    x[index] = value
    expected = np.asarray(w.numpy())
    expected[key] = 7.0
    np.testing.assert_array_equal(x.numpy(), expected)
    (x * mt.to_tensor(WEIGHTS, dtype="float64")).sum().backward()
    grad_w = WEIGHTS.copy()
    grad_w[key] = 0.0
    np.testing.assert_array_equal(w.grad.numpy(), grad_w)
    np.testing.assert_array_equal(value.grad.numpy(), _sum_to(WEIGHTS[key], value_shape))


def test_ops_that_took_x_before_a_write_send_their_gradient_to_x_as_it_was():
    w, v = _leaf([1.0, 2.0, 3.0]), _leaf(5.0)
    h = w * w
    before = h + 0.0  # took h before both writes
    h[0] = v
    between = h + 3.0  # took h between the writes
    h[1] = v * 2
    (before + between * 10 + h * 100).sum().backward()
    # PyTorch, same program (x.clone() then x[i] = v): [2, 44, 666] and 310
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 44.0, 666.0])
    assert v.grad.item() == 310.0


def test_a_py_layer_that_took_x_before_a_write_sends_its_gradient_to_x_as_it_was():
    from minitorch_amp.autograd import PyLayer

    class Double(PyLayer):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, dy):
            return dy * 2

    w = _leaf([1.0, 2.0, 3.0])
    h = w * 1.0
    y = Double.apply(h)
    h[0] = 5.0
    (y.sum() + h.sum()).backward()
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 3.0, 3.0])  # PyTorch's too


def test_backward_through_an_op_that_saved_x_before_the_write_raises():
    w = _leaf([1.0, 1.0, 1.0])
    h = w * 2.0
    y = (h * h).sum()  # multiply saved h
    h[0] = 0.0
    with pytest.raises(RuntimeError, match=r"modified in place.*'multiply'"):
        y.backward()
    assert w.grad is None
    h2 = w.exp()  # exp saved its result, which the write changes
    h2[0] = 0.0
    with pytest.raises(RuntimeError, match=r"the result of 'exp'"):
        h2.sum().backward()


def test_a_value_that_needs_a_gradient_makes_x_record_and_is_cast_to_xs_dtype():
    x = mt.zeros([3])
    value = _leaf([1.0, 2.0])  # float64
    x[1:] = value
    assert x.dtype == mt.float32 and not x.stop_gradient and not x.is_leaf
    (x * 3.0).sum().backward()
    assert value.grad.dtype == mt.float64
    np.testing.assert_array_equal(value.grad.numpy(), [3.0, 3.0])


def test_item_assignment_without_gradients_is_a_plain_write_that_bumps_the_version():
    y = mt.to_tensor([-1.0, 2.0, -3.0])
    y[y > 0] = 0.0
    y[mt.to_tensor(0)] = np.float64(9.0)
    np.testing.assert_array_equal(y.numpy(), [9.0, 0.0, -3.0])
    assert y.is_leaf and y.stop_gradient and y._version == 2


def test_a_leaf_that_needs_a_gradient_is_refused_unless_under_no_grad():
    w = _leaf([1.0, 1.0])
    with pytest.raises(ValueError, match=r"leaf tensor that needs a gradient.*no_grad"):
        w[0] = 5.0
    assert w.numpy().tolist() == [1.0, 1.0] and w._version == 0
    with mt.no_grad():
        w[0] = 5.0
    assert w.numpy().tolist() == [5.0, 1.0] and w._version == 1


def test_a_bad_index_or_a_value_that_does_not_broadcast_writes_nothing():
    x = mt.zeros([2, 3])
    with pytest.raises(IndexError, match="invalid for a tensor of shape"):
        x[5] = 1.0
    with pytest.raises(ValueError, match=r"does not broadcast to x\[index\] of shape \[3\]"):
        x[0] = np.ones(4)
    assert x._version == 0 and not x.numpy().any()
    x[0] = np.ones((1, 3))  # leading size-1 axes drop, as in NumPy
    assert x.numpy().sum() == 3.0


# ---- sum(dtype=) casts first ------------------------------------------------------------------
def test_sum_with_a_dtype_casts_first_so_float16_values_do_not_overflow():
    x = mt.to_tensor(np.full(4, 30000.0), dtype="float16", stop_gradient=False)
    out = mt.sum(x, dtype="float32")
    assert out.dtype == mt.float32 and out.item() == 120000.0
    out.backward()
    assert x.grad.dtype == mt.float16 and x.grad.numpy().tolist() == [1.0] * 4


# ---- axes: Paddle's ranges, no wrapping -------------------------------------------------------
@pytest.mark.parametrize(
    "call",
    [
        lambda: mt.squeeze(mt.zeros([1, 3, 1]), 5),
        lambda: mt.zeros([1, 3, 1]).squeeze([0, -4]),
        lambda: mt.unsqueeze(mt.zeros([2, 3]), 3),
        lambda: mt.unsqueeze(mt.zeros([2, 3]), [9]),
        lambda: mt.flatten(mt.zeros([2, 3, 4]), 0, 3),
        lambda: mt.flatten(mt.zeros([2, 3, 4]), 2, 1),
        lambda: nn.Flatten(2, 1)(mt.ones([2, 3, 4])),
        lambda: mt.transpose(mt.zeros([2, 3]), [0, 5]),
    ],
)
def test_out_of_range_axes_raise_a_value_error_instead_of_wrapping(call):
    with pytest.raises(ValueError, match=r"out of range|should be larger|permutation"):
        call()


def test_in_range_axes_work_at_the_edges_of_paddles_ranges():
    x = mt.zeros([2, 3])
    assert mt.unsqueeze(x, 2).shape == [2, 3, 1] and mt.unsqueeze(x, -3).shape == [1, 2, 3]
    assert x.unsqueeze([0, 1]).shape == [1, 1, 2, 3]  # Paddle's Tensor.unsqueeze takes lists
    assert mt.squeeze(mt.to_tensor(1.0), 0).shape == []  # a 0-D tensor comes back as it is
    assert mt.flatten(mt.zeros([2, 3, 4]), -2, -1).shape == [2, 12]


# ---- writes into a view op's result -----------------------------------------------------------
def test_a_write_into_a_view_result_leaves_the_source_and_what_an_op_saved_of_it_alone():
    src = mt.to_tensor([1.0, 2.0, 3.0, 4.0])
    w = _leaf([1.0, 1.0, 1.0, 1.0], dtype="float32")
    y = (w * src).sum()  # multiply saved src
    piece = mt.split(src, 2)[0]
    piece.set_value(np.zeros(2, np.float32))
    flat = src.reshape([2, 2])
    flat[0] = 9.0
    assert src.numpy().tolist() == [1.0, 2.0, 3.0, 4.0] and src._version == 0
    assert piece.numpy().tolist() == [0.0, 0.0] and flat.numpy()[0].tolist() == [9.0, 9.0]
    y.backward()  # src is unchanged: the gradient is right, and nothing raises
    assert w.grad.numpy().tolist() == [1.0, 2.0, 3.0, 4.0]
