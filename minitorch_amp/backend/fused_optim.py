"""``cuda/optim.cu``'s launcher: the per-tensor table, and one launch per bucket.

The maths of each optimizer is written once, in Python, in its own file
(``optimizer/sgd.py``, ``momentum.py``, ``adam.py``); the optimizer runs it on NumPy and on
CuPy arrays (``optimizer/bucket.py``), and that is the specification this kernel is held to,
bit for bit. This module only knows how the kernel is called:

* :func:`takes`: whether ``optim.cu`` has a kernel for an optimizer and a (param, grad) dtype;
* :func:`table`: the int64 words the kernel reads (one ``TensorArgs`` per tensor, the chunk
  map, Adam's ticket counter), built on the host once per set of tensors;
* :func:`launch`: one launch over a bucket, reading ``found_inf`` and the learning rate from
  device memory, so nothing waits for the GPU and a captured graph replays it.

Example (the table of two tensors, 3 and 70000 elements, no masters or state):
    >>> import numpy as np
    >>> p = [np.zeros(3, "float32"), np.zeros(70000, "float32")]
    >>> words = table(p, [None, None], p, [(), ()], [1.0, 1.0], [0.0, 0.0], [1.0, 1.0], [0.0, 0.0])
    >>> words.size - 2 * TENSOR_ARGS.itemsize // 8   # chunks (1 + 2) and the zero counter
    4
"""

from __future__ import annotations

import numpy as np

from . import kernels
from .dtypes import bfloat16, bool_, float16, float32

__all__ = ["CHUNK", "TENSOR_ARGS", "THREADS", "launch", "table", "takes"]

CHUNK = 65536  # elements per block: kChunk in optim.cu
THREADS = 256  # threads per block: kThreads in optim.cu
KINDS = ("sgd", "momentum", "adam")
_CUDA_TYPE = {float16: "__half", bfloat16: "__nv_bfloat16", float32: "float"}
KERNEL_DTYPES = (  # (param, grad)
    (float16, float16), (float16, float32), (bfloat16, bfloat16), (bfloat16, float32),
    (float32, float32),
)  # fmt: skip

OPTIM = kernels.register(
    "optim.cu",
    names=tuple(
        f"{kind}_step<{_CUDA_TYPE[p]}, {_CUDA_TYPE[g]}>" for kind in KINDS for p, g in KERNEL_DTYPES
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
WORDS = TENSOR_ARGS.itemsize // 8  # int64 words per tensor in the uploaded table


def takes(kind: str | None, ptype, gtype) -> bool:
    """Whether ``optim.cu`` has ``{kind}_step`` for float ``ptype`` params and ``gtype`` grads."""
    return kind in KINDS and (ptype, gtype) in KERNEL_DTYPES


def table(params, masters, grads, states, lr_ratios, decays, grad_scales, l2s) -> np.ndarray:
    """The int64 words the kernel reads: ``TensorArgs[n]``, ``int2 chunks[C]``, a zero counter.

    Args:
        params, masters, grads: per tensor, its arrays (a master may be None: the param is
            its own master). Only their device addresses and sizes go into the table.
        states: per tensor, its float32 state arrays in the kernel's order (Momentum:
            ``(velocity,)``; Adam: ``(moment1, moment2, beta1_pow, beta2_pow)``).
        lr_ratios, decays, grad_scales, l2s: per tensor, the scalars of ``TensorArgs``.
    """
    n = len(params)
    sizes = np.array([p.size for p in params], dtype=np.int64)
    per_tensor = -(-sizes // CHUNK)
    n_chunks = max(int(per_tensor.sum()), 1)  # all empty: one block on an empty tensor
    words = np.zeros(n * WORDS + n_chunks + 1, dtype=np.int64)
    args = words[: n * WORDS].view(TENSOR_ARGS)
    args["param"], args["master"], args["grad"] = (
        [_pointer(a) for a in arrays] for arrays in (params, masters, grads)
    )
    for j, field in enumerate(("state0", "state1", "b1p", "b2p")):
        args[field] = [_pointer(s[j] if j < len(s) else None) for s in states]
    args["size"] = sizes
    args["lr_ratio"] = lr_ratios
    args["decay"] = decays
    # float64 -> float32 rounds to nearest even, as NumPy rounds a Python float scalar.
    args["grad_scale"] = np.array(grad_scales, dtype=np.float64)
    args["l2"] = np.array(l2s, dtype=np.float64)
    chunks = words[n * WORDS : n * WORDS + n_chunks].view(np.int32).reshape(n_chunks, 2)
    if per_tensor.sum():
        first = np.cumsum(per_tensor) - per_tensor
        chunks[:, 0] = np.repeat(np.arange(n), per_tensor)
        chunks[:, 1] = np.arange(n_chunks) - np.repeat(first, per_tensor)
    return words


def launch(kind: str, ptype, gtype, words, n_tensors: int, found_inf, base_lr, scalars) -> None:
    """One launch of ``{kind}_step<T, G>`` over a bucket whose table ``words`` is on the device.

    Args:
        words: the device copy of :func:`table`'s words (``kernels.device_table``).
        found_inf: bool [1] on the device; when set, the kernel writes nothing.
        base_lr: float64 [1] on the device, the optimizer's learning rate (its own buffer).
        scalars: the kernel's hyper-parameters, as ``numpy.float32`` / ``numpy.int32``
            (the optimizer's ``_kernel_scalars``).
    """
    if found_inf.dtype != bool_ or found_inf.shape != (1,):  # the one form it takes
        raise TypeError(
            f"found_inf must be a bool array of shape [1], got {found_inf.dtype} "
            f"of shape {list(found_inf.shape)}"
        )
    n_chunks = words.size - n_tensors * WORDS - 1
    tensors, chunks = words[: n_tensors * WORDS], words[n_tensors * WORDS : -1]
    if kind == "adam":
        args = (tensors, chunks, np.int32(n_tensors), words[-1:], found_inf, base_lr)
    else:
        args = (tensors, chunks, found_inf, base_lr)
    name = f"{kind}_step<{_CUDA_TYPE[ptype]}, {_CUDA_TYPE[gtype]}>"
    kernels.launch("optim.cu", name, (n_chunks,), (THREADS,), args + tuple(scalars))


def _pointer(array) -> int:
    if array is None:
        return 0
    data = array.data
    return data.ptr if hasattr(data, "ptr") else array.ctypes.data  # a CuPy array, or NumPy's
