"""The Hopper GEMM with bfloat16 operands: ``cuda/gemm_bf16_sm90.cu``, launched as
``gemm_sm90.py`` launches the float16 one.

The kernel is ``gemm_sm90.cu``'s, instantiated with ``In = __nv_bfloat16``: its element type
picks the ``wgmma ... .bf16.bf16`` instruction, and ``gemm_bf16_sm90.cu`` adds the bfloat16
epilogue store. Everything about *feeding* it is ``gemm_sm90.py``'s, reused here unchanged:
where it runs (:func:`gemm_sm90.usable`: compute capability 9.0, TMA-addressable operands,
``MINITORCH_AMP_GEMM_KERNEL``), the shape rule and its schedules (:func:`gemm_sm90.plan`:
tile width, ping-pong, split-K; tuned on float16, and bfloat16 tiles move the same bytes
through the same instructions), the tensor maps (:func:`gemm_sm90.operand_map`) and the
shared-memory size. Only the kernel names differ.

NOTE: the tensor maps are encoded as ``FLOAT16`` (``tensor_maps.encode`` knows no other type).
TMA copies bytes and fills outside the matrix with zero bits, which are +0.0 in both 16-bit
formats, so a ``BFLOAT16`` map would load the very same tiles.

Example (the names, without a GPU):
    >>> kernel_name(False, True, "bfloat16", 128, pingpong=True)
    'gemm_sm90<false,true,__nv_bfloat16,__nv_bfloat16,128,true>'
"""

from __future__ import annotations

import numpy as np

from . import gemm_sm90 as _sm90
from .dtypes import bfloat16, float32
from .kernels import register

FILE = "gemm_bf16_sm90.cu"
_OUT_TYPES = {bfloat16: "__nv_bfloat16", float32: "float"}


def kernel_name(
    transpose_a: bool, transpose_b: bool, out_dtype, bn: int, pingpong: bool = False
) -> str:
    """The name expression for this layout, output dtype and schedule."""
    out = _OUT_TYPES[np.dtype(out_dtype)]
    flags = ",".join(str(x).lower() for x in (transpose_a, transpose_b))
    return f"gemm_sm90<{flags},{out},__nv_bfloat16,{bn},{str(pingpong).lower()}>"


_LAYOUTS = ((False, False), (False, True), (True, False))
NAMES = tuple(
    kernel_name(ta, tb, out, bn, pingpong)
    for out in _OUT_TYPES
    for ta, tb in _LAYOUTS
    for bn, pingpong in _sm90.SCHEDULES
)
KERNELS = register(FILE, names=NAMES, arch=_sm90.ARCH, split=True)
BFLOAT16 = _sm90.Variant(FILE, kernel_name)


def launch(a, b, transpose_a, transpose_b, epilogue, out, flags: int) -> None:
    """``out = epilogue(alpha * op(a) @ op(b))`` on 2-D contiguous bfloat16 CuPy arrays;
    ``out`` is bfloat16 or float32 (``backend/gemm.py`` has checked everything)."""
    _sm90.launch(a, b, transpose_a, transpose_b, epilogue, out, flags, BFLOAT16)
