"""cuda/optim.cu against its NumPy twin, bit for bit, on a CPU emulator (no GPU needed).

The emulator (tests/optim_emulator.cpp) runs the kernel file unchanged on the CPU, fed by the
real launcher (``fused_optim._launch`` packing its table around NumPy arrays that pose as CuPy
arrays), so the table layout, the chunking, the vector and scalar paths and the arithmetic are
held to the twin. test_fused_optim_gpu.py runs the same buckets on a GPU.
"""

from __future__ import annotations

import warnings

import emulated_gpu
import numpy as np
import pytest
from emulated_gpu import HostArray, host_empty
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fused_optim import OPTIMIZERS, assert_same, make_params, set_grads, snapshot

import minitorch_amp as mt
from minitorch_amp.backend import device as _device
from minitorch_amp.backend import fused_optim
from minitorch_amp.backend.cast_counter import cast_counts, reset_cast_counts

LR = 0.01
KINDS = {  # name -> (kernel family, options)
    "sgd": ("sgd", {}),
    "sgd_l2": ("sgd", {"l2": 0.01}),
    "momentum": ("momentum", {"momentum": 0.9}),
    "nesterov_l2_rescale": ("momentum", {"momentum": 0.9, "nesterov": True, "l2": 0.05}),
    "adam": ("adam", {}),
    "adamw_l2": ("adam", {"decay": 0.1, "l2": 0.02}),
}
DTYPES = [
    ("float16", "float16"), ("float16", "float32"), ("bfloat16", "bfloat16"),
    ("bfloat16", "float32"), ("float32", "float32"),
]  # fmt: skip
SIZES = [0, 1, 3, 4, 5, 17, 1023, fused_optim.CHUNK - 1, fused_optim.CHUNK + 5, 140_003]
MISALIGNED = (3, 6)  # these tensors start one element into their buffer: the scalar path


def host_bucket(kind, ptype, gtype, seed=0, sizes=SIZES):
    """[params, masters, grads, *states] as NumPy lists; every 3rd float16 param lacks a master."""
    rng = np.random.default_rng(seed)
    params = [rng.standard_normal(k).astype(ptype) for k in sizes]
    masters = [
        p.astype("float32") if ptype == "float16" and i % 3 else None for i, p in enumerate(params)
    ]
    grads = [(rng.standard_normal(k) * 0.3).astype(gtype) for k in sizes]
    family = KINDS[kind][0]
    states = []
    if family == "momentum":
        states = [[(rng.standard_normal(k) * 0.1).astype("float32") for k in sizes]]
    if family == "adam":
        states = [
            [(rng.standard_normal(k) * 0.1).astype("float32") for k in sizes],
            [(rng.random(k) * 0.01).astype("float32") for k in sizes],
            [np.array([0.9 ** (i + 1)], "float32") for i in range(len(sizes))],
            [np.array([0.999 ** (i + 1)], "float32") for i in range(len(sizes))],
        ]
    return [params, masters, grads, *states]


def copy_bucket(lists, empty, misaligned=MISALIGNED):
    """The bucket copied into arrays made by ``empty(n, dtype)``, tensors ``misaligned`` offset.

    NOTE: ``out[...] = a`` is wrong for a CuPy ``out``: CuPy refuses to convert a NumPy array
    implicitly (TypeError), so each array is moved to ``out``'s place first (no copy on the CPU).
    """

    def copy(a, i):
        if a is None:
            return None
        offset = 1 if i in misaligned and a.size else 0
        out = empty(a.size + offset, a.dtype)[offset:]
        out[...] = _device.to_place(a, _device.place_of(out))
        return out

    return [[copy(a, i) for i, a in enumerate(arrays)] for arrays in lists]


def call(kind, lists, found_inf, lr=LR):
    """One fused update of ``kind`` over the bucket, with per-tensor lr ratios, L2 and decay.

    ``lr`` is the base learning rate: a Python float, or a float64 array of shape [1] (the
    optimizer's device buffer, as the kernel reads it).
    """
    family, kw = KINDS[kind]
    n = len(lists[0])
    ratios = [1 + i % 3 for i in range(n)]
    l2 = [kw.get("l2", 0.0) if i % 2 else 0.0 for i in range(n)]
    if family == "sgd":
        fused_optim.fused_sgd(*lists[:3], lr, found_inf, lr_ratios=ratios, l2_coeffs=l2)
    elif family == "momentum":
        fused_optim.fused_momentum(
            *lists[:4], lr, found_inf, momentum=kw["momentum"],
            use_nesterov=kw.get("nesterov", False), lr_ratios=ratios, l2_coeffs=l2,
            grad_scales=[0.5] * n,
        )  # fmt: skip
    else:
        decay = [kw.get("decay", 0.0) if i % 4 < 2 else 0.0 for i in range(n)]
        fused_optim.fused_adam(
            *lists, lr, found_inf, beta1=0.9, beta2=0.999, epsilon=1e-8, lr_ratios=ratios,
            decoupled_decay=decay, l2_coeffs=l2,
        )  # fmt: skip


def bits(a):
    a = np.asarray(a).view(np.ndarray)
    return a.view({2: np.uint16, 4: np.uint32}[a.itemsize]) if a.size else a


def flat_bits(lists):
    return [bits(_device.asnumpy(a)).copy() for arrays in lists for a in arrays if a is not None]


def flat(lists):
    return [np.array(_device.asnumpy(a)) for arrays in lists for a in arrays if a is not None]


@pytest.fixture(autouse=True)
def _numpy_arrays():
    """The twin is specified on NumPy arrays: new parameters go to the CPU on every machine."""
    mt.set_device("cpu")


# ---- the kernel on a CPU emulator -------------------------------------------------------------
@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    return emulated_gpu.build("optim_emulator.cpp", tmp_path_factory.mktemp("emulator"))


@pytest.fixture
def on_emulator(emulator, monkeypatch):
    """Route the launcher's CuPy calls and kernel launches to NumPy and the emulator."""
    return emulated_gpu.install(emulator, monkeypatch, "optim.cu", block=256)


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("ptype, gtype", DTYPES)
def test_the_kernel_equals_the_twin_bit_for_bit(kind, ptype, gtype, on_emulator):
    twin = host_bucket(kind, ptype, gtype)
    kernel = copy_bucket(twin, host_empty)
    assert fused_optim.update_path(kernel[0], kernel[2]) == "fused kernel"
    base_lr = np.array([LR]).view(HostArray)  # the optimizer's device buffer
    for _ in range(2):  # the second step reads the beta pows the first one advanced
        call(kind, twin, np.array([False]))
        call(kind, kernel, np.zeros(1, bool).view(HostArray), base_lr)  # not read: the kernel does
    chunks = sum(-(-k // fused_optim.CHUNK) for k in SIZES)  # none for the empty tensor
    assert on_emulator == [(on_emulator[0][0], (chunks,))] * 2
    for want, have in zip(flat_bits(twin), flat_bits(kernel)):
        np.testing.assert_array_equal(have, want)


@pytest.mark.parametrize("kind", ["momentum", "adamw_l2"])
def test_a_set_device_flag_leaves_everything_bit_identical(kind, on_emulator):
    kernel = copy_bucket(host_bucket(kind, "float16", "float16"), host_empty)
    before = flat_bits(kernel)
    found_inf = np.ones(1, bool).view(HostArray)
    call(kind, kernel, found_inf)
    assert len(on_emulator) == 1  # launched: the kernel itself reads the flag and skips
    for want, have in zip(before, flat_bits(kernel)):
        np.testing.assert_array_equal(have, want)


def test_all_empty_tensors_still_advance_the_beta_pows(on_emulator):
    def empty(dtype):
        return [np.zeros(0, dtype).view(HostArray) for _ in range(2)]

    pows = [[np.array([b], "float32").view(HostArray) for _ in range(2)] for b in (0.9, 0.999)]
    fused_optim.fused_adam(
        empty("float16"), [None, None], empty("float16"), empty("float32"), empty("float32"),
        *pows, LR, False, beta1=0.9, beta2=0.999, epsilon=1e-8,
    )  # fmt: skip
    assert on_emulator == [("adam_step<__half, __half>", (1,))]
    assert [float(p[0]) for p in pows[0]] == [np.float32(np.float32(0.9) * np.float32(0.9))] * 2


@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
@pytest.mark.parametrize("mp", [True, False])
def test_an_optimizer_step_through_the_kernel_equals_the_per_param_loop(kind, mp, on_emulator):
    """Optimizer.step() on "device" arrays: fused_step -> _fused_update -> the kernel."""
    results = []
    for device in (False, True):
        params = make_params(("float16", "float32"))
        if device:
            for p in params:
                p._data = np.array(p._data).view(HostArray)
        opt = OPTIMIZERS[kind](params, mp)
        reset_cast_counts()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # float16 without masters warns
            for step in range(3):
                set_grads(params, step)
                if device:
                    for p in params:
                        p.grad = p.grad._data.view(HostArray)
                    if step == 2:  # a skipped step: the kernel reads the flag
                        opt._set_auxiliary_var("found_inf", np.ones(1, bool).view(HostArray))
                elif step == 2:
                    opt._set_auxiliary_var("found_inf", np.ones(1, bool))
                opt.step()
        results.append((snapshot(opt, params), cast_counts()["optimizer"]))
    assert on_emulator and len(on_emulator) % 3 == 0  # per dtype bucket and step, skip included
    assert_same(results[1][0], results[0][0])
    # NOTE: the host cannot know a device flag, so the skipped step's casts are counted too.
    assert results[1][1] == results[0][1] * 3 // 2 == (3 * 5 if mp else 0)


def assert_bitwise(have, want):
    """Equal bits, except that any NaN matches any NaN (payloads differ between converters)."""
    nan = np.isnan(want.astype("float32"))
    np.testing.assert_array_equal(np.isnan(have.astype("float32")), nan)
    np.testing.assert_array_equal(bits(have)[~nan], bits(want)[~nan])


halves = st.sampled_from([0.0, -0.0, 6e-8, 1e-4, 0.3, 1.0, 1000.0, 60000.0])


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])  # the fakes are reusable
@given(
    kind=st.sampled_from(sorted(KINDS)),
    dtypes=st.sampled_from(DTYPES),
    sizes=st.lists(st.integers(0, 70_000) | st.integers(0, 9), min_size=1, max_size=5),
    lr=st.floats(1e-6, 10.0),
    scales=st.lists(halves, min_size=2, max_size=2),
    misalign=st.booleans(),
)
def test_random_buckets_and_edge_values(kind, dtypes, sizes, lr, scales, misalign, on_emulator):
    twin = host_bucket(kind, *dtypes, seed=len(sizes), sizes=sizes)
    with np.errstate(all="ignore"):  # float16 overflow to inf is part of the test
        for p, g in zip(twin[0], twin[2]):  # some large, tiny and signed-zero values
            p[::3] *= np.asarray(scales[0], p.dtype)
            g[::5] = scales[1]
        kernel = copy_bucket(twin, host_empty, misaligned=(0,) if misalign else ())
        call(kind, twin, np.array([False]), lr)
    call(kind, kernel, np.zeros(1, bool).view(HostArray), lr)
    for have, want in zip(flat(kernel), flat(twin)):
        assert_bitwise(have, want)


# ---- the table stays on the device: no upload after the first step ----------------------------
@pytest.mark.parametrize("kind", ["sgd", "momentum_l2_rescale", "adam", "adamw"])
def test_after_the_first_step_the_kernel_path_uploads_nothing(kind, on_emulator, monkeypatch):
    """Steps through the kernel with the same parameters and gradient buffers reuse their
    table; a scheduler's new rate goes into the lr buffer (a fill, not an upload), and the
    result is still the per-parameter loop's, bit for bit."""
    from minitorch_amp.backend import kernels as _kernels
    from minitorch_amp.device import SyncError, sync_debug_mode

    monkeypatch.setattr(_kernels, "_tables", type(_kernels._tables)())  # none cached yet
    uploads, real, now = [], _kernels._sync.upload, {}
    monkeypatch.setattr(
        _kernels._sync, "upload", lambda what: (uploads.append((now["step"], what)), real(what))
    )
    results = []
    for device in (False, True):
        params = make_params(("float16", "float32"))
        if device:
            for p in params:
                p._data = np.array(p._data).view(HostArray)
        scheduler = mt.optimizer.lr.StepDecay(learning_rate=LR, step_size=1, gamma=0.5)
        opt = OPTIMIZERS[kind](params, True)
        opt.set_lr_scheduler(scheduler)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for step in range(4):
                buffers = [p._grad for p in params]
                set_grads(params, step)
                for p, buffer in zip(params, buffers):  # new values, in the same buffers
                    if buffer is None:
                        p.grad = p.grad._data.view(HostArray) if device else p.grad
                    else:  # as backward would write them: device values, no upload
                        fresh = p._grad._data
                        buffer._data[...] = fresh.view(HostArray) if device else fresh
                        p._grad = buffer
                now["step"] = step
                with sync_debug_mode("error" if step else "default"):
                    opt.step()
                scheduler.step()
        results.append(snapshot(opt, params))
    assert_same(results[1], results[0])
    # the device run uploaded one table per dtype bucket, in its first step only
    assert uploads == [(0, "a multi-tensor kernel table")] * 2
    assert len(on_emulator) == 4 * 2  # one launch per dtype bucket and step
    # a step with new gradient buffers needs a new table: "error" mode catches the upload
    for p in params:
        p.grad = (p.grad._data * 1).view(HostArray)
    with sync_debug_mode("error"), pytest.raises(SyncError, match="kernel table"):
        opt.step()
