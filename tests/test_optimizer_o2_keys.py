"""An optimizer checkpoint keys a float16 parameter's moments by its fp32 master's name, as
Paddle's O2 optimizers do (they add the moments to the master variable), so Paddle's O2
``.pdopt`` files and ours load both ways; a checkpoint keyed by the parameter loads too."""

from __future__ import annotations

import warnings

import numpy as np

from minitorch_amp.autograd.tensor import Tensor
from minitorch_amp.nn.parameter import Parameter
from minitorch_amp.optimizer import Adam

P0 = np.array([[0.5, -1.0, 2.0], [1.5, -0.25, 0.1]])
GRADS = [np.full(P0.shape, 0.1), np.full(P0.shape, -0.2)]
LR = 0.01


def half_param(name: str) -> Parameter:
    return Parameter(P0.astype("float16"), name=name)


def set_grad(p, values) -> None:
    p._grad = Tensor._wrap(np.array(values, dtype=p.dtype))


def test_accumulators_of_a_param_with_a_master_are_keyed_by_the_masters_name_as_paddle_does():
    """Paddle adds an O2 parameter's moments to its master variable, so its .pdopt holds
    'w_fp32_master_0_moment1_0'; a float32 parameter keeps its own name's keys."""
    half, full = half_param("w"), Parameter(P0.astype("float32"), name="b")
    opt = Adam(LR, parameters=[half, full], multi_precision=True)
    for p in (half, full):
        set_grad(p, GRADS[0])
    opt.step()
    keys = {k for k in opt.state_dict() if k not in ("master_weights", "LR_Scheduler")}
    assert keys == {
        *(f"w_fp32_master_0_{acc}_0" for acc in ADAM_ACCUMULATORS),
        *(f"b_{acc}_0" for acc in ADAM_ACCUMULATORS),
    }


def test_a_checkpoint_keying_the_masters_accumulators_by_the_param_still_loads():
    """How this project saved them before: nothing of such a checkpoint is lost."""
    a = half_param("w")
    opt_a = Adam(LR, parameters=[a], multi_precision=True)
    set_grad(a, GRADS[0])
    opt_a.step()
    old_form = {k.replace("w_fp32_master_0_", "w_"): v for k, v in opt_a.state_dict().items()}
    b = half_param("w")
    b._data[...] = a._data
    opt_b = Adam(LR, parameters=[b], multi_precision=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every entry is used
        opt_b.set_state_dict(old_form)
    for p, opt in ((a, opt_a), (b, opt_b)):
        set_grad(p, GRADS[1])
        opt.step()
    assert a.numpy().tobytes() == b.numpy().tobytes()
    assert opt_b.state_dict().keys() == opt_a.state_dict().keys()


ADAM_ACCUMULATORS = ("moment1", "moment2", "beta1_pow_acc", "beta2_pow_acc")
