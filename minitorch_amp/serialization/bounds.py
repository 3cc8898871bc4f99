"""What loading a checkpoint may allocate: whatever a file declares is counted before it is made.

A checkpoint states sizes that nobody has checked: an array's shape, a string's length, the
size of an index, how many entries a zip holds. Parsers believe them: NumPy allocates the
shape a pickle names before any data arrives, CPython's unpickler allocates a ``BINBYTES8``
length before reading it, ``json`` builds a dict for every ``{}`` of an index. So a load keeps
a :class:`MemoryBudget` of ``max_bytes`` and *charges* each of these before the allocation
happens; the charge that goes past ``max_bytes`` raises :class:`CheckpointError` and nothing of
it is allocated. A charge is what the allocation can take at worst (a JSON index counts 48
bytes per byte, the most ``json.loads`` builds from one byte), so a load of any file takes at
most ``max_bytes`` plus a small constant (the parsers' own buffers, about a megabyte).
``max_bytes=None`` charges nothing: the caller trusts the file.

Example:
    >>> budget = MemoryBudget(1000)
    >>> budget.charge(800, "an array")
    >>> budget.charge(800, "another array")
    Traceback (most recent call last):
    ...
    minitorch_amp.io.checkpoint.CheckpointError: another array takes the load to 1600 \
bytes, more than max_bytes=1000; if you trust this file, pass a larger max_bytes to load() \
(max_bytes=None: no limit)
"""

from __future__ import annotations

__all__ = ["CHUNK", "CheckpointError", "MemoryBudget"]

CHUNK = 2**20  # bytes read (and decompressed) at a time: what a read holds beyond its target


class CheckpointError(ValueError):
    """A file could not be read as a checkpoint (corrupt, truncated, hostile or not ours)."""


# its public home, where tracebacks name it and pickle finds it (minitorch_amp.io exports it)
CheckpointError.__module__ = "minitorch_amp.io.checkpoint"


class MemoryBudget:
    """The bytes one load may allocate (``max_bytes``; None: no limit), charged before use."""

    def __init__(self, max_bytes: int | None):
        self.max_bytes = max_bytes
        self.charged = 0

    @property
    def limited(self) -> bool:
        return self.max_bytes is not None

    def charge(self, nbytes: int, what: str) -> None:
        """Count ``nbytes`` that ``what`` is about to allocate; refuse past ``max_bytes``."""
        self.charged += nbytes
        if self.max_bytes is not None and self.charged > self.max_bytes:
            raise CheckpointError(
                f"{what} takes the load to {self.charged} bytes, more than "
                f"max_bytes={self.max_bytes}; if you trust this file, pass a larger max_bytes "
                "to load() (max_bytes=None: no limit)"
            )
