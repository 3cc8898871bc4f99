"""paddle.autograd.PyLayer: custom forward/backward, with Paddle's rules and messages."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import amp, nn
from minitorch_amp.autograd import PyLayer


class CusTanh(PyLayer):  # Paddle's docstring example
    @staticmethod
    def forward(ctx, x):
        y = mt.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, dy):
        (y,) = ctx.saved_tensor()
        return dy * (1 - mt.square(y))


class Cube(PyLayer):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, dy):
        (x,) = ctx.saved_tensor()
        return dy * 3 * x * x


def _leaf(values, dtype="float64"):
    return mt.to_tensor(np.asarray(values, dtype=dtype), stop_gradient=False)


def test_paddles_cus_tanh_example_gives_tanh_gradient():
    v = np.array([[0.3, -1.2, 0.7], [2.0, -0.1, 0.0]])
    x = _leaf(v)
    z = CusTanh.apply(x)
    assert not z.stop_gradient
    z.mean().backward()
    np.testing.assert_allclose(x.grad.numpy(), (1 - np.tanh(v) ** 2) / 6, rtol=1e-12)


def test_forward_runs_without_recording_and_outputs_need_grad():
    seen = {}

    class Probe(PyLayer):
        @staticmethod
        def forward(ctx, x):
            y = x * 2
            seen["inner"] = y.stop_gradient
            return y

        @staticmethod
        def backward(ctx, dy):
            return dy * 2

    x = _leaf([1.0])
    y = Probe.apply(x)
    assert seen["inner"] is True and y.stop_gradient is False
    y2 = Probe.apply(mt.to_tensor([1.0]))  # no input needs a gradient: nothing recorded
    assert y2.stop_gradient and y2.is_leaf


def test_keyword_tensor_arguments_and_non_tensor_arguments():
    class Scale(PyLayer):
        @staticmethod
        def forward(ctx, x, factor, y=None):
            ctx.factor = factor
            return x * factor + y

        @staticmethod
        def backward(ctx, dz):
            return dz * ctx.factor, dz

    x, y = _leaf([1.0, 2.0]), _leaf([0.0, 0.0])
    Scale.apply(x, 3.0, y=y).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])
    np.testing.assert_array_equal(y.grad.numpy(), [1.0, 1.0])


def test_several_outputs_and_mark_non_differentiable():  # Paddle's docstring example
    class Tanh(PyLayer):
        @staticmethod
        def forward(ctx, x):
            a, b = x + x, x + x + x
            ctx.mark_non_differentiable(a)
            return a, b

        @staticmethod
        def backward(ctx, grad_a, grad_b):
            np.testing.assert_array_equal(grad_a.numpy(), [0.0])
            np.testing.assert_array_equal(grad_b.numpy(), [1.0])
            return grad_b

    x = _leaf([1.0])
    a, b = Tanh.apply(x)
    assert a.stop_gradient and not b.stop_gradient
    b.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0])


def test_both_outputs_contribute_and_materialize_grads_false_gives_none():
    got = []

    class Split(PyLayer):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, ga, gb):
            got.append((ga, gb))
            total = ga * 2 if gb is None else ga * 2 + gb * 3
            return total

    x = _leaf([1.0])
    a, b = Split.apply(x)
    (a * 10 + b).sum().backward()
    assert x.grad.numpy()[0] == 23.0
    x.clear_grad()
    a, b = Split.apply(x)
    a.sum().backward()
    assert got[-1][1] is None and x.grad.numpy()[0] == 2.0


def test_backward_must_return_none_for_a_stop_gradient_input():
    class Bad(PyLayer):
        @staticmethod
        def forward(ctx, x, c):
            return x * c

        @staticmethod
        def backward(ctx, dy):
            return dy, dy

    x, c = _leaf([1.0]), mt.to_tensor([2.0], dtype="float64")
    with pytest.raises(ValueError, match="should return None at 1 position"):
        Bad.apply(x, c).sum().backward()


def test_backward_returning_too_many_or_wrong_things_is_refused():
    class TooMany(PyLayer):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, dy):
            return dy, dy

    class NotATensor(PyLayer):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, dy):
            return 1.0

    class WrongShape(PyLayer):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, dy):
            return mt.ones([5], dtype="float64")

    x = _leaf([1.0, 2.0])
    with pytest.raises(ValueError, match="should be 1"):
        TooMany.apply(x).sum().backward()
    with pytest.raises(ValueError, match="Tensor or None"):  # Paddle's InvalidArgument
        NotATensor.apply(x).sum().backward()
    with pytest.raises(ValueError, match="shape"):
        WrongShape.apply(x).sum().backward()


def test_forward_must_return_a_tensor_and_must_not_return_a_leaf_input_as_is():
    class NoTensor(PyLayer):
        @staticmethod
        def forward(ctx, x):
            return 3

    class Identity(PyLayer):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, dy):
            return dy

    class MarkedIdentity(Identity):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_not_inplace(x)
            return x

    x = _leaf([1.0])
    with pytest.raises(ValueError, match="At least one output"):  # Paddle's InvalidArgument
        NoTensor.apply(x)
    with pytest.raises(ValueError, match="inplace"):
        Identity.apply(x)
    y = MarkedIdentity.apply(x)
    assert y is not x and not y.stop_gradient
    y.sum().backward()
    assert x.grad.numpy()[0] == 1.0


def test_a_returned_saved_tensor_is_not_adopted_as_a_grad_buffer():
    class ReturnSaved(PyLayer):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(w)
            return x * 1

        @staticmethod
        def backward(ctx, dy):
            (w,) = ctx.saved_tensor()
            return w, None

    x, w = _leaf([1.0]), mt.to_tensor([5.0], dtype="float64")
    ReturnSaved.apply(x, w).sum().backward()
    ReturnSaved.apply(x, w).sum().backward()  # accumulates into x.grad
    assert x.grad.numpy()[0] == 10.0 and w.numpy()[0] == 5.0


class RecordsGradMode(PyLayer):
    seen: ClassVar[list] = []

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2.0

    @staticmethod
    def backward(ctx, dy):
        (x,) = ctx.saved_tensor()
        recorded = not (x * 1.0).stop_gradient  # x needs a gradient: recorded iff grad mode
        RecordsGradMode.seen.append((mt.is_grad_enabled(), recorded))
        return dy * 2.0


def test_backward_runs_with_grad_recording_off_unless_create_graph():
    RecordsGradMode.seen = []
    x = _leaf([1.0, 2.0])
    RecordsGradMode.apply(x).sum().backward()
    with mt.enable_grad():  # whatever the caller's mode: off inside backward
        mt.grad(RecordsGradMode.apply(x).sum(), x)
    mt.grad(RecordsGradMode.apply(x).sum(), x, create_graph=True)
    assert RecordsGradMode.seen == [(False, False), (False, False), (True, True)]


def test_unimplemented_forward_and_backward_raise():
    class Empty(PyLayer):
        pass

    with pytest.raises(NotImplementedError, match="forward"):
        Empty.apply(_leaf([1.0]))


def test_a_py_layer_is_twice_differentiable_when_its_backward_is():
    x = _leaf([2.0])
    (d1,) = mt.grad(Cube.apply(x).sum(), x, create_graph=True)  # 3 x^2
    (d2,) = mt.grad(d1.sum(), x)  # 6 x
    assert d1.numpy()[0] == 12.0 and d2.numpy()[0] == 12.0


def test_hooks_on_py_layer_outputs_and_grad_of_them():
    x = _leaf([1.0, 2.0])
    y = Cube.apply(x)
    y.register_hook(lambda g: g * 2)
    (g,) = mt.grad(y.sum(), x)
    np.testing.assert_array_equal(g.numpy(), [6.0, 24.0])


def test_under_auto_cast_ops_inside_forward_are_cast_and_grads_come_back_in_input_dtype():
    seen = {}

    class MatmulLayer(PyLayer):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return mt.matmul(x, w)  # white list: float16 under O1

        @staticmethod
        def backward(ctx, dy):
            seen["dy"] = dy.dtype
            x, w = ctx.saved_tensor()
            return (
                mt.matmul(dy.astype("float32"), w, transpose_y=True),
                mt.matmul(x, dy.astype("float32"), transpose_x=True),
            )

    x = mt.to_tensor(np.ones((2, 3), "float32"), stop_gradient=False)
    w = nn.Linear(3, 4).weight
    with amp.auto_cast(level="O1"):
        out = MatmulLayer.apply(x, w)
    assert out.dtype == np.float16  # the matmul inside forward was cast
    out.astype("float32").sum().backward()
    assert seen["dy"] == np.float16  # backward gets the output's dtype
    assert x.grad.dtype == np.float32 and w.grad.dtype == np.float32
    np.testing.assert_array_equal(w.grad.numpy(), np.full((3, 4), 2.0, "float32"))


def test_lists_of_tensors_are_refused_with_a_clear_message():
    x = _leaf([1.0])
    with pytest.raises(TypeError, match="separate"):
        Cube.apply([x, x])
