"""A backward pass writes every leaf's ``.grad`` or none, and hooks keep the gradient's type.

Before: a hook that raised left ``weight.grad`` written and ``bias.grad`` not, the graph freed,
and a later ``opt.step()`` updated only some parameters. Now the engine notes each ``.grad``
before writing it, stages additions into gradients held from before, runs every hook, and
only then commits; on failure every ``.grad`` is bit for bit what it was and the graph is
kept, so the pass can be retried (or skipped). A hook's result must have the dtype and shape
of the gradient it replaces, and its place (Paddle and PyTorch raise RuntimeError for a
dtype or place change): it is no longer cast back silently.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import nn


class HookFailedError(Exception):
    pass


def refuse(grad):
    raise HookFailedError("this hook refuses")


def _model():
    mt.seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))


def _grads(model) -> list:
    """Every parameter's ``.grad`` as the user sees it (None, or a copy of its values)."""
    return [None if p.grad is None else p.grad.numpy().copy() for p in model.parameters()]


def _prepare(model, x, before: str) -> None:
    """Bring the parameters' ``.grad`` into one of three states before the pass under test."""
    if before in ("stale", "accumulating"):
        model(x).sum().backward()
    if before == "stale":
        model.clear_gradients()  # buffers kept, marked to be overwritten


def _assert_same(got: list, want: list) -> None:
    for g, w in zip(got, want):
        assert (g is None) == (w is None)
        if w is not None:
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("before", ["none", "stale", "accumulating"])
@pytest.mark.parametrize("on", ["first weight", "last bias", "hidden result"])
def test_a_raising_hook_leaves_every_grad_as_it_was_and_the_graph_retriable(before, on):
    model, x = _model(), mt.randn([5, 3])
    _prepare(model, x, before)
    want = _grads(model)
    if on == "hidden result":
        h = model[1](model[0](x))
        handle = h.register_hook(refuse)
        loss = model[2](h).sum()
    else:
        target = model[0].weight if on == "first weight" else model[2].bias
        handle = target.register_hook(refuse)
        loss = model(x).sum()
    with pytest.raises(HookFailedError):
        loss.backward()
    _assert_same(_grads(model), want)
    handle.remove()
    loss.backward()  # the graph was not freed: the same pass, retried
    reference = _model()
    _prepare(reference, x, before)
    reference(x).sum().backward()
    _assert_same(_grads(model), _grads(reference))


def test_an_optimizer_step_after_a_failed_backward_changes_no_parameter():
    model, x = _model(), mt.randn([5, 3])
    opt = mt.optimizer.SGD(learning_rate=0.1, parameters=model.parameters())
    model(x).sum().backward()
    opt.step()
    opt.clear_grad()
    values = [p.numpy().copy() for p in model.parameters()]
    model[2].weight.register_hook(refuse)
    with pytest.raises(HookFailedError):
        model(x).sum().backward()
    opt.step()  # every gradient reads zero: nothing moves (before: the bias alone moved)
    for p, v in zip(model.parameters(), values):
        np.testing.assert_array_equal(p.numpy(), v)


def test_a_failed_pass_through_grad_frees_nothing():
    x = mt.to_tensor([1.0, 2.0], stop_gradient=False)
    h = x * x
    handle = h.register_hook(refuse)
    out = (h * 3.0).sum()
    with pytest.raises(HookFailedError):
        mt.grad(out, x)
    handle.remove()
    (g,) = mt.grad(out, x)
    np.testing.assert_array_equal(g.numpy(), [6.0, 12.0])


def test_a_failed_create_graph_pass_leaves_the_recorded_grads_as_they_were():
    x, y = mt.to_tensor([2.0], stop_gradient=False), mt.to_tensor([3.0], stop_gradient=False)
    (x * y).sum().backward(create_graph=True)
    recorded = x.grad, y.grad
    # (before: y's gradient, which arrives first, was accumulated, then x's hook raised)
    y.register_hook(lambda g: None)
    x.register_hook(refuse)
    with pytest.raises(HookFailedError):
        (x * x * y).sum().backward(create_graph=True)
    assert (x.grad, y.grad) == recorded  # the same recorded tensors
    assert x.grad.numpy()[0] == 3.0 and y.grad.numpy()[0] == 2.0


def test_leaf_hooks_still_run_before_the_gradient_is_accumulated():
    x = mt.to_tensor([1.0, 2.0], stop_gradient=False)
    (x * 3.0).sum().backward()
    seen = []
    x.register_hook(lambda g: seen.append((g.numpy().copy(), x.grad.numpy().copy())))
    (x * 5.0).sum().backward()
    np.testing.assert_array_equal(seen[0][0], [5.0, 5.0])  # this pass's gradient
    np.testing.assert_array_equal(seen[0][1], [3.0, 3.0])  # .grad not yet accumulated
    np.testing.assert_array_equal(x.grad.numpy(), [8.0, 8.0])


# ---- a hook's result keeps the gradient's dtype and shape ----------------------------------
@pytest.mark.parametrize("dtype", ["float16", "int64", "float64"])
def test_a_hook_returning_another_dtype_raises_naming_the_hook_and_both_dtypes(dtype):
    x = mt.to_tensor([1.0, 2.0], stop_gradient=False)

    def widen_or_narrow(grad):
        return grad.astype(dtype)

    x.register_hook(widen_or_narrow)
    with pytest.raises(RuntimeError) as info:  # Paddle's and PyTorch's type
        (x * 2.0).sum().backward()
    message = str(info.value)
    assert "widen_or_narrow" in message and dtype in message and "float32" in message
    assert x.grad is None  # before: float16/int64 cast back silently, float64 kept as .grad


def test_a_hook_on_a_result_returning_another_dtype_raises_too():
    x = mt.to_tensor([1.0, 2.0], stop_gradient=False)
    h = x * x
    h.register_hook(lambda g: g.astype("float16"))
    with pytest.raises(RuntimeError, match=r"<lambda>.*float16.*float32"):
        (h * 2.0).sum().backward()
    assert x.grad is None


def test_a_hook_returning_another_dtype_under_create_graph_raises_too():
    x = mt.to_tensor([1.0, 2.0], stop_gradient=False)
    x.register_hook(lambda g: g.astype("float64"))
    with pytest.raises(RuntimeError, match="float64"):
        mt.grad((x * x).sum(), x, create_graph=True)


def test_a_hook_computing_in_float16_under_auto_cast_raises_runtime_error():
    # Paddle's test: backward inside auto_cast, and the hook's mm runs in float16
    v = mt.rand([3, 3])
    v.stop_gradient = False
    v.register_hook(lambda grad: mt.mm(grad, grad))
    with mt.amp.auto_cast():
        loss = mt.mm(v, v).sum()
        with pytest.raises(RuntimeError, match="float16 gradient for a float32 tensor"):
            loss.backward()
    assert v.grad is None


def test_a_hook_moving_the_gradient_to_another_place_raises_runtime_error(monkeypatch):
    from minitorch_amp.backend import device

    moved = []  # arrays the hook "moved"; a CPU-only machine has no second place
    real_place_of = device.place_of
    monkeypatch.setattr(
        device,
        "place_of",
        lambda a: device.Place("gpu", 0) if any(a is m for m in moved) else real_place_of(a),
    )

    def to_other_place(grad):
        out = grad * 1.0
        moved.append(out._data)
        return out

    x = mt.to_tensor([1.0, 2.0], stop_gradient=False)
    x.register_hook(to_other_place)
    with pytest.raises(RuntimeError, match=r"to_other_place.*gpu:0.*cpu"):
        (x * 2.0).sum().backward()
    assert x.grad is None


@pytest.mark.skipif(not mt.is_compiled_with_cuda(), reason="needs a GPU")
def test_a_hook_returning_grad_cpu_for_a_gpu_tensor_raises_runtime_error():
    v = mt.rand([3, 3]).cuda()
    v.stop_gradient = False
    v.register_hook(lambda grad: grad.cpu())
    with pytest.raises(RuntimeError, match="place"):
        mt.mm(v, v).sum().backward()
    assert v.grad is None


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
