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

Loading never pickles (a checkpoint cannot run code) and never trusts the file's sizes
(``checkpoint_zip.py``): what a file declares (each ``.npy`` header, the index, the zip's
directory) is checked against the archive and counted against ``max_bytes`` (16 GiB unless told
otherwise) before anything is allocated, and an array that several entries refer to is read
once. Saving writes a temporary file next to the target and renames it over it at the end,
keeping the old file's permission bits; through a symbolic link it writes the link's target.

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
import io
import json
import os
import socket
import stat
import uuid
import zipfile

import numpy as np

from ..autograd.tensor import Tensor
from ..backend import device as _device
from ..backend.dtypes import FP8, bfloat16
from ..serialization import paddle_pickle
from ..serialization.bounds import CheckpointError, MemoryBudget
from . import checkpoint_zip
from .checkpoint_zip import BITS, FORMAT, STRUCTURE, VERSION

__all__ = ["DEFAULT_MAX_BYTES", "CheckpointError", "load", "save"]

_ARRAY_KINDS = "biufcUS"  # dtypes NumPy stores without pickle
DEFAULT_MAX_BYTES = 16 * 2**30  # what load() allocates at most, unless given max_bytes
_OWNER = socket.gethostname()  # with the pid, who writes a temporary file


# ---- save ---------------------------------------------------------------------------------------
def save(obj, path, protocol: int = 4) -> None:
    """Write ``obj`` (nested dict/list/tuple of Tensors, arrays and scalars) to ``path``.

    The file is written to a temporary name next to ``path`` (``.NAME.HOST-PID.RANDOM.tmp``)
    and renamed over it at the end, so an interrupted save never leaves a half-written
    checkpoint; a file that ``path`` replaces keeps its permission bits. When ``path`` is a
    symbolic link, the file it points to is written (as ``torch.save`` and ``paddle.save``
    do) and the link stays a link. A save that fails
    removes its temporary file; one whose process died (killed, power cut) leaves it behind,
    and the next save to ``path`` removes it. Missing folders are made.

    Args:
        obj: e.g. ``{'model': model.state_dict(), 'opt': opt.state_dict(), 'epoch': 3}``.
        path: the file to write (any suffix; Paddle uses ``.pdparams`` / ``.pdopt``), or an
            ``io.BytesIO``: the checkpoint is written at its position once all of it is
            encoded, so a failed save leaves the buffer as it was.
        protocol: checked as ``paddle.save`` checks it (an int, 2 to 4), else unused: nothing
            is pickled.

    Raises:
        TypeError: ``obj`` holds something that cannot be saved; the message gives its key
            path, e.g. ``obj['opt']['x']: cannot save object of type Foo``. Or ``path`` is
            neither a path nor an ``io.BytesIO``.
        ValueError: ``path`` has no file name (``''``, ``'folder/'``: Paddle's message), or
            ``protocol`` is not an int from 2 to 4.
        IsADirectoryError: ``path`` is an existing folder.

    Nothing is written when it raises.
    """
    _check_protocol(protocol)
    if isinstance(path, io.BytesIO):
        arrays: list[np.ndarray] = []
        root = _encode(obj, "obj", arrays, set())
        payload = io.BytesIO()  # all of it first: a failed save leaves the buffer as it was
        _write_archive(payload, _structure(root), arrays)
        path.write(payload.getbuffer())
        return
    path = _file_path(path, "save")
    if not os.path.basename(path):
        raise ValueError(
            "The input path MUST be format of dirname/filename [dirname\\filename in Windows "
            f"system], but received filename is empty string. (path={path!r})"
        )
    if os.path.isdir(path):
        raise IsADirectoryError(f"cannot save to {path!r}: it is a directory; give a file name")
    arrays = []
    root = _encode(obj, "obj", arrays, set())
    structure = _structure(root)
    path = os.path.realpath(path)  # through a symbolic link: the file it points to
    folder, base = os.path.split(path)
    os.makedirs(folder, exist_ok=True)
    _remove_stale_temporaries(folder, base)
    mode = _permission_bits(path)
    tmp = os.path.join(folder, f".{base}.{_OWNER}-{os.getpid()}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "xb") as f:
            _write_archive(f, structure, arrays)
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)  # what the replaced file had, not the umask's default
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _check_protocol(protocol) -> None:
    """Paddle's check of ``protocol`` (``_pickle_save``), with its messages."""
    if not isinstance(protocol, int):
        raise ValueError(f"The 'protocol' MUST be `int`, but received {type(protocol)}")
    if protocol < 2 or protocol > 4:
        raise ValueError(f"Expected 1<'protocol'<5, but received protocol={protocol}")


def _file_path(path, what: str):
    """``os.fspath(path)``, or a TypeError that says what ``save``/``load`` take."""
    try:
        return os.fspath(path)
    except TypeError:
        raise TypeError(
            f"{what}() takes a file path (str or os.PathLike) or an io.BytesIO, got "
            f"{type(path).__name__}"
        ) from None


def _structure(root: dict) -> str:
    return json.dumps({"format": FORMAT, "version": VERSION, "root": root})


def _write_archive(f, structure: str, arrays: list) -> None:
    """The checkpoint's zip archive, written to the open binary file ``f``."""
    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        zf.writestr(STRUCTURE, structure)
        for i, array in enumerate(arrays):
            with zf.open(f"arrays/{i}.npy", "w", force_zip64=True) as entry:
                np.lib.format.write_array(entry, array, allow_pickle=False)


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
    return dtype.kind in _ARRAY_KINDS or dtype == bfloat16 or dtype in FP8


def _array_node(kind: str, array: np.ndarray, arrays: list) -> dict:
    named = array.dtype == bfloat16 or array.dtype in FP8  # no .npy code: stored as bits
    arrays.append(array.view(BITS[array.dtype.name]) if named else array)  # bit-exact
    return {
        "type": kind,
        "array": len(arrays) - 1,
        "dtype": array.dtype.name if named else array.dtype.str,
        "shape": list(array.shape),
    }


# ---- load ---------------------------------------------------------------------------------------
def load(path, return_numpy: bool = False, max_bytes: int | None = DEFAULT_MAX_BYTES):
    """Read what :func:`save` wrote, or what Paddle's ``paddle.save`` wrote.

    Args:
        path: the checkpoint file, or an ``io.BytesIO`` holding one from its position on
            (read to its end: one checkpoint per buffer).
        return_numpy: give NumPy arrays instead of Tensors.
        max_bytes: the most memory the load may take (default 16 GiB); None for no limit.
            Everything the file declares counts, before it is allocated: the arrays (each
            stored array once, however many entries refer to it), the index (48 bytes per
            byte: what parsing JSON can take) and the zip's directory (16 per byte); for a
            Paddle pickle, what unpickling it builds (``serialization/pickle_scan.py``).

    A pickle written by Paddle's ``paddle.save`` (``.pdparams``, ``.pdopt``) is read by a
    restricted unpickler that never runs code (``serialization/paddle_pickle.py``).

    Returns:
        The saved structure; Tensors are created on the current device (``set_device``).

    Raises:
        FileNotFoundError: there is no file at ``path``.
        TypeError: ``path`` is neither a path nor an ``io.BytesIO``.
        CheckpointError: (a ValueError) the file is not a readable checkpoint: not a zip,
            truncated, corrupted, a zip that ``save`` did not write, a pickle that asks for
            code, or one that takes more than ``max_bytes``. The message names the file.
    """
    if max_bytes is not None and (
        isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0
    ):
        raise ValueError(f"max_bytes must be a non-negative int or None, got {max_bytes!r}")
    if isinstance(path, io.BytesIO):
        size, position = path.getbuffer().nbytes, path.tell()
        if position >= size:
            raise CheckpointError(
                f"cannot load from the io.BytesIO: nothing after its position {position} (of "
                f"{size} bytes); after saving into it, call seek(0) before loading"
            )
        budget = MemoryBudget(max_bytes)
        budget.charge(size - position, "copying the buffer")
        return _load_open(io.BytesIO(path.read()), "<io.BytesIO>", return_numpy, budget)
    path = _file_path(path, "load")
    if not os.path.exists(path):
        raise FileNotFoundError(2, "no checkpoint file at this path", path)
    if os.path.isdir(path):
        raise IsADirectoryError(f"cannot load {path!r}: it is a directory, not a checkpoint file")
    with open(path, "rb") as f:
        return _load_open(f, path, return_numpy, MemoryBudget(max_bytes))


def _load_open(f, path: str, return_numpy: bool, budget: MemoryBudget):
    """``load`` of the open binary file (or ``io.BytesIO``) ``f``; ``path`` names it."""
    if paddle_pickle.is_pickle(f.read(2)):  # what Paddle's paddle.save writes
        return paddle_pickle.load(f, path, return_numpy, budget)
    f.seek(0)
    try:
        zf = checkpoint_zip.open_archive(f, budget)
    except CheckpointError as exc:
        raise CheckpointError(f"cannot load {path!r}: {exc}") from None
    except MemoryError:
        raise
    except Exception as exc:  # zipfile raises more than BadZipFile on a damaged archive
        raise CheckpointError(
            f"cannot load {path!r}: not a checkpoint written by minitorch_amp.save (not a "
            f"readable zip archive: {exc}); the file may be truncated or corrupt"
        ) from None
    with zf:
        try:
            return checkpoint_zip.Reader(zf, return_numpy, budget).read_root()
        except CheckpointError as exc:
            raise CheckpointError(f"cannot load {path!r}: {exc}") from None
        except MemoryError:
            raise  # the machine, not the file: max_bytes allowed this much
        except Exception as exc:  # zipfile, zlib and NumPy's many ways to say "corrupt"
            raise CheckpointError(
                f"cannot load {path!r}: the file is corrupt or truncated "
                f"({type(exc).__name__}: {exc})"
            ) from None
