"""The transformer layers' arguments, checked and spread over their sublayers: one
``ParamAttr`` per sublayer (``_param_attrs``), ``Transformer``'s 1-, 2- or 3-item attributes
split between the encoder and the decoder (``_split_attrs``), and the feed-forward
activation by name (``_activation``).
"""

from __future__ import annotations

import copy

from .. import functional as F
from ..param_attr import ParamAttr


def _param_attrs(attr, n: int, layer: str, arg: str) -> list:
    """``attr`` as one attribute per sublayer: a list/tuple of ``n`` is used item by item;
    anything else is repeated ``n`` times (a named ParamAttr gets ``_0``, ``_1``, ... suffixes
    so the parameters keep distinct names)."""
    if isinstance(attr, (list, tuple)):
        if len(attr) != n:
            raise ValueError(f"{layer}: {arg} as a list needs {n} items, got {len(attr)}")
        return [None if a is True else a for a in attr]
    if isinstance(attr, bool):
        return [None if attr else False] * n
    attr = ParamAttr._to_attr(attr)
    attrs = []
    for i in range(n):
        one = copy.copy(attr)
        if attr.name:
            one.name = f"{attr.name}_{i}"
        attrs.append(one)
    return attrs


# The feed-forward activations: the functions of nn.functional's activation module (not
# 'linear' or 'layer_norm', also in F.__all__, which would fail only at the first forward).
_ACTIVATIONS = tuple(n for n in F.__all__ if getattr(F, n).__module__ == F.activation.__name__)


def _activation(name: str, layer: str):
    if not isinstance(name, str) or name not in _ACTIVATIONS:
        raise ValueError(
            f"{layer}: activation must name an activation function of nn.functional, one of "
            f"{', '.join(map(repr, _ACTIVATIONS))}; got {name!r}"
        )
    return getattr(F, name)


def _split_attrs(attr, arg: str):
    """Transformer's 1/2/3-item ``weight_attr``/``bias_attr`` as (encoder's, decoder's)."""
    if not isinstance(attr, (list, tuple)):
        return attr, attr
    if len(attr) == 1:
        return [attr[0]] * 2, [attr[0]] * 3
    if len(attr) == 2:
        return list(attr), [attr[0], attr[0], attr[1]]
    if len(attr) == 3:
        return [attr[0], attr[2]], list(attr)
    raise ValueError(f"Transformer: {arg} as a list needs 1, 2 or 3 items, got {len(attr)}")
