"""The fused optimizer update (``backend.fused_optim``, ``cuda/optim.cu``): a specification.

1. The NumPy twin IS the per-parameter optimizer, bit for bit: an optimizer forced onto the
   fused path (``update_path`` -> ``'cupy twin'``, run on NumPy arrays) ends every step with
   exactly the parameters, masters, accumulators and cast counts of the per-param loop.
2. A set ``found_inf`` changes nothing at all, also on the where-commit path the GPU uses.
3. The kernel's table and source agree with the launcher (layout, chunking, instantiations,
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

import minitorch_amp as mt
from minitorch_amp.backend import fused_optim, kernels, nvrtc
from minitorch_amp.backend.cast_counter import cast_counts, reset_cast_counts
from minitorch_amp.nn.parameter import Parameter
from minitorch_amp.optimizer import SGD, Adam, AdamW, Momentum
from minitorch_amp.optimizer.fused_step import has_fused_twin
from minitorch_amp.regularizer import L1Decay, L2Decay

SHAPES = [(0,), (1,), (3,), (7, 5), (1030,)]  # empty, odd, and not multiples of the vector width
LR = 0.01

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


def make_params(dtype_plan, seed=0):
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


def set_grads(params, step, fp32_grad_for_half=False):
    rng = np.random.default_rng(100 + step)
    for p in params:
        g = rng.standard_normal(p.shape) * 0.5
        wide = fp32_grad_for_half and p.dtype == mt.float16
        p.grad = g.astype("float32" if wide else p.dtype)


def bits(a):
    a = np.asarray(a)
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.itemsize]) if a.size else a


def snapshot(opt, params):
    out = [bits(p.numpy()).copy() for p in params]
    out += [bits(m.numpy()).copy() for _, m in sorted(opt._master_weights.items())]
    for p in params:
        for _, acc in sorted(opt._accumulators.get(id(p), {}).items()):
            out.append(bits(np.asarray(acc)).copy())
    return out


def assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


@pytest.fixture(autouse=True)
def _numpy_arrays():
    """The twin is specified on NumPy arrays: new parameters go to the CPU on every machine."""
    mt.set_device("cpu")


@pytest.fixture
def force_fused(monkeypatch):
    """Send NumPy arrays down the fused path (the twin), as CuPy arrays without kernels go."""
    monkeypatch.setattr(fused_optim, "update_path", lambda params, grads: "cupy twin")


def run_steps(kind, mp, dtype_plan, steps=3, wide=False):
    params = make_params(dtype_plan)
    opt = OPTIMIZERS[kind](params, mp)
    reset_cast_counts()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # float16 without masters warns; not the subject here
        for step in range(steps):
            set_grads(params, step, wide)
            opt.step()
    return snapshot(opt, params), cast_counts()["optimizer"]


# ---- 1. the twin is the per-parameter optimizer, bit for bit ---------------------------------
@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
@pytest.mark.parametrize(
    "mp, dtype_plan, wide",
    [
        (True, ("float16", "float32"), False),  # masters for the halves, fp32 are their own
        (True, ("float16",), True),  # float32 grads of float16 params (master_grad)
        (False, ("float16", "float32"), False),  # float16 updated without a master
    ],
)
def test_fused_path_equals_the_per_param_loop_bit_for_bit(kind, mp, dtype_plan, wide, monkeypatch):
    reference, ref_casts = run_steps(kind, mp, dtype_plan, wide=wide)
    monkeypatch.setattr(fused_optim, "update_path", lambda params, grads: "cupy twin")
    buckets = []
    twin = fused_optim._twin
    monkeypatch.setattr(fused_optim, "_twin", lambda m, b, *a: buckets.append(b) or twin(m, b, *a))
    fused, casts = run_steps(kind, mp, dtype_plan, wide=wide)
    assert buckets and len(buckets) % 3 == 0  # the fused path ran, the same buckets each step
    assert_same(fused, reference)
    assert casts == ref_casts == (3 * len(SHAPES) if mp else 0)  # one per fp16 master per step


def test_minimize_takes_the_same_fused_path(monkeypatch):
    def run():
        params = make_params(("float16", "float32"))
        opt = AdamW(LR, parameters=params, multi_precision=True)
        for step in range(2):
            set_grads(params, step)
            opt.minimize(None, parameters=params[1:], no_grad_set={params[-1].name})
        return snapshot(opt, params)

    reference = run()
    monkeypatch.setattr(fused_optim, "update_path", lambda params, grads: "cupy twin")
    assert_same(run(), reference)


def test_the_numpy_path_is_the_per_param_loop(monkeypatch):
    calls = []
    monkeypatch.setattr(fused_optim, "_twin", lambda *a, **k: calls.append(a))
    run_steps("adam", True, ("float16", "float32"), steps=1)
    assert calls == []
    assert fused_optim.update_path([np.zeros(3)], [np.zeros(3)]) == "per-param numpy"


def test_subclasses_that_change_the_maths_keep_the_per_param_loop():
    class MySGD(SGD):
        def _update(self, p, g, state, lr, hyper):
            p -= 2 * lr * g

    class MyMomentum(Momentum):
        def _prepare_grad(self, p, g, regularizer, group):
            return g * 3

    class PlainAdam(Adam):  # changes nothing: still fused
        pass

    assert all(has_fused_twin(c) for c in (SGD, Momentum, Adam, AdamW, PlainAdam))
    assert not has_fused_twin(MySGD)
    assert not has_fused_twin(MyMomentum)


# ---- 2. found_inf: nothing changes --------------------------------------------------------------
def adam_bucket(seed=0):
    rng = np.random.default_rng(seed)
    params = [rng.standard_normal(n).astype(d) for n, d in ((5, "float16"), (3, "float32"))]
    masters = [params[0].astype("float32"), None]
    grads = [rng.standard_normal(p.shape).astype(p.dtype) for p in params]
    m1 = [rng.random(p.shape).astype("float32") for p in params]
    m2 = [rng.random(p.shape).astype("float32") for p in params]
    pows = [[np.array([b**3], "float32") for _ in params] for b in (0.9, 0.999)]
    return params, masters, grads, m1, m2, *pows


def call_adam(bucket, found_inf):
    params, masters, grads, m1, m2, b1p, b2p = bucket
    fused_optim.fused_adam(
        params, masters, grads, m1, m2, b1p, b2p, LR, found_inf, lr_ratios=[1.0, 0.5],
        beta1=0.9, beta2=0.999, epsilon=1e-8, decoupled_decay=[0.1, 0.0],
    )  # fmt: skip


def flat(bucket):
    return [bits(a).copy() for group in bucket for a in group if a is not None]


@pytest.mark.parametrize("found_inf", [True, np.array([True])])
def test_found_inf_leaves_everything_bit_identical(found_inf):
    bucket = adam_bucket()
    before = flat(bucket)
    call_adam(bucket, found_inf)
    assert_same(flat(bucket), before)
    call_adam(bucket, np.array([False]))
    assert not all(np.array_equal(a, b) for a, b in zip(flat(bucket), before))


@pytest.mark.parametrize("overflow", [True, False])
def test_the_where_commit_used_on_the_gpu_matches_the_in_place_twin(overflow):
    """``keep`` is how the CuPy twin skips without reading the flag; checked here on NumPy."""
    in_place, committed = adam_bucket(), adam_bucket()
    before = flat(committed)
    call_adam(in_place, False)
    params, masters, grads, m1, m2, b1p, b2p = committed
    bucket = fused_optim._bucket(
        params, masters, grads, [list(s) for s in zip(m1, m2, b1p, b2p)], LR, [1.0, 0.5],
        None, decay=[0.1, 0.0],
    )  # fmt: skip
    hyper = dict(beta1=0.9, beta2=0.999, eps=1e-8)
    fused_optim._twin(fused_optim._adam_math, bucket, hyper, keep=np.array(overflow))
    assert_same(flat(committed), before if overflow else flat(in_place))


def test_a_skipped_optimizer_step_changes_nothing(force_fused):
    params = make_params(("float16", "float32"))
    opt = Adam(LR, parameters=params, multi_precision=True)
    set_grads(params, 0)
    opt.step()
    before = snapshot(opt, params)
    set_grads(params, 1)
    opt._set_auxiliary_var("found_inf", np.array([True]))
    opt.step()
    assert_same(snapshot(opt, params), before)
    assert opt._get_auxiliary_var("found_inf") is None


# ---- 3. the kernel's table and source -----------------------------------------------------------
def fake(size, ptr):
    return SimpleNamespace(size=size, data=SimpleNamespace(ptr=ptr))


def test_the_table_packs_tensors_chunks_and_a_zero_counter():
    chunk = fused_optim.CHUNK
    sizes = [0, 1, chunk, chunk + 1]
    params = [fake(n, 1000 + 16 * i) for i, n in enumerate(sizes)]
    ratios = [0.1, 1e-3, 0.5, 3.0]
    bucket = fused_optim._bucket(
        params, [None] * 4, [fake(n, 9000) for n in sizes], [[]] * 4, 2.0, ratios, None,
        scales=[1.0, 0.5, 1.0, 1.0], decay=[0, 0, 0.2, 0],
    )  # fmt: skip
    words, n_chunks = fused_optim._table(bucket)
    assert fused_optim.TENSOR_ARGS.itemsize == 88  # static_assert(sizeof(TensorArgs) == 88)
    args = words[: 4 * 11].view(fused_optim.TENSOR_ARGS)
    assert list(args["param"]) == [1000, 1016, 1032, 1048] and list(args["master"]) == [0] * 4
    assert list(args["size"]) == sizes
    assert list(args["lr_ratio"]) == ratios  # float64: the kernel multiplies the base lr by it
    assert list(args["decay"]) == [0, 0, 0.2, 0] and list(args["grad_scale"]) == [1, 0.5, 1, 1]
    chunks = words[44 : 44 + n_chunks].view(np.int32).reshape(-1, 2)
    assert chunks.tolist() == [[1, 0], [2, 0], [3, 0], [3, 1]]  # the empty tensor has none
    assert words[-1] == 0 and len(words) == 44 + n_chunks + 1


def test_all_empty_tensors_still_get_one_block():
    empty = [fake(0, 64)] * 2
    bucket = fused_optim._bucket(empty, [None] * 2, empty, [[]] * 2, 1.0, None, None)
    words, n_chunks = fused_optim._table(bucket)
    assert n_chunks == 1 and words[22:23].view(np.int32).tolist() == [0, 0]


def test_optim_cu_instantiates_every_registered_kernel_and_shares_the_constants():
    source = fused_optim.OPTIM.source()
    pairs = re.findall(r"^INSTANTIATE\((\w+), (\w+)\)", source, re.M)
    for kind in ("sgd", "momentum", "adam"):
        assert re.search(rf"__global__ void __launch_bounds__\(kThreads\)\s+{kind}_step\(", source)
    expected = {f"{k}_step<{p}, {g}>" for k in ("sgd", "momentum", "adam") for p, g in pairs}
    assert expected == set(fused_optim.OPTIM.names)
    assert f"kChunk = {fused_optim.CHUNK};" in source
    assert f"kThreads = {fused_optim.THREADS};" in source
    assert "--fmad=false" in fused_optim.OPTIM.options


def test_nvrtc_builds_optim_cu_without_fma_contraction(nvrtc_available):
    entry = kernels.REGISTRY["optim.cu"]
    ptx = nvrtc.compile_source(entry.source(), "optim.cu", entry.all_options(), entry.names)["ptx"]
    assert "fma.rn.f32" not in ptx  # every * and + rounds on its own, as in the twin
    assert "div.rn.f32" in ptx and "sqrt.rn.f32" in ptx  # IEEE division and square root
