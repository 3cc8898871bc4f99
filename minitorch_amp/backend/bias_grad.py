"""A Linear layer's bias gradient and its grad cast to the product's dtype, in one pass.

Before its two GEMMs, a Linear layer's backward needs the bias's gradient, the sum of the
incoming grad over the rows, and, when the add of a float32 bias promoted a 16-bit product
(AMP O1/OD), that grad rounded to the product's dtype. CuPy spells these as up to three
launches (``sum(axis=0, dtype=float32)``, ``astype`` of the sum, ``astype`` of the grad);
``bias_grad<G, B, P>`` of ``cuda/reduction.cu`` reads the grad once and writes both, with
an optional ReLU mask (``relu_backward``'s ``grad * (y > 0)``) folded in.

* NumPy arrays: :func:`~minitorch_amp.backend.primitives.column_sums` of the (masked) grad
  (BLAS on the CPU) and ``astype``. This is the twin, the specification.
* CuPy arrays: the kernel, one launch, deterministic: every column's sum is added in an
  order that depends on the shape alone (the same bits on every run and every GPU), within
  ``(ceil(rows / 8) + 3) * 2**-24`` times the sum of the magnitudes of the twin's.
* Strided arrays, dtype combinations the file does not instantiate, and
  ``MINITORCH_AMP_RAW_KERNELS=0``: the twin's code on CuPy arrays.

Example:
    >>> import numpy as np
    >>> grad = np.array([[1.0, 70000.0], [2.0, -1.0]], "float32")
    >>> gb, gp = bias_grad(grad, "float32", "float16")
    >>> gb.tolist(), gp.tolist()  # 70000 overflows float16, as astype does
    ([3.0, 69999.0], [[1.0, inf], [2.0, -1.0]])
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import device as _device
from . import kernels
from .device import get_array_module
from .dtypes import FLOATING, LOW_PRECISION, bfloat16, convert_dtype, float16, float32
from .primitives import column_sums, relu_backward

__all__ = ["bias_grad"]

_CUDA_TYPE = {float16: "__half", bfloat16: "__nv_bfloat16", float32: "float"}
# (grad G, bias gradient B, cast grad P) -> name; P = G when the cast grad is not wanted
_KERNELS = {
    (g, b, p): f"bias_grad<{_CUDA_TYPE[g]}, {_CUDA_TYPE[b]}, {_CUDA_TYPE[p]}>"
    for g, b, p in [
        (float32, float32, float32),
        (float32, float32, float16),
        (float32, float32, bfloat16),
        (float16, float16, float16),
        (bfloat16, bfloat16, bfloat16),
        (float16, float32, float16),
        (bfloat16, float32, bfloat16),
    ]
}
# sum_squares (backend.primitives) is registered for this file too: the entry names both
REDUCTION = kernels.register("reduction.cu", names=tuple(_KERNELS.values()))
_THREADS = 256  # kThreads in cuda/reduction.cu
_COLUMNS = 32  # kBiasColumns: columns per block
_MAX_BLOCKS = 65535  # past that, blocks stride over the column tiles
_NULL = np.int64(0)  # a null pointer: RawKernel passes an int64 by value, 8 zero bytes


def bias_grad(grad, bias_dtype, product_dtype=None, relu_out=None, out=None):
    """The bias gradient ``sum(m, axis=0)`` and ``m`` cast to ``product_dtype``, where ``m`` is
    ``grad`` (2-D, ``[rows, n]``), or ``grad * (relu_out > 0)`` when ``relu_out`` is given.

    The sum is accumulated in float32 (float64 for a float64 grad) and rounded once
    to ``bias_dtype``: ``grad``'s dtype, or float32 for a float16 or bfloat16 grad. The cast
    rounds to nearest even, past the largest finite value to inf (as ``astype`` does).

    Args:
        grad: the incoming gradient, ``[rows, n]``, a NumPy or CuPy array.
        bias_dtype: the bias gradient's dtype.
        product_dtype: the dtype to cast ``m`` to, or None for no cast.
        relu_out: ``relu(x)`` of ``grad``'s shape, whose non-positive entries mask ``grad``
            (NaN, not 0, for an inf or NaN grad there: a multiply, as ``relu_backward``).
        out: an array ``[n]`` of ``bias_dtype`` to write the bias gradient into.

    Returns:
        ``(gb, gp)``: the bias gradient ``[n]``, and ``m`` in ``product_dtype`` (None when
        ``product_dtype`` is None, or is ``grad``'s dtype and there is no mask: then
        ``grad`` is that array).

    Raises:
        ValueError: ``grad`` is not 2-D, or ``relu_out`` or ``out`` has the wrong shape or is
            on another device. Nothing is written then.
        TypeError: a dtype that is not a float, a ``bias_dtype`` other than the two above,
            or an ``out`` or ``relu_out`` of the wrong dtype.
    """
    key = None  # a GPU call's signature: a call made before is launched as it was
    if grad.__class__ is not np.ndarray and get_array_module(grad) is not np:
        key = _signature(grad, bias_dtype, product_dtype, relu_out, out)
        kept = KEPT.get(key)
        if kept is not None:
            return kept(grad, relu_out, out)
    bias_dtype, product_dtype = _check(grad, bias_dtype, product_dtype, relu_out, out)
    if product_dtype == grad.dtype and relu_out is None:
        product_dtype = None
    xp = get_array_module(grad)
    name = _KERNELS.get((grad.dtype, bias_dtype, product_dtype or grad.dtype))
    contiguous = grad.flags.c_contiguous and all(
        a.flags.c_contiguous for a in (relu_out, out) if a is not None
    )  # fmt: skip
    same_dtype = relu_out is None or relu_out.dtype == grad.dtype
    if xp is np or name is None or not kernels.enabled() or not contiguous or not same_dtype:
        return _twin(grad, bias_dtype, product_dtype, relu_out, out)
    rows, n = grad.shape
    blocks = min(-(-n // _COLUMNS), _MAX_BLOCKS)
    launch = _Launch(name, (blocks,), (np.int64(rows), np.int64(n)), bias_dtype, product_dtype)
    if key is not None:
        if len(KEPT) >= KEPT_CALLS:
            KEPT.clear()
        KEPT[key] = launch
    return launch(grad, relu_out, out)


# ---- kept launches: a step's bias gradients, checked once (as gemm_gpu.py's GEMMs) ---------
KEPT_CALLS = 256  # signatures kept; the dict is emptied when full
KEPT: dict = {}  # signature -> _Launch


def _signature(grad, bias_dtype, product_dtype, relu_out, out) -> tuple:
    """What a GPU call's checks and choices follow from: the arrays' kinds, the dtypes as
    passed (``float`` as the default dtype it names now), the device and
    ``MINITORCH_AMP_RAW_KERNELS``."""
    return (
        kernels.array_kind(grad), _named(bias_dtype), _named(product_dtype),
        kernels.array_kind(relu_out), kernels.array_kind(out),
        grad.device.id, kernels.enabled(),
    )  # fmt: skip


def _named(dtype):
    """``dtype`` as a signature holds it: ``float`` means the default dtype, which
    ``set_default_dtype`` changes; every other spelling names one dtype for good."""
    return convert_dtype(dtype) if dtype is float else dtype


class _Launch(NamedTuple):
    """One ``bias_grad`` launch decided but for its arrays."""

    name: str
    grid: tuple
    sizes: tuple  # (rows, n) as the kernel's int64 arguments
    bias_dtype: np.dtype
    product_dtype: np.dtype | None  # None: no cast of the gradient made

    def __call__(self, grad, relu_out, out):
        xp = _device.cupy
        n = int(self.sizes[1])
        with grad.device:
            gb = xp.empty(n, self.bias_dtype) if out is None else out
            gp = None
            if self.product_dtype is not None:
                gp = xp.empty((int(self.sizes[0]), n), self.product_dtype)
            if n:
                mask = _NULL if relu_out is None else relu_out
                args = (grad, mask, *self.sizes, gb, _NULL if gp is None else gp)
                kernels.launch("reduction.cu", self.name, self.grid, (_THREADS,), args)
        return gb, gp


# NOTE: inf and NaN are values here, as on GPUs: inf * 0 is NaN where a ReLU unit is off,
# the sums may overflow or meet a NaN, and a cast past float16's largest value is inf.
@np.errstate(over="ignore", invalid="ignore")  # (as a decorator: half the cost of a with)
def _twin(grad, bias_dtype, product_dtype, relu_out, out):
    """The specification, in the existing primitives (the CPU's bits)."""
    masked = grad if relu_out is None else relu_backward(relu_out, grad)
    wide = masked if bias_dtype == grad.dtype else masked.astype(bias_dtype)
    gb = column_sums(wide, out=out)
    gp = None if product_dtype is None else masked.astype(product_dtype)
    return gb, gp


def _check(grad, bias_dtype, product_dtype, relu_out, out):
    """The dtypes, normalised; raise before anything is written when an argument is wrong."""
    if getattr(grad, "ndim", None) != 2:
        shape = getattr(grad, "shape", None)
        raise ValueError(
            f"bias_grad: grad must be 2-D [rows, n], got shape {shape}; pass grad.reshape(-1, n)"
        )
    if grad.dtype not in FLOATING:
        raise TypeError(f"bias_grad: grad must be a float array, got {grad.dtype}")
    bias_dtype = convert_dtype(bias_dtype)
    allowed = (grad.dtype, float32) if grad.dtype in LOW_PRECISION else (grad.dtype,)
    if bias_dtype not in allowed:
        names = " or ".join(str(d) for d in allowed)
        raise TypeError(
            f"bias_grad: bias_dtype must be {names} for a {grad.dtype} grad, got {bias_dtype}; "
            "cast the result instead"
        )
    if product_dtype is not None:
        product_dtype = convert_dtype(product_dtype)
        if product_dtype not in FLOATING:
            raise TypeError(f"bias_grad: product_dtype must be a float dtype, got {product_dtype}")
    xp = get_array_module(grad)
    for label, array, shape in (("relu_out", relu_out, grad.shape), ("out", out, grad.shape[1:])):
        if array is None:
            continue
        if get_array_module(array) is not xp:
            raise ValueError(f"bias_grad: {label} must be on grad's device; move it there first")
        if tuple(array.shape) != tuple(shape):
            raise ValueError(
                f"bias_grad: {label} must have shape {list(shape)}, got {list(array.shape)}"
            )
    if relu_out is not None and relu_out.dtype not in FLOATING:
        raise TypeError(f"bias_grad: relu_out must be a float array, got {relu_out.dtype}")
    if out is not None and out.dtype != bias_dtype:
        raise TypeError(f"bias_grad: out must be {bias_dtype} (bias_dtype), got {out.dtype}")
    return bias_dtype, product_dtype
