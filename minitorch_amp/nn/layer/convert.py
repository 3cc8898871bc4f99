"""Converting a layer's tensors to another dtype or device, in place (Paddle's ``Layer.to``).

Three rules make conversion safe while an optimizer holds the parameters:

1. **In place.** A converted Parameter is the *same Python object* with a new array inside
   (``t._data`` is replaced). Optimizers, master weights and any other code keyed by the
   object keep working; nothing needs re-registering.
2. **Grads follow.** A parameter's ``.grad`` gets the same conversion, so a step after ``to``
   sees a gradient of the parameter's new dtype and device.
3. **One choke point.** Every tensor goes through :func:`convert_tensor_`. The device-memory
   check (convert through the host when the device has no room for the new copy) belongs
   there and nowhere else.

``floating_only=True`` (what ``decorate`` and ``float16()`` use) leaves integer and bool
tensors alone; ``Layer.to`` converts them too, as Paddle does (unlike PyTorch).
"""

from __future__ import annotations

import weakref

import numpy as np

from ...autograd.tensor import Tensor
from ...backend import device as _device
from ...backend import dtypes as _dtypes
from ...backend import memory as _memory

EXCLUDED_LAYERS_MESSAGE = (
    "excluded_layers must be either a nn.Layer instance/type or a list of nn.Layer "
    "instances/types, got {!r}"
)


class ConvertMixin:
    """The conversion methods of ``Layer``: :meth:`to`, :meth:`float`, :meth:`float16`."""

    def to(self, device=None, dtype=None, blocking: bool | None = None) -> ConvertMixin:
        """Convert every parameter (and its grad) and buffer, in place; returns ``self``.

        Each Parameter stays the same object, so optimizers holding it keep working. As in
        Paddle, integer and bool buffers are converted too (use :meth:`float16` to keep them).

        Args:
            device: ``'cpu'``, ``'gpu'``, ``'gpu:N'`` or a Place; None keeps each tensor's.
            dtype: e.g. ``'float16'``; None keeps each tensor's.
            blocking: True, False or None (copies here always complete; kept for Paddle).

        Raises:
            ValueError: an unknown or unusable device. TypeError: a non-bool ``blocking``.

        Example:
            >>> from minitorch_amp import nn
            >>> fc = nn.Linear(2, 2)
            >>> w = fc.weight
            >>> fc.to(dtype="float16") is fc, fc.weight is w, w.dtype
            (True, True, dtype('float16'))
        """
        return self._to_impl(device, dtype, blocking, include_sublayers=True, floating_only=False)

    def _to_impl(
        self,
        device=None,
        dtype=None,
        blocking=None,
        include_sublayers: bool = True,
        floating_only: bool = False,
    ) -> ConvertMixin:
        """:meth:`to`, optionally for this layer's own tensors only and floating ones only."""
        return to_impl(self, device, dtype, blocking, include_sublayers, floating_only)

    def float(self, excluded_layers=None) -> ConvertMixin:
        """Cast floating parameters and buffers to float32, except in ``excluded_layers``
        (Layer instances and/or types). Integer buffers are left alone."""
        return cast_floating_layers(self, "float32", excluded_layers)

    def float16(self, excluded_layers=None) -> ConvertMixin:
        """Cast floating parameters and buffers to float16, except in ``excluded_layers``
        (default: batch norm layers, as in Paddle). Integer buffers are left alone."""
        if excluded_layers is None:
            excluded_layers = default_half_excluded()
        return cast_floating_layers(self, "float16", excluded_layers)

    def bfloat16(self, excluded_layers=None) -> ConvertMixin:
        """Not available yet: minitorch_amp has no bfloat16 dtype."""
        raise NotImplementedError(
            "bfloat16 is not supported yet; use float16() (with a GradScaler) or float()"
        )


def conversion_bytes(numel: int, dtype) -> float:
    """The free device memory a cast to ``dtype`` must see before it runs on the device.

    Paddle's rule: the converted copy's bytes, rounded up to the allocator's 256-byte unit,
    times 1.2 to keep clear of the edge where memory is only just enough.
    """
    return ((numel * _dtypes.convert_dtype(dtype).itemsize) / 256 + 1) * 256 * 1.2


def convert_tensor_(t: Tensor, dtype=None, place=None, name: str | None = None) -> Tensor:
    """Convert ``t`` in place to ``dtype`` and/or ``place``; its ``.grad`` likewise.

    The memory check (Paddle PR 36862): a cast needs room for the converted copy next to the
    original. If the device has :func:`conversion_bytes` free, the cast runs there. Otherwise
    the tensor goes to the host, its device storage is freed, the cast runs on the host and
    the result is copied back, so the device never holds both copies. Then the result moves
    to ``place``. Float casts round to nearest even; ``None`` keeps the tensor's own dtype or
    place.

    Args:
        t: a Tensor (usually a Parameter or a buffer); the object itself is kept.
        dtype: the target dtype (``'float16'``, ``mt.float32``...), or None.
        place: the target device (``'cpu'``, ``'gpu:0'``, a Place), or None.
        name: what error messages call the tensor (default: ``t.name``).

    Returns:
        ``t``.

    Raises:
        OutOfMemoryError: even the host path cannot fit the converted tensor. ``t`` is then
            exactly as before (dtype, values, place); its grad too.

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp.nn.layer.convert import convert_tensor_
        >>> x = mt.to_tensor([1.0, 0.1])
        >>> convert_tensor_(x, mt.float16) is x, x.dtype
        (True, dtype('float16'))
    """
    dtype = None if dtype is None else _dtypes.convert_dtype(dtype)
    place = None if place is None else _device.parse_device(place)
    if dtype is not None and t._data.dtype != dtype:
        _cast_checked_(t, dtype, name or t.name or f"tensor of shape {t.shape}")
    if place is not None and _device.place_of(t._data) != place:
        moved = _device.to_place(t._data, place)
        _memory.track(moved)
        t._data = moved
    if t._grad is not None:
        convert_tensor_(t._grad, dtype, place, name=f"the gradient of {name or t.name}")
    return t


def _cast_checked_(t: Tensor, dtype, name: str) -> None:
    """Cast ``t._data`` to ``dtype`` on its device, through the host when memory is short."""
    source = _device.place_of(t._data)
    if _memory.memory_available(source) >= conversion_bytes(t._data.size, dtype):
        try:
            with np.errstate(over="ignore"):  # like CuPy and Paddle: past 65504 becomes inf
                converted = t._data.astype(dtype)
            _memory.track(converted)
        except _memory.OOM_ERRORS:  # the estimate was optimistic: take the host path
            converted = None
        if converted is not None:
            t._data = converted
            return
    # The fallback. NOTE: the device copy is released *before* the converted one exists;
    # if anything else still references the old array, its memory stays in use.
    host = _device.asnumpy(t._data).copy()  # a host copy: not device memory
    try:
        original = weakref.ref(t._data)  # alive afterwards only if someone else holds it
    except TypeError:  # an array type without weak references
        original = _dead
    t._data = _RELEASED
    with np.errstate(over="ignore"):
        converted = host.astype(dtype)
    try:
        converted = _device.to_place(converted, source)
        _memory.track(converted)
    except _memory.OOM_ERRORS as exc:
        del converted
        restored = original()
        if restored is None:  # it was freed: bring the host copy back where it was
            restored = _device.to_place(host, source)
            _memory.track(restored, enforce=False)  # the memory it held a moment ago
        t._data = restored
        raise _memory.OutOfMemoryError(
            f"cannot convert {name} ({host.size} elements) from {host.dtype} to {dtype} on "
            f"{source}: the converted copy needs {host.size * dtype.itemsize} bytes and only "
            f"{_memory.memory_available(source)} are free even after moving the original to "
            f"the host. The tensor is unchanged. ({exc})"
        ) from None
    t._data = converted


_RELEASED = np.empty(0, dtype=np.float32)  # what a tensor holds while its data is on the host


def _dead():
    return None


def to_impl(
    layer,
    device=None,
    dtype=None,
    blocking=None,
    include_sublayers: bool = True,
    floating_only: bool = False,
):
    """``Layer._to_impl``: check every argument, then convert each tensor in place.

    Raises:
        ValueError: ``device`` is not a device string or Place, or names no usable device.
        TypeError: ``blocking`` is not a bool or None; ``dtype`` is not supported.
        NotImplementedError: ``dtype`` is bfloat16.
    """
    if device is None and dtype is None and blocking is None:
        return layer
    place = None if device is None else parse_place(device)
    if blocking is not None and not isinstance(blocking, bool):
        raise TypeError(
            f"blocking must be True, False or None, got {blocking!r}; it says whether a "
            "device copy waits for completion"
        )
    dtype = None if dtype is None else parse_dtype(dtype)
    # NOTE: blocking is accepted for Paddle's signature; copies here always complete before
    # the array is used (CuPy orders them on the stream), so there is nothing to wait for.
    named = list(layer.named_sublayers(include_self=True)) if include_sublayers else [("", layer)]
    todo = [
        (f"{prefix}.{key}" if prefix else key, t)
        for prefix, each in named
        for store in (each._parameters, each._buffers)
        for key, t in store.items()
        if t is not None and not (floating_only and not _dtypes.is_floating(t.dtype))
    ]
    if dtype is not None:
        _check_room(todo, dtype)
    for done, (label, t) in enumerate(todo):
        try:
            convert_tensor_(t, dtype, place, name=f"'{label}'" + (f" ({t.name})" if t.name else ""))
        except _memory.OOM_ERRORS as exc:
            raise _memory.OutOfMemoryError(
                f"{exc} {done} of the {len(todo)} tensors were converted before it; "
                f"'{label}' and the {len(todo) - done - 1} after it are unchanged."
            ) from None
    if dtype is not None:
        for _, each in named:
            object.__setattr__(each, "_dtype", str(dtype))
    return layer


def _check_room(todo: list, dtype) -> None:
    """Refuse, before converting anything, a conversion that cannot fit on its device.

    Converting tensor ``k`` (through the host if needed) leaves ``allocated + sum of the size
    changes of tensors 1..k`` in use, so the whole conversion fits iff every running sum of
    size changes stays within what the device has free now. Narrowing casts only shrink
    memory; widening ones (``float()`` after O2, float32 to float64) can run out.
    """
    running, free = 0, {}
    for label, t in todo:
        for each in (t, t._grad):
            if each is None or each._data.dtype == dtype:
                continue
            place = _device.place_of(each._data)
            if place not in free:
                free[place] = _memory.memory_available(place)
            # NOTE: in the accounting's bytes: on the CPU arrays under MIN_TRACKED_BYTES are
            # free, so a small float32 array can become a counted float64 one.
            new = _counted(each._data.size * dtype.itemsize, place)
            running += new - _counted(each._data.nbytes, place)
            if running > free[place]:
                raise _memory.OutOfMemoryError(
                    f"out of memory on {place}: converting to {dtype} needs {running} more "
                    f"bytes by the time it reaches '{label}', and only {free[place]} are "
                    "free. Nothing was converted. Free memory, convert fewer layers "
                    "(excluded_layers), or raise the limit (minitorch_amp.device."
                    "set_memory_limit)."
                )


def _counted(nbytes: int, place) -> int:
    """The bytes the memory accounting charges on ``place`` for an array of ``nbytes``."""
    small = place.kind == "cpu" and nbytes < _memory.MIN_TRACKED_BYTES
    return 0 if small else nbytes


def parse_place(device) -> _device.Place:
    """A ``Place`` from ``'cpu'``, ``'gpu'``, ``'gpu:N'`` or a Place; ValueError otherwise."""
    if not isinstance(device, (str, _device.Place)):
        raise ValueError(
            "device must be None, a string such as 'cpu', 'gpu' or 'gpu:0', or a Place; got "
            f"{type(device).__name__}"
        )
    try:
        return _device.parse_device(device)
    except _device.DeviceError as exc:
        raise ValueError(str(exc)) from exc


def parse_dtype(dtype):
    """The numpy dtype for ``dtype``; bfloat16 raises a clear NotImplementedError."""
    if str(dtype).replace("paddle.", "") == "bfloat16":
        raise NotImplementedError(
            "bfloat16 is not supported yet; use 'float16' (with a GradScaler) or 'float32'"
        )
    return _dtypes.convert_dtype(dtype)


def excluded_layer_ids(models, excluded_layers) -> set[int]:
    """The ids of the layers of ``models`` that ``excluded_layers`` keeps as they are.

    ``excluded_layers`` is None, a Layer instance (it and all its sublayers), a Layer type
    (every layer that is an instance of it), or a list/tuple of those.

    Raises:
        TypeError: an entry is neither a Layer nor a Layer subclass (Paddle's message).
    """
    from .layers import Layer

    if excluded_layers is None:
        entries = []
    elif isinstance(excluded_layers, (list, tuple)):
        entries = list(excluded_layers)
    else:
        entries = [excluded_layers]
    instances, types = [], []
    for entry in entries:
        if isinstance(entry, Layer):
            instances.append(entry)
        elif isinstance(entry, type) and issubclass(entry, Layer):
            types.append(entry)
        else:
            raise TypeError(EXCLUDED_LAYERS_MESSAGE.format(entry))
    ids = {id(sub) for layer in instances for sub in layer.sublayers(include_self=True)}
    for model in models:
        for layer in model.sublayers(include_self=True):
            if isinstance(layer, tuple(types)):
                ids.add(id(layer))
    return ids


def cast_floating_layers(model, dtype, excluded_layers):
    """``Layer.float()`` / ``float16()``: cast each layer's own floating tensors, skipping
    the excluded layers (see :func:`excluded_layer_ids`). Checks everything first."""
    dtype = parse_dtype(dtype)
    excluded = excluded_layer_ids([model], excluded_layers)
    for layer in model.sublayers(include_self=True):
        if id(layer) not in excluded:
            to_impl(layer, dtype=dtype, include_sublayers=False, floating_only=True)
    return model


def default_half_excluded() -> list:
    """The layers ``float16()`` keeps in float32 by default: batch norm (as Paddle)."""
    from .norm import BatchNorm1D

    return [BatchNorm1D]
