"""``cuda/fp8_scale.cu``: the delayed-scaling update in one launch, bit for bit its twin
(``amp/fp8/scaling.py``'s ``update_amax_history_and_scale``), on a CPU emulator.

The emulator (``tests/fp8_scale_emulator.cpp`` on ``tests/cuda_emulator.h``, under the
flush-to-zero CuPy compiles kernels with) runs the kernel file unchanged, fed by the real
launcher (``backend/fp8_scale.py``) around NumPy arrays posing as CuPy ones. Checked here:
the history, the scale, its inverse and the inverse the cast used, for histories of 1 to
1030 entries holding NaN, inf, zeros, subnormal and negative amaxes, margins from 0 to 200,
both algorithms, this step's amax in the history or in a slot; the launcher refuses bad
arguments before writing anything. ``test_fp8_scale_state.py`` runs ``ScalingState.cast``
on these emulators, ``test_fp8_scale_gpu.py`` holds a GPU to the same twin.
"""

from __future__ import annotations

import re

import emulated_gpu
import numpy as np
import pytest
from emulated_gpu import HostArray

from minitorch_amp.amp.fp8.scaling import update_amax_history_and_scale
from minitorch_amp.backend import device, fp8_scale, kernels, nvrtc
from minitorch_amp.utils import kernel_check

FP8_MAXES = {"e4m3": 448.0, "e5m2": 57344.0}
SUBNORMALS = np.float32([1e-45, 1e-40, 2.0**-127, np.nextafter(np.float32(2.0**-126), 0)])
SPECIALS = np.float32(
    [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, -3.0, 2.0**-126, 3e38, 1.0, *SUBNORMALS]
)
# a NaN with a payload and a signalling one: their bits must travel through the rotation
ODD_NANS = np.array([0x7FC12345, 0xFFA00001], np.uint32).view(np.float32)


@pytest.fixture(scope="module")
def emulators(tmp_path_factory):
    directory = tmp_path_factory.mktemp("emulator")
    return {
        "fp8_cast.cu": emulated_gpu.build("fp8_cast_emulator.cpp", directory),
        "fp8_scale.cu": emulated_gpu.build("fp8_scale_emulator.cpp", directory),
    }


@pytest.fixture
def on_emulator(emulators, monkeypatch):
    """CuPy played by NumPy, each kernel file by its emulator; the list of (file, name)
    launched."""
    routes, launches = {}, []
    for file, emulator in emulators.items():
        emulated_gpu.install(emulator, monkeypatch, file, block=256)
        routes[file] = kernels.launch

    def launch(file, name, grid, block, args, shared_mem=0):
        launches.append((file, name))
        routes[file](file, name, grid, block, args, shared_mem)

    monkeypatch.setattr(kernels, "launch", launch)
    fake = device.cupy
    fake.empty = garbage
    fake.ones = lambda n, dtype: np.ones(n, dtype).view(HostArray)
    for name in ("isinf", "isfinite", "roll", "abs"):  # the twin's ops, on "CuPy"
        setattr(fake, name, getattr(np, name))
    fake.where = device_where
    return launches


def device_where(*args):
    """np.where that keeps its device arrays' type (as cupy.where returns a CuPy array)."""
    kind = next(type(a) for a in args if isinstance(a, HostArray))
    if hasattr(kind, "record"):  # test_fp8_scale_state.py's CountingArray
        kind.record("where")
    return np.where(*(np.asarray(a) if isinstance(a, HostArray) else a for a in args)).view(kind)


def garbage(shape, dtype) -> HostArray:
    """An uninitialised device array, filled with a pattern a kernel must overwrite."""
    out = np.empty(shape, dtype)
    out.view(np.uint8)[...] = 0x5A
    return out.view(HostArray)


def on_device(a) -> HostArray:
    out = np.empty(np.shape(a), np.asarray(a).dtype).view(HostArray)
    out[...] = np.asarray(a).view(HostArray)
    return out


def host(a) -> np.ndarray:
    return np.asarray(a).view(np.ndarray)


def assert_bits(got, want, where=""):
    """The very bits, NaN payloads included."""
    got, want = host(got), host(want)
    assert got.dtype == want.dtype == np.float32 and got.shape == want.shape, where
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), err_msg=where)


def kernel_against_twin(history, scale, scale_inv, fp8_max, margin, algo, slot=False):
    """Run the launcher on device copies and the twin on NumPy ones; compare everything.
    With ``slot``, the kernel reads this step's amax (``history[0]``) from a slot of its
    own, and finds a stale amax in the history's entry 0, which it must ignore."""
    state = [np.asarray(v, np.float32).copy() for v in (history, scale, scale_inv)]
    want = [v.copy() for v in state]
    got = [on_device(v) for v in state]
    amax = None
    if slot:
        amax = on_device(state[0][:1])
        got[0][0] = np.float32(1e30)  # stale: what a loaded state may hold there
    used = fp8_scale.update(*got, fp8_max, margin, algo, amax=amax)
    update_amax_history_and_scale(*want, fp8_max, margin, algo)
    where = f"n={len(state[0])} margin={margin} {algo} scale={state[1]} slot={slot}"
    if slot:
        assert host(amax).view(np.uint32).tolist() == [0], where + " (the slot, zeroed)"
    assert_bits(used, state[2], where + " (the inverse the cast used)")
    for label, g, w in zip(("history", "scale", "scale_inv"), got, want):
        assert_bits(g, w, f"{where}: {label}")
    return got


def history_of(n: int, rng, plant) -> np.ndarray:
    """Amaxes over many binades, with the values of ``plant`` at random places."""
    h = (rng.random(n) * 2.0 ** rng.integers(-30, 30, n)).astype(np.float32)
    spots = rng.choice(n, min(n, len(plant)), replace=False)
    h[spots] = plant[: len(spots)]
    return h


# ---- the kernel on the emulator against the twin ----------------------------------------------
@pytest.mark.parametrize("slot", [False, True], ids=["amax in the history", "amax in a slot"])
@pytest.mark.parametrize("algo", ["max", "most_recent"])
@pytest.mark.parametrize("n", [1, 16, 255, 256, 257, 1024, 1030])
def test_the_update_is_the_twins_bits_for_histories_with_special_amaxes(n, algo, slot, on_emulator):
    rng = np.random.default_rng(n)
    for special in SPECIALS:
        for margin in (0, 1, 3):
            h = history_of(n, rng, [special])
            if rng.random() < 0.5:
                h[0] = special  # this step's amax: the entry 'most_recent' reads
            kernel_against_twin(h, [0.75], [4 / 3], FP8_MAXES["e4m3"], margin, algo, slot)
    assert on_emulator == [("fp8_scale.cu", fp8_scale.NAME)] * (len(SPECIALS) * 3)


@pytest.mark.parametrize("fp8_max", FP8_MAXES.values(), ids=FP8_MAXES)
@pytest.mark.parametrize("margin", [0, 0.5, 7, 10, 140, 200])
def test_subnormal_amaxes_and_numerators_are_not_flushed(fp8_max, margin, on_emulator):
    """Under -ftz a float32 compare would read a subnormal amax as 0 and keep the old scale,
    a float32 division would flush a subnormal quotient or numerator (margin 140): the
    twin keeps them all."""
    for amax in [*SUBNORMALS, np.float32(2.0**-126), np.float32(3e38), np.float32(1e30)]:
        for algo in ("max", "most_recent"):
            got = kernel_against_twin([amax, 0.0, 1e-45], [0.75], [4 / 3], fp8_max, margin, algo)
    assert host(got[1])[0] != np.float32(0.75)  # (the last case's scale did change)


@pytest.mark.parametrize(
    "old_scale",
    [0.0, -0.0, 1e-40, 1e-45, -2.0, np.inf, np.nan, *ODD_NANS, 3e38, 2.0**-127],
    ids=str,
)
def test_a_kept_scale_and_its_inverse_are_the_twins_bits(old_scale, on_emulator):
    """Where the amax is unusable the old scale stays (from a checkpoint: anything); its
    inverse 1 / scale is rounded once: inf for 0, a subnormal for 3e38, the NaN quietened."""
    for amax in (np.nan, np.inf, 0.0, -1.0):
        kernel_against_twin([amax, 2.0], [old_scale], [0.5], 448.0, 0, "most_recent")
        kernel_against_twin([amax, np.nan], [old_scale], [0.5], 448.0, 0, "max")


@pytest.mark.parametrize("n", [1, 2, 255, 256, 257, 513, 1024, 1030])
def test_the_rotation_moves_every_entry_down_one_and_zeroes_the_first(n, on_emulator):
    h = np.arange(1, n + 1, dtype=np.float32)
    h[n // 2] = ODD_NANS[0]  # its bits travel too
    got = kernel_against_twin(h, [1.0], [1.0], 448.0, 0, "max")
    want = np.roll(h, -1)
    want[0] = 0.0
    assert_bits(got[0], want)


def test_the_inverse_the_cast_used_is_copied_before_the_update(on_emulator):
    scale, scale_inv = on_device(np.float32([2.0])), on_device(np.float32([0.5]))
    history = on_device(np.float32([14.0, 7.0]))
    used = fp8_scale.update(history, scale, scale_inv, 448.0, 0, "max")
    assert host(used).tolist() == [0.5] and used is not scale_inv
    assert host(scale).tolist() == [32.0] and host(scale_inv).tolist() == [1 / 32]


# ---- bad arguments ------------------------------------------------------------------------------
def f32(*shape) -> HostArray:
    return on_device(np.ones(shape, np.float32))


BAD_ARGUMENTS = [
    ({"algo": "mean"}, ValueError, "algo must be 'max' or 'most_recent'"),
    ({"margin": -1}, ValueError, "margin must be a number >= 0"),
    ({"fp8_max": True}, ValueError, "fp8_max must be a number >= 0"),
    ({"history": on_device(np.zeros(3))}, TypeError, "amax_history must be float32"),
    ({"history": f32(2, 2)}, ValueError, "1-D with >= 1 entry"),
    ({"history": f32(0)}, ValueError, "1-D with >= 1 entry"),
    ({"history": f32(8)[::2]}, ValueError, "must be C-contiguous"),
    ({"scale": f32(2)}, ValueError, "scale must have shape [1]"),
    ({"scale_inv": np.ones(1, np.float32)}, ValueError, "on amax_history's device"),
    ({"scale": on_device(np.ones(1, np.float16))}, TypeError, "scale must be float32"),
    ({"amax": f32(2)}, ValueError, "amax must have shape [1]"),
    ({"amax": np.zeros(1, np.float32)}, ValueError, "amax must be on amax_history's device"),
]


@pytest.mark.parametrize("bad, error, message", BAD_ARGUMENTS, ids=lambda v: str(v)[:40])
def test_bad_arguments_are_refused_before_anything_is_written(bad, error, message, on_emulator):
    args = {
        "history": on_device(np.float32([3.0, 1.0, 2.0])),
        "scale": on_device(np.float32([2.0])),
        "scale_inv": on_device(np.float32([0.5])),
        "fp8_max": 448.0,
        "margin": 0,
        "algo": "max",
        "amax": on_device(np.float32([5.0])),
    }
    args.update(bad)
    before = {k: host(v).copy() for k, v in args.items() if isinstance(v, np.ndarray)}
    with pytest.raises(error, match=re.escape(message)):
        fp8_scale.update(*args.values())
    for key, value in before.items():
        np.testing.assert_array_equal(host(args[key]), value)
    assert on_emulator == []


def test_numpy_arrays_are_sent_to_the_twin():
    state = [np.float32([3.0]), np.float32([1.0]), np.float32([1.0])]
    with pytest.raises(TypeError, match="update_amax_history_and_scale"):
        fp8_scale.update(*state, 448.0, 0, "max")


# ---- the kernel check and the kernel file --------------------------------------------------------
def test_the_kernel_check_passes_on_the_emulator(on_emulator):
    assert kernel_check.CHECKS["fp8_scale.cu"](on_device, host)
    assert ("fp8_scale.cu", fp8_scale.NAME) in on_emulator


def test_the_casts_kernel_check_runs_delayed_casts_with_their_update_on_the_emulator(
    on_emulator,
):
    assert kernel_check.CHECKS["fp8_cast.cu"](on_device, host)
    names = [name for _, name in on_emulator]
    assert "cast_transpose_fp8_amax<float>" in names and "cast_fp8_amax<float>" in names
    assert ("fp8_scale.cu", fp8_scale.NAME) not in on_emulator  # the update ran in the casts


def test_the_launcher_and_the_kernel_agree_on_the_block_size():
    source = kernels.REGISTRY[fp8_scale.FILE].source()
    assert f"constexpr int kScaleThreads = {fp8_scale._THREADS};" in source
    # the casts run the same update in their last block: their blocks are as wide
    cast_source = kernels.REGISTRY["fp8_cast.cu"].source()
    assert f"constexpr int kThreads = {fp8_scale._THREADS};" in cast_source
    assert kernels.REGISTRY[fp8_scale.FILE].names == (fp8_scale.NAME,)


def test_no_float32_compare_or_division_reaches_the_ptx_under_ftz(nvrtc_available):
    """CuPy's -ftz=true flushes float32 subnormals in every f32 compare and division: the
    kernel compares bits and divides exact doubles instead."""
    entry = kernels.REGISTRY[fp8_scale.FILE]
    options = (*entry.all_options(), "-ftz=true")
    result = nvrtc.compile_source(entry.source(), entry.file, options, entry.names, "compute_80")
    ptx = result["ptx"]
    assert "div.rn.f64" in ptx
    assert not re.search(r"\b(div|setp|min|max)(\.\w+)*\.f32\b", ptx)
