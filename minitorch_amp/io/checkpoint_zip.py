"""Reading the zip checkpoints that ``save`` writes, believing none of the sizes they declare.

A checkpoint is a zip archive of ``arrays/N.npy`` entries and an index, ``__structure__.json``
(the format: ``checkpoint.py``). Every allocation a file could make large is charged to the
load's :class:`~minitorch_amp.serialization.bounds.MemoryBudget` before it happens:

* the zip's central directory, which ``zipfile`` reads and turns into one object per entry:
  16 bytes per byte of it (its size is read from the end record first);
* the index: 48 bytes per byte of its declared size, the most ``json.loads`` can build from
  one byte (``[{"":{}}, ...]``). An index is ASCII (``json.dumps`` writes it so) and at most
  :data:`MAX_INDEX_BYTES` (16 MiB: about 150,000 tensors, or 400,000 Python numbers), which
  bounds the time its parse takes too; ``max_bytes=None`` lifts that cap;
* each array: the bytes its ``.npy`` header declares, after checking that the entry holds
  exactly that many (a header cannot claim more than the archive has).

Entries are read, and decompressed, a megabyte at a time and never past the size they declare,
so an entry that inflates to more than it says costs nothing beyond its declaration. Only
``save``'s compression methods are read (stored, and deflate for archives made by hand).
"""

from __future__ import annotations

import io
import json
import math
import struct
import zipfile

import numpy as np

from ..autograd.tensor import Tensor
from ..backend import device as _device
from ..backend.dtypes import bfloat16, float8_e4m3fn, float8_e5m2
from ..serialization.bounds import CHUNK, CheckpointError, MemoryBudget

STRUCTURE = "__structure__.json"
FORMAT = "minitorch_amp"
VERSION = 1
BF16_BITS = np.dtype("<u2")  # how a bfloat16 array is stored: its bits, little-endian
# the dtypes .npy has no code for, by name: how each is stored (its bits), and what it is
BITS = {"bfloat16": BF16_BITS, "float8_e4m3fn": np.dtype("u1"), "float8_e5m2": np.dtype("u1")}
NAMED = {"bfloat16": bfloat16, "float8_e4m3fn": float8_e4m3fn, "float8_e5m2": float8_e5m2}
MAX_INDEX_BYTES = 16 * 2**20
INDEX_COST = 48  # bytes json.loads may build per byte of index, at most
DIRECTORY_COST = 16  # bytes zipfile builds per byte of central directory, at most
_MAX_NPY_HEADER = 2**16
_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)


def file_dtype(node: dict):
    """The dtype string the ``.npy`` entry must have for ``node`` (bfloat16, FP8: bits)."""
    dtype = node.get("dtype")
    return BITS[dtype].str if isinstance(dtype, str) and dtype in BITS else dtype


def open_archive(f, budget: MemoryBudget) -> zipfile.ZipFile:
    """``zipfile.ZipFile(f)``, its central directory charged to ``budget`` before it is read."""
    # NOTE: zipfile has no public way to read the end record alone; _EndRecData has been its
    # name since Python 2.6. It reads at most the last 64 KiB (the record and its comment).
    end = zipfile._EndRecData(f)
    if end is None:
        raise zipfile.BadZipFile("no end of central directory record")
    budget.charge(DIRECTORY_COST * end[zipfile._ECD_SIZE], "the zip's central directory")
    return zipfile.ZipFile(f)


def read_entry(zf: zipfile.ZipFile, name: str) -> bytes:
    """The bytes of entry ``name``: its declared size, read a chunk at a time (the caller has
    charged that size)."""
    info = zf.getinfo(name)
    data = bytearray(info.file_size)
    with _open(zf, info) as entry:
        _read_into(entry, memoryview(data), name)
        _need(entry.read(1) == b"", f"{name} is longer than the {info.file_size} bytes it says")
    return bytes(data)


def _open(zf: zipfile.ZipFile, info: zipfile.ZipInfo):
    _need(
        info.compress_type in _METHODS,
        f"{info.filename} is compressed with method {info.compress_type}, which save() never "
        "uses (stored or deflate only): the file is corrupt or was not written by save()",
    )
    return zf.open(info.filename)


def _read_into(entry, buffer: memoryview, what: str) -> None:
    """Fill ``buffer`` from ``entry``, a chunk at a time (zipfile checks the CRC at the end)."""
    done = 0
    while done < len(buffer):
        got = entry.readinto(buffer[done : done + CHUNK])
        _need(got > 0, f"{what} ends after {done} of its {len(buffer)} bytes")
        done += got


def _need(condition: bool, message: str) -> None:
    if not condition:
        raise CheckpointError(message)


class Reader:
    """Decodes the JSON nodes of one open archive, reading each array when first reached."""

    def __init__(self, zf: zipfile.ZipFile, return_numpy: bool, budget: MemoryBudget):
        self.zf = zf
        self.return_numpy = return_numpy
        self.names = set(zf.namelist())
        self.budget = budget
        self.arrays: dict[str, np.ndarray] = {}  # entry name -> its array, read once
        self.on_device: dict[str, object] = {}  # entry name -> that array on the device

    def read_root(self):
        if STRUCTURE not in self.names:
            raise CheckpointError(
                f"it is a zip archive without {STRUCTURE}, so it was not written by "
                "minitorch_amp.save (for a plain .npz use numpy.load)"
            )
        size = self.zf.getinfo(STRUCTURE).file_size
        _need(
            not self.budget.limited or size <= MAX_INDEX_BYTES,
            f"its index {STRUCTURE} is {size} bytes, more than the {MAX_INDEX_BYTES} an index "
            "may have (about 150,000 tensors); if you trust this file, load it with "
            "max_bytes=None",
        )
        self.budget.charge(INDEX_COST * size, f"parsing its index {STRUCTURE} ({size} bytes)")
        try:
            header = json.loads(read_entry(self.zf, STRUCTURE).decode("ascii"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise CheckpointError(f"{STRUCTURE} is not valid JSON ({exc})") from None
        _need(isinstance(header, dict) and header.get("format") == FORMAT, "unknown format")
        version = header.get("version")
        _need(version == VERSION, f"format version {version!r} is not supported (want 1)")
        _need("root" in header, f"{STRUCTURE} has no 'root'")
        return self.decode(header["root"], "obj")

    def decode(self, node, where: str):
        _need(isinstance(node, dict) and "type" in node, f"{where}: malformed entry {node!r}")
        kind = node["type"]
        if kind == "dict":
            items = node.get("items")
            _need(isinstance(items, list), f"{where}: dict entry without items")
            out = {}
            for pair in items:
                _need(
                    isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], (str, int)),
                    f"{where}: malformed dict item {pair!r}",
                )
                out[pair[0]] = self.decode(pair[1], f"{where}[{pair[0]!r}]")
            return out
        if kind in ("list", "tuple"):
            items = node.get("items")
            _need(isinstance(items, list), f"{where}: {kind} entry without items")
            values = [self.decode(item, f"{where}[{i}]") for i, item in enumerate(items)]
            return values if kind == "list" else tuple(values)
        if kind in ("tensor", "ndarray", "npscalar"):
            return self.array(node, kind, where)
        if kind == "none":
            return None
        scalar_types = {"int": int, "bool": bool, "str": str, "float": str}
        _need(kind in scalar_types, f"{where}: unknown entry type {kind!r}")
        value = node.get("value")
        _need(type(value) is scalar_types[kind], f"{where}: a {kind} entry holds {value!r}")
        return float(value) if kind == "float" else value

    def array(self, node: dict, kind: str, where: str):
        name = f"arrays/{node.get('array')}.npy"
        _need(name in self.names, f"{where}: the archive has no {name}")
        if name not in self.arrays:
            self.arrays[name] = self.read_array(name, node, where)
        array = self.arrays[name]
        _need(
            array.dtype.str == file_dtype(node) and list(array.shape) == node.get("shape"),
            f"{where}: {name} holds {array.dtype.str}{list(array.shape)}, the index says "
            f"{node.get('dtype')}{node.get('shape')}",
        )
        named = node.get("dtype")
        if isinstance(named, str) and named in NAMED:
            array = array.view(NAMED[named])
            name += f":{named}"  # its own device copy (an index may name the bits both ways)
        if kind == "npscalar":
            return array[()]
        if kind == "ndarray" or self.return_numpy:
            return array
        if name not in self.on_device:  # one device copy, however many tensors share it
            self.on_device[name] = _device.to_place(array, _device.current_place())
        tensor = Tensor(self.on_device[name])
        tensor_name = node.get("name")
        if isinstance(tensor_name, str):
            tensor.name = tensor_name
        return tensor

    def read_array(self, name: str, node: dict, where: str) -> np.ndarray:
        """The array stored in entry ``name``, its header checked before anything is allocated.

        NOTE: ``numpy.lib.format.read_array`` allocates whatever the header declares first, so
        a few bytes claiming 10**12 elements end in a MemoryError (or a huge allocation); and
        its header reader asks a version 2.0 file for the 4 GiB a header may declare.
        """
        info = self.zf.getinfo(name)
        with _open(self.zf, info) as entry:
            shape, fortran_order, dtype, header_bytes = _read_npy_header(entry, f"{where}: {name}")
            _need(
                not dtype.hasobject,
                f"{where}: {name} holds pickled Python objects, which save() never writes: "
                "the file is corrupt or was made to run code",
            )
            _need(
                dtype.str == file_dtype(node) and list(shape) == node.get("shape"),
                f"{where}: {name} holds {dtype.str}{list(shape)}, the index says "
                f"{node.get('dtype')}{node.get('shape')}",
            )
            nbytes = math.prod(shape) * dtype.itemsize
            stored = info.file_size - header_bytes
            _need(
                nbytes == stored,
                f"{where}: {name} declares {dtype.str}{list(shape)}, {nbytes} bytes, but the "
                f"archive holds {stored} bytes for it",
            )
            self.budget.charge(nbytes, where)
            flat = np.empty(math.prod(shape), dtype)
            _read_into(entry, memoryview(flat.view(np.uint8)), f"{where}: {name}")
            _need(entry.read(1) == b"", f"{where}: {name} is longer than its header says")
        if fortran_order:
            return flat.reshape(shape[::-1]).transpose()
        return flat.reshape(shape)


def _read_npy_header(entry, what: str):
    """``(shape, fortran_order, dtype, header size)`` of the ``.npy`` file ``entry`` is at,
    reading only the bytes its header takes (at most 64 KiB)."""
    start = _read_exactly(entry, 8, what)  # magic, major and minor version
    _need(start[:6] == b"\x93NUMPY", f"{what} is not a .npy file")
    version = (start[6], start[7])
    readers = {
        (1, 0): ("<H", np.lib.format.read_array_header_1_0),
        (2, 0): ("<I", np.lib.format.read_array_header_2_0),
    }
    _need(version in readers, f"{what} is a .npy file of version {version}")
    fmt, reader = readers[version]
    length_bytes = _read_exactly(entry, struct.calcsize(fmt), what)
    (length,) = struct.unpack(fmt, length_bytes)
    _need(length <= _MAX_NPY_HEADER, f"{what} declares a header of {length} bytes")
    header = io.BytesIO(length_bytes + _read_exactly(entry, length, what))
    shape, fortran_order, dtype = reader(header)
    return shape, fortran_order, dtype, len(start) + len(length_bytes) + length


def _read_exactly(entry, n: int, what: str) -> bytes:
    data = entry.read(n)
    _need(len(data) == n, f"{what} ends inside its .npy header")
    return data
