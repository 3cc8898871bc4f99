"""Files shaped exactly like Paddle's ``paddle.save`` output, written without Paddle.

This follows ``python/paddle/framework/io.py`` and ``io_utils.py`` of Paddle 2.x/3.x:

* ``save_state_dict``: ``paddle.save`` of a *state dict* (every value a Tensor, or a dict
  without Tensors such as ``LR_Scheduler``): ``_build_saved_state_dict`` turns each Tensor
  into ``np.array(tensor)`` and adds ``StructuredToParameterName@@`` (key -> tensor name);
  under protocol 2/3, ``_unpack_saved_dict`` splits an array of more than
  ``(2**30 - 1) // itemsize`` elements into ``key@@.0``, ``key@@.1``, ... listed under
  ``UnpackBigParamInfor@@`` (``max_elements`` lowers that limit, so a test can split small
  arrays); then ``pickle.dump(obj, f, protocol)``.
* ``save_object``: ``paddle.save`` of anything else: ``_pickle_save`` with a dispatch table
  that reduces each Tensor to ``(tuple, ((name, ndarray),))``. :class:`FakeTensor` reduces
  the same way, so the bytes are the same.
* :class:`FakeLoDTensor`: Paddle 2.x reduces a LoDTensor to ``(eval, ('data', {'data':
  ndarray}))``; :class:`FakeDenseTensor`: Paddle 3 to ``(_reconstruct_dense_tensor_data,
  (ndarray,))`` from ``paddle.framework.io_utils`` (a stand-in module while pickling).
"""

from __future__ import annotations

import contextlib
import math
import pickle
import sys
import types

import numpy as np


class FakeTensor:
    """Pickles as Paddle pickles a Tensor inside a nested object: the tuple (name, ndarray)."""

    def __init__(self, name: str, data: np.ndarray):
        self.name, self.data = name, data

    def __reduce__(self):
        return (tuple, ((self.name, self.data),))


class FakeLoDTensor:
    def __init__(self, data: np.ndarray):
        self.data = data

    def __reduce__(self):
        return (eval, ("data", {"data": self.data}))


def _reconstruct_dense_tensor_data(data):
    return data


class FakeDenseTensor:
    def __init__(self, data: np.ndarray):
        self.data = data

    def __reduce__(self):
        return (_reconstruct_dense_tensor_data, (self.data,))


@contextlib.contextmanager
def _paddle_io_utils_module():
    """Make ``paddle.framework.io_utils._reconstruct_dense_tensor_data`` importable for the
    pickler (which checks a function's module), and remove it afterwards."""
    names = ["paddle", "paddle.framework", "paddle.framework.io_utils"]
    saved = {n: sys.modules.get(n) for n in names}
    module = types.ModuleType("paddle.framework.io_utils")
    module._reconstruct_dense_tensor_data = _reconstruct_dense_tensor_data
    _reconstruct_dense_tensor_data.__module__ = module.__name__
    sys.modules.update(
        {"paddle": types.ModuleType("paddle"), "paddle.framework": types.ModuleType("x")}
    )
    sys.modules["paddle.framework.io_utils"] = module
    try:
        yield
    finally:
        _reconstruct_dense_tensor_data.__module__ = __name__
        for n, m in saved.items():
            if m is None:
                sys.modules.pop(n, None)
            else:
                sys.modules[n] = m


def save_state_dict(path, state: dict, names: dict, protocol: int = 4, max_elements=None):
    """``paddle.save(state_dict, path, protocol)``: ``state`` maps keys to arrays (the
    tensors) or to dicts without tensors; ``names`` maps each array key to its tensor name."""
    saved = dict(state)
    saved["StructuredToParameterName@@"] = dict(names)
    if 1 < protocol < 4:
        info = {}
        for key, value in list(saved.items()):
            if not isinstance(value, np.ndarray):
                continue
            limit = max_elements or int((2**30 - 1) / value.dtype.itemsize)
            if value.size <= limit:
                continue
            flat = value.flatten()
            info[key] = {"OriginShape": value.shape, "slices": []}
            del saved[key]
            for i in range(math.ceil(value.size / limit)):
                part = f"{key}@@.{i}"
                info[key]["slices"].append(part)
                saved[part] = flat[i * limit : (i + 1) * limit]
        if info:
            saved["UnpackBigParamInfor@@"] = info
    with open(path, "wb") as f:
        pickle.dump(saved, f, protocol=protocol)


def save_object(path, obj, protocol: int = 4):
    """``paddle.save(obj, path, protocol)`` of a nested object (FakeTensors for Tensors)."""
    with _paddle_io_utils_module(), open(path, "wb") as f:
        pickle.Pickler(f, protocol).dump(obj)
