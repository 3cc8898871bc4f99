"""Loss-scaling primitives: the NumPy/CuPy twins of the AMP kernels (``cuda/amp.cu``).

Three functions carry all of dynamic loss scaling, in the order a step calls them, and all
work in place on device arrays so that a training step never waits for the host:

* :func:`inverse_scale` writes ``1 / scale``, rounded once to float32.
* :func:`unscale_and_check` multiplies the gradients by that inverse and raises a device
  flag when any of them is not finite (Paddle's ``check_finite_and_unscale``).
* ``update_loss_scaling`` (in ``backend/scale_update.py``) moves the scale and its two step
  counters one step along Paddle's dynamic rule (the ``update_loss_scaling`` kernel, without
  the zero-fill of grads), and counts the overflowing updates at the floor.

State shapes, as the kernels take them: ``scale`` float32 ``[1]``, ``inv_scale``
float32 ``[1]``, ``found_inf`` bool ``[1]``, ``good_steps`` / ``bad_steps`` / ``at_floor``
int32 ``[1]``.

On CuPy arrays (and unless ``MINITORCH_AMP_RAW_KERNELS=0``) all three run as the raw kernels
of ``cuda/amp.cu``: a one-thread inverse, one multi-tensor launch per gradient dtype, and a
one-thread update. The NumPy code below is their specification, and what runs everywhere
else.

Example:
    >>> import numpy as np
    >>> g = np.array([512.0, 1024.0], dtype="float16")
    >>> found_inf = np.zeros(1, dtype=bool)
    >>> unscale_and_check([g], np.array([1 / 512], dtype="float32"), found_inf)
    >>> g, found_inf
    (array([1., 2.], dtype=float16), array([False]))
"""

from __future__ import annotations

import functools
import operator

import ml_dtypes
import numpy as np

from . import host_float16, kernels
from .cast import convert
from .device import get_array_module
from .dtypes import accumulation_dtype, bfloat16, bool_, float16, float32, float64
from .pow2_scale import power_of_two_exponent, times_power_of_two

__all__ = ["by_dtype", "inverse_scale", "scale_loss", "unscale_and_check"]

_UNSCALE_KERNELS = {
    float16: "unscale_and_check<__half>",
    bfloat16: "unscale_and_check<__nv_bfloat16>",
    float32: "unscale_and_check<float>",
    float64: "unscale_and_check<double>",
}
AMP = kernels.register(
    "amp.cu",
    names=(
        "inverse_scale", "inverse_scale_and_clear", *_UNSCALE_KERNELS.values(),
        "update_loss_scaling", "scale_loss",
    ),
)  # fmt: skip
_CHUNK = 65536  # elements per block: kChunk in cuda/amp.cu
_UNSCALE_THREADS = 512  # kThreads in cuda/amp.cu


def _check_flag(array, name: str, dtype) -> None:
    if array.shape != (1,) or array.dtype != dtype:
        raise ValueError(
            f"{name} must be a {dtype} array of shape [1], got {array.dtype} of shape "
            f"{list(array.shape)}"
        )


def scale_loss(loss, scale):
    """``(loss * scale, a copy of scale)``: GradScaler.scale's product and the factor its
    backward multiplies by (``scale``, float32 [1] or 0-d, is changed in place later).

    A 0-d float32 ``loss`` on the GPU takes one launch of ``scale_loss`` (``cuda/amp.cu``),
    one float32 multiply, rounded as CuPy's; anything else is the copy and the broadcasting
    product (float32 [1] scale as a 0-d factor), the twin.
    """
    xp = get_array_module(loss, scale)
    if (
        xp is not np
        and kernels.enabled()
        and loss.ndim == 0
        and loss.dtype == float32
        and _fits_one_thread_kernel([(scale.reshape(1), float32)])
    ):
        with loss.device:
            both = xp.empty(2, float32)  # the product, then the factor
            args = (loss, scale, both[:1], both[1:])
            kernels.launch("amp.cu", "scale_loss", (1,), (1,), args)
        return both[0], both[1]
    factor = scale.reshape(()).copy()
    return loss * factor, factor


def inverse_scale(scale, out, clear=None) -> None:
    """``out = float32(1 / float64(scale))`` in place, as PyTorch computes it; ``clear``
    (a found_inf flag) is set to False in the same launch.

    The quotient is taken in float64 and rounded once to the nearest float32, ties to even:
    exact for powers of two, subnormal for scales above 2**126 (1 / 3e38), inf for 0 and for
    scales at or below 2**-128 (subnormal ones), negative for negative scales, NaN for NaN.
    On the GPU a one-thread kernel (``cuda/amp.cu``) gives the same bits for every float32.

    Args:
        scale: float32 [1], the loss scale.
        out: float32 [1], written.
        clear: None, or a bool [1] flag to clear (GradScaler's found_inf, at the start of
            each unscale): one launch, not a fill and this.

    Example:
        >>> import numpy as np
        >>> out, found_inf = np.zeros(1, "float32"), np.ones(1, bool)
        >>> inverse_scale(np.array([1024.0], "float32"), out, clear=found_inf)
        >>> out, found_inf
        (array([0.00097656], dtype=float32), array([False]))
    """
    xp = get_array_module(scale)
    arrays = [(scale, float32), (out, float32)] + ([(clear, bool_)] if clear is not None else [])
    if xp is not np and kernels.enabled() and _fits_one_thread_kernel(arrays):
        with scale.device:
            if clear is None:
                kernels.launch("amp.cu", "inverse_scale", (1,), (1,), (scale, out))
            else:
                args = (scale, out, clear)
                kernels.launch("amp.cu", "inverse_scale_and_clear", (1,), (1,), args)
        return
    with np.errstate(divide="ignore", over="ignore"):  # 1 / 0 and 1 / 2**-149 are inf
        xp.copyto(out, 1.0 / scale.astype(float64), casting="unsafe")
    if clear is not None:
        clear[...] = False


def _fits_one_thread_kernel(arrays) -> bool:
    """Every ``(array, dtype)`` is a CuPy array of shape [1] with that dtype."""
    cupy = get_array_module(arrays[0][0])
    return all(
        isinstance(a, cupy.ndarray) and a.shape == (1,) and a.dtype == dtype for a, dtype in arrays
    )


_DTYPE = operator.attrgetter("dtype")


def by_dtype(grads: list) -> dict:
    """``{dtype: grads}``: what :func:`unscale_and_check` takes, one call (one launch on a
    GPU) per dtype; usually one."""
    dtypes = set(map(_DTYPE, grads))
    if len(dtypes) == 1:
        return {dtypes.pop(): grads}
    buckets: dict = {}
    for g in grads:
        buckets.setdefault(g.dtype, []).append(g)
    return buckets


def unscale_and_check(grads: list, inv_scale, found_inf) -> None:
    """``g = g * inv_scale`` for every gradient, in place; ``found_inf |= any(!isfinite(g))``.

    Each gradient is widened to float32 (float64 stays float64), multiplied by ``inv_scale``
    and rounded to nearest even back into its own dtype. On the GPU one kernel launch does
    every tensor; on the CPU a C loop per contiguous float16 or float32 gradient
    (``csrc/float16.c``, when it compiles), else the twin, which widens runs of small tensors
    together (one NumPy pass per run of up to 2**20 elements, not one per tensor). Nothing is
    read back to the host, ``found_inf`` stays on the device.

    NOTE: finiteness is checked on the *unscaled, narrowed* value, as Paddle's kernel does.
    Checking the scaled gradient before unscaling misses values that become non-finite only
    after the multiply and the rounding (e.g. an ``inv_scale`` above 1 after the scale fell
    below 1 pushes a large finite float16 past 65504).

    Args:
        grads: gradient arrays, all of one floating dtype (any strides; views are written
            through).
        inv_scale: float32 array of shape [1], ``1 / loss_scale``.
        found_inf: bool array of shape [1]; OR-ed with the result, never cleared here.

    Raises:
        ValueError: the gradients do not share one dtype, or a flag has the wrong shape/dtype.

    Example:
        >>> import numpy as np
        >>> g = np.array([4.0, np.inf], dtype="float32")
        >>> found_inf = np.zeros(1, dtype=bool)
        >>> unscale_and_check([g], np.array([0.25], dtype="float32"), found_inf)
        >>> g, found_inf
        (array([ 1., inf], dtype=float32), array([ True]))
    """
    _check_flag(inv_scale, "inv_scale", float32)
    _check_flag(found_inf, "found_inf", bool_)
    if not grads:
        return
    dtypes = {g.dtype for g in grads}
    if len(dtypes) != 1:
        names = sorted(str(d) for d in dtypes)
        raise ValueError(
            f"unscale_and_check: all grads must have the same dtype, got {names}; "
            "call it once per dtype bucket"
        )
    xp = get_array_module(*grads)
    if xp is not np and kernels.enabled():
        grads = _unscale_with_kernel(grads, inv_scale, found_inf)  # what it could not take
        if not grads:
            return
    if xp is np and grads[0].dtype in (float16, float32) and host_float16.compiled() is not None:
        grads = _unscale_in_c(grads, inv_scale, found_inf)  # what it could not take
        if not grads:
            return
    acc = accumulation_dtype(grads[0].dtype)
    inv = inv_scale.reshape(()).astype(acc, copy=False)  # 0-d, so 0-d grads keep their shape
    limit = None if acc == grads[0].dtype else _overflow_threshold(grads[0].dtype)
    # float16 on the host times a power of two below 1 (the dynamic scale's usual 2**-k):
    # on the bits, the same result without the slow rounding (backend.pow2_scale)
    k = power_of_two_exponent(inv_scale) if xp is np and grads[0].dtype == float16 else None
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is what we look for
        for run in _runs(grads, _TWIN_RUN):
            if len(run) == 1 and limit is None:  # one float32 tensor: in place
                wide = xp.multiply(run[0], inv, out=run[0])
            else:  # widen (a run of small tensors at once), multiply, round back once
                flat = xp.concatenate([g.reshape(-1) for g in run])
                bits = None if k is None else times_power_of_two(flat.view(np.uint16), k)
                if bits is not None:  # all finite, and no product can overflow
                    wide, rounded = None, bits.view(float16)
                else:
                    wide = flat if limit is None else convert(flat, acc)  # (flat: a new array)
                    wide *= inv
                    rounded = wide if limit is None else convert(wide, run[0].dtype)  # to even
                start = 0
                for g in run:
                    g[...] = rounded[start : start + g.size].reshape(g.shape)
                    start += g.size
            if wide is None:
                continue
            if limit is None:
                bad = ~xp.isfinite(wide).all()
            else:
                # NOTE: rounding to float16 gives +-inf exactly when |wide| >= 65520 (65504
                # plus half an ulp rounds up) and keeps NaN, so testing the float32 copy is
                # the same check as isfinite on the narrowed result, and much cheaper on the
                # CPU. max/min propagate NaN, which fails both comparisons.
                bad = ~((wide.max() < limit) & (wide.min() > -limit)) if wide.size else False
            xp.logical_or(found_inf, bad, out=found_inf)


_TWIN_RUN = 2**20  # elements the twin widens at once: many small gradients cost one pass


def _unscale_in_c(grads: list, inv_scale, found_inf) -> list:
    """The twin below for float16 and float32, gradient by gradient in one C loop each
    (``csrc/float16.c``'s ``unscale``: widen, multiply, round, check, with this twin's bits);
    returns the gradients it could not take (not C-contiguous, or read-only), for the twin."""
    c, inv, rest, bad = host_float16.compiled(), float(inv_scale[0]), [], False
    for g in grads:
        if g.__class__ is np.ndarray and g.flags.c_contiguous and g.flags.writeable:
            bad |= c.unscale(g, inv)
        else:
            rest.append(g)
    if bad:
        found_inf[...] = True
    return rest


def _runs(arrays: list, limit: int) -> list:
    """``arrays`` cut into consecutive runs of at most ``limit`` elements (or one array)."""
    runs, run, size = [], [], 0
    for a in arrays:
        if run and size + a.size > limit:
            runs.append(run)
            run, size = [], 0
        run.append(a)
        size += a.size
    return [*runs, run] if run else runs


def _unscale_with_kernel(grads: list, inv_scale, found_inf) -> list:
    """One ``amp.cu`` launch over the C-contiguous CuPy grads; return the rest for the twin.

    The kernel sees only bytes, so a strided view (rare for a gradient) goes through the
    twin's loop on CuPy instead; both write through to the caller's arrays. Empty grads
    need no work; other dtypes, or flags not on the device, leave everything to the twin.
    """
    cupy = get_array_module(grads[0])
    name = _UNSCALE_KERNELS.get(grads[0].dtype)
    on_device = all(isinstance(a, cupy.ndarray) for a in (inv_scale, found_inf))
    if name is None or not on_device:
        return grads
    with grads[0].device as device:
        rest, live, table, n_chunks = _unscale_plan(grads, device.id)
        if live:
            args = (table, np.int32(live), np.int32(n_chunks), inv_scale, found_inf)
            kernels.launch("amp.cu", name, (n_chunks,), (_UNSCALE_THREADS,), args)
    return rest


_LAST_PLANS: dict = {}  # (device, dtype) -> (grads, plan): the last step's, for the next one


def _unscale_plan(grads: list, device_id: int) -> tuple:
    """``(rest, n_live, table, n_chunks)`` for ``grads``: the last step's when they are the
    very same arrays (a step reads no pointer, flag or size), else worked out again.

    NOTE: the last step's gradient arrays are kept referenced (one set per device and dtype)
    so that the same objects really are the same buffers."""
    key = (device_id, grads[0].dtype)
    last = _LAST_PLANS.get(key)
    if last is not None and len(last[0]) == len(grads) and all(map(operator.is_, last[0], grads)):
        if last[1][2] is not None:
            kernels.using(last[1][2])  # a capture in progress keeps it alive
        return last[1]
    rest = [g for g in grads if not g.flags.c_contiguous]
    live = [g for g in grads if g.flags.c_contiguous and g.size]
    table, n_chunks = None, 0
    if live:
        pointers, sizes = tuple(g.data.ptr for g in live), tuple(g.size for g in live)
        n_chunks = sum(-(-n // _CHUNK) for n in sizes)
        # Built and uploaded at the first step only: the same gradient buffers come back.
        table = kernels.device_table(
            ("amp.cu", device_id, pointers, sizes), lambda: chunk_table(pointers, sizes, _CHUNK)
        )
    plan = (rest, len(live), table, n_chunks)
    _LAST_PLANS[key] = (list(grads), plan)
    return plan


def chunk_table(pointers, sizes, chunk: int) -> np.ndarray:
    """The int64 table ``cuda/amp.cu`` walks: block ``c`` unscales chunk ``c``.

    Layout (``T`` tensors, ``C`` chunks): ``[pointers (T) | sizes (T) | tensor of chunk (C) |
    first element of chunk (C)]``. Tensor ``t`` has ``ceil(sizes[t] / chunk)`` chunks.

    Example:
        >>> chunk_table([1000, 2000], [5, 12], chunk=4).tolist()
        [1000, 2000, 5, 12, 0, 0, 1, 1, 1, 0, 4, 0, 4, 8]
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    per_tensor = -(-sizes // chunk)
    chunk_tensor = np.repeat(np.arange(len(sizes), dtype=np.int64), per_tensor)
    first_chunk = np.cumsum(per_tensor) - per_tensor  # each tensor's first chunk index
    chunk_begin = (np.arange(chunk_tensor.size, dtype=np.int64) - first_chunk[chunk_tensor]) * chunk
    pointers = np.asarray(pointers, dtype=np.int64)
    return np.concatenate([pointers, sizes, chunk_tensor, chunk_begin])


@functools.cache
def _overflow_threshold(dtype) -> float:
    """The smallest magnitude that rounds to infinity in ``dtype`` (65520 for float16).

    The largest value plus half its spacing, ``eps * 2**(maxexp - 1)``: 65504 + 16 for
    float16, ``(2 - 2**-8) * 2**127`` for bfloat16 (``ml_dtypes.finfo`` knows both).
    """
    info = ml_dtypes.finfo(dtype)
    return float(info.max) + float(info.eps) * 2.0 ** (info.maxexp - 2)
