"""``cuda/fp8_scale.cu`` on a GPU: the delayed-scaling update bit for bit its NumPy twin
(``update_amax_history_and_scale`` on NumPy arrays), and ``ScalingState.cast`` on CuPy
arrays equal to the NumPy path over several steps: the checks ``test_fp8_scale_kernel.py``
and ``test_fp8_scale_state.py`` run on the CPU emulator, here with the real ``-ftz`` and
the real loader. Skipped without CuPy and a device (the ``gpu`` marker).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from test_amp_kernels import assert_same_bits
from test_fp8_scale_kernel import FP8_MAXES, ODD_NANS, SPECIALS, SUBNORMALS, history_of
from test_fp8_scale_state import steps

from minitorch_amp.amp.fp8.recipe import DelayedScaling
from minitorch_amp.amp.fp8.scaling import ScalingState, update_amax_history_and_scale
from minitorch_amp.backend import device, fp8_scale

pytestmark = pytest.mark.gpu


@pytest.fixture
def cp(monkeypatch):
    if device.cupy is None:
        pytest.skip("needs CuPy and a CUDA device")
    monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", "1")
    return device.cupy


def assert_bits(got, want, where=""):
    """The very bits, NaN payloads included (the kernel moves NaNs as bits)."""
    got, want = device.asnumpy(got), np.asarray(want)
    assert got.dtype == want.dtype == np.float32 and got.shape == want.shape, where
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), err_msg=where)


def gpu_against_twin(cp, history, scale, scale_inv, fp8_max, margin, algo, slot=False):
    """As test_fp8_scale_kernel.kernel_against_twin: with ``slot``, this step's amax comes in
    a slot of its own and the history's entry 0 holds a stale one."""
    state = [np.asarray(v, np.float32).copy() for v in (history, scale, scale_inv)]
    want = [v.copy() for v in state]
    got = [cp.asarray(v) for v in state]
    amax = None
    if slot:
        amax = cp.asarray(state[0][:1])
        got[0][0] = np.float32(1e30)  # stale: what a loaded state may hold there
    used = fp8_scale.update(*got, fp8_max, margin, algo, amax=amax)
    update_amax_history_and_scale(*want, fp8_max, margin, algo)
    where = f"n={len(state[0])} margin={margin} {algo} scale={state[1]} slot={slot}"
    if slot:
        assert device.asnumpy(amax).view(np.uint32).tolist() == [0], where
    assert_bits(used, state[2], where + " (the inverse the cast used)")
    for label, g, w in zip(("history", "scale", "scale_inv"), got, want):
        assert_bits(g, w, f"{where}: {label}")


@pytest.mark.parametrize("slot", [False, True], ids=["amax in the history", "amax in a slot"])
@pytest.mark.parametrize("algo", ["max", "most_recent"])
@pytest.mark.parametrize("n", [1, 16, 257, 1024, 1030, 5000])
def test_the_update_on_the_gpu_is_the_twins_bits(cp, n, algo, slot):
    rng = np.random.default_rng(n)
    for special in [*SPECIALS, *ODD_NANS]:
        for margin in (0, 1, 3, 10, 140):
            h = history_of(n, rng, [special])
            if rng.random() < 0.5:
                h[0] = special  # this step's amax: the entry 'most_recent' reads
            gpu_against_twin(cp, h, [0.75], [4 / 3], FP8_MAXES["e4m3"], margin, algo, slot)


@pytest.mark.parametrize("old_scale", [0.0, -0.0, 1e-40, -2.0, np.inf, np.nan, *ODD_NANS, 3e38])
def test_a_kept_scale_and_its_inverse_are_the_twins_bits_on_the_gpu(cp, old_scale):
    for amax in (np.nan, np.inf, 0.0, -1.0, *SUBNORMALS):
        for algo in ("max", "most_recent"):
            gpu_against_twin(cp, [amax, 0.0], [old_scale], [0.5], 57344.0, 10, algo)


@pytest.mark.parametrize("dtype", ["float32", "float16", ml_dtypes.bfloat16], ids=str)
@pytest.mark.parametrize(
    "recipe",
    [
        DelayedScaling(amax_history_len=4),
        DelayedScaling(margin=1, amax_history_len=3, amax_compute_algo="most_recent"),
        DelayedScaling(amax_history_len=1024),
    ],
    ids=["max-4", "most-recent-3", "max-1024"],
)
def test_scaling_state_cast_on_the_gpu_is_the_numpy_path(cp, recipe, dtype):
    if dtype is ml_dtypes.bfloat16:
        reason = device.bfloat16_unsupported(device.Place("gpu", 0))
        if reason is not None:
            pytest.skip(reason)
    fp8_dtype = recipe.dtype(backward=recipe.margin == 1)  # most-recent-3: a gradient's E5M2
    gpu = ScalingState(recipe, fp8_dtype, cp)
    cpu = ScalingState(recipe, fp8_dtype, np)
    for step, x in enumerate(steps(dtype, seed=3)):
        out, scale_inv = gpu.cast(cp.asarray(x))
        want_out, want_scale_inv = cpu.cast(x)
        where = f"step {step}"
        got_out = device.asnumpy(out.view(np.uint8))
        np.testing.assert_array_equal(got_out, want_out.view(np.uint8), err_msg=where)
        assert_bits(scale_inv, want_scale_inv, where)
        for field in ("scale", "scale_inv", "amax_history"):
            # a NaN amax keeps the cast kernel's payload: NaN-ness only (test_fp8_scale_kernel)
            assert_same_bits(getattr(gpu, field), getattr(cpu, field), f"{where}: {field}")


@pytest.mark.parametrize("transpose", [False, True], ids=["cast", "cast and transpose"])
def test_a_cast_of_thousands_of_blocks_runs_its_update_once_after_all_of_them(cp, transpose):
    # the update runs in the cast's last block to finish (cuda/fp8_cast.cu): on a GPU the
    # blocks run at once, so a block that ran it too early would miss others' amaxes; the
    # spike moves between steps, the counter is back at 0 after each launch
    recipe = DelayedScaling(amax_history_len=6)
    gpu = ScalingState(recipe, recipe.dtype(False), cp)
    cpu = ScalingState(recipe, recipe.dtype(False), np)
    rng = np.random.default_rng(12)
    for step in range(6):
        x = rng.standard_normal((2048, 3000)).astype(np.float32)  # 4096 blocks; 12,000 tiles
        x.reshape(-1)[rng.integers(x.size)] = 300.0 * (step + 1)
        if transpose:
            out, scale_inv, out_t = gpu.cast_transposed(cp.asarray(x))
            got_t = device.asnumpy(out_t.view(np.uint8))
            np.testing.assert_array_equal(got_t, device.asnumpy(out.view(np.uint8)).T)
        else:
            out, scale_inv = gpu.cast(cp.asarray(x))
        want_out, want_scale_inv = cpu.cast(x)
        got = device.asnumpy(out.view(np.uint8))
        np.testing.assert_array_equal(got, want_out.view(np.uint8), err_msg=f"step {step}")
        assert_bits(scale_inv, want_scale_inv, f"step {step}")
        for field in ("scale", "scale_inv", "amax_history"):
            assert_bits(getattr(gpu, field), getattr(cpu, field), f"step {step}: {field}")
        assert device.asnumpy(gpu._blocks_done).tolist() == [0]
