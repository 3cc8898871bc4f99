"""``Parameter``: a trainable tensor, named the way Paddle names them (``linear_0.w_0``)."""

from __future__ import annotations

import itertools
from collections import defaultdict

from ..autograd.tensor import Tensor
from ..backend import memory

_counters: dict[str, itertools.count] = defaultdict(itertools.count)


def unique_name(prefix: str) -> str:
    """``prefix_0``, ``prefix_1``, ...: Paddle's ``unique_name.generate``."""
    return f"{prefix}_{next(_counters[prefix])}"


class Parameter(Tensor):
    """A leaf tensor that optimizers update: ``stop_gradient=False`` and ``persistable=True``.

    Args:
        data: initial values (an array, a Tensor or nested lists).
        dtype: the parameter's dtype (default: that of ``data``).
        name: a unique name; generated (``param_N``) when omitted.
        trainable: False freezes it (``stop_gradient=True``).

    Attributes:
        need_clip: whether gradient clipping includes this parameter.
        optimize_attr: ``{'learning_rate': ratio}``, a per-parameter learning-rate multiplier.
        regularizer: a weight-decay regularizer for this parameter only (None: the
            optimizer's), set from ``ParamAttr(regularizer=...)``.
    """

    regularizer = None

    def __init__(self, data, dtype=None, name: str | None = None, trainable: bool = True):
        super().__init__(data, dtype=dtype, place=None, stop_gradient=not trainable)
        self.name = name or unique_name("param")
        self.persistable = True
        self.need_clip = True
        self.optimize_attr = {"learning_rate": 1.0}

    @classmethod
    def _from_array(cls, array, name: str, trainable: bool = True) -> Parameter:
        """Wrap ``array`` without copying (initialisers use this)."""
        p = cls.__new__(cls)
        Tensor.__init__(p, array, place=None, stop_gradient=not trainable)
        p._data = array  # keep the very array: no copy, no device move
        memory.track(array)
        p.name = name
        p.persistable = True
        p.need_clip = True
        p.optimize_attr = {"learning_rate": 1.0}
        return p

    @property
    def trainable(self) -> bool:
        return not self.stop_gradient

    @trainable.setter
    def trainable(self, value: bool) -> None:
        self.stop_gradient = not value

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()
