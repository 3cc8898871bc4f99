"""Reading checkpoints written by Paddle's ``paddle.save``: pickles, read without running code.

``paddle.save`` pickles (protocol 2, 3 or 4) a state dict or a nested object whose Tensors
became NumPy arrays (``paddle_rules.py`` turns them back into what ``paddle.load`` returns).

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
``builtins.bytes`` (no arguments)                      an empty array's bytes under protocol 2
``collections.OrderedDict``, ``builtins.tuple``,       containers; ``tuple`` is how Paddle
``list``, ``dict``, ``set``, ``frozenset``, ``complex``  reduces a Tensor
``builtins.eval``: only ``eval('data', {'data': a})``  how Paddle 2.x reduces a LoDTensor
``paddle.framework.io_utils._reconstruct_dense_tensor_data``  the same in Paddle 3 (identity)
=====================================================  ========================================

Nothing it builds is bigger than the file says, and nothing holds bytes the file did not give:

* before unpickling, ``pickle_scan.scan`` checks every opcode and length and charges the
  load's :class:`~.bounds.MemoryBudget` for them;
* each allowed call charges what it allocates (a copy of a container, an encoded string);
* ``numpy.ndarray`` is a name only: calling it (``np.ndarray((4096,), 'u1')`` is
  ``np.empty``) is refused. ``_reconstruct`` counts the shape it declares and makes an empty
  :class:`_UnfilledArray`; its ``__setstate__`` checks the state (a numeric dtype, data of
  exactly the declared size) and charges what NumPy will copy. An array that never receives
  its state is refused after unpickling, never returned;
* ``numpy.dtype`` makes a :class:`_DtypeSpec`, which takes only a byte order from its state:
  NumPy's own dtype state carries flags and fields, and a float32 "holding objects" breaks
  NumPy later.
"""

from __future__ import annotations

import collections
import contextlib
import io
import math
import mmap
import os
import pickle

import numpy as np

from . import paddle_rules
from .bounds import CheckpointError, MemoryBudget
from .pickle_scan import OBJECT_COST, UnsafePickleError, scan

__all__ = ["PICKLE_PROTOCOLS", "RestrictedUnpickler", "UnsafePickleError", "is_pickle", "load"]

PICKLE_PROTOCOLS = (2, 3, 4, 5)
NUMBER_KINDS = "biufc"
ITEM_COST = 128  # bytes one item of a copied container may take (a set's slots, at most)
_NUMPY_RECONSTRUCT = np.ndarray(0).__reduce__()[0]  # numpy's own, under either module name


def is_pickle(head: bytes) -> bool:
    """True when ``head`` (a file's first bytes) starts a pickle of protocol 2 or later."""
    return len(head) >= 2 and head[0] == 0x80 and head[1] in PICKLE_PROTOCOLS


class _NdarrayName:
    """What ``numpy.ndarray`` resolves to: the argument ``_reconstruct`` expects, never called."""

    __slots__ = ()

    def __call__(self, *args, **kwargs):
        raise UnsafePickleError(
            "the pickle calls numpy.ndarray(...), which makes an array of uninitialised "
            "memory; NumPy's own pickles never do"
        )


NDARRAY = _NdarrayName()


class _UnfilledArray(np.ndarray):
    """An array ``_reconstruct`` made: empty until ``__setstate__`` gives it the file's bytes."""

    def __setstate__(self, state):
        budget = self.__dict__.pop("_budget", None)  # None: filled already (or not ours)
        if budget is None:
            raise UnsafePickleError("the pickle sets an array's data twice")
        shape, dtype, fortran, data = _array_state(state)
        nbytes = math.prod(shape) * dtype.itemsize
        if len(data) != nbytes:
            raise pickle.UnpicklingError(
                f"an array {dtype}{list(shape)} of {nbytes} bytes comes with {len(data)} bytes"
            )
        # NOTE: NumPy keeps a big bytes object as the array's memory (charged by the scan,
        # which saw it) but copies small data, byte-swapped data and a str's latin-1 encoding.
        if isinstance(data, str) or nbytes <= 1000 or not dtype.isnative:
            budget.charge(nbytes, f"an array {dtype}{list(shape)}")
        super().__setstate__((1, shape, dtype, fortran, data))  # a dtype made here


def _array_state(state):
    """``(shape, dtype, fortran, data)`` of an ndarray state ``(1, shape, dtype, fortran,
    data)``, its dtype made from the type code and byte order alone."""
    if not (type(state) is tuple and len(state) == 5 and state[0] == 1):
        raise pickle.UnpicklingError("an array's state is not NumPy's (1, shape, dtype, ...)")
    _, shape, spec, fortran, data = state
    if not (type(shape) is tuple and all(type(n) is int and n >= 0 for n in shape)):
        raise pickle.UnpicklingError(f"an array's shape {shape!r} is not a tuple of sizes")
    if not isinstance(spec, _DtypeSpec) or type(fortran) is not bool:
        raise pickle.UnpicklingError(f"an array's state holds {spec!r} where a dtype goes")
    if not isinstance(data, (bytes, str)):
        raise pickle.UnpicklingError("an array's data is not bytes")
    return shape, spec.dtype(), fortran, data


class _DtypeSpec:
    """What ``numpy.dtype(code, align, copy)`` resolves to: a numeric type code, and the byte
    order its ``__setstate__`` sets. The dtype is made from these two alone.

    NOTE: NumPy's own ``dtype.__setstate__`` takes fields, sizes and flags from the file: a
    float32 whose flags say it holds Python objects makes NumPy fail (or worse) later.
    """

    __slots__ = ("base", "byteorder")

    def __init__(self, base: np.dtype):
        self.base, self.byteorder = base, "="

    def __setstate__(self, state):
        if not (
            type(state) is tuple
            and len(state) == 8
            and state[0] == 3
            and state[1] in ("<", ">", "|", "=")
            and state[2:] == (None, None, None, -1, -1, 0)
        ):
            raise UnsafePickleError(f"a dtype state {state!r:.80}: only a byte order is read")
        self.byteorder = state[1]

    def dtype(self) -> np.dtype:
        return self.base.newbyteorder(self.byteorder) if self.byteorder in "<>" else self.base


def _numeric(dtype: np.dtype) -> bool:
    return (
        dtype.kind in NUMBER_KINDS
        and dtype.names is None
        and dtype.subdtype is None
        and not dtype.hasobject
    )


class RestrictedUnpickler(pickle.Unpickler):
    """``pickle.Unpickler`` that resolves only the names in the module docstring, and charges
    ``budget`` for what the calls they make allocate."""

    def __init__(self, file, budget: MemoryBudget):
        super().__init__(file, encoding="latin1")
        self.budget = budget
        self.arrays: list[_UnfilledArray] = []  # every array _reconstruct made
        self.allowed = {
            ("numpy.core.multiarray", "_reconstruct"): self.reconstruct,
            ("numpy._core.multiarray", "_reconstruct"): self.reconstruct,
            ("numpy.core.multiarray", "scalar"): self.scalar,
            ("numpy._core.multiarray", "scalar"): self.scalar,
            ("numpy", "ndarray"): NDARRAY,
            ("numpy", "dtype"): self.dtype,
            ("_codecs", "encode"): self.encode,
            ("builtins", "bytes"): _empty_bytes,
            ("collections", "OrderedDict"): self.container(collections.OrderedDict),
            **{("builtins", t.__name__): self.container(t) for t in _CONTAINERS},
            ("builtins", "complex"): _complex,
            ("builtins", "eval"): _lod_tensor_eval,
            ("paddle.framework.io_utils", "_reconstruct_dense_tensor_data"): _dense_tensor_data,
        }

    def find_class(self, module: str, name: str):
        module = _PYTHON2_MODULES.get(module, module)
        try:
            return self.allowed[(module, name)]
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

    def reconstruct(self, subtype, shape, dtype) -> _UnfilledArray:
        """NumPy's ``_reconstruct(ndarray, (0,), b'b')``; the data comes with ``__setstate__``."""
        if subtype is not NDARRAY:
            raise UnsafePickleError(f"an array of type {subtype!r}: only numpy.ndarray is read")
        if not (type(shape) is tuple and all(type(n) is int and n >= 0 for n in shape)):
            raise pickle.UnpicklingError(f"_reconstruct of a malformed shape {shape!r}")
        if isinstance(dtype, _DtypeSpec):
            dtype = dtype.dtype()
        elif isinstance(dtype, (bytes, str)) and len(dtype) <= 8:
            dtype = np.dtype(dtype)  # numpy writes b'b'; only its size matters here
        else:
            raise pickle.UnpicklingError(f"_reconstruct of a dtype {dtype!r:.40}")
        declared = math.prod(shape) * dtype.itemsize
        self.budget.charge(declared + OBJECT_COST, f"an array of shape {list(shape)}")
        array = _NUMPY_RECONSTRUCT(_UnfilledArray, (0,), b"b")  # empty: nothing uninitialised
        array._budget = self.budget
        self.arrays.append(array)
        return array

    def dtype(self, code, align=False, copy=True) -> _DtypeSpec:
        if not isinstance(code, str) or len(code) > 8:
            raise UnsafePickleError(f"numpy.dtype({code!r}): only a NumPy type code is read")
        self.budget.charge(OBJECT_COST, "a dtype")
        dtype = np.dtype(code)
        if not _numeric(dtype):
            raise UnsafePickleError(f"a dtype {dtype}: only arrays of numbers are read")
        return _DtypeSpec(dtype)

    def scalar(self, spec, data=None):
        if not isinstance(spec, _DtypeSpec):
            raise UnsafePickleError(f"a NumPy scalar of dtype {spec!r}: only numbers are read")
        dtype = spec.dtype()
        if not isinstance(data, bytes) or len(data) != dtype.itemsize:
            raise pickle.UnpicklingError(f"a NumPy scalar of dtype {dtype} with malformed data")
        self.budget.charge(OBJECT_COST + len(data), "a NumPy scalar")
        return np.frombuffer(data, dtype=dtype)[0]

    def encode(self, text, encoding="utf-8") -> bytes:
        if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
            raise UnsafePickleError("_codecs.encode is allowed only to turn array bytes to latin-1")
        self.budget.charge(OBJECT_COST + len(text), "array bytes encoded to latin-1")
        return text.encode("latin1")

    def container(self, kind: type):
        """``kind(items)`` for a container ``kind``, charged before it copies ``items``."""

        def build(items=()):
            if not isinstance(items, (*_CONTAINERS, dict)):
                raise UnsafePickleError(f"{kind.__name__}() of a {type(items).__name__}")
            self.budget.charge(OBJECT_COST + ITEM_COST * len(items), f"a {kind.__name__}")
            return kind(items)

        return build

    def unfilled(self) -> int:
        """How many arrays ``_reconstruct`` made never received their data."""
        return sum("_budget" in array.__dict__ for array in self.arrays)


def _made_here(value) -> bool:
    return isinstance(value, (_UnfilledArray, _DtypeSpec))


def _finished(value):
    """A plain ndarray (a view) for a filled array, a NumPy dtype for a dtype."""
    return value.dtype() if isinstance(value, _DtypeSpec) else value.view(np.ndarray)


_CONTAINERS = (tuple, list, dict, set, frozenset)
_PYTHON2_MODULES = {"__builtin__": "builtins", "copy_reg": "copyreg"}  # protocol 2 spellings


def _empty_bytes() -> bytes:
    return b""  # protocol 2 pickles an empty bytes object as bytes()


def _complex(real=0.0, imag=0.0) -> complex:
    if not all(type(x) in (int, float) for x in (real, imag)):
        raise UnsafePickleError("complex() of something other than two numbers")
    return complex(real, imag)


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


# ---- loading a file -------------------------------------------------------------------------
def load(f, path: str, return_numpy: bool, budget: MemoryBudget):
    """``minitorch_amp.load`` of a pickle file ``f`` (open, binary, or an ``io.BytesIO``):
    what ``paddle.load`` returns. Any failure is a :class:`CheckpointError` naming ``path``.

    A file bigger than the budget is refused before it is read; then its opcodes are checked
    and charged (``pickle_scan``), then it is unpickled from the file (never read whole).
    """
    size = _size(f)
    if budget.limited and size > budget.max_bytes:
        raise CheckpointError(
            f"cannot load {path!r}: the file is {size} bytes, more than "
            f"max_bytes={budget.max_bytes}; if you trust it, pass a larger max_bytes to "
            "load() (max_bytes=None: no limit)"
        )
    try:
        with _mapped(f, budget) as data:
            scan(data, budget)
        f.seek(0)
        unpickler = RestrictedUnpickler(f, budget)
        obj = unpickler.load()
        if unpickler.unfilled():
            raise UnsafePickleError(
                f"{unpickler.unfilled()} array(s) never received their data: the file would "
                "give uninitialised memory as values"
            )
        obj = paddle_rules.walk(obj, _made_here, _finished, {})
        return paddle_rules.paddle_load_result(obj, return_numpy, budget)
    except CheckpointError as exc:
        raise CheckpointError(f"cannot load {path!r}: {exc}") from None
    except UnsafePickleError as exc:
        raise CheckpointError(f"cannot load {path!r}: {exc}") from None
    except MemoryError:
        raise  # the machine, not the file: the budget allowed it
    except Exception as exc:  # whatever a malformed pickle makes pickle or NumPy raise
        raise CheckpointError(
            f"cannot load {path!r}: a pickle, but not a readable Paddle checkpoint "
            f"({type(exc).__name__}: {exc}); the file may be truncated or corrupt"
        ) from None


def _size(f) -> int:
    """The size of the open file ``f``, or of the ``io.BytesIO`` ``f``."""
    if isinstance(f, io.BytesIO):
        return f.getbuffer().nbytes
    return os.fstat(f.fileno()).st_size


@contextlib.contextmanager
def _mapped(f, budget: MemoryBudget):
    """The file's bytes, mapped into memory (not read), or read when it cannot be mapped."""
    try:
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # a file system that cannot map files
        size = _size(f)
        budget.charge(size, "reading the whole file (it cannot be mapped)")
        f.seek(0)
        yield f.read()
        return
    with data:
        yield data
