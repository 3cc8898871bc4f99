"""Checkpoint files made to hurt the loader, and a way to measure what loading them costs.

* :class:`Call` pickles as a call ``func(*args)`` (then ``__setstate__(state)``), which is how a
  pickle asks for anything: with it a test writes the exact calls a hostile pickle would make
  (``numpy.ndarray((10**8,), 'f8')``, ``_reconstruct`` without its data, ``list(x)`` a thousand
  times).
* :func:`op` and friends write raw pickle opcodes, for lengths no pickler would write (a
  ``BINBYTES8`` of ``2**62`` bytes).
* :func:`set_zip_field` rewrites one field of a zip entry's headers (its compression method,
  its declared size, ...), which ``zipfile`` cannot write wrongly on purpose.
* :func:`load_measured` loads a file under ``tracemalloc`` (NumPy reports its arrays to it) and
  gives back the result or the error, and the peak of memory held during the load.
"""

from __future__ import annotations

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


# field: (offset in the local header, offset in the central directory record, struct format)
ZIP_FIELDS = {
    "method": (8, 10, "<H"),
    "crc": (14, 16, "<I"),
    "compressed_size": (18, 20, "<I"),
    "size": (22, 24, "<I"),
    "name_length": (26, 28, "<H"),
    "extra_length": (28, 30, "<H"),
    "header_offset": (None, 42, "<I"),
}


def set_zip_field(data: bytes, name: str, field: str, value: int) -> bytes:
    """``data`` (a zip archive) with ``field`` of entry ``name`` (see :data:`ZIP_FIELDS`) set
    to ``value`` in its local header and its central directory record, e.g. ``"method"``
    (the compression method) or ``"size"`` (the declared uncompressed size)."""
    out = bytearray(data)
    for offset, fmt in zip_field_positions(data, name, field):
        struct.pack_into(fmt, out, offset, value % 2 ** (8 * struct.calcsize(fmt)))
    return bytes(out)


def zip_field_positions(data: bytes, name: str, field: str) -> list[tuple[int, str]]:
    """Where ``field`` of entry ``name`` lies in ``data`` (a readable zip archive), with its
    struct format: in the local header, and in the central directory record."""
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        local = zf.getinfo(name).header_offset
    local_offset, central_offset, fmt = ZIP_FIELDS[field]
    positions = [(_central_record(data, name) + central_offset, fmt)]
    if local_offset is not None:
        positions.append((local + local_offset, fmt))
    return positions


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
    """``(result or the exception raised, peak bytes held)`` of ``mt.load(path, **kwargs)``:
    the peak of what was allocated during the load and not yet freed."""
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
