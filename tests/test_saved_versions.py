"""A tensor an op saved for backward must not change before that backward runs.

Every in-place write of a tensor's values (``set_value``, ``copy_``, ``Layer.set_state_dict``)
bumps its version. Each recorded op notes the version of its tensor inputs; before the op's
backward runs, the engine compares: if a tensor the op saved changed, backward would compute
from the new values, silently. It raises instead, PyTorch's "modified by an inplace operation",
naming the tensor, the op and both versions, before any ``.grad`` is written. A change to an
input the op did not save (an add's) is harmless and allowed, as in PyTorch.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import nn
from minitorch_amp.autograd import PyLayer


def _leaf(values, dtype="float32"):
    return mt.to_tensor(np.asarray(values, dtype=dtype), stop_gradient=False)


def _set(tensor, value) -> None:
    with mt.no_grad():
        tensor.set_value(np.full(tensor.shape, value, dtype=tensor.dtype))


def test_changing_an_input_an_op_saved_makes_backward_raise_instead_of_a_wrong_gradient():
    x = _leaf([1.0, 1.0, 1.0])
    y = x * x
    _set(x, 5.0)  # before the check, backward gave 2 * 5 = 10 instead of 2, silently
    with pytest.raises(RuntimeError) as info:
        y.sum().backward()
    message = str(info.value)
    for part in (
        "modified in place",
        "'multiply'",
        "float32 tensor of shape [3]",
        "saved at version 0",
        "now at version 1",
        "after backward()",
    ):
        assert part in message, part
    assert x.grad is None


def test_the_message_names_a_linear_layers_weight_changed_between_forward_and_backward():
    fc = nn.Linear(3, 2)
    out = fc(mt.ones([4, 3])).sum()
    fc.weight.set_value(np.zeros([3, 2], "float32"))
    with pytest.raises(RuntimeError, match=rf"'linear'.*'{fc.weight.name}'"):
        out.backward()
    assert fc.weight.grad is None and fc.bias.grad is None


def test_set_state_dict_between_forward_and_backward_is_seen():
    fc = nn.Linear(3, 2)
    out = fc(mt.ones([4, 3])).sum()
    fc.set_state_dict(nn.Linear(3, 2).state_dict())
    with pytest.raises(RuntimeError, match="modified in place"):
        out.backward()


def test_copy_is_an_in_place_write_too():
    x = _leaf([2.0])
    y = x * x
    x.copy_(mt.to_tensor([3.0]))
    with pytest.raises(RuntimeError, match=r"saved at version 0.*now at version 1"):
        y.backward()


def test_a_saved_input_that_needs_no_gradient_is_checked_too():
    batch = mt.ones([4, 3])  # stop_gradient=True, but Linear's weight gradient reads it
    fc = nn.Linear(3, 2)
    out = fc(batch).sum()
    _set(batch, 7.0)
    with pytest.raises(RuntimeError, match="input 0 of 'linear'"):
        out.backward()


def test_a_saved_result_is_checked_too():
    x = _leaf([0.5, 1.0])
    y = x.exp()  # exp's backward reads its result
    _set(y, 0.0)
    with pytest.raises(RuntimeError, match=r"the result of 'exp'.*saved at version 0"):
        y.sum().backward()


def test_an_input_the_op_did_not_save_may_change():
    x, w = _leaf([1.0, 2.0]), _leaf([3.0, 4.0])
    y = (x + w) * 2.0  # add's backward reads neither input
    _set(w, 0.0)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 2.0])


def test_a_change_after_backward_is_fine_but_a_retained_graph_then_refuses():
    x = _leaf([1.0, 2.0])
    loss = (x * x).sum()
    loss.backward(retain_graph=True)
    _set(x, 0.0)  # the optimizer's kind of write, after backward: allowed
    with pytest.raises(RuntimeError, match="modified in place"):
        loss.backward()  # the retained graph saved the old values
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])  # the first backward's


def test_a_failed_check_writes_no_grad_and_frees_nothing():
    x, w = _leaf([1.0, 2.0]), _leaf([3.0, 4.0])
    out = (x * x * w).sum()  # backward reaches w's multiply first, then x's
    _set(x, 0.0)
    with pytest.raises(RuntimeError, match="modified in place"):
        out.backward()
    assert w.grad is None and x.grad is None
    (gw,) = mt.grad(out, w)  # the graph is intact: the part that reads only x * x still runs
    np.testing.assert_array_equal(gw.numpy(), [1.0, 4.0])


def test_with_create_graph_a_changed_input_is_refused_even_if_the_op_saved_only_its_result():
    # exp's first backward reads its result only; its recorded backward reads the input
    x = _leaf([0.5])
    y = x.exp().sum()
    _set(x, 2.0)
    with pytest.raises(RuntimeError, match="input 0 of 'exp'"):
        mt.grad(y, x, create_graph=True)
    (g,) = mt.grad(y, x)  # once, from the saved result: exp(0.5)
    np.testing.assert_allclose(g.numpy(), np.exp([0.5]), rtol=1e-6)


def test_grad_checks_versions_like_backward():
    x = _leaf([1.0, 2.0])
    y = (x * x).sum()
    _set(x, 3.0)
    with pytest.raises(RuntimeError, match="modified in place"):
        mt.grad(y, x)


class Cube(PyLayer):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, dy):
        (x,) = ctx.saved_tensor()
        return dy * 3 * x * x


def test_a_py_layers_saved_tensor_changed_before_backward_raises_naming_the_layer():
    x = _leaf([1.0, 2.0])
    y = Cube.apply(x)
    _set(x, 10.0)
    with pytest.raises(RuntimeError) as info:
        y.sum().backward()
    message = str(info.value)
    assert "Cube" in message and "saved tensor 0" in message
    assert "saved at version 0" in message and "now at version 1" in message
    assert x.grad is None


def test_a_py_layers_saved_tensors_unchanged_give_the_gradient():
    x = _leaf([1.0, 2.0])
    Cube.apply(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 12.0])


@pytest.mark.parametrize("view", ["reshape", "transpose", "slice", "split"])
@pytest.mark.parametrize("write", ["set_value", "setitem", "set_state_dict"])
def test_a_write_into_a_source_is_seen_through_the_views_an_op_saved(view, write):
    layer = nn.Linear(2, 2)
    d = layer.weight  # a source that owns its memory, written three ways
    w = mt.ones([2, 2])
    w.stop_gradient = False
    make = {
        "reshape": lambda: d.reshape([4]).reshape([2, 2]),  # a view of a view
        "transpose": lambda: d.transpose([1, 0]),
        "slice": lambda: d[0:2],
        "split": lambda: mt.split(d, 2)[0],
    }
    v = make[view]()
    y = (v * w[: v.shape[0]]).sum()  # saves v for w's gradient
    new = np.full([2, 2], 5.0, np.float32)
    if write == "set_value":
        d.set_value(new)
    elif write == "setitem":
        with mt.no_grad():
            d[0, 0] = 5.0
    else:
        layer.set_state_dict({"weight": mt.to_tensor(new), "bias": layer.bias})
    with pytest.raises(RuntimeError, match="sharing its memory with another tensor"):
        y.backward()
    assert w.grad is None


def test_a_view_that_got_its_own_memory_is_not_refused_when_its_source_is_written():
    d = mt.to_tensor([1.0, 2.0, 3.0, 4.0])
    v = d.reshape([2, 2])
    v[0, 0] = 9.0  # copy on write: v has its own memory now, d keeps 1.0
    w = mt.ones([2, 2])
    w.stop_gradient = False
    y = (v * w).sum()
    d.set_value(mt.zeros([4]))
    y.backward()
    assert w.grad.numpy().tolist() == [[9.0, 2.0], [3.0, 4.0]]


def test_the_table_of_views_drops_the_dead_and_keeps_a_long_lived_sources_views_few():
    from minitorch_amp.autograd import view_writes

    source = mt.ones([4])
    for _ in range(3000):
        mt.ones([4]).reshape([2, 2])  # a dead source's view each time
        source.reshape([2, 2])  # a live source's dead view each time
    assert len(view_writes._views) < 2100
    assert len(view_writes._views[id(source._data)]) <= 16


def test_a_write_into_a_tensor_or_its_detached_twin_is_seen_through_the_other():
    x = mt.to_tensor([1.0, 2.0], stop_gradient=False)
    y = (x * x).sum()
    x.detach().set_value(mt.to_tensor([5.0, 5.0]))
    with pytest.raises(RuntimeError, match="modified in place"):
        y.backward()
    d = x.detach()
    w = mt.ones([2])
    w.stop_gradient = False
    z = (d * w).sum()
    x.set_value(mt.to_tensor([7.0, 7.0]))
    with pytest.raises(RuntimeError, match="sharing its memory"):
        z.backward()


def test_an_optimizer_step_is_seen_through_a_view_of_the_parameter():
    layer = nn.Linear(2, 3)
    opt = mt.optimizer.SGD(learning_rate=0.1, parameters=layer.parameters())
    x = mt.ones([1, 6])
    x.stop_gradient = False
    y = mt.matmul(x, layer.weight.reshape([6, 1])).sum()  # saves the weight's view
    layer.weight.sum().backward()
    opt.step()  # writes the weight in place
    with pytest.raises(RuntimeError, match="modified in place"):
        y.backward()


def test_loading_or_initializing_a_view_leaves_the_tensor_it_was_made_from():
    src = mt.to_tensor([0.0, 1.0, 2.0, 3.0])
    layer = nn.Layer()
    layer.register_buffer("buf", src.reshape([2, 2]))
    layer.set_state_dict({"buf": mt.full([2, 2], 7.0)})
    view = src.reshape([2, 2])
    nn.initializer.Constant(9.0)(view)
    assert src.numpy().tolist() == [0.0, 1.0, 2.0, 3.0]
    assert layer.buf.numpy().max() == 7.0 and view.numpy().max() == 9.0


@pytest.mark.parametrize("make", [mt.Tensor, nn.Parameter])
def test_a_tensor_made_from_a_tensor_shares_its_writes_as_detach_does(make):
    s = mt.to_tensor([1.0, 2.0])
    w = mt.ones([2])
    w.stop_gradient = False
    y = (s * w).sum()
    twin = make(s)
    assert twin._data is s._data
    twin.set_value(mt.to_tensor([10.0, 20.0]))
    with pytest.raises(RuntimeError, match="modified in place"):
        y.backward()


def test_repeated_detach_and_many_live_views_keep_one_entry_each():
    from minitorch_amp.autograd import view_writes

    w = mt.ones([4])
    for _ in range(1000):
        w.detach()  # (a logging pattern): w itself is noted once
    assert len(view_writes._views[id(w._data)]) <= 16
    x = mt.ones([3000, 2])
    rows = [x[i] for i in range(3000)]
    assert len(view_writes._views[id(x._data)]) == len(rows)
