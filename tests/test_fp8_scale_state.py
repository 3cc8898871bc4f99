"""``ScalingState.cast`` on an emulated GPU: a delayed cast is one launch (the cast folds its
amax into a slot of the state's own, and its last block runs ``cuda/fp8_scale.cu``'s update,
which moves it into the history and zeroes the slot; two launches where the amax is reduced
over ranks first, or the tensor is empty) and gives the NumPy path's bytes, scales and
histories over several steps, tensors of many blocks, a loaded state and a world of ranks
too; with raw kernels off the twin runs on the device. The emulators and helpers are
``test_fp8_scale_kernel.py``'s; ``test_fp8_scale_gpu.py`` holds a GPU to the same.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import test_fp8_scale_kernel as kernel_tests
from emulated_gpu import HostArray
from test_amp_kernels import assert_same_bits
from test_fp8_scale_kernel import assert_bits, host, on_device

from minitorch_amp.amp.fp8.recipe import DelayedScaling
from minitorch_amp.amp.fp8.scaling import ScalingState
from minitorch_amp.backend import comm, device, fp8_scale

emulators = kernel_tests.emulators  # the fixtures: both emulators built once per module
on_emulator = kernel_tests.on_emulator


def steps(dtype, seed: int) -> list[np.ndarray]:
    """Seven steps of one tensor: growth, a spike, a NaN, a subnormal one (its amax gives an
    inf quotient: float32's largest scale), and back."""
    rng = np.random.default_rng(seed)
    xs = [(rng.standard_normal((33, 17)) * 4.0**k).astype(np.float32) for k in range(3)]
    spike = xs[0] * 1e4
    nan_step = xs[1].copy()
    nan_step[3, 4] = np.nan
    tiny = np.full((5, 3), 1e-39, np.float32)  # subnormal in float32: an inf-capped scale
    return [x.astype(dtype) for x in (*xs, spike, nan_step, tiny, xs[2])]


@pytest.mark.parametrize("dtype", ["float32", "float16", ml_dtypes.bfloat16], ids=str)
@pytest.mark.parametrize(
    "recipe",
    [
        DelayedScaling(amax_history_len=4),
        DelayedScaling(margin=1, amax_history_len=3, amax_compute_algo="most_recent"),
        DelayedScaling(margin=3, amax_history_len=1),
        DelayedScaling(amax_history_len=1024, fp8_format="E4M3"),
    ],
    ids=["max-4", "most-recent-3", "margin-3-len-1", "max-1024"],
)
def test_scaling_state_cast_on_the_gpu_is_the_numpy_path_bit_for_bit(recipe, dtype, on_emulator):
    fp8_dtype = recipe.dtype(backward=recipe.margin == 1)  # most-recent-3: a gradient's E5M2
    gpu = ScalingState(recipe, fp8_dtype, device.cupy)
    cpu = ScalingState(recipe, fp8_dtype, np)
    assert type(gpu.amax_history) is HostArray
    for step, x in enumerate(steps(dtype, seed=len(recipe.amax_compute_algo))):
        on_emulator.clear()
        out, scale_inv = gpu.cast(on_device(x))
        want_out, want_scale_inv = cpu.cast(x)
        where = f"step {step}"
        np.testing.assert_array_equal(host(out).view(np.uint8), want_out.view(np.uint8), where)
        assert out.dtype == want_out.dtype
        assert_bits(scale_inv, want_scale_inv, where)
        for field in ("scale", "scale_inv", "amax_history"):
            # NOTE: a NaN amax keeps the payload the cast kernel gave it (fp8_cast.cu: a
            # float16 NaN widens to 0x7fffffff there, to 0x7fc00000 in NumPy): NaN-ness only
            assert_same_bits(getattr(gpu, field), getattr(cpu, field), f"{where}: {field}")
        assert on_emulator == [("fp8_cast.cu", f"cast_fp8_amax<{fp8_kernels_in_type(dtype)}>")]


@pytest.mark.parametrize("transpose", [False, True], ids=["cast", "cast and transpose"])
@pytest.mark.parametrize("algo", ["max", "most_recent"])
def test_a_cast_of_many_blocks_updates_once_after_the_last_block(transpose, algo, on_emulator):
    # 20,000 elements: 20 blocks (or 28 tiles); the spike sits in an early block, so an
    # update run before the last block had folded its amax would miss nothing here, but one
    # run by a block that is not the last would run too early or twice (the history rotates
    # once per cast, the counter is 0 again after each)
    recipe = DelayedScaling(amax_history_len=5, amax_compute_algo=algo)
    gpu = ScalingState(recipe, recipe.dtype(False), device.cupy)
    cpu = ScalingState(recipe, recipe.dtype(False), np)
    rng = np.random.default_rng(11)
    for step in range(4):
        x = (rng.standard_normal((200, 100)) * 2.0**step).astype(np.float32)
        x[-1, -1] = 3.0 * 2.0**step * (7 if step == 2 else 1)  # in the last block
        on_emulator.clear()
        if transpose:
            out, scale_inv, out_t = gpu.cast_transposed(on_device(x))
            np.testing.assert_array_equal(host(out_t), host(out).T)
        else:
            out, scale_inv = gpu.cast(on_device(x))
        want_out, want_scale_inv = cpu.cast(x)
        np.testing.assert_array_equal(host(out).view(np.uint8), want_out.view(np.uint8))
        assert_bits(scale_inv, want_scale_inv, f"step {step}")
        for field in ("scale", "scale_inv", "amax_history"):
            assert_bits(getattr(gpu, field), getattr(cpu, field), f"step {step}: {field}")
        ((file, name),) = on_emulator
        assert file == "fp8_cast.cu" and ("transpose" in name) == transpose
        assert host(gpu._blocks_done).tolist() == [0] and host(gpu._amax_slot).tolist() == [0.0]


def test_an_empty_tensor_launches_the_update_alone(on_emulator):
    # no block of a cast runs for an empty tensor: the update is its own launch, as before
    recipe = DelayedScaling(amax_history_len=3)
    gpu = ScalingState(recipe, recipe.dtype(False), device.cupy)
    cpu = ScalingState(recipe, recipe.dtype(False), np)
    for x in (np.float32([[2.0, -8.0]]), np.zeros((0, 4), np.float32), np.float32([[1.0]])):
        on_emulator.clear()
        gpu.cast(on_device(x))
        cpu.cast(x)
        for field in ("scale", "scale_inv", "amax_history"):
            assert_bits(getattr(gpu, field), getattr(cpu, field), field)
        if x.size == 0:
            assert on_emulator == [("fp8_scale.cu", fp8_scale.NAME)]


def test_a_state_loaded_with_an_amax_in_its_first_entry_casts_as_on_numpy(on_emulator):
    """A current-scaling checkpoint keeps the last amax in its one entry; resumed under
    DelayedScaling(amax_history_len=1) the NumPy path overwrites it with this step's amax:
    the GPU must not fold the two (max(100, 3) would be 100)."""
    recipe = DelayedScaling(amax_history_len=1)
    saved = [np.float32([2.0]), np.float32([0.5]), np.float32([100.0])]
    gpu = ScalingState.restored(*(on_device(a) for a in saved))
    cpu = ScalingState.restored(*(a.copy() for a in saved))
    for state in (gpu, cpu):  # as fp8_autocast takes a loaded state up (autocast._take_up)
        state.recipe, state.dtype = recipe, np.dtype(recipe.dtype(False))
    for step, x in enumerate([np.float32([[3.0, -1.0]]), np.float32([[0.5, 0.25]])]):
        out, scale_inv = gpu.cast(on_device(x))
        want_out, want_scale_inv = cpu.cast(x)
        np.testing.assert_array_equal(host(out).view(np.uint8), want_out.view(np.uint8))
        assert_bits(scale_inv, want_scale_inv, f"step {step}")
        for field in ("scale", "scale_inv", "amax_history"):
            assert_bits(getattr(gpu, field), getattr(cpu, field), f"step {step}: {field}")


def fp8_kernels_in_type(dtype) -> str:
    return {"float32": "float", "float16": "__half"}.get(str(np.dtype(dtype)), "__nv_bfloat16")


def test_without_raw_kernels_the_state_runs_the_twin_on_the_device(on_emulator, monkeypatch):
    monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", "0")
    recipe = DelayedScaling(amax_history_len=3)
    gpu, cpu = (ScalingState(recipe, recipe.dtype(False), xp) for xp in (device.cupy, np))
    for x in steps("float32", seed=2)[:3]:
        gpu.cast(on_device(x))
        cpu.cast(x)
    for field in ("scale", "scale_inv", "amax_history"):
        assert_bits(getattr(gpu, field), getattr(cpu, field), field)
    assert ("fp8_scale.cu", fp8_scale.NAME) not in on_emulator
    # the cast kernel runs either way (CuPy has no FP8); the fused cast's amax slot, which
    # carries the update into its last block, is never made
    assert gpu._amax_slot is None


# ---- launches per delayed cast -----------------------------------------------------------------
OPS: list[str] = []  # what CountingArray recorded


class CountingArray(HostArray):
    """A device array that records every array operation on it (each a CuPy launch or
    more on a GPU): ufuncs and reductions, NumPy functions, copies, casts, stores."""

    @staticmethod
    def record(op: str) -> None:
        OPS.append(op)

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        OPS.append(f"{ufunc.__name__}.{method}")
        if out is not None:
            kwargs["out"] = tuple(_plain(o) for o in out)
        return _counted(getattr(ufunc, method)(*map(_plain, inputs), **kwargs))

    def __array_function__(self, func, types, args, kwargs):
        OPS.append(func.__name__)
        return _counted(func(*map(_plain, args), **kwargs))

    def copy(self, *args, **kwargs):
        OPS.append("copy")
        return _counted(_plain(self).copy(*args, **kwargs))

    def astype(self, *args, **kwargs):
        OPS.append("astype")
        return _counted(_plain(self).astype(*args, **kwargs))

    def __setitem__(self, index, value):
        OPS.append("setitem")
        super().__setitem__(index, value)


def _plain(a):
    return a.view(np.ndarray) if isinstance(a, np.ndarray) else a


def _counted(a):
    return a.view(CountingArray) if isinstance(a, np.ndarray) else a


def launches_of_one_delayed_cast(on_emulator) -> tuple[list, list]:
    """(raw kernels launched, array operations on device arrays) by one delayed cast of a
    tensor on the emulated GPU, with the array operations counted."""

    def zeros(n, dtype):  # a fill: a launch on a GPU
        OPS.append("zeros")
        return _counted(np.zeros(n, dtype))

    device.cupy.zeros = zeros
    recipe = DelayedScaling(amax_history_len=16)
    state = ScalingState(recipe, recipe.dtype(False), np)
    state.amax_history, state.scale, state.scale_inv = (
        _counted(a) for a in (state.amax_history, state.scale, state.scale_inv)
    )
    x = _counted(np.linspace(-3, 5, 4096, dtype=np.float32))
    state.cast(x)  # a first step: it makes the state's amax slot (one zero fill)
    on_emulator.clear()
    OPS.clear()
    state.cast(x)
    return list(on_emulator), list(OPS)


def test_a_delayed_cast_on_the_gpu_is_one_launch_and_no_array_operation(on_emulator):
    kernels_launched, ops = launches_of_one_delayed_cast(on_emulator)
    assert [file for file, _ in kernels_launched] == ["fp8_cast.cu"]  # the update in it
    assert ops == []


def test_without_the_update_kernel_a_delayed_cast_is_a_launch_and_many_array_ops(
    on_emulator, monkeypatch
):
    """What the kernel replaces (and proof that the count above can fail): the cast, its
    amax's zero fill, the inverse's copy, the amax's store, and the update's operations."""
    monkeypatch.setenv("MINITORCH_AMP_RAW_KERNELS", "0")
    kernels_launched, ops = launches_of_one_delayed_cast(on_emulator)
    assert [file for file, _ in kernels_launched] == ["fp8_cast.cu"]
    assert len(ops) >= 15, ops


class TwoRanks:
    """A world of two ranks as reduce_amax sees it: the other rank's amax is ``other``."""

    size = 2

    def __init__(self, other: float):
        self.other, self.calls = np.float32(other), []

    def all_reduce(self, array, op, caller=""):
        self.calls.append((host(array).copy(), op, caller))
        array[...] = np.maximum(array, self.other)
        return array


def test_in_a_world_of_ranks_the_amax_in_the_history_is_all_reduced_before_the_update(
    on_emulator, monkeypatch
):
    world = TwoRanks(other=112.0)  # larger than this rank's 7: every rank takes 448 / 112
    monkeypatch.setattr(comm, "get_world", lambda: world)
    recipe = DelayedScaling(amax_history_len=4)
    state = ScalingState(recipe, recipe.dtype(False), device.cupy)
    on_emulator.clear()
    state.cast(on_device(np.float32([[7.0, -2.0]])))
    # the reduction comes between the cast and the update: two launches
    assert [file for file, _ in on_emulator] == ["fp8_cast.cu", "fp8_scale.cu"]
    ((seen, op, caller),) = world.calls
    assert seen.tolist() == [7.0] and op == comm.ReduceOp.MAX and caller == "fp8 amax"
    assert host(state.scale).tolist() == [4.0]
    assert host(state.amax_history).tolist() == [0.0, 0.0, 0.0, 112.0]


@pytest.mark.parametrize("where", ["numpy", "emulated gpu"])
def test_a_recipe_without_amax_reduction_keeps_this_ranks_scales(where, request, monkeypatch):
    """``DelayedScaling(reduce_amax=False)`` (TE's name): no all-reduce, so an FP8 region on
    some ranks only (an evaluation on rank 0) does not wait for the others; each rank's
    history holds its own amax. The default reduces (the test above)."""
    world = TwoRanks(other=112.0)
    monkeypatch.setattr(comm, "get_world", lambda: world)
    recipe = DelayedScaling(amax_history_len=4, reduce_amax=False)
    if where == "numpy":
        state, x = ScalingState(recipe, recipe.dtype(False), np), np.float32([[7.0, -2.0]])
    else:
        request.getfixturevalue("on_emulator")
        state = ScalingState(recipe, recipe.dtype(False), device.cupy)
        x = on_device(np.float32([[7.0, -2.0]]))
    state.cast(x)
    assert world.calls == []
    assert host(state.scale).tolist() == [64.0]  # 448 / 7: this rank's amax alone
    assert host(state.amax_history).tolist() == [0.0, 0.0, 0.0, 7.0]
    with pytest.raises(TypeError, match="reduce_amax must be True"):
        DelayedScaling(reduce_amax=1)
