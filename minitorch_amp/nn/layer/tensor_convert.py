"""Converting tensors in place, memory-checked and all or nothing (``Layer.to``'s engine).

:func:`convert_all_` converts a list of tensors and their grads to a dtype and/or device;
``Layer.to``, ``float()``, ``float16()``, ``decorate`` and :func:`convert_tensor_` all go
through it, so the rules below hold for every conversion:

1. **The memory check** (Paddle PR 36862). A cast needs room for the converted copy next to
   the original; without it the tensor goes through the host, so the device never holds both.
2. **Validate, then write.** A conversion that cannot fit even through the host is refused
   before the first write (:func:`_check_room`). Then the optimizers stepping the tensors
   drop the step plans that hold their arrays (:func:`_release_optimizer_plans`), so that
   each original is freed when it is replaced.
3. **All or nothing.** Before an array is replaced, the journal keeps what it takes to put it
   back (:class:`_Journal`). A failure half-way (out of memory that the check could not
   foresee, or any other error) puts every replaced array back, so every tensor and grad is
   as it was, and the error says so.
"""

from __future__ import annotations

import weakref

import numpy as np

from ...autograd.dispatch import hooks
from ...autograd.tensor import Tensor
from ...backend import device as _device
from ...backend import dtypes as _dtypes
from ...backend import memory as _memory
from ...backend.cast import cast
from ...backend.error_notes import add_note


def conversion_bytes(numel: int, dtype) -> float:
    """The free device memory a cast to ``dtype`` must see before it runs on the device.

    Paddle's rule, float maths as Paddle writes it (``/ 256 + 1``, no rounding): the
    converted copy's bytes plus one 256-byte block, times 1.2 to keep clear of the edge
    where memory is only just enough.
    """
    return ((numel * _dtypes.convert_dtype(dtype).itemsize) / 256 + 1) * 256 * 1.2


def convert_tensor_(t: Tensor, dtype=None, place=None, name: str | None = None) -> Tensor:
    """Convert ``t`` in place to ``dtype`` and/or ``place``; its ``.grad`` likewise.

    The memory check (Paddle PR 36862): a cast needs room for the converted copy next to the
    original. If the device has :func:`conversion_bytes` free, the cast runs there. Otherwise
    the tensor goes to the host, its device storage is freed, the cast runs on the host and
    the result is copied back, so the device never holds both copies. Then the result moves
    to ``place``. Float casts round to nearest even; ``None`` keeps the tensor's own dtype or
    place. ``t`` and its grad are converted together or not at all (see :func:`convert_all_`).

    Args:
        t: a Tensor (usually a Parameter or a buffer); the object itself is kept.
        dtype: the target dtype (``'float16'``, ``mt.float32``...), or None.
        place: the target device (``'cpu'``, ``'gpu:0'``, a Place), or None.
        name: what error messages call the tensor (default: ``t.name``).

    Returns:
        ``t``.

    Raises:
        OutOfMemoryError: even the host path cannot fit the converted tensor or its grad.
            ``t`` and its grad are then exactly as before (dtype, values, place).

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp.nn.layer.convert import convert_tensor_
        >>> x = mt.to_tensor([1.0, 0.1])
        >>> convert_tensor_(x, mt.float16) is x, x.dtype
        (True, dtype('float16'))
    """
    convert_all_([(name or t.name or f"tensor of shape {t.shape}", t)], dtype, place)
    return t


def convert_all_(todo: list, dtype=None, place=None) -> None:
    """Convert every tensor of ``todo`` (``(name, tensor)`` pairs) and its grad: all or none.

    Validate, then write: a conversion that cannot fit is refused before anything changes
    (:func:`_check_room`). Then tensor after tensor goes through the memory check, and before
    an array is replaced the journal keeps what it takes to put it back (:class:`_Journal`).
    If anything fails (out of memory on the device or the host, or any other error), every
    replaced array is put back, the last first, and the error says so.

    Raises:
        OutOfMemoryError: the conversion does not fit; nothing was converted.
        Any other exception from inside, with a note that nothing was converted.
    """
    dtype = None if dtype is None else _dtypes.convert_dtype(dtype)
    place = None if place is None else _device.parse_device(place)
    arrays = _arrays_to_convert(todo)
    if dtype is not None:
        _check_room(arrays, dtype)
    _release_optimizer_plans(arrays, dtype, place)
    journal = _Journal(keep_originals=_room_to_keep_originals(arrays, dtype, place))
    try:
        for name, t in arrays:
            _convert_array_(t, dtype, place, name, journal)
    except _memory.OOM_ERRORS as exc:
        outcome = _outcome(journal.roll_back())
        raise _memory.OutOfMemoryError(f"{exc} {outcome}") from None
    except BaseException as exc:
        add_note(exc, f"Layer.to / convert_tensor_: {_outcome(journal.roll_back())}")
        raise


def _arrays_to_convert(todo: list) -> list:
    """``(name, tensor)`` for each tensor of ``todo`` and each grad, every tensor once.

    NOTE: a grad is taken as ``_grad_value``, not ``_grad``: reading ``_grad`` would carry out a
    deferred zero-fill (``clear_grad``) now, a write that a failure would have to undo. A stale
    grad is converted as it is and still reads as zeros afterwards.
    """
    seen, arrays = set(), []
    for name, t in todo:
        for label, each in ((name, t), (f"the gradient of {name}", t._grad_value)):
            if each is not None and id(each) not in seen:  # tied weights are listed twice
                seen.add(id(each))
                arrays.append((label, each))
    return arrays


def _release_optimizer_plans(arrays: list, dtype, place) -> None:
    """Make every optimizer that steps a tensor about to get a new array drop its step plan,
    which holds the tensor's array (``optimizer/state.py``): else the original would stay
    alive, and a conversion through the host would find no memory freed. The plan is built
    again at the next step; the optimizer's state (accumulators, masters) is kept."""
    changing = [
        t
        for _, t in arrays
        if (dtype is not None and t._data.dtype != dtype)
        or (place is not None and _device.place_of(t._data) != place)
    ]
    if changing:
        for release in hooks.new_arrays:  # (optimizer.state.release_plans, once imported)
            release(changing)


def _convert_array_(t: Tensor, dtype, place, name: str, journal: _Journal) -> None:
    """Convert the array ``t`` holds; ``journal`` learns what it held first."""
    if dtype is not None and t._data.dtype != dtype:
        converted = _cast_on_device(t._data, dtype)
        if converted is None:
            _cast_through_host_(t, dtype, name, journal)
        else:
            journal.keep(t)
            t._data = converted
    if place is not None and _device.place_of(t._data) != place:
        moved = _device.to_place(t._data, place)
        _memory.track(moved)
        journal.keep(t, on_device=True)  # its source device held it already: no new memory
        t._data = moved


def _cast_on_device(array, dtype):
    """``array`` cast to ``dtype`` on its device, or None when the device has no room."""
    if _memory.memory_available(_device.place_of(array)) < conversion_bytes(array.size, dtype):
        return None
    try:
        with np.errstate(over="ignore"):  # like CuPy and Paddle: past 65504 becomes inf
            converted = cast(array, dtype)  # bfloat16: rounded once, also from float64
        _memory.track(converted)
    except _memory.OOM_ERRORS:  # the estimate was optimistic: take the host path
        return None
    return converted


def _cast_through_host_(t: Tensor, dtype, name: str, journal: _Journal) -> None:
    """The memory check's fallback: cast on the host, so the device never holds both copies.

    NOTE: the device copy is released *before* the converted one exists; if anything else
    still references the old array, its memory stays in use and the copy back may not fit.
    """
    source = _device.place_of(t._data)
    host = _host_copy(t._data)
    journal.keep(t, host=host)
    t._data = _RELEASED
    with np.errstate(over="ignore"):
        converted = cast(host, dtype)
    try:
        converted = _device.to_place(converted, source)
        _memory.track(converted)
    except _memory.OOM_ERRORS as exc:
        raise _memory.OutOfMemoryError(
            f"cannot convert {name} ({host.size} elements) from {host.dtype} to {dtype} on "
            f"{source}: the converted copy needs {host.size * dtype.itemsize} bytes and only "
            f"{_memory.memory_available(source)} are free even after moving the original to "
            f"the host. ({exc})"
        ) from None
    t._data = converted


_RELEASED = np.empty(0, dtype=np.float32)  # what a tensor holds while its data is on the host


class _Journal:
    """What a conversion replaced, so that a failure can put every array back.

    While the devices have room for the old and the new copies together (``keep_originals``),
    a replaced array is kept as it is, and a failure puts back the very same object. Otherwise
    it is kept as a host copy plus a weak reference: the device copy is released at once (the
    point of the memory check), and comes back as itself if anything else still holds it, as
    an equal copy if not.
    """

    def __init__(self, keep_originals: bool):
        self.keep_originals = keep_originals
        self.entries: dict[int, tuple] = {}  # id(t) -> (t, array or weakref, host copy, place)

    def keep(self, t: Tensor, host=None, on_device: bool = False) -> None:
        """Remember what ``t`` holds before its first write; later calls change nothing."""
        if id(t) in self.entries:
            return
        array = t._data
        if host is None and not (self.keep_originals or on_device):
            host = _host_copy(array)
        original = array if host is None else _weak(array)
        self.entries[id(t)] = (t, original, host, _device.place_of(array))

    def roll_back(self) -> list[Tensor]:
        """Put back every replaced array, the last first; the tensors that could not be."""
        unrestored = []
        for t, original, host, place in reversed(self.entries.values()):
            array = original if host is None else original()
            if array is None:  # freed: its host copy goes back, where the new copy was
                converted, t._data = t._data, _RELEASED
                try:
                    array = _device.to_place(host, place)
                    _memory.track(array, enforce=False)  # memory the tensor held before
                except Exception:  # a device full after all: keep a usable tensor, and say so
                    t._data = converted
                    unrestored.append(t)
                    continue
                del converted
            t._data = array
        return unrestored


def _outcome(unrestored: list) -> str:
    """The truth about the tensors after a roll back, for the error message."""
    if not unrestored:
        return "Nothing was converted: every tensor and gradient is as it was."
    names = ", ".join(t.name or f"a tensor of shape {t.shape}" for t in unrestored)
    return (
        f"The conversion was undone except for {names}: putting them back failed as well, so "
        "they hold their converted values; every other tensor and gradient is as it was."
    )


def _host_copy(array) -> np.ndarray:
    """A copy of ``array`` in host memory (never the array itself)."""
    host = _device.asnumpy(array)
    return host.copy() if host is array else host


def _weak(array):
    try:
        return weakref.ref(array)  # alive later only if something else holds it
    except TypeError:  # an array type without weak references
        return _dead


def _dead():
    return None


def _room_to_keep_originals(arrays: list, dtype, place) -> bool:
    """Whether every device has room for all converted copies next to all originals."""
    need: dict = {}
    for _, t in arrays:
        source = _device.place_of(t._data)
        new_dtype = t._data.dtype if dtype is None else dtype
        if new_dtype != t._data.dtype:
            need[source] = need.get(source, 0) + conversion_bytes(t._data.size, new_dtype)
        if place is not None and place != source:
            need[place] = need.get(place, 0) + conversion_bytes(t._data.size, new_dtype)
    return all(_memory.memory_available(where) >= n for where, n in need.items())


def _check_room(arrays: list, dtype) -> None:
    """Refuse, before converting anything, a conversion that cannot fit on its device.

    Converting tensor ``k`` (through the host if needed) leaves ``allocated + sum of the size
    changes of tensors 1..k`` in use, so the whole conversion fits iff every running sum of
    size changes stays within what the device has free now. Narrowing casts only shrink
    memory; widening ones (``float()`` after O2, float32 to float64) can run out.
    """
    running, free = {}, {}
    for label, t in arrays:
        if t._data.dtype == dtype:
            continue
        place = _device.place_of(t._data)
        if place not in free:
            free[place] = _memory.memory_available(place)
        # NOTE: in the accounting's bytes: on the CPU arrays under MIN_TRACKED_BYTES are
        # free, so a small float32 array can become a counted float64 one.
        new = _counted(t._data.size * dtype.itemsize, place)
        running[place] = running.get(place, 0) + new - _counted(t._data.nbytes, place)
        if running[place] > free[place]:
            raise _memory.OutOfMemoryError(
                f"out of memory on {place}: converting to {dtype} needs {running[place]} more "
                f"bytes by the time it reaches {label}, and only {free[place]} are "
                "free. Nothing was converted. Free memory, convert fewer layers "
                "(excluded_layers), or raise the limit (minitorch_amp.device."
                "set_memory_limit)."
            )


def _counted(nbytes: int, place) -> int:
    """The bytes the memory accounting charges on ``place`` for an array of ``nbytes``."""
    small = place.kind == "cpu" and nbytes < _memory.MIN_TRACKED_BYTES
    return 0 if small else nbytes
