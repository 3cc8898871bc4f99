"""O2's fp32 master weights follow their float16 parameters when something else writes them.

The update starts from the master and the optimize-cast writes the parameter from it, so a
master that missed an outside write (rolling the model back to a checkpoint, ``float()`` then
``float16()``, ``set_value``) would silently undo that write at the next step. Each such write
bumps the parameter's version (or replaces its array), and the optimizer re-seeds the master
from the parameter where the two no longer agree, with a warning. Loading the optimizer's own
state still restores the masters exactly.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import amp, nn


def o2_model():
    mt.seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = mt.optimizer.SGD(0.05, parameters=model.parameters())
    return amp.decorate(models=model, optimizers=opt, level="O2")


def train(model, opt, steps: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        x = mt.to_tensor(rng.standard_normal((3, 4)).astype("float32"))
        with amp.auto_cast(level="O2"):
            loss = model(x).astype("float32").mean()
        loss.backward()
        opt.step()
        opt.clear_grad()


def zero_grad_step(model, opt):
    """A step that moves nothing: what it writes back is the master, rounded."""
    for p in model.parameters():
        p.grad = np.zeros(p.shape, p.dtype)
    opt.step()
    opt.clear_grad()


def values(tensors):
    return [np.array(t.numpy(), copy=True) for t in tensors]


def masters(opt):
    return [np.array(m.numpy(), copy=True) for _, m in sorted(opt._master_weights.items())]


def test_rolling_the_model_back_is_not_undone_by_the_next_step():
    model, opt = o2_model()
    train(model, opt, 1)
    checkpoint = {k: np.array(v.numpy(), copy=True) for k, v in model.state_dict().items()}
    saved = values(model.parameters())
    train(model, opt, 3, seed=1)
    model.set_state_dict(checkpoint)
    with pytest.warns(UserWarning, match="written outside the optimizer"):
        zero_grad_step(model, opt)
    for p, want in zip(model.parameters(), saved):
        np.testing.assert_array_equal(p.numpy(), want)


def test_float_then_float16_keeps_the_masters_fp32_digits():
    model, opt = o2_model()
    train(model, opt, 3)
    before_params, before_masters = values(model.parameters()), masters(opt)
    model.float()
    model.float16()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the master is checked; nothing needs re-seeding
        zero_grad_step(model, opt)
    for have, want in zip(masters(opt), before_masters):
        np.testing.assert_array_equal(have, want)
    for p, want in zip(model.parameters(), before_params):
        np.testing.assert_array_equal(p.numpy(), want)


def test_set_value_on_a_parameter_reseeds_only_the_elements_that_changed():
    model, opt = o2_model()
    train(model, opt, 3)
    weight = model[0].weight
    old_master = np.array(opt._master_weights[weight.name].numpy(), copy=True)
    new = weight.numpy().copy()
    new[0, 0] = 0.5
    weight.set_value(new)
    with pytest.warns(UserWarning, match=weight.name):
        zero_grad_step(model, opt)
    master = opt._master_weights[weight.name].numpy()
    assert master[0, 0] == 0.5 and weight.numpy()[0, 0] == 0.5
    np.testing.assert_array_equal(master.reshape(-1)[1:], old_master.reshape(-1)[1:])


def test_an_initializer_run_again_is_not_undone_by_the_next_step():
    """An initializer writes in place, as set_value does: the master follows it."""
    model, opt = o2_model()
    train(model, opt, 2)
    weight = model[0].weight
    nn.initializer.Constant(0.25)(weight)
    with pytest.warns(UserWarning, match=weight.name):
        zero_grad_step(model, opt)
    np.testing.assert_array_equal(weight.numpy(), np.full(weight.shape, 0.25, weight.dtype))
    np.testing.assert_array_equal(opt._master_weights[weight.name].numpy(), 0.25)


def test_an_initializer_write_is_seen_by_backward():
    x = mt.to_tensor(np.ones(3, "float32"), stop_gradient=False)
    y = x * x
    nn.initializer.Constant(5.0)(x)
    with pytest.raises(RuntimeError, match="modified in place"):
        y.sum().backward()


@pytest.mark.parametrize("model_first", [True, False])
def test_loading_the_optimizers_state_restores_the_masters_exactly(model_first):
    model, opt = o2_model()
    train(model, opt, 2)
    model_state = {k: np.array(v.numpy(), copy=True) for k, v in model.state_dict().items()}
    opt_state = opt.state_dict()  # (copies)
    saved_masters, saved_params = masters(opt), values(model.parameters())
    train(model, opt, 3, seed=2)
    loads = [lambda: model.set_state_dict(model_state), lambda: opt.set_state_dict(opt_state)]
    for load in loads if model_first else loads[::-1]:
        load()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zero_grad_step(model, opt)
    for have, want in zip(masters(opt), saved_masters):
        np.testing.assert_array_equal(have, want)
    for p, want in zip(model.parameters(), saved_params):
        np.testing.assert_array_equal(p.numpy(), want)


def test_a_write_after_loading_the_optimizers_state_is_followed_too():
    """The loaded masters are the truth for the parameters as they were at the load; a later
    write (another model checkpoint, set_value) is followed as any outside write is."""
    model, opt = o2_model()
    train(model, opt, 2)
    opt.set_state_dict(opt.state_dict())
    weight = model[0].weight
    edited = np.full(weight.shape, 0.5, "float16")
    weight.set_value(edited)
    with pytest.warns(UserWarning, match="written outside the optimizer"):
        zero_grad_step(model, opt)
    np.testing.assert_array_equal(weight.numpy(), edited)


def test_the_optimizers_own_writes_raise_no_warning():
    model, opt = o2_model()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        train(model, opt, 3)


def test_an_edit_made_in_float32_between_float_and_float16_survives_the_next_step():
    model, opt = o2_model()
    train(model, opt, 3)
    model.float()
    weight = model[0].weight
    edited = weight.numpy().copy()
    edited[1, 2] = 0.25
    weight.set_value(edited)
    model.float16()
    with pytest.warns(UserWarning, match="written outside the optimizer"):
        zero_grad_step(model, opt)
    assert weight.numpy()[1, 2] == 0.25
