"""What a collective says before it moves data: the descriptor every rank exchanges.

Every collective of ``backend.comm`` (the library's own included) first exchanges one
fixed-size descriptor per rank (:func:`describe`): which collective, dtype, shape, root or
op, a checksum the shape does not show, and who called it. Equal on every rank, the data
moves; otherwise every rank raises the same ``CollectiveMismatchError`` with
:func:`mismatch_message`, and nothing moved.
"""

from __future__ import annotations

import functools
import zlib

import numpy as np

_MAX_DIMS = 8  # dimensions a descriptor carries
_LABEL_BYTES = 48  # who called a collective, as ASCII text in the descriptor

OP_NAMES = {0: "SUM", 1: "MAX", 2: "MIN", 3: "PROD", 4: "AVG"}


# Collective codes in a descriptor (0 is "no collective"), and dtype codes.
OPS = ("all_reduce", "broadcast", "all_gather", "reduce_scatter", "barrier", "check",
       "gather_object")  # fmt: skip
_DTYPES = ("bool", "uint8", "int32", "int64", "float16", "float32", "float64", "bfloat16")


def describe(op: str, array=None, arg: int = 0, caller: str = "", detail: int = 0) -> np.ndarray:
    """The descriptor a collective exchanges before moving data (19 int64, 152 bytes).

    ``[op, dtype, arg, detail, ndim, shape (8), caller (48 ASCII bytes)]``: ``arg`` is the
    reduce op or the root, ``detail`` a checksum the shape does not show (the block lengths of
    an unequal reduce_scatter, a model's signature), ``caller`` who made the call: empty for
    a user's call, else what the library was doing (``'gradient bucket 0'``, ``'found_inf'``).
    """
    dtype, ndim, shape = -1, -1, [-1] * _MAX_DIMS
    if array is not None:
        name = np.dtype(array.dtype).name
        # NOTE: dtypes outside _DTYPES get distinct codes too (100 + NumPy's type number):
        # one shared "unsupported" code would let int8 on one rank meet int16 on another.
        dtype = _DTYPES.index(name) if name in _DTYPES else 100 + np.dtype(array.dtype).num
        ndim = array.ndim
        if ndim > _MAX_DIMS:  # rare: the size, a checksum of the whole shape, its lead
            whole = np.asarray(array.shape, dtype=np.int64).tobytes()
            shape[:2] = [int(np.prod(array.shape)), zlib.crc32(whole)]
            shape[2:] = array.shape[: _MAX_DIMS - 2]
        else:
            shape[:ndim] = array.shape
    head = [OPS.index(op) + 1, dtype, arg, detail, ndim, *shape]
    return np.array(head + _label_words(caller), dtype=np.int64)


@functools.lru_cache(maxsize=1024)
def _label_words(caller: str) -> list:
    """``caller`` as ASCII, cut or padded with zeros to 48 bytes, as 6 int64 words."""
    label = caller.encode("ascii", "replace")[:_LABEL_BYTES].ljust(_LABEL_BYTES, b"\0")
    return np.frombuffer(label, dtype=np.int64).tolist()


def _explain(desc: np.ndarray) -> str:
    """``all_reduce(float32, shape=[4], op=AVG) for gradient bucket 0``, from a descriptor."""
    op = OPS[desc[0] - 1] if desc[0] > 0 else "?"
    caller = desc[5 + _MAX_DIMS :].tobytes().rstrip(b"\0").decode("ascii", "replace")
    if op == "check" and caller:  # a check of the library's own: the caller says it all
        return caller
    text = op
    if desc[1] >= 0:
        dtype = _DTYPES[desc[1]] if desc[1] < len(_DTYPES) else "unsupported dtype"
        ndim = int(desc[4])
        shape = f"{ndim}-d, size {desc[5]}"
        if ndim <= _MAX_DIMS:
            shape = [int(d) for d in desc[5 : 5 + ndim]]
        extra = ""
        if op == "broadcast":
            extra = f", src={desc[2]}"
        elif op in ("all_reduce", "reduce_scatter"):
            extra = f", op={OP_NAMES.get(int(desc[2]), desc[2])}"
        if op == "reduce_scatter" and desc[3]:
            extra += f", blocks #{int(desc[3]) & 0xFFFFFFFF:08x}"
        text = f"{op}({dtype}, shape={shape}{extra})"
    return f"{text} for {caller}" if caller else text


def mismatch_message(table: np.ndarray) -> str:
    """What :class:`CollectiveMismatchError` says: every rank's call, from the descriptors."""
    lines = "; ".join(f"rank {r}: {_explain(row)}" for r, row in enumerate(table))
    ours = ""
    if (table[:, 5 + _MAX_DIMS :] != 0).any():  # some rank was inside the library
        ours = (
            " The calls 'for ...' and the checks are made by minitorch_amp itself (the "
            "gradient sync after backward, GradScaler, a sharded step, wrapping a model): "
            "every rank must run the same steps, on as many batches, with the same settings."
        )
    return (
        f"the ranks called a collective with different arguments ({lines}). Every rank "
        "must call the same collective with the same shape and dtype (and the same src); "
        f"nothing was sent.{ours}"
    )
