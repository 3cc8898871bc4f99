"""Cache-sized blocks for chains of NumPy passes.

A chain of NumPy passes over a multi-megabyte array streams the whole array through memory once
per pass; over 256 KiB blocks the chain's arrays stay in the core's cache from one pass to the
next. Elementwise maths gives the same bits either way. On the 2-core CPU (interleaved in one
process): exact GELU's normal CDF, about twenty passes over a ``[16, 64, 512]`` float32 tensor,
took 4.5 ms whole and 2.6-2.8 ms in blocks; the GPT step went from 1.50x to 1.38x PyTorch's
with GELU alone in blocks (``benchmarks/gpt_step.py``).

CuPy arrays take one block: a GPU kernel has no such cache to keep.
"""

from __future__ import annotations

BLOCK = 1 << 16  # float32 elements per block: 256 KiB


def blocks(size: int) -> list[slice]:
    """``slice``s of at most :data:`BLOCK` elements covering ``range(size)`` in order.

    Example:
        >>> blocks(150_000)
        [slice(0, 65536, None), slice(65536, 131072, None), slice(131072, 196608, None)]
    """
    return [slice(start, start + BLOCK) for start in range(0, max(size, 1), BLOCK)]
