"""Fused optimizer updates: every parameter of a dtype bucket in one pass, skipped on the device.

The optimizers' ``_update`` methods update one parameter at a time. On the GPU that would be
several kernel launches per parameter plus the optimize-cast, and a host read of
``found_inf`` to decide whether to run them at all. Here one call updates a whole bucket
(parameters of one dtype with gradients of one dtype): for each tensor, in float32::

    lr = float32(base_lr * lr_ratio)                             # the product in float64
    p = master if master is not None else float32(param)
    g = float32(grad) * grad_scale;  g = g + l2 * p  (when l2)   # Momentum's rescale, L2Decay
    <the optimizer's step on p and its state>                    # same maths as its _update
    master = p;  param = round_to_nearest_even(p)                # the optimize-cast

and when ``found_inf`` is set nothing changes at all (Adam's beta pows do not advance).

``base_lr`` is a float64 array of shape [1] (or a Python float): on the GPU it is the
optimizer's device buffer (``backend.graphs.HostFed``), so the kernel reads the learning rate
from device memory and a scheduler's new value reaches a replayed CUDA graph. Everything else
the kernel reads per tensor (pointers, sizes, ratios, coefficients) is fixed from step to
step, so its table is uploaded once per set of tensors (``kernels.device_table``).

Three implementations, chosen by :func:`update_path` (the one place that decides):

* ``'fused kernel'``: CuPy arrays and raw kernels enabled: ``cuda/optim.cu``, one launch per
  bucket; the flag is read by the kernel, never by the host. Its float32 arithmetic is the
  twin's, rounding for rounding (no FMA contraction), so the results are bit-identical.
* ``'cupy twin'``: CuPy arrays without raw kernels (or dtypes, or strides, the kernel does not
  take): the twin below on CuPy; with a device flag it computes new values and commits them
  with ``where(found_inf, old, new)``, so there is still no host read.
* ``'per-param numpy'``: NumPy arrays. The optimizer keeps its own per-parameter loop there
  (reading a host flag is free); the twin on NumPy is bit-identical to it (tested).

Example (two tensors, one float16 with an fp32 master, one float32 that is its own master):
    >>> import numpy as np
    >>> w16, master = np.array([1.0], "float16"), np.array([1.0], "float32")
    >>> b32 = np.array([0.5, -0.5], "float32")
    >>> grads = [np.array([1.0], "float16"), np.array([1.0, 1.0], "float32")]
    >>> fused_sgd([w16, b32], [master, None], grads, 0.1, False, lr_ratios=[1e-3, 1.0])
    >>> master, w16, b32
    (array([0.9999], dtype=float32), array([1.], dtype=float16), array([ 0.4, -0.6], dtype=float32))
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import device as _device
from . import kernels
from .dtypes import accumulation_dtype, bfloat16, bool_, float16, float32

__all__ = ["fused_adam", "fused_momentum", "fused_sgd", "update_path"]

CHUNK = 65536  # elements per block: kChunk in optim.cu
THREADS = 256  # threads per block: kThreads in optim.cu
_KINDS = ("sgd", "momentum", "adam")
_CUDA_TYPE = {float16: "__half", bfloat16: "__nv_bfloat16", float32: "float"}
_KERNEL_DTYPES = (  # (param, grad)
    (float16, float16), (float16, float32), (bfloat16, bfloat16), (bfloat16, float32),
    (float32, float32),
)  # fmt: skip

OPTIM = kernels.register(
    "optim.cu",
    names=tuple(
        f"{kind}_step<{_CUDA_TYPE[p]}, {_CUDA_TYPE[g]}>"
        for kind in _KINDS
        for p, g in _KERNEL_DTYPES
    ),
    # NOTE: no FMA contraction, so that every * and + rounds as it does in NumPy (the twin).
    options=("--fmad=false",),
)

# One tensor's entry in the kernel's table: struct TensorArgs in optim.cu, 88 bytes.
TENSOR_ARGS = np.dtype(
    [(name, "<u8") for name in ("param", "master", "grad", "state0", "state1", "b1p", "b2p")]
    + [("size", "<i8"), ("lr_ratio", "<f8"), ("decay", "<f8"), ("grad_scale", "<f4")]
    + [("l2", "<f4")]
)
_WORDS = TENSOR_ARGS.itemsize // 8  # int64 words per tensor in the uploaded table


@dataclass
class _Bucket:
    """Parallel per-tensor lists; ``states[i]`` is the tensor's float32 accumulators."""

    params: list
    masters: list  # float32 array or None (the param is its own master)
    grads: list
    states: list  # [] (SGD), [velocity], [moment1, moment2, beta1_pow, beta2_pow]
    base_lr: object  # a float64 array [1] (a device buffer on the GPU) or a Python float
    lr_ratios: list  # Python floats: each tensor's lr is float32(base_lr * ratio)
    grad_scales: list
    l2_coeffs: list
    decay_coeffs: list  # AdamW's decoupled coefficient, 0.0 for none


def update_path(params, grads) -> str:
    """How a bucket is updated: ``'fused kernel'``, ``'cupy twin'`` or ``'per-param numpy'``."""
    if not params or _device.get_array_module(*params[:1]) is np:
        return "per-param numpy"
    dtypes = {(p.dtype, g.dtype) for p, g in zip(params, grads)}
    contiguous = all(a.flags.c_contiguous for a in (*params, *grads))
    if kernels.enabled() and len(dtypes) == 1 and dtypes <= set(_KERNEL_DTYPES) and contiguous:
        return "fused kernel"
    return "cupy twin"


def fused_sgd(params, masters, grads, base_lr, found_inf, *, lr_ratios=None, l2_coeffs=None):
    """``p = p - lr * g`` for every tensor, in place (see the module docstring).

    Args:
        params: parameter arrays (float16 or float32), written in place.
        masters: per param, its float32 master (updated in place) or None.
        grads: gradient arrays, same shapes; never modified.
        base_lr: the learning rate: a float64 array of shape [1] on the params' device, or
            a Python float.
        found_inf: None/bool, or a bool array of shape [1] (a device flag stays on the device).
        lr_ratios: per param, a multiplier of ``base_lr`` (1 for none).
        l2_coeffs: per param, an L2Decay coefficient added to the gradient (0 for none).
    """
    bucket = _bucket(params, masters, grads, [[]] * len(params), base_lr, lr_ratios, l2_coeffs)
    _run("sgd", bucket, found_inf)


def fused_momentum(
    params, masters, grads, velocities, base_lr, found_inf, *, momentum: float,
    use_nesterov: bool = False, lr_ratios=None, l2_coeffs=None, grad_scales=None,
) -> None:  # fmt: skip
    """Momentum for every tensor: ``v = mu*v + g``, ``p -= lr*(g + mu*v)`` (Nesterov) or ``lr*v``.

    ``grad_scales`` (Momentum's ``rescale_grad``, per param) multiplies each gradient before
    the L2 term is added. Other arguments as :func:`fused_sgd`; ``velocities`` are float32.
    """
    states = [[v] for v in velocities]
    bucket = _bucket(params, masters, grads, states, base_lr, lr_ratios, l2_coeffs, grad_scales)
    _run("momentum", bucket, found_inf, momentum=float(momentum), nesterov=bool(use_nesterov))


def fused_adam(
    params, masters, grads, moment1s, moment2s, beta1_pows, beta2_pows, base_lr, found_inf, *,
    beta1: float, beta2: float, epsilon: float, lr_ratios=None, decoupled_decay=None,
    l2_coeffs=None,
) -> None:  # fmt: skip
    """Adam (AdamW with ``decoupled_decay``) for every tensor, Paddle's maths (see ``Adam``).

    ``decoupled_decay`` (per param, 0 for none) first shrinks ``p *= 1 - lr * coeff``. The
    moments are float32 like the master; the beta pows are float32 arrays of shape [1], one
    pair per tensor, advanced once per update (not when ``found_inf`` is set).
    """
    states = [list(s) for s in zip(moment1s, moment2s, beta1_pows, beta2_pows)]
    bucket = _bucket(
        params, masters, grads, states, base_lr, lr_ratios, l2_coeffs, None, decoupled_decay
    )
    _run("adam", bucket, found_inf, beta1=float(beta1), beta2=float(beta2), eps=float(epsilon))


def _bucket(params, masters, grads, states, base_lr, ratios, l2, scales=None, decay=None):
    n = len(params)

    def per_tensor(values, fill):
        return [fill] * n if values is None else [float(v) for v in values]

    bucket = _Bucket(
        list(params), list(masters), list(grads), list(states), base_lr,
        per_tensor(ratios, 1.0), per_tensor(scales, 1.0), per_tensor(l2, 0.0),
        per_tensor(decay, 0.0),
    )  # fmt: skip
    lists = (bucket.masters, bucket.grads, bucket.states, bucket.lr_ratios, bucket.grad_scales)
    if any(len(x) != n for x in (*lists, bucket.l2_coeffs, bucket.decay_coeffs)):
        raise ValueError("fused optimizer update: every per-tensor list needs one entry per param")
    return bucket


def _run(kind: str, bucket: _Bucket, found_inf, **hyper) -> None:
    """Skip on a set host flag; else the kernel, or the twin (committing on a device flag)."""
    if not bucket.params:
        return
    on_device = _device.is_array(found_inf) and _device.get_array_module(found_inf) is not np
    if not on_device and _flag_is_set(found_inf):
        return  # a host flag: reading it is free, so skip outright
    path = update_path(bucket.params, bucket.grads)
    if path == "fused kernel":
        _launch(kind, bucket, found_inf if on_device else None, hyper)
    else:
        keep = found_inf.reshape(()) if on_device else None
        _twin(_MATH[kind], bucket, hyper, keep)


def _flag_is_set(flag) -> bool:
    if flag is None:
        return False
    return bool(flag.any()) if isinstance(flag, np.ndarray) else bool(flag)


# ---- the NumPy twin: the kernel's specification ----------------------------------------------
# Each step is written exactly as the optimizer's _update (same operations, same order, Python
# floats rounded to float32 by NumPy), so the twin is bit-identical to the per-param path.
def _sgd_math(p, g, state, lr, decay, hyper) -> None:
    p -= lr * g


def _momentum_math(p, g, state, lr, decay, hyper) -> None:
    (v,) = state
    mu = hyper["momentum"]
    v *= mu
    v += g
    if hyper["nesterov"]:
        p -= lr * (g + mu * v)
    else:
        p -= lr * v


def _adam_math(p, g, state, lr, decay, hyper) -> None:
    xp = _device.get_array_module(p)
    beta1, beta2, eps = hyper["beta1"], hyper["beta2"], hyper["eps"]
    m, v, beta1_pow, beta2_pow = state
    if decay is not None:
        p *= decay  # AdamW's decoupled decay, 1 - lr * coeff, before the Adam step
    m *= beta1
    m += (1.0 - beta1) * g
    v *= beta2
    v += (1.0 - beta2) * (g * g)
    root = xp.sqrt(1.0 - beta2_pow)
    lr_t = lr * root / (1.0 - beta1_pow)
    p -= lr_t * (m / (xp.sqrt(v) + eps * root))
    beta1_pow *= beta1
    beta2_pow *= beta2


_MATH = {"sgd": _sgd_math, "momentum": _momentum_math, "adam": _adam_math}


def _lr_and_decay(base_lr, ratio: float, coeff: float):
    """``(float32(base * ratio), float32(1 - base * ratio * coeff) or None)``, products in
    float64: Python floats when the base is on the host (NumPy rounds them to float32 as it
    multiplies a float32 array), 0-d float32 device arrays when it is on the GPU (no read)."""
    if not _device.is_array(base_lr) or _device.get_array_module(base_lr) is np:
        lr = float(np.asarray(base_lr).reshape(-1)[0]) * ratio
        return lr, (1.0 - lr * coeff if coeff else None)
    lr64 = base_lr.reshape(()) * ratio
    decay = (1.0 - lr64 * coeff).astype(float32) if coeff else None
    return lr64.astype(float32), decay


def _twin(math, bucket: _Bucket, hyper: dict, keep=None) -> None:
    """Run ``math`` tensor by tensor, in place.

    With ``keep`` (a 0-d bool device array, True = overflow) the step runs on copies that are
    committed with ``copyto(old, new, where=~keep)``: skipped or not, the flag is never read.
    """
    b = bucket
    for i, (param, master, grad) in enumerate(zip(b.params, b.masters, b.grads)):
        xp = _device.get_array_module(param)
        own = master  # what the step updates: the master, else the param (as float32)
        if own is None:
            own = param.astype(accumulation_dtype(param.dtype), copy=False)
        old = [own, *b.states[i]]
        new = old if keep is None else [a.copy() for a in old]
        p, state = new[0], new[1:]
        g = grad.astype(p.dtype, copy=False)
        if b.grad_scales[i] != 1.0:
            g = g * b.grad_scales[i]
        if b.l2_coeffs[i]:
            g = g + b.l2_coeffs[i] * p  # L2Decay, on the value before this step
        lr, decay = _lr_and_decay(b.base_lr, b.lr_ratios[i], b.decay_coeffs[i])
        math(p, g, state, lr, decay, hyper)
        if keep is None:
            if own is not param:  # the optimize-cast (or a float16 param's float32 copy, back)
                param[...] = p.astype(param.dtype)
            continue
        for dst, src in zip(old, new):
            xp.copyto(dst, src, where=~keep)
        if own is not param:
            xp.copyto(param, p.astype(param.dtype), where=~keep)


# ---- the kernel launcher ------------------------------------------------------------------------
def _launch(kind: str, bucket: _Bucket, found_inf, hyper: dict) -> None:
    """One launch of ``{kind}_step<T, G>`` over the bucket; nothing waits for the GPU."""
    b = bucket
    ptype, gtype = b.params[0].dtype, b.grads[0].dtype
    for i, (param, master, grad) in enumerate(zip(b.params, b.masters, b.grads)):
        kernels.check_array(param, ptype, f"params[{i}]")
        kernels.check_array(grad, gtype, f"grads[{i}]")
        for array in (master, *b.states[i]):
            if array is not None:
                kernels.check_array(array, float32, f"the master and state of params[{i}]")
    with b.params[0].device as device:
        base_lr = _device_lr(b.base_lr)
        if found_inf is None:  # the host said "no overflow": a device flag that says so
            found_inf = _no_overflow(device.id)
        kernels.check_array(found_inf, bool_, "found_inf")
        words = kernels.device_table(_table_key(kind, device.id, b), lambda: _table(b)[0])
        n = len(b.params)
        n_chunks = words.size - n * _WORDS - 1
        tensors, chunks, blocks_done = words[: n * _WORDS], words[n * _WORDS : -1], words[-1:]
        if kind == "adam":
            args = (tensors, chunks, np.int32(n), blocks_done, found_inf, base_lr)
        else:
            args = (tensors, chunks, found_inf, base_lr)
        name = f"{kind}_step<{_CUDA_TYPE[ptype]}, {_CUDA_TYPE[gtype]}>"
        kernels.launch("optim.cu", name, (n_chunks,), (THREADS,), args + _scalars(kind, hyper))


def _device_lr(base_lr):
    """The base lr as the kernel reads it: a float64 device array of shape [1]."""
    if _device.is_array(base_lr) and _device.get_array_module(base_lr) is not np:
        kernels.check_array(base_lr, np.float64, "base_lr")
        if base_lr.shape != (1,):
            raise ValueError(f"base_lr must have shape [1], got {list(base_lr.shape)}")
        return base_lr
    # A host value: a fill kernel with the value as its argument (no upload).
    return _device.cupy.full(1, float(np.asarray(base_lr).reshape(-1)[0]), dtype=np.float64)


_NO_OVERFLOW: dict[int, object] = {}


def _no_overflow(device_id: int):
    """A device bool [1] that stays False, made once per device."""
    flag = _NO_OVERFLOW.get(device_id)
    if flag is None:
        flag = _NO_OVERFLOW[device_id] = _device.cupy.zeros(1, dtype=bool_)
    return flag


def _scalars(kind: str, hyper: dict) -> tuple:
    """The kernel's hyper-parameters, rounded to float32 from the doubles NumPy would round."""
    if kind == "momentum":
        return np.float32(hyper["momentum"]), np.int32(hyper["nesterov"])
    if kind == "adam":
        beta1, beta2 = hyper["beta1"], hyper["beta2"]
        return tuple(np.float32(x) for x in (beta1, beta2, 1.0 - beta1, 1.0 - beta2, hyper["eps"]))
    return ()


def _pointer(array) -> int:
    return 0 if array is None else array.data.ptr


def _table_key(kind: str, device_id: int, bucket: _Bucket) -> tuple:
    """Everything :func:`_table` writes, so that equal keys mean equal tables."""
    b = bucket
    rows = tuple(
        (*map(_pointer, (param, master, grad, *state)), param.size, *scalars)
        for param, master, grad, state, *scalars in zip(
            b.params,
            b.masters,
            b.grads,
            b.states,
            b.lr_ratios,
            b.decay_coeffs,
            b.grad_scales,
            b.l2_coeffs,
        )
    )
    return ("optim.cu", kind, device_id, rows)


def _table(bucket: _Bucket) -> tuple[np.ndarray, int]:
    """The int64 words the kernel reads: TensorArgs[n], then int2 chunks[C], then a zero counter."""
    b = bucket
    n = len(b.params)
    sizes = np.array([p.size for p in b.params], dtype=np.int64)
    per_tensor = -(-sizes // CHUNK)
    n_chunks = max(int(per_tensor.sum()), 1)  # all empty: one block on an empty tensor
    words = np.zeros(n * _WORDS + n_chunks + 1, dtype=np.int64)
    args = words[: n * _WORDS].view(TENSOR_ARGS)
    args["param"], args["master"], args["grad"] = (
        [_pointer(a) for a in arrays] for arrays in (b.params, b.masters, b.grads)
    )
    for j, field in enumerate(("state0", "state1", "b1p", "b2p")):
        args[field] = [_pointer(s[j] if j < len(s) else None) for s in b.states]
    args["size"] = sizes
    args["lr_ratio"] = b.lr_ratios
    args["decay"] = b.decay_coeffs
    # float64 -> float32 rounds to nearest even, as NumPy rounds a Python float scalar.
    args["grad_scale"] = np.array(b.grad_scales, dtype=np.float64)
    args["l2"] = np.array(b.l2_coeffs, dtype=np.float64)
    chunks = words[n * _WORDS : n * _WORDS + n_chunks].view(np.int32).reshape(n_chunks, 2)
    if per_tensor.sum():
        first = np.cumsum(per_tensor) - per_tensor
        chunks[:, 0] = np.repeat(np.arange(n), per_tensor)
        chunks[:, 1] = np.arange(n_chunks) - np.repeat(first, per_tensor)
    return words, n_chunks
