"""cuda/optim.cu against the twin, bit for bit, on a CPU emulator (no GPU needed).

The emulator (tests/optim_emulator.cpp) runs the kernel file unchanged on the CPU. Real
optimizers drive it: their parameters' arrays and gradients are NumPy arrays posing as CuPy
ones (``emulated_gpu.HostArray``), so a step builds its buckets and tables and launches
``optim.cu`` exactly as on a GPU. Each result is compared with the same optimizer on plain
NumPy arrays, where the twin (the optimizer's ``_update``) is the step. The table layout,
the chunking, the vector and scalar paths and the arithmetic are all held to the twin.
test_fused_optim_gpu.py runs the same cases on a GPU.
"""

from __future__ import annotations

import emulated_gpu
import numpy as np
import pytest
from emulated_gpu import HostArray, host_empty
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from optim_cases import (
    DTYPES,
    FAMILY,
    KINDS,
    LR,
    OPTIMIZERS,
    SHAPES,
    SIZES,
    assert_bitwise,
    assert_same,
    make_params,
    run_steps,
    set_grads,
    sized_grads,
    state_of,
    train,
    values_of,
)

import minitorch_amp as mt
from minitorch_amp.backend import device as _device
from minitorch_amp.backend import fused_optim, kernels
from minitorch_amp.backend import sync as _sync
from minitorch_amp.device import SyncError, sync_debug_mode
from minitorch_amp.nn.parameter import Parameter
from minitorch_amp.optimizer import SGD, Adam, AdamW

MISALIGNED = (3, 6)  # these parameters and grads start one element into their buffer
CUDA = {"float16": "__half", "bfloat16": "__nv_bfloat16", "float32": "float"}


def to_emulator(a, offset=0):
    """``a`` copied into a HostArray that starts ``offset`` elements into its buffer."""
    offset = offset if a.size else 0
    out = host_empty(a.size + offset, a.dtype)[offset:].reshape(a.shape)
    out[...] = np.asarray(a).view(HostArray)
    return out


def kernel_name(bucket) -> str:
    types = (np.dtype(bucket.ptype).name, np.dtype(bucket.kernel_gtype()).name)
    return f"{bucket.kernel}_step<{CUDA[types[0]]}, {CUDA[types[1]]}>"


def chunks(bucket) -> int:
    return max(sum(-(-n // fused_optim.CHUNK) for n in bucket.sizes), 1)


def buckets_of(opt) -> list:
    return [bucket for _, bucket in opt._state.plan.buckets]


def run_placed(make, move, steps=3, found_inf_at=(), flag=None):
    """``make(params)`` over ``make_params`` placed by ``move`` (None: NumPy), stepped
    ``steps`` times; returns the optimizer, its parameters and its optimize-casts."""
    params = make_params(("float16", "float32"))
    for p in params if move else ():
        p._data = move(p._data)
    opt, casts = run_steps(make, params, steps, move=move, found_inf_at=found_inf_at, flag=flag)
    return opt, params, casts


@pytest.fixture(autouse=True)
def _numpy_arrays():
    """Parameters are made on the CPU and placed by each test on every machine."""
    mt.set_device("cpu")


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    return emulated_gpu.build("optim_emulator.cpp", tmp_path_factory.mktemp("emulator"))


@pytest.fixture
def launches(emulator, monkeypatch):
    """Route CuPy to HostArray and optim.cu's launches to the emulator; the launches made."""
    launched = emulated_gpu.install(emulator, monkeypatch, "optim.cu", block=256)
    # what a bucket asks of CuPy beyond emulated_gpu's fake: the grads it prepares for a
    # regularizer the kernel does not fuse (L1Decay)
    contiguous = lambda a, dtype=None: np.ascontiguousarray(a, dtype).view(HostArray)  # noqa: E731
    monkeypatch.setattr(_device.cupy, "ascontiguousarray", contiguous, raising=False)
    # and what the twin asks of it on device arrays (raw kernels off)
    monkeypatch.setattr(_device.cupy, "repeat", np.repeat, raising=False)
    monkeypatch.setattr(_device.cupy, "copyto", np.copyto, raising=False)
    monkeypatch.setattr(_device.cupy, "sqrt", np.sqrt, raising=False)
    monkeypatch.setattr(_device.cupy, "divide", np.divide, raising=False)
    return launched


# ---- every family, dtype pair and size ---------------------------------------------------------
CASES = [(p, g, mp) for p, g in DTYPES for mp in ((True, False) if p != "float32" else (True,))]


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("ptype, gtype, mp", CASES)
def test_the_kernel_equals_the_twin_bit_for_bit(kind, ptype, gtype, mp, launches):
    """Two steps (the second reads the beta pows the first advanced) over SIZES, with lr
    ratios, L2 on every other parameter, Momentum's rescale and AdamW's decay on some."""
    twin, twin_params = train(kind, ptype, gtype, SIZES, mp)
    kernel, params = train(kind, ptype, gtype, SIZES, mp, move=to_emulator, misaligned=MISALIGNED)
    (bucket,) = buckets_of(kernel)
    assert bucket.kernel == FAMILY[kind] and buckets_of(twin)[0].kernel is None
    assert (bucket.master is not None) == (mp and ptype != "float32")
    name = f"{FAMILY[kind]}_step<{CUDA[ptype]}, {CUDA[gtype]}>"
    assert launches == [(name, (sum(-(-n // fused_optim.CHUNK) for n in SIZES),))] * 2
    assert_same(state_of(kernel, params), state_of(twin, twin_params))


@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
@pytest.mark.parametrize("mp", [True, False])
def test_every_optimizer_through_the_kernel_equals_the_twin(kind, mp, launches):
    """``OPTIMIZERS`` on float16 and float32 parameters, three steps, the third skipped on
    overflow (a host flag on NumPy, a device flag that the kernel reads)."""

    def run(move, flag):
        return run_placed(lambda ps: OPTIMIZERS[kind](ps, mp), move, found_inf_at=(2,), flag=flag)

    twin, twin_params, twin_casts = run(None, lambda: np.array([True]))
    kernel, params, casts = run(to_emulator, lambda: to_emulator(np.array([True])))
    buckets = buckets_of(kernel)
    assert all(b.kernel == type(kernel)._kernel_kind() for b in buckets)
    assert launches == [(kernel_name(b), (chunks(b),)) for b in buckets] * 3  # skip included
    assert_same(state_of(kernel, params), state_of(twin, twin_params))
    # NOTE: the host cannot know a device flag, so the skipped step's casts are counted too.
    assert casts == twin_casts * 3 // 2 == (3 * len(SHAPES) if mp else 0)


class UnreadFlag(HostArray):
    """A device flag that the host must not read: its truth value fails the test."""

    def __bool__(self):
        raise AssertionError("found_inf was read on the host")


@pytest.mark.parametrize("overflow", [True, False])
@pytest.mark.parametrize("kind", ["momentum", "adamw_l2"])
def test_a_device_flag_is_read_by_the_kernel_alone(kind, overflow, launches, monkeypatch):
    """Set, the kernel is launched and skips itself: every bit stays. Not set: the step."""
    reads = []
    monkeypatch.setattr(_sync, "host_read", lambda what: reads.append(what))
    sizes = SIZES[:8]
    kernel, params = train(kind, "float16", "float16", sizes, steps=1, move=to_emulator)
    before = state_of(kernel, params)
    for p, g in zip(params, sized_grads(params, "float16", 1)):
        p.grad = to_emulator(g)
    kernel._set_auxiliary_var("found_inf", to_emulator(np.array([overflow])).view(UnreadFlag))
    kernel.step()
    assert reads == [] and len(launches) == 2  # the second launch read the flag
    if overflow:
        assert_same(state_of(kernel, params), before)
    else:
        twin, twin_params = train(kind, "float16", "float16", sizes, steps=2)
        assert_same(state_of(kernel, params), state_of(twin, twin_params))


def test_all_empty_tensors_still_advance_the_beta_pows(launches):
    twin, twin_params = train("adam", "float16", "float16", [0, 0], steps=1)
    kernel, params = train("adam", "float16", "float16", [0, 0], steps=1, move=to_emulator)
    assert launches == [("adam_step<__half, __half>", (1,))]  # one block, on an empty tensor
    b1p = np.float32(np.float32(0.9) * np.float32(0.9))
    assert [float(kernel._accumulators[id(p)]["beta1_pow_acc"][0]) for p in params] == [b1p] * 2
    assert_same(state_of(kernel, params), state_of(twin, twin_params))


@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
def test_with_raw_kernels_off_the_twin_on_device_arrays_is_the_numpy_twin(
    kind, launches, monkeypatch
):
    """The twin as it runs on CuPy: padded segments, the lr read from the device buffer,
    per-tensor state repeated over elements, a device flag committed with where()."""
    monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", "0")

    def run(move, flag):
        make = lambda ps: OPTIMIZERS[kind](ps, True)  # noqa: E731
        opt, params, _ = run_placed(make, move, found_inf_at=(2,), flag=flag)
        assert all(b.kernel is None and b.dense == (move is None) for b in buckets_of(opt))
        return state_of(opt, params)

    twin = run(None, lambda: np.array([True]))
    device = run(to_emulator, lambda: to_emulator(np.array([True])).view(UnreadFlag))
    assert launches == []
    assert_same(device, twin)


@pytest.mark.parametrize("raw_kernels", ["1", "0"])
@pytest.mark.parametrize("cls", [Adam, AdamW])
def test_parameters_at_different_steps_in_one_device_bucket(
    cls, raw_kernels, launches, monkeypatch
):
    """Parameters that got their first gradient at steps 0, 1 and 2 share a bucket and its
    beta pows' buffer: the kernel reads each tensor's own, the device twin repeats each over
    its elements, and both equal the NumPy twin."""
    monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", raw_kernels)
    results = []
    for move in (None, to_emulator):
        rng = np.random.default_rng(0)
        params = [
            Parameter(rng.standard_normal(n).astype("float16"), name=f"late_{n}")
            for n in (70, 6, 5)
        ]
        for p in params if move else ():
            p._data = move(p._data)
        opt = cls(LR, parameters=params, multi_precision=True)
        for step in range(4):
            set_grads(params[: step + 1], step, move=move)  # parameter i joins at step i
            opt.step()
        (bucket,) = buckets_of(opt)
        assert len(bucket.records) == 3
        results.append(state_of(opt, params))
    pows = [float(opt._accumulators[id(p)]["beta1_pow_acc"][0]) for p in params]
    assert len(set(pows)) == 3
    grids = [(1,), (2,), (3,), (3,)]  # one launch a step, over the parameters that have joined
    launched = [("adam_step<__half, __half>", grid) for grid in grids]
    assert launches == (launched if raw_kernels == "1" else [])
    assert_same(results[1], results[0])


def test_a_subclass_with_its_own_update_runs_the_device_twin(launches):
    """No kernel for maths the kernel does not have: the twin runs on the device arrays."""

    class DoubleSGD(SGD):
        def _update(self, p, g, state, lr, hyper):
            p -= 2 * lr * g

    results = []
    for move in (None, to_emulator):
        make = lambda ps: DoubleSGD(LR, parameters=ps, multi_precision=True)  # noqa: E731
        opt, params, _ = run_placed(make, move)
        assert [b.kernel for b in buckets_of(opt)] == [None, None]
        results.append(state_of(opt, params))
    assert launches == []
    assert_same(results[1], results[0])


# ---- random sizes and edge values --------------------------------------------------------------
edges = st.sampled_from([0.0, -0.0, 6e-8, 1e-4, 0.3, 1.0, 1000.0, 60000.0])


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])  # the fakes are reusable
@given(
    kind=st.sampled_from(sorted(KINDS)),
    dtypes=st.sampled_from(DTYPES),
    mp=st.booleans(),
    sizes=st.lists(st.integers(0, 70_000) | st.integers(0, 9), min_size=1, max_size=5),
    lr=st.floats(1e-6, 10.0),
    scales=st.lists(edges, min_size=2, max_size=2),
    misalign=st.booleans(),
)
def test_random_buckets_and_edge_values(kind, dtypes, mp, sizes, lr, scales, misalign, launches):
    """Signed zeros, subnormals, 60000 and overflow to inf in parameters and grads: the same
    bits as the twin, where any NaN matches any NaN."""

    def edit(values, grads):
        for p in values:
            p[::3] *= np.asarray(scales[0], p.dtype)
        for step_grads in grads:
            for g in step_grads:
                g[::5] = scales[1]

    launches.clear()  # the fixture lives across examples
    common = dict(mp=mp, edit=edit, lr=lr)
    twin, twin_params = train(kind, *dtypes, sizes, **common)
    misaligned = (0,) if misalign else ()
    kernel, params = train(kind, *dtypes, sizes, move=to_emulator, misaligned=misaligned, **common)
    assert len(launches) == 2
    have, want = values_of(kernel, params), values_of(twin, twin_params)
    assert [label for label, _ in have] == [label for label, _ in want]
    for (label, x), (_, y) in zip(have, want):
        assert_bitwise(x, y, err_msg=label)


# ---- after the first step, nothing is uploaded ------------------------------------------------
@pytest.mark.parametrize("kind", ["sgd", "momentum_l2_rescale", "adam", "adamw"])
def test_after_the_first_step_the_kernel_path_uploads_nothing(kind, launches, monkeypatch):
    """Steps with the same parameters and gradient buffers reuse their tables; a scheduler's
    new rate goes into the lr buffer (a fill, not an upload); the result is the twin's."""
    monkeypatch.setattr(kernels, "_tables", type(kernels._tables)())  # none cached yet
    uploads, real, now = [], kernels._sync.upload, {}
    monkeypatch.setattr(
        kernels._sync, "upload", lambda what: (uploads.append((now["step"], what)), real(what))
    )
    results = []
    for move in (None, to_emulator):
        params = make_params(("float16", "float32"))
        for p in params if move else ():
            p._data = move(p._data)
        scheduler = mt.optimizer.lr.StepDecay(learning_rate=LR, step_size=1, gamma=0.5)
        opt = OPTIMIZERS[kind](params, True)
        opt.set_lr_scheduler(scheduler)
        for step in range(4):
            buffers = [p._grad for p in params]
            set_grads(params, step, move=move)
            for p, buffer in zip(params, buffers):  # new values, in the same buffers
                if buffer is not None:  # as backward would write them: no upload
                    buffer._data[...] = p._grad._data
                    p._grad = buffer
            now["step"] = step
            with sync_debug_mode("error" if step else "default"):
                opt.step()
            scheduler.step()
        results.append(state_of(opt, params))
    assert_same(results[1], results[0])
    buckets = buckets_of(opt)
    assert len(buckets) == 2 and all(b.kernel for b in buckets)
    # one table per bucket, uploaded in the first step only; one launch per bucket and step
    assert uploads == [(0, "a multi-tensor kernel table")] * len(buckets)
    assert launches == [(kernel_name(b), (chunks(b),)) for b in buckets] * 4
    # a step with new gradient buffers needs a new table: "error" mode catches the upload
    for p in params:
        p.grad = (p.grad._data * 1).view(HostArray)
    with sync_debug_mode("error"), pytest.raises(SyncError, match="kernel table"):
        opt.step()


def test_the_environment_reports_kernel_check_runs_the_optimizer_kernel(launches):
    # `python -m minitorch_amp` checks optim.cu this way: the kernel against the host maths
    from minitorch_amp.utils import kernel_check

    assert kernel_check._optim_matches(to_emulator, np.asarray)
    assert launches  # the kernel ran: the device half was not the host twin


def test_the_kernel_check_keeps_its_host_half_on_the_host_when_the_gpu_is_current(
    launches, monkeypatch
):
    # on a GPU the current device is the GPU: a Parameter made from the check's NumPy values
    # went there while its grads stayed NumPy, and the kernel got a host array (H200, run 2)
    from minitorch_amp.utils import kernel_check

    monkeypatch.setattr(_device, "current_place", lambda: _device.Place("gpu", 0))
    assert kernel_check._optim_matches(to_emulator, np.asarray)
    assert launches
