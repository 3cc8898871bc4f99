"""Tensor methods defined by the function modules: ``x.topk(2)`` is ``topk(x, 2)``.

Paddle binds the functions named in its ``tensor_method_func`` list to ``Tensor`` the same
way. The list here is explicit: each name below becomes a ``Tensor`` method whose first
argument is the tensor. ``tensor_operators.py`` defines the older methods (each one op
through ``apply``); a name ``Tensor`` already has is left alone.

=====================  ===================================================================
Paddle's methods       bmm, chunk, cumsum, gather, index_select, masked_fill, rsqrt, sort,
                       argsort, split, take_along_axis, topk, unbind; ``clone`` (eager)
also PyTorch's         tril, triu, multinomial
=====================  ===================================================================

Example:
    >>> import minitorch_amp as mt
    >>> mt.to_tensor([3.0, 1.0, 2.0]).sort().numpy()
    array([1., 2., 3.], dtype=float32)
"""

from __future__ import annotations

from . import functions_index, functions_math, functions_sort
from .tensor import Tensor

METHODS = {
    "argsort": functions_sort.argsort,
    "bmm": functions_math.bmm,
    "chunk": functions_index.chunk,
    "clone": functions_index.clone,
    "cumsum": functions_math.cumsum,
    "gather": functions_index.gather,
    "index_select": functions_index.index_select,
    "masked_fill": functions_index.masked_fill,
    "multinomial": functions_sort.multinomial,
    "rsqrt": functions_math.rsqrt,
    "sort": functions_sort.sort,
    "split": functions_index.split,
    "take_along_axis": functions_index.take_along_axis,
    "topk": functions_sort.topk,
    "tril": functions_index.tril,
    "triu": functions_index.triu,
    "unbind": functions_index.unbind,
}

for _name, _fn in METHODS.items():
    if _name not in vars(Tensor):
        setattr(Tensor, _name, _fn)
