"""TMA tensor maps: the descriptors a Hopper kernel's bulk copies read operands through.

``cp.async.bulk.tensor`` copies a box of a matrix from global to shared memory, described by
a ``CUtensorMap``: the matrix's address, sizes and row stride, the box, the swizzle. The
Hopper GEMMs (``gemm_sm90.py``, ``gemm_bf16_sm90.py`` and the FP8 GEMM of
``fp8_gemm.py``) each take two, built here:

* :func:`tma_addressable`: TMA's rules for an operand (else the caller keeps another kernel);
* :func:`map_spec`: what the driver is told, in elements, innermost first;
* :func:`encode`: the map from ``cuTensorMapEncodeTiled`` (the driver API through
  ``ctypes``: CuPy does not wrap it), 2-byte elements, 128-byte swizzle, out-of-bounds
  elements read as zero bits; kept per address, shape, row stride and box.

Example (the pure parts run anywhere):
    >>> import numpy as np
    >>> map_spec(np.zeros((300, 136), np.float16), box=(64, 128))
    {'dims': (136, 300), 'row_stride': 272, 'box': (64, 128)}
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict

import numpy as np


def tma_addressable(array) -> bool:
    """TMA's rules for a 2-D operand: 16-byte aligned start, rows 16 bytes apart, no empty
    dimension, a row stride below 2**40 bytes."""
    return (
        array.data.ptr % 16 == 0
        and array.strides[0] % 16 == 0
        and array.strides[1] == array.itemsize
        and min(array.shape) >= 1
        and array.strides[0] < 2**40
    )


def map_spec(array, box: tuple[int, int]) -> dict:
    """What ``cuTensorMapEncodeTiled`` gets for a 2-D row-major ``array`` read in boxes of
    ``box``: sizes and box in elements, innermost first, the row stride in bytes."""
    stored_rows, stored_cols = array.shape
    return {"dims": (stored_cols, stored_rows), "row_stride": array.strides[0], "box": box}


_DATA_TYPE_FLOAT16 = 6  # CU_TENSOR_MAP_DATA_TYPE_FLOAT16 (cuda.h)
_INTERLEAVE_NONE = 0
_SWIZZLE_128B = 3
_L2_PROMOTION_256B = 3
_OOB_FILL_ZEROS = 0
TENSOR_MAP = np.dtype((np.void, 128))  # CUtensorMap: 128 opaque bytes


class TensorMapError(RuntimeError):
    """cuTensorMapEncodeTiled refused an operand."""


_encode = None


def _encoder():
    global _encode
    if _encode is None:
        fn = ctypes.CDLL("libcuda.so.1").cuTensorMapEncodeTiled
        u32p, u64p = ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint64)
        fn.argtypes = [
            ctypes.c_void_p,
            ctypes.c_int,
            ctypes.c_uint32,
            ctypes.c_void_p,
            u64p,
            u64p,
            u32p,
            u32p,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_int,
        ]
        fn.restype = ctypes.c_int
        _encode = fn
    return _encode


MAP_CACHE_SIZE = 512  # tensor maps kept: a step's operands, many times over
_maps: OrderedDict = OrderedDict()  # (address, shape, row stride, box) -> map


def encode(array, box: tuple[int, int]):
    """The tensor map of ``array`` (a CuPy matrix of 2-byte elements) read in boxes of
    ``box`` (contiguous extent, rows; in elements) as a 128-byte kernel argument.

    A map is a function of the operand's address, shape and row stride and of the box, and
    nothing else, so it is encoded once and then found here: a weight keeps its address for
    the whole run, and CuPy's pool hands an activation of the same size back at the same
    address step after step, so a training step encodes nothing after its first iteration
    (the ``ctypes`` call and its argument arrays cost tens of µs of host time per operand).
    The ``MAP_CACHE_SIZE`` least recently used are kept. A map is passed by value, so a
    graph captured with it needs nothing kept alive.
    """
    key = (array.data.ptr, array.shape, array.strides[0], box)
    found = _maps.get(key)
    if found is not None:
        _maps.move_to_end(key)
        return found
    found = _encode_now(array, box)
    _maps[key] = found
    if len(_maps) > MAP_CACHE_SIZE:
        _maps.popitem(last=False)
    return found


def _encode_now(array, box: tuple[int, int]):
    """:func:`encode` without the cache: one ``cuTensorMapEncodeTiled`` call."""
    spec = map_spec(array, box)
    holder = np.zeros(256, np.uint8)  # the driver wants the map 64-byte aligned
    offset = (-holder.ctypes.data) % 128
    dims = (ctypes.c_uint64 * 2)(*spec["dims"])
    strides = (ctypes.c_uint64 * 1)(spec["row_stride"])
    box = (ctypes.c_uint32 * 2)(*spec["box"])
    steps = (ctypes.c_uint32 * 2)(1, 1)
    status = _encoder()(
        holder.ctypes.data + offset,
        _DATA_TYPE_FLOAT16,
        2,
        array.data.ptr,
        dims,
        strides,
        box,
        steps,
        _INTERLEAVE_NONE,
        _SWIZZLE_128B,
        _L2_PROMOTION_256B,
        _OOB_FILL_ZEROS,
    )
    if status != 0:
        raise TensorMapError(
            f"cuTensorMapEncodeTiled failed (CUresult {status}) for an operand of shape "
            f"{array.shape} with strides {array.strides}; set MINITORCH_AMP_GEMM_KERNEL=sm80 "
            f"to use the mma.sync kernel"
        )
    return holder[offset : offset + 128].view(TENSOR_MAP)[0]
