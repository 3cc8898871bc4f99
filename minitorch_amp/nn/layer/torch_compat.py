"""PyTorch's names on ``Layer``: ``load_state_dict(state_dict, strict=True)`` and ``zero_grad``;
for a PyTorch name it lacks, what to use instead."""

from __future__ import annotations

import warnings
from typing import NamedTuple

from ...pytorch_hints import missing
from .state_dict import extra_owner


class IncompatibleKeys(NamedTuple):
    """What ``load_state_dict`` returns (PyTorch's ``_IncompatibleKeys``)."""

    missing_keys: list
    unexpected_keys: list


class TorchLayerMethods:
    """Mixed into ``Layer``: PyTorch's spellings over Paddle's methods."""

    def load_state_dict(self, state_dict: dict, strict: bool = True) -> IncompatibleKeys:
        """PyTorch's ``load_state_dict``: :meth:`set_state_dict` with PyTorch's ``strict``.

        ``strict=True``: every key of this layer's ``state_dict()`` must be in ``state_dict``
        and no other key may be; otherwise a RuntimeError lists them and *nothing* is loaded
        (PyTorch loads the matching entries before raising). ``strict=False``: the matching
        entries are loaded and the others reported, without a warning. The values are copied
        into the existing tensors, all or none (see ``set_state_dict``).

        Returns:
            ``IncompatibleKeys(missing_keys, unexpected_keys)``.

        Example:
            >>> from minitorch_amp import nn
            >>> src, dst = nn.Linear(2, 2), nn.Linear(2, 2)
            >>> dst.load_state_dict(src.state_dict())
            IncompatibleKeys(missing_keys=[], unexpected_keys=[])
        """
        if not isinstance(strict, bool):
            raise TypeError(f"load_state_dict: strict must be True or False, got {strict!r}")
        if not isinstance(state_dict, dict):
            raise TypeError(f"load_state_dict needs a dict, got {type(state_dict).__name__}")
        own = self.state_dict(use_hook=False)
        missing = [k for k in own if k not in state_dict]
        known = set(own) | {k for k in state_dict if extra_owner(k) in own}  # FP8 states
        unexpected = [k for k in state_dict if k not in known]
        empty = [k for k in own if k in state_dict and state_dict[k] is None]
        if empty:  # (set_state_dict, Paddle's, takes None for absent: here it is present)
            raise RuntimeError(
                f"Error(s) in loading state_dict for {type(self).__name__}: {empty} hold "
                "None, not a tensor. Nothing was loaded; leave those keys out (strict=False) "
                "to keep their values."
            )
        if strict and (missing or unexpected):
            parts = []
            if missing:
                parts.append(f"Missing key(s) in state_dict: {missing}.")
            if unexpected:
                parts.append(f"Unexpected key(s) in state_dict: {unexpected}.")
            raise RuntimeError(
                f"Error(s) in loading state_dict for {type(self).__name__}: {' '.join(parts)} "
                "Nothing was loaded; pass strict=False to load the matching entries."
            )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the missing keys are returned instead
            self.set_state_dict({k: v for k, v in state_dict.items() if k in known})
        return IncompatibleKeys(missing, unexpected)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """PyTorch's ``zero_grad``: drop every parameter's ``.grad`` (``set_to_none=True``,
        PyTorch's default) or zero it; Paddle's ``clear_gradients`` zeroes by default."""
        self.clear_gradients(set_to_zero=not set_to_none)


def missing_attribute(layer, name: str) -> AttributeError:
    """What ``Layer.__getattr__`` raises for a name no layer has: Python's message, plus what
    to use for a PyTorch name (``model.half()`` -> ``model.float16()``)."""
    return missing("Layer", name, f"{type(layer).__name__!r} object")
