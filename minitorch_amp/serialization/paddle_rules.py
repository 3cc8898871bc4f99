"""What ``paddle.load`` returns for an unpickled Paddle checkpoint (``paddle.save``'s forms).

``paddle.save`` pickles one of two shapes:

* a *state dict* (every value a Tensor, or a dict holding no Tensor, such as the optimizer's
  ``LR_Scheduler``): a plain dict whose Tensors became NumPy arrays, plus the key
  ``StructuredToParameterName@@`` mapping each key to the tensor's name. Under protocol 2 and
  3 an array of more than 1 GiB is split into ``key@@.0``, ``key@@.1``, ... and listed under
  ``UnpackBigParamInfor@@``;
* anything else (a dict with nested state dicts, an optimizer state with ``master_weights``):
  the object itself, each Tensor pickled as the tuple ``(name, ndarray)``.

:func:`paddle_load_result` undoes both: Tensors named as in Paddle (unless ``return_numpy``),
the name table dropped, split arrays joined. Paddle pickles a bfloat16 tensor as its bits, a
``uint16`` array (Paddle has no uint16 tensor: ``paddle.load`` makes every uint16 array a
bfloat16 Tensor), so one becomes a bfloat16 Tensor here too; an array of a dtype no Tensor
holds (int8, uint8, int16: quantized weights) is refused with its key, and
``return_numpy=True`` reads it. Each walk visits an object once however many times the pickle
refers to it, so a list referred to a thousand times costs one visit.
"""

from __future__ import annotations

import pickle

import numpy as np

from ..autograd.tensor import Tensor
from ..backend.dtypes import SUPPORTED, bfloat16
from .bounds import CheckpointError, MemoryBudget

_NAME_TABLE = "StructuredToParameterName@@"
_BIG_PARAMS = "UnpackBigParamInfor@@"


def paddle_load_result(obj, return_numpy: bool, budget: MemoryBudget):
    """What ``paddle.load`` returns for the unpickled ``obj`` (its arrays plain ndarrays)."""
    if isinstance(obj, dict):
        obj = _pack_big_params(obj, budget)
        if _NAME_TABLE in obj:
            table = obj.pop(_NAME_TABLE)
            if not isinstance(table, dict):
                raise pickle.UnpicklingError(f"{_NAME_TABLE} is not a dict")
            for key, name in table.items():
                if isinstance(obj.get(key), np.ndarray) and not return_numpy:
                    obj[key] = _named_tensor(obj[key], name, key)
            return obj
    pairs = _contains(obj, _named_pair)
    if return_numpy:
        return walk(obj, _named_pair, lambda pair: pair[1], {}) if pairs else obj
    if pairs:  # (name, array) pairs are the Tensors; plain arrays stay arrays
        return walk(obj, _named_pair, lambda pair: _named_tensor(pair[1], pair[0], None), {})
    return walk(obj, _is_array, lambda array: _named_tensor(array, None, None), {})


def _named_tensor(array: np.ndarray, name, key) -> Tensor:
    if name is not None and not isinstance(name, str):
        raise pickle.UnpicklingError(
            f"{_NAME_TABLE} names the tensor {key!r} with a {type(name).__name__}, not a str"
        )
    if array.dtype == np.uint16:  # a bfloat16 tensor's bits (Paddle's numpy() of BF16)
        array = array.view(bfloat16)
    elif array.dtype not in SUPPORTED:
        what = repr(key) if key is not None else repr(name) if name is not None else "an array"
        raise CheckpointError(
            f"the tensor {what} has dtype {array.dtype}, which no minitorch_amp Tensor holds "
            f"(supported: {', '.join(str(d) for d in SUPPORTED)}); load(path, "
            "return_numpy=True) gives the arrays as NumPy arrays"
        )
    t = Tensor(array)
    t.name = name
    return t


def _pack_big_params(obj: dict, budget: MemoryBudget) -> dict:
    """Join arrays that protocol 2/3 split into slices (Paddle's ``_pack_loaded_dict``)."""
    info = obj.get(_BIG_PARAMS)
    if info is None:
        return obj
    try:
        for key, entry in info.items():
            parts = [obj.pop(part) for part in entry["slices"]]
            budget.charge(sum(p.nbytes for p in parts), f"joining the slices of {key!r}")
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


def _contains(obj, test) -> bool:
    seen, stack = set(), [obj]
    while stack:
        value = stack.pop()
        if test(value):
            return True
        if id(value) in seen or not isinstance(value, (dict, list, tuple)):
            continue
        seen.add(id(value))
        stack.extend(value.values() if isinstance(value, dict) else value)
    return False


def walk(obj, test, convert, done: dict):
    """``obj`` with each value that passes ``test`` replaced by ``convert(value)``: dicts and
    lists in place, tuples rebuilt. ``done`` maps ``id`` to the result, so an object the
    pickle refers to many times is converted once and stays one object."""
    key = id(obj)
    if key in done:
        return done[key][1]
    if test(obj):
        result = convert(obj)
    elif isinstance(obj, (dict, list)):
        done[key] = (obj, obj)  # first, so that a cycle ends here
        items = obj.items() if isinstance(obj, dict) else enumerate(obj)
        for k, value in list(items):
            obj[k] = walk(value, test, convert, done)
        return obj
    elif type(obj) is tuple:
        result = tuple(walk(value, test, convert, done) for value in obj)
    else:
        return obj
    done[key] = (obj, result)  # keeps obj alive, so its id is not reused
    return result
