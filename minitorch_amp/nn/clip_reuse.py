"""What a clip object keeps from one call to the next: its output buffers, one per parameter
(``_Outputs``: the same addresses every step, so the optimizer's fused kernel finds its table
cached and a step can be captured as a CUDA graph), and on a GPU what
:class:`~minitorch_amp.nn.clip.ClipGradByGlobalNorm` decided for a set of pairs
(``_KeptClip``: its launches and result, used again while the pairs are the same).

Like ``clip.py``, this module uses only the backend and Tensor (never ``minitorch_amp.nn``).
"""

from __future__ import annotations

import weakref

from ..autograd.tensor import Tensor
from ..backend import get_array_module, kernels


class _Outputs:
    """One persistent output array per parameter, reused while its shape and dtype hold."""

    def __init__(self):
        self._arrays: dict[int, tuple] = {}  # id(param) -> (weakref to param, array)

    def __call__(self, param, like):
        key = id(param)
        entry = self._arrays.get(key)
        if entry is not None and entry[0]() is param:
            out = entry[1]
            if out.shape == like.shape and out.dtype == like.dtype and type(out) is type(like):
                return out
        out = get_array_module(like).empty_like(like)
        arrays = self._arrays
        self._arrays[key] = (weakref.ref(param, lambda _, key=key: arrays.pop(key, None)), out)
        return out

    def __getstate__(self):  # buffers are scratch space: a copy of the clip starts without them
        return {"_arrays": {}}


def _data(grad):
    return grad._data if isinstance(grad, Tensor) else grad


class _KeptClip:
    """What a GPU call of :class:`ClipGradByGlobalNorm` decided, kept for the next call with
    the same pairs: the same parameters in the same order, each with the same gradient
    tensor, holding the same array, and the same ``need_clip``. Then the result is the same
    too (the same output buffers, wrapped the same), and only the launches run again
    (``global_norm.Clip``): an optimizer step clips its gradients with a pass over the pairs
    in place of building and checking every list and table anew (the example GPT's step,
    68 parameters: its optimizer part fell from 698 to 300 µs, on the CPU with the GPU
    stood in for). Holds the objects it compares, so their ids stay theirs."""

    __slots__ = ("objects", "clip", "result")
    SETS = 8  # sets of pairs kept per clip (an optimizer's parameter groups share its clip)

    @staticmethod
    def key(params_grads) -> tuple:
        """Which kept set a call may be: its length and first parameter (``fits`` decides)."""
        return (len(params_grads), id(params_grads[0][0]) if params_grads else None)

    def __init__(self, params_grads, clip, result):
        self.objects = self._objects(params_grads)
        self.clip = clip
        self.result = result

    @staticmethod
    def _objects(params_grads) -> list:
        return [
            x
            for p, g in params_grads
            for x in (p, g, _data(g) if g is not None else None, getattr(p, "need_clip", True))
        ]

    def fits(self, params_grads) -> bool:
        """Whether ``params_grads`` are the kept call's pairs (and raw kernels still on)."""
        objects = self.objects
        if len(objects) != 4 * len(params_grads) or not kernels.enabled():
            return False
        i = 0
        for p, g in params_grads:
            if (
                p is not objects[i]
                or g is not objects[i + 1]
                or (g is not None and _data(g) is not objects[i + 2])
                or getattr(p, "need_clip", True) is not objects[i + 3]
            ):
                return False
            i += 4
        return True
