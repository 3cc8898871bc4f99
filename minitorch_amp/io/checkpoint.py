"""``save`` / ``load``: nested state dicts in an open format, without pickling code.

A checkpoint is a zip archive (what ``numpy.savez`` writes, so ``numpy.load`` and any zip
tool can open it) holding:

* ``arrays/0.npy``, ``arrays/1.npy``, ...: one ``.npy`` file per Tensor or array, in NumPy's
  format, so every dtype (float16 included) round-trips bit for bit; bfloat16, which the
  ``.npy`` format cannot name, is stored as its raw bits (``uint16``) and the index says
  ``"dtype": "bfloat16"``;
* ``__structure__.json``: the nesting, with the keys, the scalars and where each array goes::

    {"format": "minitorch_amp", "version": 1, "root": NODE}
    NODE = {"type": "dict", "items": [[key, NODE], ...]}     (keys: str or int, in order)
         | {"type": "list" | "tuple", "items": [NODE, ...]}
         | {"type": "tensor" | "ndarray" | "npscalar", "array": i, "dtype": ..., "shape": ...}
         | {"type": "int" | "bool" | "str", "value": ...} | {"type": "float", "value": repr}
         | {"type": "none"}

Loading never pickles (a checkpoint cannot run code) and never trusts the file's sizes: each
``.npy`` header is checked against the archive before anything is allocated, all arrays
together may take at most ``max_bytes`` (16 GiB unless told otherwise), and an array that
several entries refer to is read once. Saving writes a temporary file next to the target and
renames it over it at the end, keeping the old file's permission bits.

Example:
    >>> import os, tempfile
    >>> import minitorch_amp as mt
    >>> path = os.path.join(tempfile.mkdtemp(), "ckpt.pdparams")
    >>> mt.save({"w": mt.ones([2], dtype="float16"), "epoch": 3}, path)
    >>> state = mt.load(path)
    >>> state["w"].dtype, state["epoch"]
    (dtype('float16'), 3)
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import stat
import uuid
import zipfile

import numpy as np

from ..autograd.tensor import Tensor
from ..backend import device as _device
from ..backend.dtypes import bfloat16
from ..serialization import paddle_pickle
from ..serialization.bounds import CheckpointError, MemoryBudget

__all__ = ["DEFAULT_MAX_BYTES", "CheckpointError", "load", "save"]

_STRUCTURE = "__structure__.json"
_FORMAT = "minitorch_amp"
_VERSION = 1
_ARRAY_KINDS = "biufcUS"  # dtypes NumPy stores without pickle
_BF16_BITS = np.dtype("<u2")  # how a bfloat16 array is stored: its bits, little-endian
DEFAULT_MAX_BYTES = 16 * 2**30  # what load() allocates at most, unless given max_bytes
_CHUNK = 16 * 2**20  # bytes read from the archive at a time
_OWNER = socket.gethostname()  # with the pid, who writes a temporary file


# ---- save ---------------------------------------------------------------------------------------
def save(obj, path, protocol: int = 4) -> None:
    """Write ``obj`` (nested dict/list/tuple of Tensors, arrays and scalars) to ``path``.

    The file is written to a temporary name next to ``path`` (``.NAME.HOST-PID.RANDOM.tmp``)
    and renamed over it at the end, so an interrupted save never leaves a half-written
    checkpoint; a file that ``path`` replaces keeps its permission bits. A save that fails
    removes its temporary file; one whose process died (killed, power cut) leaves it behind,
    and the next save to ``path`` removes it. Missing folders are made.

    Args:
        obj: e.g. ``{'model': model.state_dict(), 'opt': opt.state_dict(), 'epoch': 3}``.
        path: the file to write (any suffix; Paddle uses ``.pdparams`` / ``.pdopt``).
        protocol: accepted for Paddle compatibility; ignored (nothing is pickled).

    Raises:
        TypeError: ``obj`` holds something that cannot be saved; the message gives its key
            path, e.g. ``obj['opt']['x']: cannot save object of type Foo``.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        raise IsADirectoryError(f"cannot save to {path!r}: it is a directory; give a file name")
    arrays: list[np.ndarray] = []
    root = _encode(obj, "obj", arrays, set())
    structure = json.dumps({"format": _FORMAT, "version": _VERSION, "root": root})
    folder, base = os.path.split(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    _remove_stale_temporaries(folder, base)
    mode = _permission_bits(path)
    tmp = os.path.join(folder, f".{base}.{_OWNER}-{os.getpid()}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "xb") as f:
            with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
                zf.writestr(_STRUCTURE, structure)
                for i, array in enumerate(arrays):
                    with zf.open(f"arrays/{i}.npy", "w", force_zip64=True) as entry:
                        np.lib.format.write_array(entry, array, allow_pickle=False)
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)  # what the replaced file had, not the umask's default
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _permission_bits(path: str) -> int | None:
    """The permission bits of the file at ``path``, or None when there is none."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return None


def _remove_stale_temporaries(folder: str, base: str) -> None:
    """Delete the temporary files that saves to ``base`` left when their process died.

    Only those of this host's processes that are gone: a save in progress keeps its file, and
    another host's pids mean nothing here. (POSIX only: elsewhere there is no way to ask.)
    """
    if os.name != "posix":
        return
    prefix, suffix = f".{base}.", ".tmp"
    for name in os.listdir(folder):
        if not (name.startswith(prefix) and name.endswith(suffix)):
            continue
        owner = name[len(prefix) : -len(suffix)].rpartition(".")[0]  # HOST-PID
        host, _, pid = owner.rpartition("-")
        if host == _OWNER and pid.isdigit() and not _alive(int(pid)):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(folder, name))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):  # exists but is not ours, or no pid: leave it alone
        return True
    return True


def _encode(value, where: str, arrays: list, active: set) -> dict:
    """The JSON node for ``value``; arrays are appended to ``arrays``."""
    if isinstance(value, Tensor):
        node = _array_node("tensor", _device.asnumpy(value._data), arrays)
        if isinstance(value.name, str):
            node["name"] = value.name
        return node
    if _device.is_array(value):
        if not _storable(value.dtype):
            raise TypeError(f"{where}: cannot save an array of dtype {value.dtype}")
        return _array_node("ndarray", _device.asnumpy(value), arrays)
    if isinstance(value, np.generic) and _storable(value.dtype):
        return _array_node("npscalar", np.asarray(value), arrays)
    if value is None:
        return {"type": "none"}
    if isinstance(value, bool):
        return {"type": "bool", "value": value}
    if isinstance(value, int):
        return {"type": "int", "value": int(value)}
    if isinstance(value, float):
        return {"type": "float", "value": repr(float(value))}  # 'nan' and 'inf' stay valid JSON
    if isinstance(value, str):
        return {"type": "str", "value": value}
    if isinstance(value, (dict, list, tuple)):
        if id(value) in active:
            raise TypeError(f"{where}: contains itself; cannot save a cyclic structure")
        active.add(id(value))
        try:
            if isinstance(value, dict):
                items = []
                for key, item in value.items():
                    if isinstance(key, bool) or not isinstance(key, (str, int)):
                        raise TypeError(
                            f"{where}: cannot save dict key {key!r} of type "
                            f"{type(key).__name__}; keys must be str or int"
                        )
                    items.append([key, _encode(item, f"{where}[{key!r}]", arrays, active)])
                return {"type": "dict", "items": items}
            kind = "list" if isinstance(value, list) else "tuple"
            items = [_encode(v, f"{where}[{i}]", arrays, active) for i, v in enumerate(value)]
            return {"type": kind, "items": items}
        finally:
            active.discard(id(value))
    raise TypeError(
        f"{where}: cannot save object of type {type(value).__name__}; save() takes Tensors, "
        "arrays, numbers, strings, None and dicts/lists/tuples of them"
    )


def _storable(dtype) -> bool:
    return dtype.kind in _ARRAY_KINDS or dtype == bfloat16


def _array_node(kind: str, array: np.ndarray, arrays: list) -> dict:
    bf16 = array.dtype == bfloat16
    arrays.append(array.view(_BF16_BITS) if bf16 else array)  # the bits, bit-exact
    return {
        "type": kind,
        "array": len(arrays) - 1,
        "dtype": "bfloat16" if bf16 else array.dtype.str,
        "shape": list(array.shape),
    }


def _file_dtype(node: dict):
    """The dtype string the ``.npy`` entry must have for ``node`` (bfloat16: its bits)."""
    dtype = node.get("dtype")
    return _BF16_BITS.str if dtype == "bfloat16" else dtype


# ---- load ---------------------------------------------------------------------------------------
def load(path, return_numpy: bool = False, max_bytes: int | None = DEFAULT_MAX_BYTES):
    """Read what :func:`save` wrote.

    Args:
        path: the checkpoint file.
        return_numpy: give NumPy arrays instead of Tensors.
        max_bytes: the most memory the arrays may take together (default 16 GiB), and the
            index alone; None for no limit. Each stored array counts once, however many
            entries refer to it (they all get that one array).

    A pickle written by Paddle's ``paddle.save`` (``.pdparams``, ``.pdopt``) is read too, by
    a restricted unpickler that never runs code (``serialization/paddle_pickle.py``).

    Returns:
        The saved structure; Tensors are created on the current device (``set_device``).

    Raises:
        FileNotFoundError: there is no file at ``path``.
        CheckpointError: (a ValueError) the file is not a readable checkpoint: not a zip,
            truncated, corrupted, a zip that ``save`` did not write, or bigger than
            ``max_bytes``. The message names it.
    """
    path = os.fspath(path)
    if max_bytes is not None and (
        isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0
    ):
        raise ValueError(f"max_bytes must be a non-negative int or None, got {max_bytes!r}")
    if not os.path.exists(path):
        raise FileNotFoundError(2, "no checkpoint file at this path", path)
    if os.path.isdir(path):
        raise IsADirectoryError(f"cannot load {path!r}: it is a directory, not a checkpoint file")
    with open(path, "rb") as f:
        if paddle_pickle.is_pickle(f.read(2)):  # what Paddle's paddle.save writes
            return paddle_pickle.load(f, path, return_numpy, MemoryBudget(max_bytes))
        f.seek(0)
        try:
            zf = zipfile.ZipFile(f)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
            raise CheckpointError(
                f"cannot load {path!r}: not a checkpoint written by minitorch_amp.save (not a "
                f"readable zip archive: {exc}); the file may be truncated or corrupt"
            ) from None
        with zf:
            try:
                return _Reader(zf, return_numpy, max_bytes).read_root()
            except CheckpointError as exc:
                raise CheckpointError(f"cannot load {path!r}: {exc}") from None
            except (
                zipfile.BadZipFile,
                OSError,
                EOFError,
                ValueError,
                KeyError,
                IndexError,
                TypeError,
                RecursionError,
            ) as exc:
                raise CheckpointError(
                    f"cannot load {path!r}: the file is corrupt or truncated "
                    f"({type(exc).__name__}: {exc})"
                ) from None


class _Reader:
    """Decodes the JSON nodes of one open archive, reading each array when first reached."""

    def __init__(self, zf: zipfile.ZipFile, return_numpy: bool, max_bytes: int | None):
        self.zf = zf
        self.return_numpy = return_numpy
        self.names = set(zf.namelist())
        self.max_bytes = max_bytes
        self.reserved = 0  # bytes of arrays read so far, against max_bytes
        self.arrays: dict[str, np.ndarray] = {}  # entry name -> its array, read once
        self.on_device: dict[str, object] = {}  # entry name -> that array on the device

    def read_root(self):
        if _STRUCTURE not in self.names:
            raise CheckpointError(
                f"it is a zip archive without {_STRUCTURE}, so it was not written by "
                "minitorch_amp.save (for a plain .npz use numpy.load)"
            )
        size = self.zf.getinfo(_STRUCTURE).file_size  # an index, so not counted with arrays
        _need(
            self.max_bytes is None or size <= self.max_bytes,
            f"{_STRUCTURE} alone is {size} bytes, more than max_bytes={self.max_bytes}",
        )
        try:
            header = json.loads(self.zf.read(_STRUCTURE).decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise CheckpointError(f"{_STRUCTURE} is not valid JSON ({exc})") from None
        _need(isinstance(header, dict) and header.get("format") == _FORMAT, "unknown format")
        version = header.get("version")
        _need(version == _VERSION, f"format version {version!r} is not supported (want 1)")
        _need("root" in header, f"{_STRUCTURE} has no 'root'")
        return self.decode(header["root"], "obj")

    def reserve(self, nbytes: int, where: str) -> None:
        """Count ``nbytes`` more against ``max_bytes``, before allocating them."""
        self.reserved += nbytes
        if self.max_bytes is not None and self.reserved > self.max_bytes:
            raise CheckpointError(
                f"{where}: reading it takes the checkpoint to {self.reserved} bytes, more than "
                f"max_bytes={self.max_bytes}; if you trust this file, pass a larger max_bytes "
                "to load() (max_bytes=None: no limit)"
            )

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
        _need(
            type(value) is scalar_types[kind],
            f"{where}: a {kind} entry holds {value!r}",
        )
        return float(value) if kind == "float" else value

    def array(self, node: dict, kind: str, where: str):
        name = f"arrays/{node.get('array')}.npy"
        _need(name in self.names, f"{where}: the archive has no {name}")
        if name not in self.arrays:
            self.arrays[name] = self.read_array(name, node, where)
        array = self.arrays[name]
        _need(
            array.dtype.str == _file_dtype(node) and list(array.shape) == node.get("shape"),
            f"{where}: {name} holds {array.dtype.str}{list(array.shape)}, the index says "
            f"{node.get('dtype')}{node.get('shape')}",
        )
        if node.get("dtype") == "bfloat16":
            array = array.view(bfloat16)
            name += ":bfloat16"  # its own device copy (an index may name the bits both ways)
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
        a few bytes claiming 10**12 elements end in a MemoryError (or a huge allocation).
        """
        with self.zf.open(name) as entry:
            version = np.lib.format.read_magic(entry)
            readers = {
                (1, 0): np.lib.format.read_array_header_1_0,
                (2, 0): np.lib.format.read_array_header_2_0,
            }
            _need(version in readers, f"{where}: {name} is a .npy file of version {version}")
            shape, fortran_order, dtype = readers[version](entry)
            _need(
                not dtype.hasobject,
                f"{where}: {name} holds pickled Python objects, which save() never writes: "
                "the file is corrupt or was made to run code",
            )
            _need(
                dtype.str == _file_dtype(node) and list(shape) == node.get("shape"),
                f"{where}: {name} holds {dtype.str}{list(shape)}, the index says "
                f"{node.get('dtype')}{node.get('shape')}",
            )
            nbytes = math.prod(shape) * dtype.itemsize
            stored = self.zf.getinfo(name).file_size - entry.tell()
            _need(
                nbytes == stored,
                f"{where}: {name} declares {dtype.str}{list(shape)}, {nbytes} bytes, but the "
                f"archive holds {stored} bytes for it",
            )
            self.reserve(nbytes, where)
            flat = np.empty(math.prod(shape), dtype)
            _read_into(entry, memoryview(flat.view(np.uint8)), f"{where}: {name}")
            _need(entry.read(1) == b"", f"{where}: {name} is longer than its header says")
        if fortran_order:
            return flat.reshape(shape[::-1]).transpose()
        return flat.reshape(shape)


def _read_into(entry, buffer: memoryview, what: str) -> None:
    """Fill ``buffer`` from ``entry``, a bounded chunk at a time (zipfile checks the CRC)."""
    done = 0
    while done < len(buffer):
        got = entry.readinto(buffer[done : done + _CHUNK])
        _need(got > 0, f"{what} ends after {done} of its {len(buffer)} bytes")
        done += got


def _need(condition: bool, message: str) -> None:
    if not condition:
        raise CheckpointError(message)
