"""cuda/amp.cu's kernels against their NumPy twins, bit for bit, on a CPU emulator.

The emulator (tests/amp_emulator.cpp, built on tests/cuda_emulator.h) runs the kernel file
unchanged, fed by the real launchers (``loss_scaling.unscale_and_check`` packing its chunk
table, ``inverse_scale`` and ``update_loss_scaling`` their arguments, around NumPy arrays
that pose as CuPy arrays), with float32 subnormals flushed to zero as CuPy's -ftz=true
flushes them on the GPU. So without a GPU the suite checks what test_amp_kernels.py checks
on one: every element's rounding (float16 products round to nearest even, ties included),
the vector and the element-by-element paths, the chunking, the block-wide OR that sets
found_inf, the inverse of every kind of float32 scale, and the update with its floor counter
over subnormal scales, ties and the int32 wrap.
"""

from __future__ import annotations

import struct

import emulated_gpu
import numpy as np
import pytest
from emulated_gpu import HostArray
from test_amp_kernels import (
    UPDATE_WALKS,
    assert_same_bits,
    inverse_scale_cases,
    update_both,
    update_walk,
)

from minitorch_amp.backend import loss_scaling
from minitorch_amp.backend.loss_scaling import inverse_scale, unscale_and_check

CHUNK = loss_scaling._CHUNK
# 0 (no chunk), tails under one 16-byte vector, exact vectors, and two chunks with a tail
SIZES = [0, 1, 3, 8, 9, 33, 1000, CHUNK + 17]


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    return emulated_gpu.build("amp_emulator.cpp", tmp_path_factory.mktemp("emulator"))


@pytest.fixture
def on_emulator(emulator, monkeypatch):
    return emulated_gpu.install(
        emulator, monkeypatch, "amp.cu", block=loss_scaling._UNSCALE_THREADS
    )


def on_device(a: np.ndarray, offset: int = 0) -> HostArray:
    """A copy of ``a`` in 'device' memory, starting ``offset`` elements into its buffer."""
    out = np.empty(a.size + offset, a.dtype)[offset:].view(HostArray)
    out[...] = a.view(HostArray)
    return out


def run_both(grads: list, inv: float, misaligned=()):
    """The twin and the emulated kernel on copies of ``grads``: (twin, kernel, flags)."""
    inv_scale = np.array([inv], np.float32)
    twin = [g.copy() for g in grads]
    found_twin = np.zeros(1, bool)
    unscale_and_check(twin, inv_scale, found_twin)
    kernel = [on_device(g, 1 if i in misaligned else 0) for i, g in enumerate(grads)]
    found_kernel = on_device(np.zeros(1, bool))
    unscale_and_check(kernel, inv_scale.view(HostArray), found_kernel)
    return twin, kernel, (bool(found_twin[0]), bool(found_kernel[0]))


def half_round_to_nearest_even(x: float) -> np.float16:
    """Python's struct 'e' format rounds to nearest, ties to even: an oracle independent of
    NumPy, of the twin and of cuda_fp16.h."""
    return np.frombuffer(struct.pack("<e", x), np.float16)[0]


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("inv", [2.0**-10, 1 / 3, 1 / 1000.0, 3.0])
def test_the_kernel_unscales_like_the_twin_bit_for_bit(dtype, inv, on_emulator):
    rng = np.random.default_rng(0)
    grads = [(rng.standard_normal(n) * 1000).astype(dtype) for n in SIZES]
    twin, kernel, (found_twin, found_kernel) = run_both(grads, inv, misaligned=(2, 4, 7))
    chunks = sum(-(-n // CHUNK) for n in SIZES)  # none for the empty tensor
    name = loss_scaling._UNSCALE_KERNELS[np.dtype(dtype)]
    assert on_emulator == [(name, (chunks,))]
    for i, (want, have) in enumerate(zip(twin, kernel)):
        assert_same_bits(have, want, f"tensor {i} of size {SIZES[i]}")
    assert found_twin is found_kernel is False


def test_float16_products_round_to_nearest_even_ties_included(on_emulator):
    """Every float16 value in [1, 2) times 1.5: of the 1024 products (exact in float32) 341 are
    float16 numbers, 342 lie exactly halfway between two (ties) and 341 a quarter of the way.
    Rounding toward zero, or ties away from zero, shows at once."""
    g = np.arange(0x3C00, 0x4000, dtype=np.uint16).view(np.float16)  # [1, 2), 1024 values
    twin, (kernel,), _ = run_both([g], 1.5)
    expected = np.array([half_round_to_nearest_even(float(v) * 1.5) for v in g])
    assert_same_bits(twin[0], expected, "the twin")
    assert_same_bits(kernel, expected, "the kernel")


@pytest.mark.parametrize("where", [0, 5, CHUNK + 3, CHUNK + 16])
@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan, 40000.0])
def test_one_bad_element_anywhere_sets_the_flag(where, bad, on_emulator):
    """inf, NaN, or a finite float16 that overflows only after the multiply (40000 * 2)."""
    g = np.ones(CHUNK + 17, np.float16)
    g[where] = bad
    twin, (kernel, _), (found_twin, found_kernel) = run_both([g, np.ones(9, np.float16)], 2.0)
    assert found_twin is found_kernel is True
    assert_same_bits(kernel, twin[0])


def test_a_set_flag_stays_set(on_emulator):
    """found_inf is only ever OR-ed: a clean bucket after a bad one leaves it set."""
    found = on_device(np.array([True]))
    unscale_and_check([on_device(np.ones(8, np.float32))], on_device(np.ones(1, np.float32)), found)
    assert bool(found[0])


def test_the_next_steps_same_gradients_reuse_their_plan_and_new_ones_get_their_own(
    on_emulator, monkeypatch
):
    """A step with the very same gradient arrays builds no table and reads no pointer; a
    step with one new array (same count, same sizes) is planned again, and both are right."""
    from minitorch_amp.backend import kernels

    built = []
    real = kernels.device_table
    monkeypatch.setattr(kernels, "device_table", lambda k, b: built.append(k) or real(k, b))
    rng = np.random.default_rng(5)
    host = [rng.standard_normal(n).astype(np.float16) for n in (5, 1000, 9)]
    device = [on_device(g) for g in host]
    for step in range(3):
        if step == 2:
            device[1] = on_device(host[1])  # a new buffer: a new pointer in the table
        for d, h in zip(device, host):
            d[...] = h.view(HostArray)
        twin = [h.copy() for h in host]
        unscale_and_check(twin, np.array([0.5], np.float32), np.zeros(1, bool))
        flag = on_device(np.zeros(1, bool))
        unscale_and_check(device, on_device(np.array([0.5], np.float32)), flag)
        for have, want in zip(device, twin):
            assert_same_bits(have, want)
    assert len(built) == 2 and built[0] != built[1]  # steps 0 and 2


# ---- the one-thread kernels: inverse_scale and update_loss_scaling -------------------------
@pytest.fixture
def one_thread(emulator, monkeypatch):
    return emulated_gpu.install(emulator, monkeypatch, "amp.cu", block=1)


def is_subnormal(x: np.ndarray) -> np.ndarray:
    return (x != 0) & (np.abs(x) < np.finfo(np.float32).tiny)


def test_the_inverse_of_every_kind_of_scale_has_the_twins_bits(one_thread):
    """Subnormal quotients (1 / 3e38) and subnormal scales are where -ftz bites: a kernel
    that writes ``(float)d`` flushes the first to 0, one that reads ``(double)scale`` turns
    the second into 1 / 0 = inf."""
    scales = inverse_scale_cases()
    twin = np.zeros_like(scales)
    for i in range(scales.size):
        inverse_scale(scales[i : i + 1], twin[i : i + 1])
    kernel = on_device(np.zeros_like(scales))
    for i in range(scales.size):
        inverse_scale(on_device(scales[i : i + 1]), kernel[i : i + 1])
    assert one_thread == [("inverse_scale", (1,))] * scales.size
    assert_same_bits(kernel, twin, "1 / scale")
    # the cases reach what they are for
    assert is_subnormal(twin).sum() > 300 and (is_subnormal(scales) & np.isfinite(twin)).any()
    assert np.signbit(twin[scales == -np.inf]).all() and np.isinf(twin[scales == 0]).all()


@pytest.mark.parametrize("was", [True, False])
def test_the_step_s_first_launch_inverts_the_scale_and_clears_found_inf(was, one_thread):
    """GradScaler.unscale_ starts each step with one launch, not a fill and an inverse."""
    for scale in (1024.0, 3e38, 0.0):
        twin, twin_flag = np.zeros(1, np.float32), np.array([was])
        inverse_scale(np.float32([scale]), twin, clear=twin_flag)
        kernel, flag = on_device(np.zeros(1, np.float32)), on_device(np.array([was]))
        inverse_scale(on_device(np.float32([scale])), kernel, clear=flag)
        assert_same_bits(kernel, twin, "1 / scale")
        assert not bool(flag[0]) and not bool(twin_flag[0])
    assert one_thread == [("inverse_scale_and_clear", (1,))] * 3


@pytest.mark.parametrize("walk", UPDATE_WALKS)
def test_the_update_walks_like_the_twin_under_ftz(walk, one_thread):
    longest_at_floor = update_walk(on_device, walk)
    assert one_thread == [("update_loss_scaling", (1,))] * 200
    if "floor" in walk or "2**-149" in walk:  # the walk reached its floor and counted there
        assert longest_at_floor >= 2


@pytest.mark.parametrize("overflow", [True, False])
def test_the_counters_wrap_like_numpy_int32(overflow, one_thread):
    """At 2**31 - 1, one more step gives -2**31 (signed overflow is undefined in C++)."""
    rule = dict(incr_every_n_steps=2**40, decr_every_n_nan_or_inf=2**40, incr_ratio=2.0,
                decr_ratio=0.5, min_loss_scaling=1.0)  # fmt: skip
    _, good, bad, at_floor = update_both(on_device, [overflow], 1.0, rule, (2**31 - 1,) * 3)
    wrapped = [bad[0], at_floor[0]] if overflow else [good[0]]
    assert wrapped == [-(2**31)] * len(wrapped)


def test_the_floor_counter_reads_the_scale_just_written(one_thread):
    """2 shrinks to the floor 1 in this step: counted now, not one overflow later."""
    rule = dict(incr_every_n_steps=5, decr_every_n_nan_or_inf=1, incr_ratio=2.0,
                decr_ratio=0.5, min_loss_scaling=1.0)  # fmt: skip
    scale, *_, at_floor = update_both(on_device, [True, True, False, True], 2.0, rule)
    assert (scale[0], at_floor[0]) == (1.0, 1)


# ---- scale_loss: GradScaler.scale's product and the factor its backward keeps ---------------
SCALE_LOSS_CASES = [  # (loss, scale): plain, a product that rounds, overflow, -ftz's flush
    (1.5, 1024.0), (0.1, 3.0), (3e38, 2.0), (2.0**-100, 2.0**-30), (-(2.0**-126), 0.75),
    (np.inf, 0.0), (np.nan, 1.0), (-0.0, 65536.0), (2.5, np.inf),
]  # fmt: skip


def test_scale_loss_writes_the_product_and_keeps_the_scale_in_one_launch(one_thread):
    for loss, scale in SCALE_LOSS_CASES:
        host_loss, host_scale = np.asarray(np.float32(loss)), np.float32([scale])
        with np.errstate(over="ignore", invalid="ignore"):
            want, want_factor = loss_scaling.scale_loss(host_loss, host_scale)
        want = np.where(is_subnormal(want), np.copysign(np.float32(0), want), want)  # -ftz
        one_thread.clear()
        device_scale = on_device(host_scale)
        got, factor = loss_scaling.scale_loss(on_device(host_loss).reshape(()), device_scale)
        assert one_thread == [("scale_loss", (1,))]
        assert got.shape == factor.shape == () and got.dtype == np.float32
        assert_same_bits(got, want, f"{loss} * {scale}")
        assert_same_bits(factor, want_factor, "the factor")
        device_scale[0] = 7.0  # update() writes the scale in place: the factor stays
        assert_same_bits(factor, want_factor, "the factor after an update")


def test_a_scaled_losss_backward_uses_the_scale_as_it_was(one_thread):
    """GradScaler.scale's op on the emulated GPU: one launch forward; its backward
    multiplies by the scale of the forward even if the scale changes before it."""
    from minitorch_amp.amp.scaled_loss import ScaleLoss
    from minitorch_amp.autograd.dispatch import apply
    from minitorch_amp.autograd.tensor import Tensor

    loss = Tensor._wrap(on_device(np.float32([0.375])).reshape(()))
    loss.stop_gradient = False
    scale = Tensor._wrap(on_device(np.float32([1024.0])))
    scaled = apply(ScaleLoss, loss, scale)
    assert one_thread == [("scale_loss", (1,))]
    assert float(scaled._data) == 384.0
    scale._data[0] = 2.0  # an update() before backward()
    scaled.backward()
    assert float(loss.grad._data) == 1024.0 and scale.grad is None
