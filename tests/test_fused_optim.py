"""The optimizer step, bucketed (``optimizer/state.py``, ``bucket.py``): a specification.

On NumPy the twin (each optimizer's ``_update`` run on a bucket's flat buffers) IS the step.

1. One optimizer over all parameters (a few buckets, runs of several parameters) ends every
   step with exactly the parameters, masters, accumulators and cast counts of one optimizer
   per parameter (a bucket of one), bit for bit; also when the parameters of a bucket are at
   different steps (Adam's per-tensor beta pows), and through ``minimize``.
2. Only the optimizers whose maths is the kernel's have a kernel (``_kernel_kind``).
3. ``found_inf``: a set host flag returns before anything is prepared; a device flag is never
   read, changes nothing when set, and equals the in-place step when not.
4. The plan is kept while the step looks the same and rebuilt when it does not, without
   losing a bit of state.
5. The kernel's table and source agree with the launcher (layout, chunking, instantiations,
   no FMA contraction).
The kernel itself is held to the twin in test_fused_optim_kernel.py (a CPU emulator) and
test_fused_optim_gpu.py (a GPU).
"""

from __future__ import annotations

import re
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
from optim_cases import (
    LR,
    OPTIMIZERS,
    SHAPES,
    assert_changed,
    assert_same,
    make_params,
    run_steps,
    set_grads,
    state_of,
)

import minitorch_amp as mt
from minitorch_amp.backend import device as _device
from minitorch_amp.backend import fused_optim, kernels, nvrtc
from minitorch_amp.backend import sync as _sync
from minitorch_amp.backend.cast_counter import cast_counts, reset_cast_counts
from minitorch_amp.nn.parameter import Parameter
from minitorch_amp.optimizer import SGD, Adam, AdamW, Momentum
from minitorch_amp.regularizer import L2Decay


@pytest.fixture(autouse=True)
def _numpy_arrays():
    """The twin is specified on NumPy arrays: new parameters go to the CPU on every machine."""
    mt.set_device("cpu")


def buckets_of(opt) -> list:
    return [bucket for _, bucket in opt._state.plan.buckets]


# ---- 1. bucketed == per parameter, bit for bit ---------------------------------------------------
PLANS = [
    (True, ("float16", "float32"), False),  # masters for the halves, fp32 are their own
    (True, ("float16",), True),  # float32 grads of float16 params (master_grad)
    (False, ("float16", "float32"), False),  # float16 updated without a master
]


def step_alone(kind, mp, params, steps=3, wide=False):
    """One optimizer per parameter: ``[(opt, param)]`` and the optimize-casts."""
    opts = [OPTIMIZERS[kind]([p], mp) for p in params]
    reset_cast_counts()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # float16 without masters warns; not the subject here
        for step in range(steps):
            set_grads(params, step, wide)
            for opt in opts:
                opt.step()
    return list(zip(opts, params)), cast_counts()["optimizer"]


def state_alone(pairs) -> list:
    return [item for opt, p in pairs for item in state_of(opt, [p])]


@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
@pytest.mark.parametrize("mp, dtype_plan, wide", PLANS)
def test_one_optimizer_over_all_parameters_equals_one_per_parameter(kind, mp, dtype_plan, wide):
    params = make_params(dtype_plan)
    initial = [p._data.copy() for p in params]
    opt, casts = run_steps(lambda ps: OPTIMIZERS[kind](ps, mp), params, wide=wide)
    pairs, casts_alone = step_alone(kind, mp, make_params(dtype_plan), wide=wide)

    assert_same(state_of(opt, params), state_alone(pairs))
    assert casts == casts_alone == (3 * len(SHAPES) if mp else 0)  # one per fp16 master and step
    assert not all(np.array_equal(p._data, p0) for p, p0 in zip(params, initial))
    # the comparison is of something: buckets of several parameters, updated in several runs
    buckets = buckets_of(opt)
    assert sum(len(b.records) for b in buckets) == len(params) > len(buckets)
    assert max(len(b.records) for b in buckets) >= len(SHAPES) - 1
    assert any(len(b.runs) > 1 for b in buckets)
    # runs of one: a regularizer that is not fused (L1), or AdamW's decay on every other name
    if kind not in ("momentum_l1_rescale", "adamw"):
        assert any(stop - start > 1 for b in buckets for start, stop in b.runs)
    for one, p in pairs:
        assert [b.records[0].param for b in buckets_of(one)] == [p]  # a bucket of one


@pytest.mark.parametrize("cls", [Adam, AdamW])
def test_parameters_at_different_steps_share_a_bucket_and_still_step_as_alone(cls):
    """A parameter that gets its first gradient later joins the bucket with fresh beta pows:
    the run splits where the per-tensor state differs."""

    def params():
        rng = np.random.default_rng(0)
        values = [rng.standard_normal(n).astype("float16") for n in (4, 6, 5)]
        return [Parameter(v, name=f"late_{v.size}") for v in values]

    joined, alone = params(), params()
    opt = cls(LR, parameters=joined, multi_precision=True)
    opts = [cls(LR, parameters=[p], multi_precision=True) for p in alone]
    for step in range(4):
        for group in (joined, alone):  # parameter i gets gradients from step i on
            set_grads(group[: step + 1], step)
        opt.step()
        for one in opts:
            one.step()
    bucket = buckets_of(opt)[0]
    assert len(buckets_of(opt)) == 1 and len(bucket.records) == 3 and len(bucket.runs) == 1
    assert len(set(bucket.state["beta1_pow_acc"].tolist())) == 3  # 4, 3 and 2 steps taken
    assert bucket._runs(bucket.state) == [(0, 1), (1, 2), (2, 3)]
    assert_same(state_of(opt, joined), state_alone(zip(opts, alone)))


def test_minimize_updates_the_chosen_parameters_as_step_does():
    def params():
        return make_params(("float16", "float32"))

    chosen, reference = params(), params()
    opt = OPTIMIZERS["adamw"](chosen, True)
    ref = OPTIMIZERS["adamw"](reference[1:-2], True)
    for step in range(2):
        set_grads(chosen, step)
        set_grads(reference, step)
        skip = {chosen[-1].name, chosen[-2]}  # by name and by tensor
        ops, pairs = opt.minimize(None, parameters=chosen[1:], no_grad_set=skip)
        ref.step()
        assert ops == [] and [(id(p), id(g)) for p, g in pairs] == [
            (id(p), id(p._grad)) for p in chosen[1:-2]
        ]
    assert_same(state_of(opt, chosen), state_of(ref, reference))
    assert opt._accumulators.get(id(chosen[0])) is None  # not chosen: no state, no update


def test_minimize_steps_a_parameter_of_no_group_as_an_optimizer_built_on_it():
    def pair():
        rng = np.random.default_rng(3)
        members = [Parameter(rng.standard_normal(5).astype("float32"), name="member")]
        return members, Parameter(rng.standard_normal(7).astype("float16"), name="outsider")

    (members, outsider), (_, alone) = pair(), pair()
    opt = Adam(LR, parameters=members, multi_precision=True)
    ref = Adam(LR, parameters=[alone], multi_precision=True)
    for step in range(2):
        for group in ([outsider], [alone], members):
            set_grads(group, step)
        opt.minimize(None, parameters=[outsider])
        ref.step()
    assert opt._state.extra_params == [outsider]
    assert opt._accumulators.get(id(members[0])) is None
    assert_same(state_of(opt, [outsider]), state_of(ref, [alone]))


# ---- 2. which optimizers have a kernel -------------------------------------------------------
class DoubleSGD(SGD):
    def _update(self, p, g, state, lr, hyper):
        p -= 2 * lr * g


class SlowAdam(Adam):
    def _advance(self, state, hyper):
        state["beta1_pow_acc"] *= hyper["beta1"]  # beta2's power is left alone


class PlainAdam(Adam):  # changes nothing: still the kernel's maths
    pass


def test_only_the_kernels_own_maths_has_a_kernel():
    kinds = [c._kernel_kind() for c in (SGD, Momentum, Adam, AdamW, PlainAdam)]
    assert kinds == ["sgd", "momentum", "adam", "adam", "adam"]
    assert DoubleSGD._kernel_kind() is None
    assert SlowAdam._kernel_kind() is None


def test_a_subclass_with_its_own_update_trains_through_the_twin():
    w32 = np.array([0.5, -1.25, 2.0], "float32")
    w16 = np.array([1.0, -0.5, 3.0, 0.25], "float16")
    g32 = np.array([0.25, 1.0, -2.0], "float32")
    g16 = np.array([0.5, -1.0, 0.125, 8.0], "float16")
    a, b = Parameter(w32.copy(), name="a"), Parameter(w16.copy(), name="b")
    opt = DoubleSGD(LR, parameters=[a, b], multi_precision=True)
    a.grad, b.grad = g32, g16
    opt.step()
    lr = np.float32(LR)
    np.testing.assert_array_equal(a.numpy(), w32 - np.float32(2 * lr) * g32)
    master = w16.astype("float32") - np.float32(2 * lr) * g16.astype("float32")
    np.testing.assert_array_equal(opt._master_weights["b"].numpy(), master)
    np.testing.assert_array_equal(b.numpy(), master.astype("float16"))
    assert [bucket.kernel for bucket in buckets_of(opt)] == [None, None]


# ---- 3. found_inf ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "flag", [True, np.array([True]), np.array([0.0, np.inf])], ids=["bool", "array", "floats"]
)
@pytest.mark.parametrize("api", ["step", "minimize"])
def test_a_set_host_flag_changes_nothing_and_prepares_nothing(flag, api):
    """A host flag is free to read: a set one returns before any state is made or touched
    (a bool, a bool [1], or any array that Paddle's GradScaler may hand over)."""
    params = make_params(("float16", "float32"))
    opt = OPTIMIZERS["adam"](params, True)

    def step(found_inf=None):
        if found_inf is not None:
            opt._set_auxiliary_var("found_inf", found_inf)
        if api == "step":
            opt.step()
        else:
            opt.minimize(None)
        assert opt._get_auxiliary_var("found_inf") is None  # used once

    initial = state_of(opt, params)
    set_grads(params, 0)
    step(flag)  # a first step: not even the state is created
    assert_same(state_of(opt, params), initial)
    assert opt._accumulators == {} and opt._master_weights == {} and opt._state.plan is None
    step()
    before = state_of(opt, params)
    set_grads(params, 1)
    step(flag)
    assert_same(state_of(opt, params), before)
    step(np.array([False]))
    assert_changed(state_of(opt, params), before)


class DeviceFlag(np.ndarray):
    """A NumPy array posing as a CuPy one, so found_inf counts as a device flag; asking its
    truth on the host (a synchronisation on a GPU) fails the test."""

    @property
    def device(self):
        return SimpleNamespace(id=0)

    def __bool__(self):
        raise AssertionError("the device flag was read on the host")


@pytest.fixture
def device_flags(monkeypatch):
    """DeviceFlag counts as CuPy; every host read is recorded (the list returned)."""
    fake_cupy = SimpleNamespace(ndarray=DeviceFlag, asnumpy=lambda a: np.array(a).view(np.ndarray))
    monkeypatch.setattr(_device, "cupy", fake_cupy)
    reads = []
    monkeypatch.setattr(_sync, "host_read", lambda what: reads.append(what))
    return reads


@pytest.mark.parametrize("overflow", [True, False])
@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
def test_a_device_flag_is_never_read_and_commits_all_or_nothing(kind, overflow, device_flags):
    """The twin computes into copies and commits with where(~found_inf): set, nothing
    changes; not set, the result is the in-place step's, bit for bit."""

    def run(steps, **flags):
        params = make_params(("float16", "float32"))
        opt, casts = run_steps(lambda ps: OPTIMIZERS[kind](ps, True), params, steps, **flags)
        return state_of(opt, params), casts

    flag = lambda: np.array([overflow]).view(DeviceFlag)  # noqa: E731
    have, casts = run(2, found_inf_at=(1,), flag=flag)
    want, _ = run(1 if overflow else 2)
    assert_same(have, want)
    assert device_flags == []
    # NOTE: the host cannot know a device flag, so a skipped step counts its casts too
    assert casts == 2 * len(SHAPES)
    if overflow:
        assert_changed(run(2)[0], want)  # the skipped step had something to skip


# ---- 4. the plan: kept while the step looks the same -----------------------------------------
def change_nothing(opt, params, extra):
    pass


def a_parameter_joins(opt, params, extra):
    extra.grad = np.full(extra.shape, 0.5, extra.dtype)


def a_parameter_leaves(opt, params, extra):
    extra.grad = None


def a_new_array(opt, params, extra):
    params[4]._data = params[4]._data.copy()  # as Layer.to or float()/float16() leave it


def a_new_version(opt, params, extra):
    params[1].set_value(params[1]._data.copy())


def a_new_grad_dtype(opt, params, extra):
    for p in params[: len(SHAPES)]:  # the same values, now float32 (exact)
        p.grad = p.grad._data.astype("float32")


def a_loaded_state_dict(opt, params, extra):
    opt.set_state_dict(opt.state_dict())


@pytest.mark.parametrize(
    "change",
    [
        change_nothing,
        a_parameter_joins,
        a_parameter_leaves,
        a_new_array,
        a_new_version,
        a_new_grad_dtype,
        a_loaded_state_dict,
    ],
)
def test_the_plan_is_rebuilt_when_the_step_changes_and_keeps_every_bit_of_state(change):
    """From the second step on, ``change`` is made before each step; the parameters' state
    ends as in an optimizer that never rebuilt its plan."""
    params, same = make_params(("float16", "float32")), make_params(("float16", "float32"))
    extra = Parameter(np.ones(6, "float16"), name="extra")
    opt = Adam(LR, parameters=[*params, extra], multi_precision=True)
    ref = Adam(LR, parameters=same, multi_precision=True)
    plans, ref_plans = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a master re-seeded after set_value warns
        for step in range(3):
            set_grads(params, step)
            set_grads(same, step)
            extra.grad = np.full(6, 0.25, "float16") if change is a_parameter_leaves else None
            if step:
                change(opt, params, extra)
            opt.step()
            ref.step()
            plans.append(opt._state.plan)
            ref_plans.append(ref._state.plan)
            assert_same(state_of(opt, params), state_of(ref, same))
    assert ref_plans[0] is ref_plans[1] is ref_plans[2]
    rebuilt = plans[1] is not plans[0]
    assert rebuilt == (change is not change_nothing)
    # the new plan is kept, unless the change is made again (a new array, version, load)
    kept = (change_nothing, a_parameter_joins, a_parameter_leaves, a_new_grad_dtype)
    assert (plans[2] is plans[1]) == (change in kept)


# ---- 5. the kernel's table and source ----------------------------------------------------------
def fake(size, ptr):
    return SimpleNamespace(size=size, data=SimpleNamespace(ptr=ptr))


def test_the_table_packs_tensors_chunks_and_a_zero_counter():
    chunk = fused_optim.CHUNK
    sizes = [0, 1, chunk, chunk + 1]
    params = [fake(n, 1000 + 16 * i) for i, n in enumerate(sizes)]
    masters = [None, fake(1, 5000), None, fake(chunk + 1, 6000)]
    grads = [fake(n, 9000 + 16 * i) for i, n in enumerate(sizes)]
    states = [
        tuple(fake(n, 20000 + 100 * i + 8 * j) for j in range(4)) for i, n in enumerate(sizes)
    ]
    states[1] = (fake(1, 7000),)  # Momentum's velocity only
    ratios = [0.1, 1e-3, 0.5, 3.0]
    words = fused_optim.table(
        params, masters, grads, states, ratios, [0, 0, 0.2, 0], [1.0, 0.5, 1.0, 0.1],
        [0.0, 0.02, 0.0, 0.0],
    )  # fmt: skip
    assert fused_optim.TENSOR_ARGS.itemsize == 88  # static_assert(sizeof(TensorArgs) == 88)
    assert fused_optim.WORDS == 11
    args = words[: 4 * 11].view(fused_optim.TENSOR_ARGS)
    assert list(args["param"]) == [1000, 1016, 1032, 1048]
    assert list(args["master"]) == [0, 5000, 0, 6000]  # none: the param is its own master
    assert list(args["grad"]) == [9000, 9016, 9032, 9048]
    assert list(args["state0"]) == [20000, 7000, 20200, 20300]
    assert list(args["state1"]) == [20008, 0, 20208, 20308]
    assert list(args["b1p"]) == [20016, 0, 20216, 20316]
    assert list(args["b2p"]) == [20024, 0, 20224, 20324]
    assert list(args["size"]) == sizes
    assert list(args["lr_ratio"]) == ratios  # float64: the kernel multiplies the base lr by it
    assert list(args["decay"]) == [0, 0, 0.2, 0]
    # float32, rounded to nearest even as NumPy rounds the Python float in the twin
    assert list(args["grad_scale"]) == [1, 0.5, 1, np.float32(0.1)]
    assert list(args["l2"]) == [0, np.float32(0.02), 0, 0]
    n_chunks = len(words) - 44 - 1
    chunks = words[44 : 44 + n_chunks].view(np.int32).reshape(-1, 2)
    assert chunks.tolist() == [[1, 0], [2, 0], [3, 0], [3, 1]]  # the empty tensor has none
    assert words[-1] == 0  # Adam's ticket counter starts at zero


def test_all_empty_tensors_still_get_one_block():
    empty = [fake(0, 64)] * 2
    words = fused_optim.table(empty, [None] * 2, empty, [()] * 2, *[[1.0, 1.0], [0.0, 0.0]] * 2)
    assert len(words) == 2 * 11 + 1 + 1  # two tensors, one chunk, the counter
    assert words[22:23].view(np.int32).tolist() == [0, 0] and words[-1] == 0


def test_optim_cu_instantiates_every_registered_kernel_and_shares_the_constants():
    source = fused_optim.OPTIM.source()
    pairs = re.findall(r"^INSTANTIATE\((\w+), (\w+)\)", source, re.M)
    for kind in ("sgd", "momentum", "adam"):
        assert re.search(rf"__global__ void __launch_bounds__\(kThreads\)\s+{kind}_step\(", source)
    expected = {f"{k}_step<{p}, {g}>" for k in ("sgd", "momentum", "adam") for p, g in pairs}
    assert expected == set(fused_optim.OPTIM.names)
    assert len(pairs) == len(fused_optim.KERNEL_DTYPES)
    assert f"kChunk = {fused_optim.CHUNK};" in source
    assert f"kThreads = {fused_optim.THREADS};" in source
    assert "--fmad=false" in fused_optim.OPTIM.options


def test_nvrtc_builds_optim_cu_without_fma_contraction(nvrtc_available):
    entry = kernels.REGISTRY["optim.cu"]
    ptx = nvrtc.compile_source(entry.source(), "optim.cu", entry.all_options(), entry.names)["ptx"]
    assert "fma.rn.f32" not in ptx  # every * and + rounds on its own, as in the twin
    assert "div.rn.f32" in ptx and "sqrt.rn.f32" in ptx  # IEEE division and square root


def test_a_parameters_own_settings_changed_between_steps_reach_the_next_step():
    """Paddle reads ``optimize_attr`` and ``regularizer`` at every step: a change after the
    first step rebuilds the plan, and the step after it uses the new values."""
    params = [Parameter(np.ones(3, "float32"), name=f"settings_{i}") for i in range(2)]
    opt = SGD(0.5, parameters=params)
    grad = np.array([1.0, 2.0, 4.0], "float32")
    for p in params:
        p.grad = grad
    opt.step()
    plan = opt._state.plan
    params[0].optimize_attr["learning_rate"] = 0.25  # in place, as Paddle users write it
    params[1].regularizer = L2Decay(0.5)
    opt.step()
    assert opt._state.plan is not plan
    w = 1 - np.float32(0.5) * grad  # after the first step
    np.testing.assert_array_equal(params[0].numpy(), w - np.float32(0.125) * grad)
    np.testing.assert_array_equal(
        params[1].numpy(), w - np.float32(0.5) * (grad + np.float32(0.5) * w)
    )
