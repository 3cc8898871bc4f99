"""Checking an optimizer's arguments: the learning rate, weight decay and parameter groups."""

from __future__ import annotations

import numbers

from ..autograd.tensor import Tensor
from ..backend import dtypes as _dtypes
from ..regularizer import L2Decay, WeightDecayRegularizer
from .lr import LRScheduler


def check_learning_rate(value):
    if isinstance(value, LRScheduler):
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"learning_rate must be a float or an lr.LRScheduler, got {type(value).__name__}"
        )
    if value < 0:
        raise ValueError(f"learning_rate must be >= 0, got {value}")
    return float(value)


def as_regularizer(weight_decay):
    if weight_decay is None or isinstance(weight_decay, WeightDecayRegularizer):
        return weight_decay
    if isinstance(weight_decay, bool) or not isinstance(weight_decay, numbers.Real):
        raise TypeError(
            "weight_decay must be None, a float (L2 coefficient) or a regularizer such as "
            f"regularizer.L2Decay(1e-4), got {type(weight_decay).__name__}"
        )
    return L2Decay(float(weight_decay)) if weight_decay else None


def check_floating(param, owner: str) -> None:
    """Refuse a parameter an update cannot write: one that is not float16, bfloat16, float32
    or float64 (``p -= lr * g`` has no integer, bool or FP8 form)."""
    dtype = param._data.dtype
    if not _dtypes.is_floating(dtype):
        raise TypeError(
            f"{owner}: parameter {param.name!r} is {dtype}, but an optimizer updates "
            "floating-point parameters only (float16, bfloat16, float32, float64); leave it "
            "out of parameters, or make it a float parameter (astype('float32'))"
        )


def own_settings(param) -> tuple:
    """A parameter's own settings, as a step reads them: its ``optimize_attr`` learning-rate
    ratio (None when unset) and its ``regularizer`` (both from ``ParamAttr``)."""
    attr = getattr(param, "optimize_attr", None)
    return (attr.get("learning_rate") if attr else None), getattr(param, "regularizer", None)


def as_groups(parameters, owner: str) -> tuple[list[dict], bool]:
    """Normalise ``parameters`` into a non-empty list of ``{'params': [...], ...}`` dicts, and
    whether they were given as group dicts (a plain list of parameters is one group)."""
    hint = (
        f"{owner} needs the parameters to optimize, e.g. "
        f"{owner}(learning_rate=0.01, parameters=model.parameters())"
    )
    if parameters is None:
        raise ValueError(f"parameters is None. {hint} (required in dygraph mode)")
    if isinstance(parameters, (Tensor, dict, set, str)):
        raise TypeError(
            f"parameters must be a list of Parameters or of param-group dicts, got "
            f"{type(parameters).__name__}. {hint}"
        )
    items = list(parameters)
    if items and all(isinstance(item, dict) for item in items):
        for group in items:
            if "params" not in group or isinstance(group["params"], (Tensor, set)):
                raise TypeError(f"each param group needs 'params': a list of Parameters. {hint}")
        groups = [{**group, "params": list(group["params"])} for group in items]
    elif any(isinstance(item, dict) for item in items):
        raise TypeError("parameters mixes Parameters and param-group dicts; use one or the other")
    else:
        groups = [{"params": items}]
    if sum(len(g["params"]) for g in groups) == 0:
        raise ValueError(f"parameters is empty: there is nothing to optimize. {hint}")
    return groups, isinstance(items[0], dict)
