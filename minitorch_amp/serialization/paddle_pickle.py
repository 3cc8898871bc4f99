"""Reading checkpoints written by Paddle's ``paddle.save``: pickles, read without running code.

``paddle.save`` pickles (protocol 2, 3 or 4) one of two shapes:

* a *state dict* (every value a Tensor, or a dict holding no Tensor, such as the optimizer's
  ``LR_Scheduler``): a plain dict whose Tensors became NumPy arrays, plus the key
  ``StructuredToParameterName@@`` mapping each key to the tensor's name. Under protocol 2 and
  3 an array of more than 1 GiB is split into ``key@@.0``, ``key@@.1``, ... and listed under
  ``UnpackBigParamInfor@@``;
* anything else (a dict with nested state dicts, an optimizer state with ``master_weights``):
  the object itself, each Tensor pickled as the tuple ``(name, ndarray)``.

A pickle is a program for a small stack machine that may call any importable function, so
``pickle.load`` on a file from elsewhere can run anything. :class:`RestrictedUnpickler` (the
approach of PyTorch's ``weights_only=True``) resolves only these names and refuses every
other one before anything is called:

=====================================================  ========================================
name                                                   why a Paddle checkpoint needs it
=====================================================  ========================================
``numpy.core.multiarray._reconstruct`` (and the        an ndarray (subtype ``numpy.ndarray``
``numpy._core`` spelling of NumPy 2), ``numpy.ndarray``  only), filled by its ``__setstate__``
``numpy.dtype``                                        the array's dtype
``numpy.core.multiarray.scalar`` (both spellings)      a NumPy scalar (numeric dtypes only)
``_codecs.encode`` (to latin-1 only)                   array bytes under protocol 2
``collections.OrderedDict``, ``builtins.tuple``,       containers; ``tuple`` is how Paddle
``list``, ``dict``, ``set``, ``frozenset``, ``complex``  reduces a Tensor
``builtins.eval``: only ``eval('data', {'data': a})``  how Paddle 2.x reduces a LoDTensor
``paddle.framework.io_utils._reconstruct_dense_tensor_data``  the same in Paddle 3 (identity)
=====================================================  ========================================

Afterwards every array must hold numbers (no object arrays). Then Paddle's ``load`` rules turn
the arrays into Tensors (named as in Paddle), unless ``return_numpy``.
"""

from __future__ import annotations

import collections
import io
import os
import pickle

import numpy as np

from ..autograd.tensor import Tensor

PICKLE_PROTOCOLS = (2, 3, 4, 5)
_NAME_TABLE = "StructuredToParameterName@@"
_BIG_PARAMS = "UnpackBigParamInfor@@"
_NUMBER_KINDS = "biufc"


class UnsafePickleError(pickle.UnpicklingError):
    """The pickle asks for something a checkpoint never needs (a function, a class, code)."""


def is_pickle(head: bytes) -> bool:
    """True when ``head`` (a file's first bytes) starts a pickle of protocol 2 or later."""
    return len(head) >= 2 and head[0] == 0x80 and head[1] in PICKLE_PROTOCOLS


_NUMPY_RECONSTRUCT = np.ndarray(0).__reduce__()[0]  # numpy's own, under either module name


def _reconstruct(subtype, shape, dtype_char):
    if subtype is not np.ndarray:
        raise UnsafePickleError(f"an array of type {subtype!r}: only numpy.ndarray is allowed")
    return _NUMPY_RECONSTRUCT(subtype, shape, dtype_char)


def _scalar(dtype, data=None):
    if not isinstance(dtype, np.dtype) or dtype.kind not in _NUMBER_KINDS:
        raise UnsafePickleError(f"a NumPy scalar of dtype {dtype!r}: only numbers are allowed")
    if not isinstance(data, bytes) or len(data) != dtype.itemsize:
        raise UnsafePickleError(f"a NumPy scalar of dtype {dtype} with malformed data")
    return np.frombuffer(data, dtype=dtype)[0]


def _encode(text, encoding="utf-8"):
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise UnsafePickleError("_codecs.encode is allowed only to turn array bytes into latin-1")
    return text.encode("latin1")


def _lod_tensor_eval(expression, namespace=None, *rest):
    """Paddle 2.x pickles a LoDTensor as ``eval('data', {'data': array})``: that form only."""
    if (
        expression == "data"
        and not rest
        and isinstance(namespace, dict)
        and list(namespace) == ["data"]
        and isinstance(namespace["data"], np.ndarray)
    ):
        return namespace["data"]
    raise UnsafePickleError(
        "the pickle calls eval(): only Paddle's eval('data', {'data': array}) is allowed"
    )


def _dense_tensor_data(data):
    if not isinstance(data, np.ndarray):
        raise UnsafePickleError("_reconstruct_dense_tensor_data of something not an array")
    return data


_ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy.core.multiarray", "scalar"): _scalar,
    ("numpy._core.multiarray", "scalar"): _scalar,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("_codecs", "encode"): _encode,
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("builtins", "tuple"): tuple,
    ("builtins", "list"): list,
    ("builtins", "dict"): dict,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("builtins", "complex"): complex,
    ("builtins", "eval"): _lod_tensor_eval,
    ("paddle.framework.io_utils", "_reconstruct_dense_tensor_data"): _dense_tensor_data,
}
_PYTHON2_MODULES = {"__builtin__": "builtins", "copy_reg": "copyreg"}  # protocol 2 spellings


class RestrictedUnpickler(pickle.Unpickler):
    """``pickle.Unpickler`` that resolves only the names in :data:`_ALLOWED`."""

    def find_class(self, module: str, name: str):
        module = _PYTHON2_MODULES.get(module, module)
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise UnsafePickleError(
                f"the pickle asks for {module}.{name}, which a checkpoint never needs; it was "
                "refused and nothing was run. Only arrays, numbers, strings and containers "
                "are read (load it with pickle yourself only if you trust whoever wrote it)"
            ) from None

    def persistent_load(self, pid):
        raise UnsafePickleError(
            "the pickle refers to external objects (a PyTorch-style archive?); not supported"
        )


def restricted_loads(data: bytes):
    """Unpickle ``data`` with :class:`RestrictedUnpickler`; check every array holds numbers."""
    obj = RestrictedUnpickler(io.BytesIO(data), encoding="latin1").load()
    _check_arrays(obj)
    return obj


def _check_arrays(obj) -> None:
    stack = [obj]
    while stack:
        value = stack.pop()
        if isinstance(value, np.ndarray):
            if value.dtype.kind not in _NUMBER_KINDS:
                raise UnsafePickleError(
                    f"an array of dtype {value.dtype}: only arrays of numbers are read"
                )
        elif isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, (list, tuple, set, frozenset)):
            stack.extend(value)


# ---- Paddle's load rules ------------------------------------------------------------------
_MALFORMED = (
    pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError,
    KeyError, OverflowError, RecursionError,
)  # fmt: skip


def load(f, path: str, return_numpy: bool, max_bytes: int | None, error: type):
    """``minitorch_amp.load`` of a pickle file ``f`` (open, binary): what ``paddle.load``
    returns. Any failure is raised as ``error`` (the caller's CheckpointError) naming ``path``.

    The arrays come from the file's own bytes, so a file of at most ``max_bytes`` cannot
    make the arrays take much more; a bigger file is refused before it is read.
    """
    size = os.fstat(f.fileno()).st_size
    if max_bytes is not None and size > max_bytes:
        raise error(
            f"cannot load {path!r}: the file is {size} bytes, more than max_bytes={max_bytes}; "
            "if you trust it, pass a larger max_bytes to load() (max_bytes=None: no limit)"
        )
    f.seek(0)
    try:
        obj = restricted_loads(f.read())
        return paddle_load_result(obj, return_numpy, _named_tensor)
    except UnsafePickleError as exc:
        raise error(f"cannot load {path!r}: {exc}") from None
    except _MALFORMED as exc:
        raise error(
            f"cannot load {path!r}: a pickle, but not a readable Paddle checkpoint "
            f"({type(exc).__name__}: {exc}); the file may be truncated or corrupt"
        ) from None


def _named_tensor(array: np.ndarray, name) -> Tensor:
    t = Tensor(array)
    if name is not None:
        t.name = name
    return t


def paddle_load_result(obj, return_numpy: bool, to_tensor):
    """What ``paddle.load`` returns for the unpickled ``obj`` (``to_tensor(array, name)``)."""
    if isinstance(obj, dict):
        obj = _pack_big_params(obj)
        if _NAME_TABLE in obj:
            table = obj.pop(_NAME_TABLE)
            if not isinstance(table, dict):
                raise pickle.UnpicklingError(f"{_NAME_TABLE} is not a dict")
            for key, name in table.items():
                if isinstance(obj.get(key), np.ndarray) and not return_numpy:
                    obj[key] = to_tensor(obj[key], name)
            return obj
    convert = _named_pair if _contains(obj, _named_pair) else _is_array
    return _map(obj, convert, lambda v: _split(v)[0] if return_numpy else to_tensor(*_split(v)))


def _pack_big_params(obj: dict) -> dict:
    """Join arrays that protocol 2/3 split into slices (Paddle's ``_pack_loaded_dict``)."""
    info = obj.get(_BIG_PARAMS)
    if info is None:
        return obj
    try:
        for key, entry in info.items():
            parts = [obj.pop(part) for part in entry["slices"]]
            obj[key] = np.concatenate(parts).reshape(entry["OriginShape"])
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise pickle.UnpicklingError(f"malformed {_BIG_PARAMS} ({exc})") from None
    del obj[_BIG_PARAMS]
    return obj


def _named_pair(value) -> bool:  # how Paddle pickles a Tensor: (name, ndarray)
    return (
        type(value) is tuple
        and len(value) == 2
        and isinstance(value[0], str)
        and isinstance(value[1], np.ndarray)
    )


def _is_array(value) -> bool:
    return isinstance(value, np.ndarray)


def _split(value):
    return (value[1], value[0]) if _named_pair(value) else (value, None)


def _contains(obj, test) -> bool:
    if test(obj):
        return True
    if isinstance(obj, dict):
        return any(_contains(v, test) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return any(_contains(v, test) for v in obj)
    return False


def _map(obj, test, convert):
    if test(obj):
        return convert(obj)
    if isinstance(obj, dict):
        for key in list(obj):
            obj[key] = _map(obj[key], test, convert)
        return obj
    if isinstance(obj, list):
        return [_map(v, test, convert) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_map(v, test, convert) for v in obj)
    return obj
