"""Tensor.register_hook and paddle.grad / autograd.backward: Paddle's semantics.

The expected values are Paddle's (the register_hook example of its docs) or the calculus.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import autograd, nn


def _leaf(values, dtype="float32"):
    return mt.to_tensor(np.asarray(values, dtype=dtype), stop_gradient=False)


# ---- register_hook --------------------------------------------------------------------------
def test_paddles_register_hook_example():
    # Paddle's docstring: x.grad [4, 8, 12, 16], y.grad [2, 4, 6, 8], the printed x grad
    # [2, 4, 6, 8] (before the doubling hook), w.grad None.
    x, y = _leaf([0.0, 1.0, 2.0, 3.0]), _leaf([4.0, 5.0, 6.0, 7.0])
    z = mt.to_tensor([1.0, 2.0, 3.0, 4.0])
    seen = []
    h = x.register_hook(lambda g: seen.append(g.numpy().copy()))
    x.register_hook(lambda g: g * 2)
    w = x + y
    w.register_hook(lambda g: g * 2)
    z.matmul(w).backward()
    np.testing.assert_array_equal(seen[0], [2.0, 4.0, 6.0, 8.0])
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 8.0, 12.0, 16.0])
    np.testing.assert_array_equal(y.grad.numpy(), [2.0, 4.0, 6.0, 8.0])
    assert w.grad is None
    assert h.remove() is True and h.remove() is False


def test_a_removed_hook_is_not_called_again():
    x = _leaf([1.0, 2.0])
    handle = x.register_hook(lambda g: g * 0)
    (x * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0])
    handle.remove()
    x.clear_grad()
    (x * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


def test_a_leaf_hook_sees_the_gradient_summed_over_every_path_once():
    x = _leaf([1.0, 2.0])
    calls = []
    x.register_hook(lambda g: calls.append(g.numpy().copy()))
    (x * 2 + x * x).sum().backward()  # d/dx = 2 + 2x
    assert len(calls) == 1
    np.testing.assert_array_equal(calls[0], [4.0, 6.0])


def test_an_intermediate_hook_changes_what_flows_on():
    x = _leaf([1.0, 2.0])
    y = x * x
    y.register_hook(lambda g: g * 0 + 1.5)
    (y * 4).sum().backward()  # y's gradient 4 is replaced by 1.5; d y/d x = 2x
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 6.0])


def test_hook_rules_are_checked():
    with pytest.raises(RuntimeError, match="stop gradient"):
        mt.to_tensor([1.0]).register_hook(lambda g: g)
    x = _leaf([1.0, 2.0])
    with pytest.raises(TypeError, match="function"):
        x.register_hook(3)
    x.register_hook(lambda g: mt.ones([3]))
    with pytest.raises(ValueError, match="shape"):
        (x * 1).sum().backward()


def test_a_hook_on_a_parameter_does_not_change_other_parameters_buffers():
    fc = nn.Linear(2, 2)
    fc.weight.register_hook(lambda g: g * 0)
    fc(mt.ones([3, 2])).sum().backward()
    np.testing.assert_array_equal(fc.weight.grad.numpy(), np.zeros((2, 2)))
    np.testing.assert_array_equal(fc.bias.grad.numpy(), [3.0, 3.0])


# ---- paddle.grad --------------------------------------------------------------------------
def test_grad_returns_a_list_and_leaves_dot_grad_alone():
    x, y = _leaf([1.0, 2.0]), _leaf([3.0, 4.0])
    out = (x * y).sum()
    gx, gy = mt.grad(out, [x, y])
    np.testing.assert_array_equal(gx.numpy(), [3.0, 4.0])
    np.testing.assert_array_equal(gy.numpy(), [1.0, 2.0])
    assert x.grad is None and y.grad is None
    assert gx.stop_gradient and gy.stop_gradient
    assert isinstance(mt.grad((x * x).sum(), x), list)


def test_grad_of_an_intermediate_tensor():
    x = _leaf([1.0, 2.0])
    h = x * x
    (gh,) = mt.grad((h * h).sum(), h)  # d/dh h^2 = 2h
    np.testing.assert_array_equal(gh.numpy(), [2.0, 8.0])


def test_grad_outputs_weights_each_output_and_none_means_ones():
    x = _leaf([1.0, 2.0])
    a, b = x * 2, x * x
    (g,) = mt.grad([a, b], x, grad_outputs=[mt.to_tensor([1.0, 10.0]), None])
    np.testing.assert_array_equal(g.numpy(), [2.0 + 2.0, 20.0 + 4.0])
    with pytest.raises(ValueError, match="shape"):
        mt.grad(a, x, grad_outputs=mt.ones([3]))
    with pytest.raises(ValueError, match="one per output"):
        mt.grad([a, b], x, grad_outputs=[None])


@pytest.mark.parametrize(
    "path",
    [
        lambda x: x,  # the output is the input: the gradient is grad_outputs itself
        lambda x: x + 0.0,  # add hands its incoming gradient on as it is
        lambda x: x.reshape([2, 1]).reshape([2]),  # reshape hands on a view of it
    ],
    ids=["the input itself", "add", "reshape"],
)
def test_grad_never_returns_the_callers_grad_outputs_array(path):
    x = _leaf([1.0, 2.0])
    v = mt.to_tensor([10.0, 20.0])
    (g,) = mt.grad(path(x), x, grad_outputs=v)
    assert not np.shares_memory(g._data, v._data)
    v.set_value(np.zeros(2, "float32"))  # the caller reuses its buffer
    np.testing.assert_array_equal(g.numpy(), [10.0, 20.0])


def test_an_unused_input_is_an_error_unless_allow_unused():
    x, u = _leaf([1.0]), _leaf([2.0])
    with pytest.raises(ValueError, match="does not appear in the backward graph"):
        mt.grad((x * x).sum(), [x, u], retain_graph=True)
    gx, gu = mt.grad((x * x).sum(), [x, u], allow_unused=True)
    assert gu is None and gx.numpy()[0] == 2.0


def test_refusing_an_unused_input_leaves_the_graph_usable():
    x, u = _leaf([1.0]), _leaf([2.0])
    out = (x * x).sum()
    with pytest.raises(ValueError):
        mt.grad(out, [x, u])
    out.backward()  # nothing was freed by the refused call
    assert x.grad.numpy()[0] == 2.0


def test_no_grad_vars_block_the_flow():
    x = _leaf([2.0])
    h = x * x
    out = h * x  # x^3; with h held constant: d/dx = h = x^2
    (g,) = mt.grad(out, x, no_grad_vars=[h])
    assert g.numpy()[0] == 4.0


def test_retain_graph_defaults_to_create_graph():
    x = _leaf([2.0])
    out = x * x * x
    mt.grad(out, x)
    with pytest.raises(RuntimeError, match="freed"):
        mt.grad(out, x)
    out = x * x * x
    mt.grad(out, x, create_graph=True)
    (g,) = mt.grad(out, x)
    assert g.numpy()[0] == 12.0


def test_grad_of_an_intermediate_leaves_the_graph_below_it_for_a_later_backward():
    """Split backprop (a pipeline's stages): grad(loss, act), then act.backward(g). grad()
    runs and frees only the nodes between the outputs and its inputs, as PyTorch's does."""
    mt.seed(0)
    stage1, stage2 = nn.Linear(3, 3), nn.Linear(3, 1)
    x = mt.randn([5, 3])
    act = mt.tanh(stage1(x))
    (g,) = mt.grad(stage2(act).sum(), act)  # retain_graph=False: stage 2's nodes are freed
    act.backward(g)
    mt.seed(0)
    ref1, ref2 = nn.Linear(3, 3), nn.Linear(3, 1)
    ref2(mt.tanh(ref1(mt.randn([5, 3])))).sum().backward()
    np.testing.assert_array_equal(stage1.weight.grad.numpy(), ref1.weight.grad.numpy())
    assert stage2.weight.grad is None


def test_grad_runs_no_hook_of_a_branch_that_leads_to_no_input():
    x, w = _leaf([1.0, 2.0]), _leaf([3.0, 4.0])
    b = w * 3
    ran = []
    b.register_hook(lambda g: ran.append("b"))
    z = (x * 2 * b).sum()
    (gx,) = mt.grad(z, x, retain_graph=True)
    assert gx.numpy().tolist() == [18.0, 24.0] and ran == []
    z.backward()  # the branch's hook runs when its gradient is wanted
    assert ran == ["b"]


def test_only_inputs_false_is_refused():
    x = _leaf([1.0])
    with pytest.raises(NotImplementedError):
        mt.grad(x * x, x, only_inputs=False)


def test_autograd_backward_of_several_tensors_in_one_pass():
    x = _leaf([1.0, 2.0])
    autograd.backward([x * 2, (x * x).sum()], [mt.to_tensor([1.0, 1.0]), None])
    np.testing.assert_array_equal(x.grad.numpy(), [2.0 + 2.0, 2.0 + 4.0])


# ---- double backward: analytic ------------------------------------------------------------
def test_second_derivative_of_a_cube():
    x = _leaf([3.0, -1.0])
    (dy,) = mt.grad((x * x * x).sum(), x, create_graph=True)
    assert not dy.stop_gradient
    (d2y,) = mt.grad(dy.sum(), x)
    np.testing.assert_array_equal(dy.numpy(), [27.0, 3.0])
    np.testing.assert_array_equal(d2y.numpy(), [18.0, -6.0])


def test_second_derivative_of_tanh():
    v = np.array([-1.5, 0.2, 0.9])
    x = _leaf(v, "float64")
    (d1,) = mt.grad(x.tanh().sum(), x, create_graph=True)
    (d2,) = mt.grad(d1.sum(), x)
    t = np.tanh(v)
    np.testing.assert_allclose(d1.numpy(), 1 - t * t, rtol=1e-12)
    np.testing.assert_allclose(d2.numpy(), -2 * t * (1 - t * t), rtol=1e-12)


def test_backward_with_create_graph_makes_grad_differentiable():
    x = _leaf([2.0])
    (x**4).sum().backward(create_graph=True)  # x.grad = 4 x^3 = 32, recorded
    g = x.grad
    assert not g.stop_gradient and g.numpy()[0] == 32.0
    (d2,) = mt.grad(g.sum(), x)  # 12 x^2
    assert d2.numpy()[0] == 48.0
    x.clear_grad()  # the recorded gradient's array is left to its graph
    assert x.grad.numpy()[0] == 0.0 and g.numpy()[0] == 32.0


def test_gradient_penalty_trains_through_the_gradient():
    mt.seed(0)
    fc = nn.Linear(3, 1)
    x = mt.randn([4, 3])
    x.stop_gradient = False
    (gx,) = mt.grad(fc(x).tanh().sum(), x, create_graph=True)
    penalty = (gx * gx).sum()
    penalty.backward()
    assert fc.weight.grad is not None and float(np.abs(fc.weight.grad.numpy()).sum()) > 0


def test_an_op_without_double_backward_is_refused_before_anything_runs():
    x = _leaf([[0.5, -0.3]])
    out = nn.functional.gelu(x).sum()
    with pytest.raises(NotImplementedError, match="gelu"):
        mt.grad(out, x, create_graph=True)
    (g,) = mt.grad(out, x)  # the graph is intact and differentiable once
    assert g.shape == [1, 2]


def test_create_graph_records_the_backward_without_auto_cast():
    x = _leaf([[1.0001, 2.0003]])  # not representable in float16
    w = _leaf([[0.5], [0.25]])
    out = x.matmul(w).sum()  # float32 throughout
    with mt.amp.auto_cast(level="O1"):  # matmul is white-listed: it would run in float16
        (gw,) = mt.grad(out, w, create_graph=True)
    np.testing.assert_array_equal(gw.numpy().ravel(), x.numpy().ravel())  # exact: float32
