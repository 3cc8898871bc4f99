"""Checkpoint files made to hurt the loader, and a way to measure what loading them costs.

* :class:`Call` pickles as a call ``func(*args)`` (then ``__setstate__(state)``), which is how a
  pickle asks for anything: with it a test writes the exact calls a hostile pickle would make
  (``numpy.ndarray((10**8,), 'f8')``, ``_reconstruct`` without its data, ``list(x)`` a thousand
  times).
* :func:`op` and friends write raw pickle opcodes, for lengths no pickler would write (a
  ``BINBYTES8`` of ``2**62`` bytes).
* :func:`set_zip_field` rewrites one field of a zip entry's headers (its compression method,
  its declared size), which ``zipfile`` cannot write wrongly on purpose.
* :func:`load_measured` loads a file under ``tracemalloc`` (NumPy reports its arrays to it) and
  gives back the result or the error, and the peak of memory held during the load.
"""

from __future__ import annotations

import gc
import io
import struct
import tracemalloc
import zipfile

import numpy as np

import minitorch_amp as mt

RECONSTRUCT = np.ndarray(0).__reduce__()[0]  # numpy's _reconstruct, under either module name
_NO_STATE = object()
SLACK = 2**20  # "a small constant": what a load may hold beyond max_bytes


class Call:
    """Pickles as ``func(*args)``, then ``__setstate__(state)`` when a state is given."""

    def __init__(self, func, args: tuple, state=_NO_STATE):
        self.func, self.args, self.state = func, args, state

    def __reduce__(self):
        if self.state is _NO_STATE:
            return (self.func, self.args)
        return (self.func, self.args, self.state)


def array_state(array: np.ndarray) -> tuple:
    """What ``ndarray.__reduce__`` gives ``__setstate__``: (1, shape, dtype, fortran, bytes)."""
    return array.__reduce__()[2]


def op(code: bytes, fmt: str = "", *values) -> bytes:
    """One pickle opcode and its packed little-endian argument."""
    return code + (struct.pack("<" + fmt, *values) if fmt else b"")


PROTO_4 = op(b"\x80", "B", 4)
STOP = b"."


def global_name(module: str, name: str) -> bytes:
    return b"c" + f"{module}\n{name}\n".encode()


def set_zip_field(data: bytes, name: str, field: str, value: int) -> bytes:
    """``data`` (a zip archive) with ``field`` of entry ``name`` set to ``value`` in both its
    local header and its central directory record: ``"method"`` (the compression method) or
    ``"size"`` (the declared uncompressed size; zip32 entries only)."""
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        local = zf.getinfo(name).header_offset
    central = _central_record(data, name)
    out = bytearray(data)
    if field == "method":
        struct.pack_into("<H", out, local + 8, value)
        struct.pack_into("<H", out, central + 10, value)
    elif field == "size":
        struct.pack_into("<I", out, local + 22, value)
        struct.pack_into("<I", out, central + 24, value)
    else:
        raise ValueError(field)
    return bytes(out)


def _central_record(data: bytes, name: str) -> int:
    """Where the central directory record of entry ``name`` starts."""
    start = 0
    while True:
        at = data.index(b"PK\x01\x02", start)
        length = struct.unpack_from("<H", data, at + 28)[0]
        if data[at + 46 : at + 46 + length] == name.encode():
            return at
        start = at + 4


def load_measured(path, **kwargs):
    """``(result or the exception raised, peak bytes held)`` of ``mt.load(path, **kwargs)``."""
    gc.collect()
    tracemalloc.start()
    try:
        try:
            result = mt.load(path, **kwargs)
        except Exception as exc:  # the caller checks which
            result = exc
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return result, peak
