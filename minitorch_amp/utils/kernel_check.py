"""Does each raw kernel compile, and does it compute what its NumPy twin computes?

On a GPU every file of ``cuda/`` is compiled by the loader and launched once on a small
input, and the result is held to the twin run on the same input with NumPy: bit for bit
where the kernel promises that (casts, unscaling, the loss-scale update, the optimizer), within
two float16 ulps for the GEMM (it adds in another order). Without a GPU, each file is compiled
with NVRTC when the library is here (``pip install nvidia-cuda-nvrtc``), and nothing runs.

The checks take ``to_device`` and ``to_host`` so that the tests can run them with NumPy on
both sides; :func:`check_kernels` uses CuPy.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..backend import cast as _cast
from ..backend import device as _device
from ..backend import fused_optim as _fused_optim
from ..backend import gemm as _gemm
from ..backend import kernels as _kernels
from ..backend import loss_scaling as _loss_scaling

Move = Callable[[np.ndarray], object]


def _cast_matches(to_device: Move, to_host: Move) -> bool:
    edges = [1 + 2**-11, 65504, 65520, 2**-24, 2**-25, -3.5, np.nan, 1e-3, -np.inf]
    x = np.array(edges * 3, dtype=np.float32)  # 27: whole 8-element vectors and a tail
    flag, expected_flag = to_device(np.zeros(1, bool)), np.zeros(1, bool)
    half = to_host(_cast.cast(to_device(x), "float16", flag))
    expected = _cast.cast(x, "float16", expected_flag)
    back = to_host(_cast.cast(to_device(expected), "float32"))
    return (
        np.array_equal(half, expected, equal_nan=True)
        and np.array_equal(to_host(flag), expected_flag)
        and np.array_equal(back, expected.astype(np.float32), equal_nan=True)
    )


def _amp_matches(to_device: Move, to_host: Move) -> bool:
    rng = np.random.default_rng(0)
    grads = [
        (rng.standard_normal(70) * 1000).astype(np.float16),
        np.float16([60000.0, 1.0, -2.0]),  # times 2: past 65504 once unscaled
    ]
    inv, flag = np.float32([2.0]), np.zeros(1, bool)
    on_device = [to_device(g) for g in grads]
    device_flag = to_device(flag)
    _loss_scaling.unscale_and_check(on_device, to_device(inv), device_flag)
    _loss_scaling.unscale_and_check(grads, inv, flag)
    same = all(np.array_equal(to_host(d), g) for d, g in zip(on_device, grads))
    same = same and np.array_equal(to_host(device_flag), flag)
    rule = dict(
        incr_every_n_steps=1,
        decr_every_n_nan_or_inf=1,
        incr_ratio=2.0,
        decr_ratio=0.5,
        min_loss_scaling=1.0,
    )
    for found in (False, True):
        state = [
            np.array([found]),
            np.float32([1024.0]),
            np.zeros(1, np.int32),
            np.ones(1, np.int32),
        ]
        moved = [to_device(a) for a in state]
        _loss_scaling.update_loss_scaling(*moved, **rule)
        _loss_scaling.update_loss_scaling(*state, **rule)
        same = same and all(np.array_equal(to_host(m), s) for m, s in zip(moved, state))
    return same


def _gemm_matches(to_device: Move, to_host: Move) -> bool:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((19, 40)).astype(np.float16)  # not multiples of any tile
    b = rng.standard_normal((40, 23)).astype(np.float16)
    bias = rng.standard_normal(23).astype(np.float16)
    out = to_host(_gemm.gemm(to_device(a), to_device(b), bias=to_device(bias), relu=True))
    expected = _gemm.gemm(a, b, bias=bias, relu=True)
    two_ulps = 2.0 * np.spacing(np.abs(expected)).astype(np.float32)
    return out.dtype == expected.dtype and bool(
        np.all(np.abs(out.astype(np.float32) - expected.astype(np.float32)) <= two_ulps)
    )


def _optim_matches(to_device: Move, to_host: Move) -> bool:
    rng = np.random.default_rng(0)
    param = rng.standard_normal(300).astype(np.float16)
    grad = rng.standard_normal(300).astype(np.float16)
    host = [param.copy(), param.astype(np.float32), np.zeros(300, np.float32)]
    host += [np.zeros(300, np.float32), np.float32([0.9]), np.float32([0.999])]
    moved = [to_device(a) for a in host]
    hyper = dict(beta1=0.9, beta2=0.999, epsilon=1e-8)
    for state, g in ((moved, to_device(grad)), (host, grad)):
        p, master, m1, m2, b1, b2 = state
        flag = to_device(np.zeros(1, bool)) if state is moved else np.zeros(1, bool)
        _fused_optim.fused_adam([p], [master], [g], [m1], [m2], [b1], [b2], 1e-3, flag, **hyper)
    return all(np.array_equal(to_host(m), h) for m, h in zip(moved, host))


CHECKS: dict[str, Callable[[Move, Move], bool]] = {
    "cast.cu": _cast_matches,
    "amp.cu": _amp_matches,
    "gemm_fp16.cu": _gemm_matches,
    "optim.cu": _optim_matches,
}


def run_checks(to_device: Move, to_host: Move) -> list[tuple[str, str]]:
    """``(file, status)`` for every check: launch, hold to the twin, report; never raise."""
    results = []
    for file, check in CHECKS.items():
        try:
            ok = check(to_device, to_host)
        except Exception as exc:
            results.append((file, f"FAILED: {type(exc).__name__}: {exc}".splitlines()[0]))
            continue
        results.append((file, "compiles, matches its twin" if ok else "MISMATCH with its twin"))
    return results


def compile_checks() -> list[tuple[str, str]]:
    """Without a GPU: compile each registered file with NVRTC, as the loader would."""
    from ..backend import nvrtc

    try:
        version = "{}.{}".format(*nvrtc.version())
        nvrtc.include_dir()
    except Exception as exc:
        return [(file, f"not checked: no GPU, and {exc}") for file in _kernels.REGISTRY]
    results = []
    for file, entry in _kernels.REGISTRY.items():
        try:
            nvrtc.compile_source(entry.source(), file, entry.all_options(), entry.names)
        except Exception as exc:
            results.append((file, f"FAILED to compile: {str(exc).splitlines()[0]}"))
            continue
        results.append((file, f"compiles with NVRTC {version}; not run (no GPU)"))
    return results


def check_kernels(compile_without_gpu: bool = True) -> list[tuple[str, str]]:
    """The kernel lines of the report: run on the GPU, else compiled only (or skipped)."""
    cupy = _device.cupy
    if cupy is not None and _device.current_place().kind == "gpu":
        if not _kernels.enabled():
            return [(f, "not run: MINITORCH_AMP_RAW_KERNELS=0") for f in _kernels.REGISTRY]
        return run_checks(cupy.asarray, cupy.asnumpy)
    if not compile_without_gpu:
        return [(file, "not run (no GPU)") for file in _kernels.REGISTRY]
    return compile_checks()
