"""An optimizer step writes its parameters in place, so it bumps their versions.

As in PyTorch (whose in-place updates bump the version counter) and as ``set_value`` does
here: backward refuses a graph that saved a weight before the step, a cached cast of the
weight is made again, and a second optimizer holding a master of the same float16
parameter sees the first one's write. The step's plan and its record of what it left
(``master_seen``) follow the bumps, so a plan is kept across steps and a master is re-seeded
only after a write by someone else.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import amp, nn
from minitorch_amp.nn import Parameter


def params(*dtypes):
    return [Parameter(np.full(4, 1.0 + i, dtype), name=f"v{i}") for i, dtype in enumerate(dtypes)]


def grads(ps, value=0.5):
    for p in ps:
        p.grad = np.full(p.shape, value, p.dtype)


def test_each_step_bumps_the_written_parameters_and_keeps_its_plan():
    a, b, c, frozen = params("float32", "float32", "float16", "float32")
    opt = mt.optimizer.Adam(
        0.1,
        parameters=[{"params": [a, b]}, {"params": [c, frozen], "learning_rate": 0.5}],
        multi_precision=True,
    )
    frozen.stop_gradient = True
    plans = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no master is re-seeded: the bumps are the step's own
        for _ in range(3):
            grads([a, b, c])
            before = [p._version for p in (a, b, c, frozen)]
            opt.step()
            assert [p._version for p in (a, b, c, frozen)] == [v + 1 for v in before[:3]] + [
                before[3]
            ]
            plans.append(opt._state.plan)
    assert plans[0] is plans[1] is plans[2]


def test_minimize_bumps_only_the_parameters_it_updates():
    a, b = params("float32", "float32")
    opt = mt.optimizer.SGD(0.1, parameters=[a, b])
    grads([a, b])
    opt.minimize(None, parameters=[a])
    assert (a._version, b._version) == (1, 0)


def test_backward_through_a_graph_that_saved_a_weight_before_the_step_raises():
    """PyTorch's "modified by an inplace operation" (the GAN mistake): the old graph would
    otherwise differentiate with the new weights."""
    mt.seed(0)
    layer = nn.Linear(3, 2)
    opt = mt.optimizer.SGD(0.1, parameters=layer.parameters())
    x = mt.to_tensor(np.ones((4, 3), "float32"), stop_gradient=False)
    first = layer(x).sum()
    second = (layer(x) * layer(x)).sum()
    first.backward()
    opt.step()
    with pytest.raises(RuntimeError, match="modified in place"):
        second.backward()


def test_a_rebuilt_plan_does_not_take_the_steps_own_writes_for_outside_ones():
    """After steps, a parameter that gets its first gradient rebuilds the plan: the masters
    of the others are not re-seeded (no warning), their fp32 digits kept."""
    a, b = params("float16", "float16")
    opt = mt.optimizer.SGD(0.001, parameters=[a, b], multi_precision=True)
    for _ in range(3):
        grads([a], 0.3)  # b has no gradient yet: not in the plan
        opt.step()
    plan, master = opt._state.plan, opt._master_weights["v0"].numpy().copy()
    assert master.tobytes() != a.numpy().astype("float32").tobytes()  # digits to lose
    grads([a, b], 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.step()
    assert opt._state.plan is not plan
    np.testing.assert_array_equal(opt._master_weights["v0"].numpy(), master)


def test_a_second_optimizer_over_the_same_float16_parameter_starts_from_the_first_ones_write():
    (w,) = params("float16")
    first = mt.optimizer.SGD(0.25, parameters=[w], multi_precision=True)
    second = mt.optimizer.SGD(0.25, parameters=[w], multi_precision=True)
    for opt in (first, second):  # each makes its master
        grads([w], 0.0)
        opt.step()
    grads([w], 1.0)
    for opt in (first, second):  # 1.0 -> 0.75 -> 0.5: each starts from the other's write
        with pytest.warns(UserWarning, match="written outside the optimizer"):
            opt.step()
    np.testing.assert_array_equal(w.numpy(), np.full(4, 0.5, "float16"))


def test_a_cast_retained_across_a_step_inside_one_region_is_made_again():
    mt.seed(0)
    layer = nn.Linear(3, 2)
    opt = mt.optimizer.SGD(0.5, parameters=layer.parameters())
    x = mt.ones([1, 3])
    amp.reset_cast_counts()
    with amp.auto_cast():
        layer(x).astype("float32").sum().backward(retain_graph=True)
        opt.step()
        after = layer(x)
    assert amp.cast_counts()["weight"] == 2
    with amp.auto_cast():
        expected = layer(x)
    np.testing.assert_array_equal(after.numpy(), expected.numpy())
