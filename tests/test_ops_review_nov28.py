"""Ops as a review of 2026-11-28 found them against Paddle 2.x: max's gradient at ties,
``axis=[]``, clip's gradient at its bounds, NaN in descending sorts, the dtype of integer
division and float maths, clear errors, and ``full``'s default dtype."""

from __future__ import annotations

import math

import numpy as np
import pytest

import minitorch_amp as mt
import minitorch_amp.nn.functional as F

NAN = float("nan")


def test_max_gives_every_tied_maximum_the_whole_gradient():
    x = mt.to_tensor([[0.1, 0.9, 0.9, 0.9], [0.9, 0.9, 0.6, 0.7]], "float64", stop_gradient=False)
    mt.max(x).backward()  # Paddle's max example: amax would give each 0.2
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 1, 1, 1], [1, 1, 0, 0]])
    x.clear_grad()
    x.max(axis=1, keepdim=True).backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 1, 1, 1], [1, 1, 0, 0]])
    (g,) = mt.grad(mt.max(x), [x], create_graph=True)  # the differentiable rule agrees
    np.testing.assert_array_equal(g.numpy(), [[0, 1, 1, 1], [1, 1, 0, 0]])


def test_an_empty_axis_list_reduces_every_axis():
    x = mt.to_tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], stop_gradient=False)
    for reduce, expected in ((mt.sum, 21.0), (mt.mean, 3.5), (mt.max, 6.0)):
        out = reduce(x, axis=[])
        assert out.shape == [] and out.item() == expected
    x.sum(axis=()).backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.ones([2, 3]))


def test_clip_passes_no_gradient_at_its_bounds():
    x = mt.to_tensor([0.0, 0.5, 1.0, 2.0], stop_gradient=False)
    mt.clip(x, 0.0, 1.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0, 1, 0, 0])


def test_normalize_at_a_norm_equal_to_epsilon_sends_nothing_through_the_norm():
    # Paddle: x / maximum(norm, epsilon), whose gradient to the norm is 0 where they are equal
    x = mt.to_tensor([[0.5, 0.0]], stop_gradient=False)
    F.normalize(x, epsilon=0.5).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[2.0, 2.0]])


def test_nan_counts_as_the_largest_value_in_sorts_and_topk():
    v = mt.to_tensor([1.0, NAN, 0.0, 1.0, NAN])
    assert mt.argsort(v, descending=True).numpy().tolist() == [1, 4, 0, 3, 2]
    assert mt.argsort(v).numpy().tolist() == [2, 0, 3, 1, 4]
    assert math.isnan(mt.sort(v, descending=True).numpy()[0])
    values, indices = mt.topk(v, 1)
    assert math.isnan(values.item()) and indices.numpy().tolist() == [1]
    assert mt.topk(v, 2, largest=False)[1].numpy().tolist() == [2, 0]


def test_integer_division_and_float_maths_of_integers_give_the_default_float_dtype():
    i = mt.to_tensor([1, 4, 9], dtype="int32")
    results = [i / 2, i / i, 2 / i, mt.divide(i, i), i * 0.5, i**0.5]
    results += [f(i) for f in (mt.sqrt, mt.exp, mt.log, mt.tanh, mt.sigmoid, mt.rsqrt)]
    assert {str(r.dtype) for r in results} == {"float32"}
    np.testing.assert_allclose(mt.sqrt(i).numpy(), [1, 2, 3])
    assert (i + i).dtype == np.int32 and (i**2).dtype == np.int32 and (i * 2).dtype == np.int32


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: mt.argmax(mt.ones([2, 3]), axis=5), ValueError, "axis 5 is out of range"),
        (lambda: mt.argmax(mt.ones([0])), ValueError, "empty tensor"),
        (lambda: mt.ones([2]).argmax(axis=[0]), TypeError, "axis must be an int"),
        (lambda: -mt.to_tensor([True, False]), TypeError, "x == False"),
        (lambda: mt.to_tensor([2], dtype="int32") ** -1, ValueError, "base floating"),
        (lambda: mt.argsort(mt.to_tensor(1.0), axis=5), ValueError, "axis 5 is out of range"),
    ],
)
def test_bad_arguments_to_argmax_neg_pow_and_argsort_get_clear_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_full_without_a_dtype_is_the_default_float_dtype():
    assert mt.full([2], 3).dtype == np.float32 and mt.full([2], True).dtype == np.float32
    assert mt.full([2], 3, "int64").dtype == np.int64
    assert mt.full_like(mt.to_tensor([1, 2]), 3).dtype == np.int64  # x's dtype (Paddle)
