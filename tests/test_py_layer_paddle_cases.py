"""PyLayer cases from Paddle's own tests (issue 26): outputs cast to integer or bool dtypes
keep the graph, and malformed returns raise ValueError (Paddle's ``InvalidArgument``)."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp.autograd import PyLayer


def _leaf(values, dtype="float32"):
    return mt.to_tensor(values, dtype=dtype, stop_gradient=False)


class CastTo(PyLayer):
    @staticmethod
    def forward(ctx, x, dtype):
        return mt.cast(x, dtype)

    @staticmethod
    def backward(ctx, dy):
        return dy


# ---- an output of any dtype keeps the graph ----------------------------------------------------
@pytest.mark.parametrize(
    "dtype", ["bool", "int32", "int64", "float16", "float32", "float64", "bfloat16"]
)  # (Paddle's test has uint8 too, a dtype this library does not have)
def test_an_output_cast_to_any_dtype_keeps_the_graph(dtype):
    x = _leaf([[0.5, 2.0, -1.0], [3.0, 0.0, 1.5]])
    z = CastTo.apply(x, dtype)
    assert z.dtype == getattr(mt, dtype) and not z.stop_gradient
    mt.cast(z, "float32").sum().backward()  # Paddle's test: the gradient reaches x
    assert x.grad is not None and x.grad.dtype == np.float32
    assert x.grad.shape == [2, 3]


def test_an_integer_output_gets_its_gradient_in_its_dtype():
    seen = []

    class Round(PyLayer):
        @staticmethod
        def forward(ctx, x):
            return mt.cast(x, "int32"), x * 2.0

        @staticmethod
        def backward(ctx, d_int, d_float):
            seen.append(d_int)
            return mt.cast(d_int, "float32") * 10.0 + d_float

    x = _leaf([1.0, 2.0])
    r, y = Round.apply(x)
    (mt.cast(r, "float32") * 3.0 + y).sum().backward()
    assert seen[0].dtype == np.int32
    np.testing.assert_array_equal(seen[0].numpy(), [3, 3])
    np.testing.assert_array_equal(x.grad.numpy(), [31.0, 31.0])


def test_an_integer_output_of_a_pylayer_without_inputs_needing_grad_stops_gradient():
    z = CastTo.apply(mt.to_tensor([1.5]), "int32")
    assert z.stop_gradient


def test_mark_non_differentiable_still_stops_an_integer_output():
    class Marked(PyLayer):
        @staticmethod
        def forward(ctx, x):
            idx = mt.cast(x, "int64")
            ctx.mark_non_differentiable(idx)
            return idx, x * 2.0

        @staticmethod
        def backward(ctx, d_idx, dy):
            return dy

    idx, y = Marked.apply(_leaf([1.0]))
    assert idx.stop_gradient and not y.stop_gradient


# ---- malformed returns: ValueError, as in Paddle -------------------------------------------------
def _layer(forward, backward=lambda ctx, *grads: grads):
    return type(
        "Layer", (PyLayer,), {"forward": staticmethod(forward), "backward": staticmethod(backward)}
    )


@pytest.mark.parametrize(
    "returned", [None, 1, [1, None]], ids=["None", "int", "list-without-tensor"]
)
def test_forward_returning_no_tensor_is_a_value_error(returned):
    layer = _layer(lambda ctx, x: returned)
    with pytest.raises(ValueError, match=r"At least one output of `PyLayer\.forward` is a"):
        layer.apply(_leaf([1.0]))


def test_forward_may_return_non_tensors_beside_tensors():
    layer = _layer(lambda ctx, x: [1, None, "s", x * 2.0], lambda ctx, dy: dy * 2.0)
    x = _leaf([1.0, 2.0])
    one, none, s, y = layer.apply(x)
    assert (one, none, s) == (1, None, "s")
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])


@pytest.mark.parametrize(
    "returned", [lambda dy: 1, lambda dy: (1, 1), lambda dy: "grad"], ids=["1", "(1, 1)", "str"]
)
def test_backward_returning_a_non_tensor_for_an_input_is_a_value_error(returned):
    layer = _layer(lambda ctx, a, b: a * 2.0 + b * 5.0, lambda ctx, dy: returned(dy))
    x = _leaf([1.0, 2.0])
    with pytest.raises(ValueError, match="Tensor or None for backward output"):
        layer.apply(x, x).sum().backward()
    assert x.grad is None


def test_backward_returning_too_few_or_too_many_gradients_is_a_value_error():
    too_few = _layer(lambda ctx, a, b: a + b, lambda ctx, dy: dy + 1)
    too_many = _layer(lambda ctx, x: (x * 2.0, x * 5.0), lambda ctx, d1, d2: (d2 * 2, d1 * 2))
    x = _leaf([1.0, 2.0])
    with pytest.raises(ValueError, match="should not return empty at 1 position"):
        too_few.apply(x, _leaf([3.0, 4.0])).mean().backward()
    with pytest.raises(ValueError, match="should be 1"):
        y = too_many.apply(x)
        (y[0] + y[1]).mean().backward()
    assert x.grad is None


def test_a_bfloat16_input_gets_its_gradient():
    class Double(PyLayer):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        def backward(ctx, dy):
            return dy * 2.0

    x = _leaf([1.0, 2.0], dtype="bfloat16")
    y = Double.apply(x)
    assert not y.stop_gradient  # before: a bfloat16 input counted as not floating
    mt.cast(y, "float32").sum().backward()
    assert x.grad.dtype == mt.bfloat16
    np.testing.assert_array_equal(x.grad.numpy().astype("float32"), [2.0, 2.0])
