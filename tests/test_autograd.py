"""The backward engine and Tensor basics, as Paddle's dygraph defines them.

Gradients accumulate until clear_grad(); the graph is freed after backward unless
retain_graph=True; errors leave every gradient as it was; only floating tensors get gradients.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import amp


def leaf(values, dtype="float64"):
    return mt.to_tensor(values, dtype=dtype, stop_gradient=False)


# ---- accumulation and clearing -------------------------------------------------------------------
def test_gradients_accumulate_across_backward_calls_until_clear_grad():
    x = leaf([1.0, 2.0])
    (x * x).sum().backward()
    (x * 3.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2 + 3, 4 + 3])
    x.clear_grad()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0])
    (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])
    x.clear_grad(set_to_zero=False)
    assert x.grad is None


def test_clear_grad_keeps_the_same_gradient_tensor():
    x = leaf([1.0])
    (x * 2.0).sum().backward()
    before = x.grad
    x.clear_grad()
    (x * 5.0).sum().backward()
    assert x.grad is before and x.grad.item() == 5.0


def test_intermediate_results_keep_no_grad():
    x = leaf([1.0, 2.0])
    y = x * 2.0
    (y * y).sum().backward()
    assert y.grad is None and not y.is_leaf and x.is_leaf
    np.testing.assert_array_equal(x.grad.numpy(), [8.0, 16.0])


# ---- graph lifetime ------------------------------------------------------------------------------
def test_retain_graph_allows_a_second_backward():
    x = leaf([3.0])
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.item() == 12.0


def test_backward_through_a_freed_graph_raises_and_leaves_grads_unchanged():
    x, w = leaf([1.0, 2.0]), leaf([5.0])
    h = x * 2.0
    h.sum().backward()
    before = x.grad.numpy().copy()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        (h * w).sum().backward()  # w's part is fresh, h's part was freed
    np.testing.assert_array_equal(x.grad.numpy(), before)
    assert w.grad is None


def test_backward_on_a_non_scalar_starts_from_ones_as_in_paddle():
    x = leaf([1.0, 2.0])
    y = x * x
    y.backward(retain_graph=True)  # PyTorch refuses; Paddle seeds with ones
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])
    x.clear_grad()
    y.backward(grad_tensor=mt.to_tensor([1.0, 10.0], dtype="float64"))  # explicit: weighted
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 40.0])


def test_grad_tensor_of_the_wrong_shape_names_both_shapes():
    x = leaf([[1.0, 2.0, 3.0]])
    with pytest.raises(ValueError, match=r"\[3\].*\[1, 3\]"):
        (x * 2.0).backward(grad_tensor=np.ones(3))
    assert x.grad is None


def test_backward_needs_something_to_differentiate():
    with pytest.raises(RuntimeError, match="stop_gradient=True"):
        mt.ones([1]).backward()


def test_a_20000_op_chain_backprops_without_recursion_error():
    x = leaf([1.0])
    y = x
    for _ in range(20000):
        y = y * 1.0001
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0001**20000], rtol=1e-9)


# ---- graph shapes --------------------------------------------------------------------------------
def test_shared_subexpressions_sum_their_gradients():
    x = leaf([2.0])
    a = x * 3.0  # the diamond: x -> a -> (b, c) -> d
    b, c = a * a, a + 1.0
    d = b * c
    d.sum().backward()
    a_value = 6.0
    expected = (2 * a_value * (a_value + 1) + a_value**2) * 3.0  # d' = b'c + bc'
    assert x.grad.item() == expected


def test_a_tensor_used_twice_in_one_op_gets_both_gradients():
    x = leaf([3.0])
    (x * x).sum().backward()
    assert x.grad.item() == 6.0


def test_gradients_are_unbroadcast_to_each_input_shape():
    a, b = leaf(np.ones((3, 1))), leaf(np.ones(4))
    out = a * 2.0 + b * np.arange(3.0).reshape(3, 1)
    assert out.shape == [3, 4]
    out.sum().backward()
    assert a.grad.shape == [3, 1] and b.grad.shape == [4]
    np.testing.assert_array_equal(a.grad.numpy(), np.full((3, 1), 8.0))
    np.testing.assert_array_equal(b.grad.numpy(), np.full(4, 0.0 + 1.0 + 2.0))


def test_mismatched_shapes_name_both_shapes():
    with pytest.raises(ValueError, match=r"\[2, 3\] and \[4\]"):
        mt.ones([2, 3]) + mt.ones([4])
    with pytest.raises(ValueError, match=r"\[2, 3\].*\[4, 5\]"):
        mt.matmul(mt.ones([2, 3]), mt.ones([4, 5]))


def test_gradient_dtype_follows_the_leaf():
    x = leaf([1.0, 2.0], dtype="float16")
    (x.astype("float32") * 3.0).sum().backward()
    assert x.grad.dtype == mt.float16
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


# ---- grad mode -----------------------------------------------------------------------------------
def test_no_grad_as_a_context_records_nothing():
    x = leaf([1.0])
    with mt.no_grad():
        y = x * 2.0
        assert not mt.is_grad_enabled()
    assert mt.is_grad_enabled()
    assert y.stop_gradient and y.is_leaf


def test_no_grad_decorates_a_generator_each_of_whose_steps_records_nothing():
    """The plain wrapper left the block before the generator's body ran (Paddle's and
    PyTorch's decorators wrap every step)."""
    x = leaf([1.0])

    @mt.no_grad()
    def scaled(n):
        for k in range(n):
            assert not mt.is_grad_enabled()
            received = yield x * k
            if received is not None:
                yield x * received

    steps = scaled(3)
    first = next(steps)
    assert mt.is_grad_enabled()  # the caller's code between steps runs outside
    assert first.stop_gradient and steps.send(5.0).stop_gradient
    assert all(y.stop_gradient for y in steps)

    @amp.auto_cast()
    def casted():
        yield mt.ones([2, 3]).matmul(mt.ones([3, 1]))  # white: float16 inside

    assert next(casted()).dtype == np.float16


def test_no_grad_decorates_without_parentheses_as_pytorch_allows():
    x = leaf([1.0])

    @mt.no_grad
    def scaled():
        return x * 2.0

    assert scaled.__name__ == "scaled" and scaled().stop_gradient
    with pytest.raises(TypeError, match="takes no arguments"):
        mt.no_grad(3)


def test_no_grad_as_a_decorator_and_enable_grad_inside():
    x = leaf([1.0])

    @mt.no_grad()
    def scaled():
        inner = x * 2.0
        with mt.enable_grad():
            recorded = x * 3.0
        return inner, recorded

    inner, recorded = scaled()
    assert inner.stop_gradient and not recorded.stop_gradient
    assert mt.is_grad_enabled()


def test_set_grad_enabled_false_records_nothing():
    x = leaf([1.0])
    with mt.set_grad_enabled(False):
        assert (x * 2.0).stop_gradient
    with mt.set_grad_enabled(True):
        assert not (x * 2.0).stop_gradient


def test_detach_cuts_the_graph_and_shares_data():
    x = leaf([1.0, 2.0])
    d = (x * 2.0).detach()
    assert d.stop_gradient and d.is_leaf
    y = (x * 2.0).sum() + (d * 5.0).sum()
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])


# ---- only floating tensors get gradients ---------------------------------------------------------
@pytest.mark.parametrize("values", [[1, 2], [True, False]])
def test_int_and_bool_tensors_never_get_grads(values):
    t = mt.to_tensor(values, stop_gradient=False)
    w = leaf([1.0, 2.0])
    (t * w).sum().backward()
    assert t.grad is None
    np.testing.assert_array_equal(w.grad.numpy(), np.asarray(values, dtype=np.float64))
    with pytest.raises(RuntimeError, match="floating"):
        t.backward()


def test_comparisons_and_argmax_are_not_recorded():
    x = leaf([1.0, 3.0, 2.0])
    assert (x > 1.5).stop_gradient and (x > 1.5).dtype == mt.bool
    assert mt.argmax(x).stop_gradient and mt.argmax(x).item() == 1


# ---- Tensor basics -------------------------------------------------------------------------------
def test_repr_looks_like_paddle():
    text = repr(mt.to_tensor([1.0, 2.0]))
    assert text.startswith("Tensor(shape=[2], dtype=float32, place=Place(cpu), stop_gradient=True,")
    assert text.rstrip().endswith("[1., 2.])")


def test_shape_dtype_and_size_properties():
    t = mt.zeros([2, 3, 4], dtype="float16")
    assert t.shape == [2, 3, 4] and t.dtype == mt.float16 and t.dtype == "float16"
    assert t.ndim == 3 and t.dim() == 3 and t.size == 24 and t.numel() == 24 and len(t) == 2
    assert mt.to_tensor(7.5).item() == 7.5 and mt.to_tensor([[4]]).item() == 4
    with pytest.raises(ValueError, match="one element"):
        t.item()


def test_astype_and_to_convert_and_round_to_nearest_even():
    t = mt.to_tensor([1.0, 2049.0, 2051.0], dtype="float32")
    half = t.astype("float16")
    assert half.dtype == mt.float16
    np.testing.assert_array_equal(half.numpy(), [1.0, 2048.0, 2052.0])  # ties to even
    assert t.to(dtype="float64").dtype == mt.float64
    assert t.to("cpu") is t and t.to(dtype="float32") is t


def test_to_tensor_copies_and_infers_dtypes():
    data = np.array([1.0, 2.0])
    t = mt.to_tensor(data)
    data[0] = 99.0
    assert t.numpy()[0] == 1.0 and t.dtype == mt.float64  # arrays keep their dtype
    assert mt.to_tensor([1.0]).dtype == mt.float32  # Python floats use the default
    assert mt.to_tensor([1]).dtype == mt.int64 and mt.to_tensor([True]).dtype == mt.bool


def test_creation_functions_shapes_and_values():
    assert mt.zeros([2, 3]).numpy().sum() == 0 and mt.ones([2]).dtype == mt.float32
    np.testing.assert_array_equal(mt.full([2], 7, "int32").numpy(), [7, 7])
    np.testing.assert_array_equal(mt.arange(4).numpy(), [0, 1, 2, 3])
    assert mt.zeros_like(mt.ones([3], "float16")).dtype == mt.float16
    assert mt.randn([0, 3]).shape == [0, 3]
    r = mt.randint(0, 5, [1000]).numpy()
    assert r.min() >= 0 and r.max() <= 4 and len(set(r)) == 5
    u = mt.uniform([1000], min=2.0, max=3.0).numpy()
    assert u.min() >= 2.0 and u.max() < 3.0
    with pytest.raises(ValueError, match="negative"):
        mt.zeros([2, -1])


def test_seed_makes_random_creation_reproducible():
    mt.seed(123)
    first = [mt.randn([4]).numpy(), mt.rand([3]).numpy(), mt.randint(0, 100, [5]).numpy()]
    mt.seed(123)
    second = [mt.randn([4]).numpy(), mt.rand([3]).numpy(), mt.randint(0, 100, [5]).numpy()]
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(mt.randn([4]).numpy(), first[0])


def test_grad_setter_checks_the_shape():
    x = leaf([1.0, 2.0])
    with pytest.raises(ValueError, match=r"\[3\].*\[2\]"):
        x.grad = np.zeros(3)
