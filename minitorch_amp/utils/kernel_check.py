"""Does each raw kernel compile, and does it compute what its NumPy twin computes?

On a GPU every file of ``cuda/`` is compiled by the loader and launched once on a small
input, and the result is held to the twin run on the same input with NumPy: bit for bit
where the kernel promises that (casts, unscaling, the loss-scale update, the optimizer, the
ReLU gradient, the start-up probe, the Hopper GEMM, and the sum of squares, the bias
gradient and mse_loss's squared error on integer data, whose float32 sums are exact in any
order), within two float16 ulps for ``gemm_fp16.cu`` (it adds in another order), and within
float32 rounding for the kernels of LayerNorm, softmax, cross-entropy and exact GELU, whose
twins sum or evaluate in their own ways (:mod:`minitorch_amp.utils.kernel_check_ops`); the FP8
casts and the delayed-scaling update run through scaling states
(:mod:`minitorch_amp.utils.kernel_check_fp8`). Each GEMM
check chooses its kernel with ``MINITORCH_AMP_GEMM_KERNEL``; ``gemm_sm90.cu`` runs only on
compute capability 9.0 and is reported "not run" elsewhere.
Without a GPU, each file is compiled with NVRTC for its target when the library is here
(``pip install nvidia-cuda-nvrtc``), and nothing runs; the compiled kernels are kept between
runs (:mod:`minitorch_amp.utils.kernel_cache`). Every check is a generator: the report prints
each kernel's line as it is done.

The checks take ``to_device`` and ``to_host`` so that the tests can run them with NumPy on
both sides; :func:`check_kernels` uses CuPy.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator

import numpy as np

from ..backend import bias_grad as _bias_grad
from ..backend import cast as _cast
from ..backend import device as _device
from ..backend import fp8_gemm as _fp8_gemm
from ..backend import gemm as _gemm
from ..backend import gemm_sm90 as _gemm_sm90
from ..backend import kernels as _kernels
from ..backend import loss_scaling as _loss_scaling
from ..backend import primitives as _primitives
from ..backend import scale_update as _scale_update
from ..backend import squared_error as _squared_error
from ..backend.dtypes import bfloat16
from . import kernel_cache as _kernel_cache
from . import kernel_check_fp8 as _fp8_checks
from . import kernel_check_ops as _ops
from .kernel_cache import KernelCache

Move = Callable[[np.ndarray], object]


class NotApplicableError(Exception):
    """A check that does not apply to this device; its message says why."""


@contextlib.contextmanager
def _gemm_kernel(choice: str):
    """``MINITORCH_AMP_GEMM_KERNEL=choice`` inside (read at every launch), then as before."""
    previous = os.environ.get(_gemm_sm90.KERNEL_ENV)
    os.environ[_gemm_sm90.KERNEL_ENV] = choice
    try:
        yield
    finally:
        if previous is None:
            del os.environ[_gemm_sm90.KERNEL_ENV]
        else:
            os.environ[_gemm_sm90.KERNEL_ENV] = previous


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
    for found, scale in ((False, 1024.0), (True, 1024.0), (True, 1.0)):  # the last: at the floor
        state = [
            np.array([found]),
            np.float32([scale]),
            np.zeros(1, np.int32),
            np.ones(1, np.int32),
            np.full(1, 7, np.int32),
        ]
        moved = [to_device(a) for a in state]
        _scale_update.update_loss_scaling(*moved, **rule)
        _scale_update.update_loss_scaling(*state, **rule)
        same = same and all(np.array_equal(to_host(m), s) for m, s in zip(moved, state))
    # 1 / 3e38 is subnormal and 1 / 1e-39 finite: both flushed to 0 or inf by a naive kernel
    for scale in (3.0, 3e38, 1e-39, 0.0):
        out, expected = to_device(np.zeros(1, np.float32)), np.zeros(1, np.float32)
        _loss_scaling.inverse_scale(to_device(np.float32([scale])), out)
        _loss_scaling.inverse_scale(np.float32([scale]), expected)
        same = same and np.array_equal(to_host(out).view(np.uint32), expected.view(np.uint32))
    return same


def _gemm_matches(to_device: Move, to_host: Move) -> bool:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((19, 40)).astype(np.float16)  # not multiples of any tile
    b = rng.standard_normal((40, 23)).astype(np.float16)
    bias = rng.standard_normal(23).astype(np.float16)
    with _gemm_kernel("sm80"):  # gemm_fp16.cu itself, also where gemm_sm90.cu would run
        out = to_host(_gemm.gemm(to_device(a), to_device(b), bias=to_device(bias), relu=True))
        expected = _gemm.gemm(a, b, bias=bias, relu=True)
    two_ulps = 2.0 * np.spacing(np.abs(expected)).astype(np.float32)
    return out.dtype == expected.dtype and bool(
        np.all(np.abs(out.astype(np.float32) - expected.astype(np.float32)) <= two_ulps)
    )


def _gemm_sm90_matches(to_device: Move, to_host: Move) -> bool:
    # M = 40, N = 24: tails of a tile; K = 40 (one partial block of 64) and 1536 (24 blocks,
    # split in 3). Each layout, both tile widths, both output types, the split-K reduction.
    # Small integers: every float32 sum is exact, so the kernel must give the twin's bits.
    cases = [  # (a's shape, b's shape, transpose_a, transpose_b, bias, relu, out, bn, splits)
        ((40, 40), (40, 24), False, False, True, True, np.float16, 128, 1),
        ((40, 1536), (24, 1536), False, True, True, False, np.float16, 128, 3),
        ((1536, 40), (1536, 24), True, False, False, False, np.float32, 256, 1),
    ]
    return _hopper_matches(to_device, to_host, np.float16, cases)


def _gemm_bf16_sm90_matches(to_device: Move, to_host: Move) -> bool:
    # gemm_sm90.cu's cases in bfloat16. Sums past 256 are rounded in a bfloat16 output: the
    # bias goes with the float32 output, where both orders of "round, add" agree exactly.
    bf16 = bfloat16
    cases = [
        ((40, 40), (40, 24), False, False, False, True, bf16, 128, 1),
        ((40, 1536), (24, 1536), False, True, False, False, bf16, 128, 3),
        ((1536, 40), (1536, 24), True, False, True, False, np.float32, 256, 1),
    ]
    return _hopper_matches(to_device, to_host, bf16, cases)


def _hopper_matches(to_device: Move, to_host: Move, dtype, cases) -> bool:
    on_gpu = _device.get_array_module(to_device(np.zeros(1, np.float16))) is not np
    if on_gpu and not _gemm_sm90.device_is_hopper():
        reason = "needs compute capability 9.0 (wgmma, TMA); gemm_fp16.cu runs here"
        raise NotApplicableError(reason)
    rng = np.random.default_rng(0)
    same = True
    for shape_a, shape_b, ta, tb, with_bias, relu, out_dtype, bn, splits in cases:
        with _gemm_kernel("sm90"), _gemm_sm90.forced_plan(bn, splits):
            a = rng.integers(-3, 4, shape_a).astype(dtype)
            b = rng.integers(-3, 4, shape_b).astype(dtype)
            bias = rng.integers(-8, 9, 24).astype(out_dtype) if with_bias else None
            moved_a, moved_b = to_device(a), to_device(b)
            k = shape_a[0] if ta else shape_a[1]
            if on_gpu and not _gemm_sm90.usable(moved_a, moved_b, k):
                raise RuntimeError("the check's operands are not TMA-addressable")
            moved_bias = to_device(bias) if with_bias else None
            args = dict(relu=relu, out_dtype=out_dtype)
            out = _gemm.gemm(moved_a, moved_b, ta, tb, moved_bias, **args)
            expected = _gemm.gemm(a, b, ta, tb, bias, **args)
            same = same and np.array_equal(bits(to_host(out)), bits(expected))
    return same


def bits(array) -> np.ndarray:
    """The array's bytes as unsigned integers (bfloat16 has no NumPy equality of its own)."""
    array = np.asarray(array)
    return array.view({2: np.uint16, 4: np.uint32}[array.itemsize])


def _optim_matches(to_device: Move, to_host: Move) -> bool:
    """Two O2 Adam steps of one float16 parameter: the kernel's (on the device) against the
    optimizer's own maths on the host; parameter, fp32 master and moments bit for bit."""
    from ..autograd.tensor import Tensor
    from ..nn.parameter import Parameter
    from ..optimizer import Adam

    rng = np.random.default_rng(0)
    values = rng.standard_normal(300).astype(np.float16)
    grads = [rng.standard_normal(300).astype(np.float16) for _ in range(2)]
    results = []
    for move in (to_device, None):
        # the very arrays, wherever the current device is: a Parameter made from NumPy
        # values follows the current device, and the host half must stay on the host
        data = values.copy() if move is None else move(values)
        param = Parameter._from_array(data, name="kernel_check.w")
        opt = Adam(1e-3, parameters=[param], multi_precision=True)
        for grad in grads:
            param.grad = Tensor._wrap(grad if move is None else move(grad))
            opt.step()
        state = opt._accumulators[id(param)]
        arrays = [param._data, opt._master_weights[param.name]._data, *state.values()]
        results.append([np.asarray(a if move is None else to_host(a)) for a in arrays])
    return all(np.array_equal(bits(a), bits(b)) for a, b in zip(*results))


def _relu_backward_matches(to_device: Move, to_host: Move) -> bool:
    """Every kind of y meets every kind of gradient (signed zeros, subnormals, inf, NaN): the
    twin's bits, NaN where the twin has NaN (inf * 0 where the unit is off)."""
    values = [0.0, -0.0, 1e-40, -1e-40, 1.0, -2.0, np.inf, -np.inf, np.nan]
    y = np.repeat(np.float32(values), len(values))
    g = np.tile(np.float32(values), len(values)).astype(np.float16)
    with np.errstate(invalid="ignore"):  # inf * 0 is NaN, on purpose
        out = to_host(_primitives.relu_backward(to_device(y), to_device(g)))
        expected = _primitives.relu_backward(y, g)
    nan = np.isnan(expected)
    return np.array_equal(np.isnan(out), nan) and np.array_equal(
        bits(out)[~nan], bits(expected)[~nan]
    )


def _elementwise_matches(to_device: Move, to_host: Move) -> bool:
    """elementwise.cu's two launchers: ReLU's gradient and exact GELU."""
    return _relu_backward_matches(to_device, to_host) and _ops.gelu_matches(to_device, to_host)


def _sum_squares_matches(to_device: Move, to_host: Move) -> bool:
    """17 tiles and a tail (both kernels) of small integers, whose float32 sums are exact in
    any order: the twin's bits, twice."""
    x = np.random.default_rng(0).integers(-3, 4, 17 * 4096 + 5).astype(np.float16)
    moved = to_device(x)
    runs = [to_host(_primitives.sum_squares(moved, np.float32)) for _ in range(2)]
    expected = np.asarray(_primitives.sum_squares(x, np.float32))
    return all(np.array_equal(bits(run), bits(expected)) for run in runs)


def _bias_grad_matches(to_device: Move, to_host: Move) -> bool:
    """Two column tiles of small positive integers (exact float32 sums in any order, no
    zero of either sign to tell orders apart), with a ReLU mask and a cast to float16, and
    without: the twin's bits."""
    rng = np.random.default_rng(0)
    g = rng.integers(1, 4, (70, 45)).astype(np.float32)
    y = rng.integers(-3, 4, (70, 45)).astype(np.float32)
    results = []
    for product, mask in ((np.float16, y), (None, None)):
        moved = None if mask is None else to_device(mask)
        got = _bias_grad.bias_grad(to_device(g), np.float32, product, relu_out=moved)
        want = _bias_grad.bias_grad(g, np.float32, product, relu_out=mask)
        results += [(to_host(a), b) for a, b in zip(got, want) if b is not None]
    return all(np.array_equal(bits(a), bits(b)) for a, b in results)


def _squared_error_matches(to_device: Move, to_host: Move) -> bool:
    """mse_loss's difference and its squares' mean and sum: 17 tiles and a tail (both
    kernels) and one tile (one launch) of small integers, whose float32 sums are exact in
    any order (so the mean is the twin's one rounding of the same sum): the twin's bits."""
    rng = np.random.default_rng(0)
    same = True
    for n in (17 * 4096 + 5, 1000):
        a, b = (rng.integers(-3, 4, n).astype(np.float32) for _ in range(2))
        for mean in (True, False):
            got = _squared_error.squared_error(to_device(a), to_device(b), mean)
            want = _squared_error.squared_error(a, b, mean)
            same = same and all(
                np.array_equal(bits(to_host(x)), bits(np.asarray(y))) for x, y in zip(got, want)
            )
    return same


def _reduction_matches(to_device: Move, to_host: Move) -> bool:
    """reduction.cu's four launchers: the sum of squares, the bias gradient, mse_loss's
    squared error and ClipGradByGlobalNorm."""
    return (
        _sum_squares_matches(to_device, to_host)
        and _bias_grad_matches(to_device, to_host)
        and _squared_error_matches(to_device, to_host)
        and _ops.global_norm_matches(to_device, to_host)
    )


def _probe_matches(to_device: Move, to_host: Move) -> bool:
    """The start-up probe's kernel writes 1.0 as a float16 (its twin on NumPy arrays)."""
    x = to_device(np.zeros(1, np.float16))
    if _device.get_array_module(x) is np:
        x[0] = 1.0
    else:
        with x.device:
            _kernels.launch("probe.cu", _device.PROBE.names[0], (1,), (1,), (x,))
    return np.array_equal(bits(to_host(x)), bits(np.float16([1.0])))


def _fp8_gemm_matches(to_device: Move, to_host: Move) -> bool:
    # small integers through every FP8 format pair (fp8_gemm.check_gemm); sm_90a only
    on_gpu = _device.get_array_module(to_device(np.zeros(1, np.float16))) is not np
    if on_gpu and not _gemm_sm90.device_is_hopper():
        raise NotApplicableError("needs compute capability 9.0 (FP8 wgmma, TMA)")
    return _fp8_gemm.check_gemm(to_device, to_host)


CHECKS: dict[str, Callable[[Move, Move], bool]] = {
    "cast.cu": _cast_matches,
    "amp.cu": _amp_matches,
    "gemm_fp16.cu": _gemm_matches,
    "gemm_sm90.cu": _gemm_sm90_matches,
    "gemm_bf16_sm90.cu": _gemm_bf16_sm90_matches,
    "optim.cu": _optim_matches,
    "elementwise.cu": _elementwise_matches,
    "reduction.cu": _reduction_matches,
    "probe.cu": _probe_matches,
    "fp8_cast.cu": _fp8_checks.cast_matches,  # every float16 value; delayed casts, updated
    "gemm_fp8_sm90.cu": _fp8_gemm_matches,
    "fp8_scale.cu": _fp8_checks.scale_update_matches,
    "layer_norm.cu": _ops.layer_norm_matches,
    "softmax.cu": _ops.softmax_matches,
    "cross_entropy.cu": _ops.cross_entropy_matches,
}


def run_checks(to_device: Move, to_host: Move) -> Iterator[tuple[str, str]]:
    """``(file, status)`` for every check, each as it is done: launch, hold to the twin,
    report; never raise."""
    for file, check in CHECKS.items():
        try:
            ok = check(to_device, to_host)
        except NotApplicableError as reason:
            yield file, f"not run: {reason}"
            continue
        except Exception as exc:
            yield file, f"FAILED: {type(exc).__name__}: {exc}".splitlines()[0]
            continue
        yield file, "compiles, matches its twin" if ok else "MISMATCH with its twin"
    for file in _kernels.REGISTRY:
        if file not in CHECKS:
            yield file, "not run: no check against its twin in utils/kernel_check.py yet"


HEADING = "kernels (cuda/*.cu):"


def compile_checks(cache: KernelCache) -> tuple[str, Iterator[tuple[str, str]]]:
    """Without a GPU: the heading, and ``(file, status)`` for each registered file compiled
    with NVRTC as the loader would, each as it is done (through ``cache``; never raises)."""
    from ..backend import nvrtc

    try:
        version = "{}.{}".format(*nvrtc.version())
        nvrtc.include_dir()
    except Exception as exc:
        return HEADING, iter([(f, f"not checked: no GPU, and {exc}") for f in _kernels.REGISTRY])
    heading = f"kernels (cuda/*.cu), compiled with NVRTC {version}, not run (no GPU):"
    return heading, _compile_each(cache)


def _compile_each(cache: KernelCache) -> Iterator[tuple[str, str]]:
    targets = {file: entry.arch or "compute_80" for file, entry in _kernels.REGISTRY.items()}
    width = max(map(len, targets.values())) + 2  # the target, then the outcome, in columns
    for file, entry in _kernels.REGISTRY.items():
        arch = targets[file]  # a file built for one target only, else Ampere's
        try:
            done = cache.compile(entry.source(), file, entry.all_options(), entry.names, arch)
        except Exception as exc:
            yield file, f"FAILED to compile for {arch}: {str(exc).splitlines()[0]}"
            continue
        if done.cached:
            yield file, f"{arch:<{width}}from the cache (a cold compile took {done.seconds:.1f} s)"
        else:
            problem = f" ({done.problem})" if done.problem else ""
            yield file, f"{arch:<{width}}compiled in {done.seconds:.1f} s{problem}"


def check_kernels(
    compile_without_gpu: bool = True, cache: KernelCache | None = None
) -> tuple[str, Iterator[tuple[str, str]]]:
    """The kernel section of the report: its heading, and its lines, each made as it is asked
    for (run on the GPU, else compiled only through ``cache``, by default the one
    :func:`~minitorch_amp.utils.kernel_cache.cache_dir` names, or skipped)."""
    cupy = _device.cupy
    if cupy is not None and _device.current_place().kind == "gpu":
        if not _kernels.enabled():
            return HEADING, iter(
                [(f, "not run: MINITORCH_AMP_RAW_KERNELS=0") for f in _kernels.REGISTRY]
            )
        heading = "kernels (cuda/*.cu), run on the GPU and held to their NumPy twins:"
        return heading, run_checks(cupy.asarray, cupy.asnumpy)
    if not compile_without_gpu:
        return HEADING, iter([(file, "not run (no GPU)") for file in _kernels.REGISTRY])
    return compile_checks(KernelCache(_kernel_cache.cache_dir()) if cache is None else cache)
