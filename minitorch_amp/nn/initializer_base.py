"""The base of every initializer, in its own module so that the initializers of
``initializer.py`` and ``initializer_structured.py`` share it without importing each other."""

from __future__ import annotations

import numpy as np

from ..autograd import view_writes as _view_writes
from ..autograd.tensor import Tensor
from ..backend import device as _device
from ..backend import dtypes as _dtypes


class Initializer:
    """Base class: subclasses implement ``_generate(shape, dtype, xp)`` returning a new array."""

    def __call__(self, param: Tensor, block=None) -> None:
        """Refill ``param`` in place (its identity, dtype and device are kept)."""
        if not isinstance(param, Tensor):
            raise TypeError(f"an initializer fills a Tensor/Parameter, got {type(param).__name__}")
        xp = _device.get_array_module(param._data)
        values = self._generate(param.shape, param.dtype, xp)
        param._writable(whole=True)[...] = values  # (a view gets its own memory first)
        param._version += 1  # a write: an fp32 master, a cached cast, a saved input follow
        _view_writes.wrote(param)

    def _generate(self, shape, dtype, xp):  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({fields})"


def _draw_dtype(dtype) -> str:
    """Random values are drawn in float64 for float64 parameters, else float32."""
    return "float64" if np.dtype(dtype) == _dtypes.float64 else "float32"


def _check_floating(name: str, dtype) -> None:
    if not _dtypes.is_floating(dtype):
        raise TypeError(f"{name} draws random values and needs a floating dtype, got {dtype}")
