"""Converting a layer's tensors to another dtype or device, in place (Paddle's ``Layer.to``).

Three rules make conversion safe while an optimizer holds the parameters:

1. **In place.** A converted Parameter is the *same Python object* with a new array inside
   (``t._data`` is replaced). Optimizers, master weights and any other code keyed by the
   object keep working; nothing needs re-registering.
2. **Grads follow.** A parameter's ``.grad`` gets the same conversion, so a step after ``to``
   sees a gradient of the parameter's new dtype and device.
3. **One choke point.** Every conversion goes through ``tensor_convert.convert_all_``: the
   device-memory check (convert through the host when the device has no room for the new
   copy) and the all-or-nothing guarantee (a failure puts back every parameter, gradient
   and buffer as it was) live there and nowhere else.

``floating_only=True`` (what ``decorate`` and ``float16()`` use) leaves integer and bool
tensors alone; ``Layer.to`` converts them too, as Paddle does (unlike PyTorch).
"""

from __future__ import annotations

from ...autograd.tensor import Tensor
from ...autograd.tensor_to import parse_to_args
from ...backend import device as _device
from ...backend import dtypes as _dtypes
from ...backend.device_errors import DeviceError, unsupported_dtype
from .tensor_convert import convert_all_
from .tensor_convert import convert_tensor_ as convert_tensor_  # (re-exported: decorate uses it)

EXCLUDED_LAYERS_MESSAGE = (
    "excluded_layers must be either a nn.Layer instance/type or a list of nn.Layer "
    "instances/types, got {!r}"
)


class ConvertMixin:
    """The conversion methods of ``Layer``: :meth:`to`, :meth:`astype`, :meth:`float`,
    :meth:`float16`, :meth:`bfloat16`."""

    keeps_float32: str | None = None
    """When converting a model to a 16-bit dtype keeps this layer's tensors float32:
    ``None`` (never: most layers), ``'always'`` (batch norm) or ``'float16'`` (layer norm:
    only for float16, whose range its statistics need). Read by :func:`stays_float32`."""

    def to(self, *args, **kwargs) -> ConvertMixin:
        """``to(device=None, dtype=None, blocking=None)``: convert every parameter (and its
        grad) and buffer, in place; returns ``self``.

        Each Parameter stays the same object, so optimizers holding it keep working. As in
        Paddle, integer and bool buffers are converted too (use :meth:`float16` to keep them).

        Args:
            device: ``'cpu'``, ``'gpu'``, ``'gpu:N'`` or a Place; None keeps each tensor's.
            dtype: e.g. ``'float16'``; None keeps each tensor's.
            blocking: True, False or None (copies here always complete; kept for Paddle).

        Raises:
            DeviceError: an unknown or unusable device, an unsupported dtype, or one in the
                other's place, such as ``device='float16'`` (also a ValueError and a
                TypeError). TypeError: a non-bool ``blocking``, an unknown keyword.

        Example:
            >>> from minitorch_amp import nn
            >>> fc = nn.Linear(2, 2)
            >>> w = fc.weight
            >>> fc.to(dtype="float16") is fc, fc.weight is w, w.dtype
            (True, True, dtype('float16'))

        PyTorch's forms work too: ``layer.to(dtype)`` (a dtype in the first slot, ``'float16'``
        or ``mt.float16``, since no dtype is a device) and ``layer.to(tensor)`` (its device
        and dtype); the arguments are read as ``Tensor.to`` reads them
        (``autograd.tensor_to.parse_to_args``).
        """
        if not args and not kwargs:
            return self  # Paddle's to() with nothing to do
        device, dtype = parse_to_args(args, kwargs, "Layer.to()")
        return self._to_impl(device, dtype, None, include_sublayers=True, floating_only=False)

    def astype(self, dtype=None) -> ConvertMixin:
        """Paddle's ``Layer.astype(dtype)``: convert every parameter (and its grad) and buffer
        of this layer and its sublayers to ``dtype``, in place, integer and bool ones too;
        returns ``self``. The same conversion as ``to(dtype=dtype)``: memory-checked, all or
        nothing, each Parameter the same object.

        Raises:
            ValueError: ``dtype`` is None (as in Paddle, whose default is None all the same).
            DeviceError: an unsupported dtype (also a ValueError and a TypeError).
            OutOfMemoryError: the conversion does not fit; nothing was converted.

        Example:
            >>> from minitorch_amp import nn
            >>> fc = nn.Linear(2, 2)
            >>> fc.astype("float16") is fc, fc.weight.dtype
            (True, dtype('float16'))
        """
        if dtype is None:
            raise ValueError(
                "Layer.astype(dtype) needs a dtype, e.g. 'float16' or mt.float32, got None "
                "(Paddle refuses None too)"
            )
        dtype = parse_dtype(dtype, "Layer.astype()")
        return self._to_impl(None, dtype, None, include_sublayers=True, floating_only=False)

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
        return cast_floating_layers(self, "float32", excluded_layers, purpose=None)

    def float16(self, excluded_layers=None) -> ConvertMixin:
        """Cast floating parameters and buffers to float16, except in ``excluded_layers``
        (default: the layers that stay float32, batch norm; see :func:`stays_float32`).
        Integer buffers are left alone."""
        return cast_floating_layers(self, "float16", excluded_layers, purpose="half")

    def bfloat16(self, excluded_layers=None) -> ConvertMixin:
        """Cast floating parameters and buffers to bfloat16, except in ``excluded_layers``
        (default: the layers that stay float32, batch norm; see :func:`stays_float32`).
        Integer buffers are left alone.

        Example:
            >>> from minitorch_amp import nn
            >>> model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1D(2)).bfloat16()
            >>> model[0].weight.dtype, model[1].weight.dtype
            (dtype(bfloat16), dtype('float32'))
        """
        return cast_floating_layers(self, "bfloat16", excluded_layers, purpose="half")


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
        DeviceError: ``device`` is not a device string or Place, or names no usable device;
            ``dtype`` is not supported (also a ValueError and a TypeError).
        TypeError: ``blocking`` is not a bool or None.
        OutOfMemoryError: the conversion does not fit; nothing was converted.
    """
    if device is None and dtype is None and blocking is None:
        return layer
    place = None if device is None else parse_place(device)
    if blocking is not None and not isinstance(blocking, bool):
        raise TypeError(
            f"blocking must be True, False or None, got {blocking!r}; it says whether a "
            "device copy waits for completion"
        )
    dtype = None if dtype is None else parse_dtype(dtype, "Layer.to()")
    # NOTE: blocking is accepted for Paddle's signature; copies here always complete before
    # the array is used (CuPy orders them on the stream), so there is nothing to wait for.
    named = list(layer.named_sublayers(include_self=True)) if include_sublayers else [("", layer)]
    convert_layers_(named, dtype, place, floating_only)
    return layer


def convert_layers_(named: list, dtype, place, floating_only: bool) -> None:
    """Convert the own tensors of every ``(prefix, layer)`` in ``named``: all or none."""
    todo = [
        (_describe(f"{prefix}.{key}" if prefix else key, t), t)
        for prefix, each in named
        for store in (each._parameters, each._buffers)
        for key, t in store.items()
        if t is not None and not (floating_only and not _dtypes.is_floating(t.dtype))
    ]
    convert_all_(todo, dtype, place)
    if dtype is not None:
        for _, each in named:
            object.__setattr__(each, "_dtype", str(dtype))


def _describe(label: str, t: Tensor) -> str:
    return f"'{label}'" + (f" ({t.name})" if t.name else "")


def parse_place(device) -> _device.Place:
    """A ``Place`` from ``'cpu'``, ``'gpu'``, ``'gpu:N'``, ``'cuda:N'`` or a Place; else a
    ``DeviceError`` (also a ValueError, as this raised before, and Paddle does)."""
    return _device.parse_device(device, "Layer.to()")


def parse_dtype(dtype, where: str = ""):
    """The numpy dtype for ``dtype`` (a name, ``'paddle.bfloat16'``, a dtype); else a
    ``DeviceError`` (also a TypeError, as this raised before)."""
    try:
        return _dtypes.convert_dtype(dtype)
    except DeviceError:
        raise unsupported_dtype(dtype, _dtypes.SUPPORTED, where) from None


def stays_float32(layer, dtype, purpose: str) -> bool:
    """Whether ``layer``'s own tensors stay float32 when a model is converted to the 16-bit
    ``dtype`` for ``purpose``: the one rule, read from the layer's ``keeps_float32``.

    Args:
        layer: a Layer.
        dtype: the target dtype, float16 or bfloat16 (a name or a numpy dtype).
        purpose: ``'decorate'`` (``amp.decorate(level='O2')``) or ``'half'``
            (``Layer.float16()`` / ``bfloat16()`` called without ``excluded_layers``).

    NOTE: Paddle's two paths keep different layers, and so does this function:

    - ``decorate`` (Paddle's ``need_keep_fp32``) keeps batch norm always, layer norm for
      float16 only (bfloat16 has float32's range), and every layer that an ``excluded_layers``
      of this or an earlier ``decorate`` marked (``_cast_to_low_precision`` False).
      Its ``excluded_layers`` are kept *in addition* (the caller checks them).
    - ``float16()`` / ``bfloat16()`` keep batch norm only: layer norm is cast even to float16,
      and the decorate mark is not read. An ``excluded_layers`` given to them *replaces* this
      rule (the caller then asks nothing), so batch norm is cast too.
    - ``to(dtype)`` and ``float()`` keep no layer float32 and never ask.

    Paddle's ``float16()`` default is ``[nn.BatchNorm]`` matched by exact type, which is its
    legacy batch norm class only (``BatchNorm1D``/``2D``/``3D`` are not subclasses of it);
    here every batch norm stays, as in ``decorate``. Paddle's ``need_keep_fp32`` also names
    SyncBatchNorm (always) and InstanceNorm1D/2D/3D (float16), which are not built here.

    Example:
        >>> from minitorch_amp import nn
        >>> ln, bn = nn.LayerNorm(4), nn.BatchNorm1D(4)
        >>> [stays_float32(ln, d, "decorate") for d in ("float16", "bfloat16")]
        [True, False]
        >>> stays_float32(ln, "float16", "half"), stays_float32(bn, "bfloat16", "half")
        (False, True)
    """
    keeps = layer.keeps_float32
    if purpose == "decorate":
        if not layer._cast_to_low_precision:
            return True
        return keeps == "always" or (keeps == "float16" and parse_dtype(dtype) == _dtypes.float16)
    if purpose == "half":
        return keeps == "always"
    raise ValueError(f"stays_float32: purpose must be 'decorate' or 'half', got {purpose!r}")


def excluded_layer_ids(models, excluded_layers) -> set[int]:
    """The ids of the layers of ``models`` that ``excluded_layers`` keeps as they are.

    ``excluded_layers`` is None, a Layer instance (it and all its sublayers), a Layer type
    (every layer that is an instance of it), or a list/tuple of those.

    Raises:
        TypeError: an entry is neither a Layer nor a Layer subclass (Paddle's message).
    """
    if excluded_layers is None:
        entries = []
    elif isinstance(excluded_layers, (list, tuple)):
        entries = list(excluded_layers)
    else:
        entries = [excluded_layers]
    instances, types = [], []
    # NOTE: ConvertMixin stands for Layer here (every Layer is one, and nothing else is):
    # importing Layer from layers.py, which imports this module, would be an import cycle.
    for entry in entries:
        if isinstance(entry, ConvertMixin):
            instances.append(entry)
        elif isinstance(entry, type) and issubclass(entry, ConvertMixin):
            types.append(entry)
        else:
            raise TypeError(EXCLUDED_LAYERS_MESSAGE.format(entry))
    ids = {id(sub) for layer in instances for sub in layer.sublayers(include_self=True)}
    for model in models:
        for layer in model.sublayers(include_self=True):
            if isinstance(layer, tuple(types)):
                ids.add(id(layer))
    return ids


def cast_floating_layers(model, dtype, excluded_layers, purpose: str | None):
    """``Layer.float()`` / ``float16()`` / ``bfloat16()``: cast each layer's own floating
    tensors as one all-or-nothing conversion, skipping ``excluded_layers`` (see
    :func:`excluded_layer_ids`) or, when there are none and ``purpose`` is given, the layers
    that :func:`stays_float32` keeps."""
    dtype = parse_dtype(dtype)
    excluded = excluded_layer_ids([model], excluded_layers)
    by_rule = purpose is not None and excluded_layers is None  # Paddle: a list replaces it
    named = [
        (prefix, layer)
        for prefix, layer in model.named_sublayers(include_self=True)
        if id(layer) not in excluded and not (by_rule and stays_float32(layer, dtype, purpose))
    ]
    convert_layers_(named, dtype, None, floating_only=True)  # one conversion: all or none
    return model
