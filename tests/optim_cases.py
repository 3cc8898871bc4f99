"""The optimizer cases that the fused-step tests share, and how they compare results.

Two catalogues:

* ``OPTIMIZERS``: every optimizer configuration a bucket must get right (L2 fused or not,
  Momentum's rescale, AdamW's per-parameter lr ratio and decay), run on ``make_params``
  (five shapes per dtype, one parameter with an lr ratio, one with its own L2Decay);
* ``KINDS``: one configuration per kernel family, run on ``sized_params`` (any sizes, with
  per-parameter lr ratios and L2 on every other parameter), for holding ``cuda/optim.cu``
  to the twin over ``DTYPES`` and ``SIZES``.

``train`` runs an optimizer for a few steps with arrays placed by a ``move`` function
(identity for NumPy, the emulator's HostArray, CuPy), and ``state_of`` reads back everything
a step writes, as bits, so that results compare bit for bit.
"""

from __future__ import annotations

import warnings

import numpy as np

import minitorch_amp as mt
from minitorch_amp.backend import device as _device
from minitorch_amp.backend import fused_optim
from minitorch_amp.backend.cast_counter import cast_counts, reset_cast_counts
from minitorch_amp.nn.parameter import Parameter
from minitorch_amp.optimizer import SGD, Adam, AdamW, Momentum
from minitorch_amp.regularizer import L1Decay, L2Decay

LR = 0.01

# ---- the optimizer configurations, on a few shapes -------------------------------------------
SHAPES = [(0,), (1,), (3,), (7, 5), (1030,)]  # empty, odd, and not multiples of the vector width

OPTIMIZERS = {
    "sgd": lambda ps, mp: SGD(LR, parameters=ps, multi_precision=mp),
    "sgd_l2": lambda ps, mp: SGD(LR, parameters=ps, weight_decay=0.01, multi_precision=mp),
    "momentum": lambda ps, mp: Momentum(LR, 0.9, ps, multi_precision=mp),
    "nesterov": lambda ps, mp: Momentum(LR, 0.9, ps, use_nesterov=True, multi_precision=mp),
    "momentum_l2_rescale": lambda ps, mp: Momentum(
        LR, 0.9, ps, weight_decay=0.05, rescale_grad=0.5, multi_precision=mp
    ),
    "momentum_l1_rescale": lambda ps, mp: Momentum(
        LR, 0.9, ps, weight_decay=L1Decay(0.05), rescale_grad=0.5, multi_precision=mp
    ),
    "adam": lambda ps, mp: Adam(LR, parameters=ps, multi_precision=mp),
    "adam_l2": lambda ps, mp: Adam(
        LR, parameters=ps, weight_decay=L2Decay(0.1), multi_precision=mp
    ),
    "adamw": lambda ps, mp: AdamW(
        LR,
        parameters=ps,
        weight_decay=0.1,
        lr_ratio=lambda p: 0.5 if p.ndim == 1 else 1.0,
        apply_decay_param_fun=lambda name: not name.endswith("_1"),
        multi_precision=mp,
    ),
}


def make_params(dtype_plan, seed=0) -> list:
    """Parameters of every SHAPE in each dtype; one has an lr ratio, one its own L2."""
    rng = np.random.default_rng(seed)
    params = []
    for i, shape in enumerate(SHAPES * len(dtype_plan)):
        dtype = dtype_plan[i // len(SHAPES)]
        p = Parameter(rng.standard_normal(shape).astype(dtype), name=f"w{seed}_{i}_{i % 2}")
        params.append(p)
    params[2].optimize_attr = {"learning_rate": 0.5}
    params[3].regularizer = L2Decay(0.02)
    return params


def set_grads(params, step, fp32_grad_for_half=False, move=None) -> None:
    """Step ``step``'s gradients (the same for every run), placed by ``move``."""
    rng = np.random.default_rng(100 + step)
    for p in params:
        g = rng.standard_normal(p.shape) * 0.5
        wide = fp32_grad_for_half and p.dtype in (mt.float16, mt.bfloat16)
        g = g.astype("float32" if wide else p.dtype)
        p.grad = g if move is None else move(g)


# ---- one configuration per kernel family, on any sizes ---------------------------------------
def _decays(name: str) -> bool:
    return int(name.rsplit("_", 1)[1]) % 4 < 2  # AdamW decays parameters 0, 1, 4, 5, 8, ...


KINDS = {  # name -> (the optimizer, the L2Decay of every other parameter)
    "sgd": (lambda ps, mp: SGD(LR, parameters=ps, multi_precision=mp), None),
    "sgd_l2": (lambda ps, mp: SGD(LR, parameters=ps, multi_precision=mp), 0.01),
    "momentum": (
        lambda ps, mp: Momentum(LR, 0.9, ps, rescale_grad=0.5, multi_precision=mp),
        None,
    ),
    "nesterov_l2_rescale": (
        lambda ps, mp: Momentum(
            LR, 0.9, ps, use_nesterov=True, rescale_grad=0.5, multi_precision=mp
        ),
        0.05,
    ),
    "adam": (lambda ps, mp: Adam(LR, parameters=ps, multi_precision=mp), None),
    "adamw_l2": (
        lambda ps, mp: AdamW(
            LR, parameters=ps, weight_decay=0.1, apply_decay_param_fun=_decays, multi_precision=mp
        ),
        0.02,
    ),
}
FAMILY = {  # the optim.cu kernel of each
    "sgd": "sgd",
    "sgd_l2": "sgd",
    "momentum": "momentum",
    "nesterov_l2_rescale": "momentum",
    "adam": "adam",
    "adamw_l2": "adam",
}
DTYPES = [
    ("float16", "float16"), ("float16", "float32"), ("bfloat16", "bfloat16"),
    ("bfloat16", "float32"), ("float32", "float32"),
]  # fmt: skip
SIZES = [0, 1, 3, 4, 5, 17, 1023, fused_optim.CHUNK - 1, fused_optim.CHUNK + 5, 140_003]


def sized_params(sizes, ptype, l2=None, seed=0) -> list:
    """One parameter per size; lr ratios 1, 2, 3, 1, ... and ``L2Decay(l2)`` on odd ones."""
    rng = np.random.default_rng(seed)
    params = []
    for i, k in enumerate(sizes):
        p = Parameter(rng.standard_normal(k).astype(ptype), name=f"s{seed}_{i}")
        p.optimize_attr = {"learning_rate": float(1 + i % 3)}
        if l2 is not None and i % 2:
            p.regularizer = L2Decay(l2)
        params.append(p)
    return params


def sized_grads(params, gtype, step, seed=0) -> list:
    rng = np.random.default_rng(1000 * seed + step)
    return [(rng.standard_normal(p.shape) * 0.3).astype(gtype) for p in params]


def train(
    kind, ptype, gtype, sizes, mp=True, steps=2, move=None, misaligned=(), edit=None, lr=None
):
    """``KINDS[kind]`` for ``steps`` steps on ``sized_params``; returns ``(opt, params)``.

    Args:
        move: ``move(host_array, offset)`` places an array (None: NumPy); ``offset=1`` makes
            it start one element into its buffer (the parameters and grads of ``misaligned``).
        edit: ``edit(values, grads)`` changes the host values (the parameters', and each
            step's list of gradients) before they are placed: edge values, the same in every run.
        lr: the learning rate, if not ``LR``.
    """
    make, l2 = KINDS[kind]
    params = sized_params(sizes, ptype, l2)
    grads = [sized_grads(params, gtype, step) for step in range(steps)]
    if edit is not None:
        with np.errstate(all="ignore"):  # float16 overflow to inf is part of the edit
            edit([p._data for p in params], grads)
    if move is not None:
        for i, p in enumerate(params):
            p._data = move(p._data, int(i in misaligned))
    opt = make(params, mp)
    if lr is not None:
        opt.set_lr(lr)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # float16 without masters warns; not the subject here
        for step in range(steps):
            for i, (p, g) in enumerate(zip(params, grads[step])):
                p.grad = g if move is None else move(g, int(i in misaligned))
            opt.step()
    return opt, params


def run_steps(make_opt, params, steps=3, wide=False, move=None, found_inf_at=(), flag=None):
    """``make_opt(params)`` stepped ``steps`` times on ``set_grads``; a ``flag()`` is set
    before the steps in ``found_inf_at``. Returns the optimizer and its optimize-casts."""
    opt = make_opt(params)
    reset_cast_counts()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # float16 without masters warns; not the subject here
        for step in range(steps):
            set_grads(params, step, wide, move)
            if step in found_inf_at:
                opt._set_auxiliary_var("found_inf", flag())
            opt.step()
    return opt, cast_counts()["optimizer"]


# ---- reading results back, and comparing them bit for bit ------------------------------------
def bits(a) -> np.ndarray:
    """The array's bytes as unsigned integers (NaN payloads and signed zeros included)."""
    a = np.asarray(_device.asnumpy(a)).view(np.ndarray)
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.itemsize]) if a.size else a


def state_of(opt, params) -> list:
    """``[(label, bits)]``: each parameter, its master and its accumulators, in order."""
    out = []
    for p in params:
        out.append((f"{p.name}", bits(p._data).copy()))
        master = opt._master_weights.get(p.name)
        if master is not None:
            out.append((f"{p.name} master", bits(master._data).copy()))
        for name, acc in sorted(opt._accumulators.get(id(p), {}).items()):
            out.append((f"{p.name} {name}", bits(acc).copy()))
    return out


def assert_same(have: list, want: list) -> None:
    """The same arrays under the same labels, bit for bit."""
    assert [label for label, _ in have] == [label for label, _ in want]
    for (label, x), (_, y) in zip(have, want):
        np.testing.assert_array_equal(x, y, err_msg=label)


def assert_changed(have: list, want: list) -> None:
    """Not everything is as before (the step the comparison is about did run)."""
    assert any(not np.array_equal(x, y) for (_, x), (_, y) in zip(have, want))


def assert_bitwise(have, want, err_msg="") -> None:
    """Equal bits, except that any NaN matches any NaN (payloads differ between converters)."""
    have, want = (np.asarray(_device.asnumpy(a)).view(np.ndarray) for a in (have, want))
    nan = np.isnan(want.astype("float32"))
    np.testing.assert_array_equal(np.isnan(have.astype("float32")), nan, err_msg=err_msg)
    np.testing.assert_array_equal(bits(have)[~nan], bits(want)[~nan], err_msg=err_msg)


def values_of(opt, params) -> list:
    """``[(label, array)]`` like :func:`state_of`, as values (for NaN-tolerant comparison)."""
    out = []
    for p in params:
        out.append((p.name, np.array(_device.asnumpy(p._data))))
        master = opt._master_weights.get(p.name)
        if master is not None:
            out.append((f"{p.name} master", np.array(_device.asnumpy(master._data))))
        for name, acc in sorted(opt._accumulators.get(id(p), {}).items()):
            out.append((f"{p.name} {name}", np.array(_device.asnumpy(acc))))
    return out
