"""``Place``: where a tensor lives (``Place('cpu')``, ``Place('gpu', 0)``, printed like
Paddle's), Paddle's ``CPUPlace`` and ``CUDAPlace``, and the device strings read as Places.

A Place only names a device: whether this machine has it is checked where the place is used
(``device.parse_device``). Everything here is re-exported by ``backend/device.py``.
"""

from __future__ import annotations

import numpy as np

from .device_errors import DeviceError


class Place:
    """Where a tensor lives: ``Place('cpu')`` or ``Place('gpu', 0)``. Printed like Paddle."""

    __slots__ = ("kind", "index")

    def __init__(self, kind: str, index: int = 0):
        """``kind`` is ``'cpu'`` or ``'gpu'`` (any case; ``'cuda'`` is ``'gpu'``, as in the
        device strings); ``index`` the GPU's number, 0 for the CPU.

        Raises:
            DeviceError: another kind (``'xpu'``), or a negative, non-int or (for the CPU)
                non-zero index. Also a ValueError.
        """
        # NOTE: place_of makes a Place per GPU op: the usual arguments pass two comparisons
        if (kind == "gpu" or (kind == "cpu" and index == 0)) and type(index) is int and index >= 0:
            self.kind, self.index = kind, index
        else:
            self.kind, self.index = _checked_place(kind, index)

    def is_gpu_place(self) -> bool:
        return self.kind == "gpu"

    def is_cpu_place(self) -> bool:
        return self.kind == "cpu"

    def gpu_device_id(self) -> int:
        return self.index

    def __eq__(self, other) -> bool:
        """Equal to a Place of the same device, and to its canonical name (``'cpu'``,
        ``'gpu:0'``: ``str(place)``); anything else is unequal, other spellings of the device
        (``'cuda:0'``, ``'gpu'``, ``'CPU'``) included: a Place hashes as its canonical name,
        and Python's rule (equal objects hash alike) leaves no room for the others. Compare
        ``place == mt.device.Place('cuda')`` or ``mt.device(name)`` to take any spelling."""
        if isinstance(other, Place):
            return self.kind == other.kind and self.index == other.index
        return isinstance(other, str) and other == str(self)

    def __hash__(self) -> int:
        return hash(str(self))  # as the canonical name's: ``'cpu' in {Place('cpu')}``

    def __str__(self) -> str:
        return "cpu" if self.kind == "cpu" else f"gpu:{self.index}"

    def __repr__(self) -> str:
        return f"Place({self})"


class CPUPlace(Place):
    """Paddle's ``paddle.CPUPlace()``: the host. Equal to ``Place('cpu')`` and to ``'cpu'``."""

    __slots__ = ()

    def __init__(self):
        super().__init__("cpu")


class CUDAPlace(Place):
    """Paddle's ``paddle.CUDAPlace(id)``: GPU ``id``. Whether that GPU exists is checked
    where the place is used (``to_tensor(..., place=)``, ``Tensor.to``), as for ``'gpu:N'``."""

    __slots__ = ()

    def __init__(self, id: int):  # noqa: A002 - Paddle's argument name
        if isinstance(id, bool) or not isinstance(id, int) or id < 0:
            raise DeviceError(
                f"CUDAPlace(id) needs a device number >= 0, got {id!r}; e.g. CUDAPlace(0)"
            )
        super().__init__("gpu", id)


CPU = Place("cpu")


def _checked_place(kind, index) -> tuple[str, int]:
    """``Place(kind, index)``'s fields from arguments off its fast path, or a DeviceError."""
    name = kind.strip().lower() if isinstance(kind, str) else None
    name = "gpu" if name == "cuda" else name
    if name not in ("cpu", "gpu"):
        raise DeviceError(
            f"Place(kind): the kind must be 'cpu' or 'gpu' (any case; 'cuda' means 'gpu'), got "
            f"{kind!r}; e.g. Place('gpu', 0), or the strings 'cpu' and 'gpu:0'"
        )
    if isinstance(index, (bool, np.bool_)) or not isinstance(index, (int, np.integer)):
        raise DeviceError(f"Place({kind!r}, index): the index must be an int, got {index!r}")
    if index < 0 or (name == "cpu" and index):
        allowed = "0 (the CPU has no device number)" if name == "cpu" else ">= 0"
        raise DeviceError(f"Place({kind!r}, {index!r}): the index must be {allowed}")
    return name, int(index)


def _named_place(text: str) -> Place | None:
    """The Place ``text`` names (``'gpu:1'``, ``'cuda'``), whether or not this machine has
    it; None for a string that names no device."""
    kind, _, index = text.strip().lower().partition(":")
    kind = "gpu" if kind == "cuda" else kind
    if kind not in ("cpu", "gpu") or (index and not index.isdigit()) or (kind == "cpu" and index):
        return None
    return Place(kind, int(index or 0))
