"""The forward ``apex.initialize`` gives each model: its own forward run under
``auto_cast(level)``, float16 outputs cast to ``cast_model_outputs`` (float32 at O2), and the
mark that says a model was patched already (``initialize`` is called once per model).
"""

from __future__ import annotations

from ..autograd.tensor import Tensor
from ..backend.dtypes import float16
from .auto_cast import auto_cast


def _is_patched(model) -> bool:
    return hasattr(model.__dict__.get("forward"), "_amp_original_forward")


def _patch_forward(model, level: str, out_dtype) -> None:
    """Make ``model(...)`` run its forward under ``auto_cast(level)`` (an instance attribute)."""
    forward = model.forward  # the bound method

    def amp_forward(*args, **kwargs):
        with auto_cast(level=level):
            output = forward(*args, **kwargs)
        return output if out_dtype is None else _cast_floats(output, out_dtype)

    amp_forward._amp_original_forward = forward
    amp_forward.__doc__ = forward.__doc__
    model.forward = amp_forward


def _cast_floats(value, dtype):
    """Cast every float16 Tensor in ``value`` (nested tuples, lists, dicts) to ``dtype``."""
    if isinstance(value, Tensor):
        return value.astype(dtype) if value.dtype == float16 and dtype != float16 else value
    if type(value) in (list, tuple):
        return type(value)(_cast_floats(v, dtype) for v in value)
    if isinstance(value, dict):
        return {k: _cast_floats(v, dtype) for k, v in value.items()}
    return value
