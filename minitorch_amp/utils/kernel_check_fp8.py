"""Kernel checks of the FP8 casts (``fp8_cast.cu``) and the delayed-scaling update
(``fp8_scale.cu``) that go through the scaling state (``amp.fp8.scaling``): the update on
histories with special amaxes, and delayed casts whose last block runs the update, each
against the same on NumPy, bit for bit. :mod:`minitorch_amp.utils.kernel_check` runs them
with the others (``to_device`` / ``to_host`` as there; NumPy on both sides in the tests).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..backend import fp8_kernels

Move = Callable[[np.ndarray], object]

__all__ = ["cast_matches", "scale_update_matches"]


def bits(array) -> np.ndarray:
    """The array's bytes as unsigned integers of its item size."""
    array = np.asarray(array)
    return array.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[array.itemsize])


def scale_update_matches(to_device: Move, to_host: Move) -> bool:
    """Histories of 1, 16 and 1030 entries (past one block's stride) holding a NaN, inf, 0,
    a subnormal or an ordinary largest amax, both algorithms, margins 0 and 10, updated by
    ``update_amax_history_and_scale`` (the kernel on a GPU): the history, the scale and its
    inverse are the bits it gives on NumPy."""
    from ..amp.fp8.scaling import update_amax_history_and_scale as update

    rng = np.random.default_rng(0)
    same = True
    for n in (1, 16, 1030):
        for special in np.float32([np.nan, np.inf, 0.0, 1e-40, 1e30]):
            history = (rng.random(n) * 100).astype(np.float32)
            history[rng.integers(n)] = special
            for algo, margin in (("max", 0), ("max", 10), ("most_recent", 0)):
                want = [history.copy(), np.float32([0.75]), np.float32([4 / 3])]
                got = [to_device(a) for a in want]
                update(*got, 448.0, margin, algo)
                update(*want, 448.0, margin, algo)
                same = same and all(
                    np.array_equal(bits(to_host(a)), bits(b)) for a, b in zip(got, want)
                )
    return same


def cast_matches(to_device: Move, to_host: Move) -> bool:
    """``fp8_kernels.check_cast`` (every float16 value, both formats and overflow modes),
    then five delayed casts of a [300, 70] tensor (21 blocks; 30 tiles when transposed)
    through a scaling state on the device and one on NumPy: the bytes, and the history,
    scale and inverse that the cast's last block updated, are NumPy's."""
    from ..amp.fp8.recipe import DelayedScaling
    from ..amp.fp8.scaling import ScalingState

    if not fp8_kernels.check_cast(to_device, to_host):
        return False
    recipe = DelayedScaling(amax_history_len=4)
    start = (np.float32([1.0]), np.float32([1.0]), np.zeros(4, np.float32))
    on_device = ScalingState.restored(*(to_device(a.copy()) for a in start))
    on_host = ScalingState.restored(*(a.copy() for a in start))
    for state in (on_device, on_host):  # as fp8_autocast takes a loaded state up
        state.recipe, state.dtype = recipe, np.dtype(recipe.dtype(False))
    rng = np.random.default_rng(1)
    same = True
    for step in range(5):
        x = (rng.standard_normal((300, 70)) * 4.0**step).astype(np.float32)
        want, _ = on_host.cast(x)
        if step % 2:  # the transposing cast on odd steps
            out, _, out_t = on_device.cast_transposed(to_device(x))
            got_t = np.asarray(to_host(out_t.view(np.uint8)))
            same = same and np.array_equal(got_t, want.view(np.uint8).T)
        else:
            out, _ = on_device.cast(to_device(x))
        same = same and np.array_equal(np.asarray(to_host(out.view(np.uint8))), want.view(np.uint8))
        for field in ("scale", "scale_inv", "amax_history"):
            got = to_host(getattr(on_device, field))
            same = same and np.array_equal(bits(got), bits(getattr(on_host, field)))
    return same
