"""Keep the step's large NumPy temporaries in the heap, so a training step takes no page faults.

Each op of an eager NumPy step allocates fresh arrays of a few megabytes and frees them a few
ops later. glibc's ``malloc`` serves blocks above its mmap threshold (128 KiB at first, raised
by each freed mapping, at most 32 MiB) with fresh ``mmap`` pages and gives heap memory above
its trim threshold back to the system, so every step faults its temporaries in again: 9,000 to
23,000 minor page faults and 15 to 50 ms of system time in a 150 ms GPT step (2-core CPU,
``benchmarks/gpt_step.py``), against PyTorch's 1,000 to 2,000.

:func:`keep_temporaries_in_heap` sets both thresholds once, at import: blocks up to 32 MiB
come from the heap, and the heap keeps up to 256 MiB of free memory at its top instead of
returning it. The step then takes no page faults after its first. The cost is memory the
process keeps: up to 256 MiB more resident than with glibc's defaults after a large step.
Only glibc has ``mallopt``; elsewhere, or with ``MINITORCH_AMP_MALLOC=system``, nothing is
changed.
"""

from __future__ import annotations

import ctypes
import os
import sys

MMAP_THRESHOLD = 32 << 20  # glibc's own upper limit for its dynamic threshold
TRIM_THRESHOLD = 256 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # <malloc.h>
ENV = "MINITORCH_AMP_MALLOC"


def keep_temporaries_in_heap() -> bool:
    """Raise glibc's mmap and trim thresholds (see the module docstring); True if it did."""
    setting = os.environ.get(ENV, "heap").strip().lower()
    if setting not in ("heap", "system"):
        raise ValueError(f"{ENV}={setting!r}: use 'heap' (the default) or 'system' (glibc's own)")
    if setting == "system" or not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )


HEAP_TUNED = keep_temporaries_in_heap()
