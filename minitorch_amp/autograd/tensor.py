"""``Tensor``: an array (NumPy or CuPy) plus what autodiff needs.

Paddle semantics: ``stop_gradient`` is True for data and False for parameters; the result of
an op needs a gradient iff one of its inputs does; ``backward()`` accumulates into ``.grad``.
Every method that computes goes through :func:`~minitorch_amp.autograd.dispatch.apply`.
"""

from __future__ import annotations

import numpy as np

from ..backend import device as _device
from ..backend import dtypes as _dtypes
from ..backend import memory as _memory
from ..backend import sync as _sync
from . import view_writes as _view_writes
from .tensor_input import as_array as _as_array


class Tensor:
    """A multi-dimensional array that can record the ops applied to it.

    Args:
        data: an array, a nested list or a number.
        dtype: float16, float32, float64, int32, int64 or bool (default: inferred; Python
            floats become the default dtype, float32).
        place: ``'cpu'``, ``'gpu'``, ``'gpu:N'`` or a Place (default: the current device).
        stop_gradient: False to have ``backward()`` compute this tensor's gradient.

    Example:
        >>> import minitorch_amp as mt
        >>> x = mt.to_tensor([1.0, 2.0], stop_gradient=False)
        >>> (x * x).sum().backward()
        >>> x.grad.numpy()
        array([2., 4.], dtype=float32)
    """

    __slots__ = (
        "_data", "_node", "_grad_value", "_grad_stale", "_version", "stop_gradient", "name",
        "persistable", "_hooks", "__weakref__",
    )  # fmt: skip

    def __init__(self, data, dtype=None, place=None, stop_gradient: bool = True):
        place = _device.current_place() if place is None else _device.parse_device(place)
        self._data = _as_array(data._data if isinstance(data, Tensor) else data, dtype, place)
        _memory.track(self._data)
        if isinstance(data, Tensor) and self._data is data._data:  # twins, as detach() makes
            _view_writes.note_view(data)
            _view_writes.note_view(self)
        self._node = None
        self._grad_value = None
        self._grad_stale = False
        self._version = 0  # bumped by in-place writes of the values (set_value, loads)
        self.stop_gradient = bool(stop_gradient)
        self.name = None
        self.persistable = False
        self._hooks = None  # a leaf's gradient hooks (an intermediate's live on its Node)

    @classmethod
    def _wrap(cls, array) -> Tensor:
        """A tensor around ``array`` with no checks (the fast path ``apply`` uses)."""
        if not isinstance(array, np.ndarray) and not _device.is_array(array):
            array = np.asarray(array)  # NumPy returns scalars from 0-d maths
        t = object.__new__(cls)
        t._data = array
        t._node = None
        t._grad_value = None
        t._grad_stale = False
        t._version = 0
        t.stop_gradient = True
        t.name = None
        t.persistable = False
        t._hooks = None
        if array.base is not None:  # a view: a write into its source is a write into it
            _view_writes.note_view(t)
            _memory.track(array)
        elif array.nbytes >= _memory.MIN_TRACKED_BYTES:  # (tiny arrays: below the granularity)
            _memory.track(array)
        return t

    _xp_of = staticmethod(_device.get_array_module)

    # ---- properties -------------------------------------------------------------------------
    @property
    def data(self):
        """The underlying NumPy or CuPy array (shares memory)."""
        return self._data

    @property
    def dtype(self) -> np.dtype:
        return self._data.dtype

    @property
    def shape(self) -> list[int]:
        return list(self._data.shape)

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def dim(self) -> int:
        return self._data.ndim

    @property
    def size(self) -> int:
        return int(self._data.size)

    def numel(self) -> int:
        """Number of elements."""
        return int(self._data.size)

    @property
    def place(self) -> _device.Place:
        return _device.place_of(self._data)

    @property
    def is_leaf(self) -> bool:
        """True unless this tensor was computed by a recorded op."""
        return self._node is None

    @property
    def grad(self):
        """The accumulated gradient (a Tensor), or None before any backward."""
        return self._grad

    @property
    def _grad(self):
        """The gradient every internal reader sees: zeroed here if ``clear_grad`` deferred it.

        ``clear_grad()`` does not launch a fill: it marks the buffer stale, and the next
        backward *writes* its gradient into the buffer instead of adding it to zeros (one
        kernel instead of two, same address). Only a reader that comes first pays the fill.
        """
        grad = self._grad_value
        if self._grad_stale:
            self._grad_stale = False
            grad._data.fill(0)
        return grad

    @_grad.setter
    def _grad(self, value) -> None:
        self._grad_value = value
        self._grad_stale = False

    @grad.setter
    def grad(self, value) -> None:
        if value is not None:
            value = value if isinstance(value, Tensor) else Tensor._wrap(value)
            if value._data.shape != self._data.shape:
                raise ValueError(
                    f"grad of shape {value.shape} does not match the tensor's shape {self.shape}"
                )
        self._grad = value

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __hash__(self) -> int:
        return id(self)

    # ---- autodiff ---------------------------------------------------------------------------
    def backward(
        self, grad_tensor=None, retain_graph: bool = False, create_graph: bool = False
    ) -> None:
        """Accumulate the gradient of this tensor into ``.grad`` of every leaf it depends on.

        Args:
            grad_tensor: d(output)/d(self); None means ones, also for several elements.
            retain_graph: keep the graph so backward can run through it again.
            create_graph: record the backward itself, so each ``.grad`` can be differentiated
                again (PyTorch's argument; implies ``retain_graph``). See docs/autograd.md.
        """
        from .engine import backward

        backward(self, grad_tensor, retain_graph, create_graph)

    def register_hook(self, hook):
        """Call ``hook(grad)`` whenever this tensor's gradient is computed; a Tensor it
        returns replaces the gradient. Returns a handle whose ``remove()`` unregisters it.
        See :func:`minitorch_amp.autograd.hooks.register_hook`."""
        from .hooks import register_hook

        return register_hook(self, hook)

    def clear_grad(self, set_to_zero: bool = True) -> None:
        """Zero ``.grad`` in place (or drop it with ``set_to_zero=False``).

        The zeroing is deferred: the next backward writes into the same buffer (see
        ``_grad``), and a read before that sees zeros.
        """
        if self._grad_value is None:
            return
        if set_to_zero and self._grad_value._node is not None:
            # a recorded gradient (backward(create_graph=True)): its array belongs to the graph
            self._grad = Tensor._wrap(self._xp_of(self._data).zeros_like(self._grad_value._data))
        elif set_to_zero:
            self._grad_stale = True
        else:
            self._grad = None

    clear_gradient = clear_grad

    def detach(self) -> Tensor:
        """A tensor sharing this one's data, cut off from the graph (stop_gradient=True).
        A write into either is a write into the other: each bumps the other's version."""
        t = Tensor._wrap(self._data)
        if self._data.base is None:  # (a view's result was noted by _wrap already)
            _view_writes.note_view(self)
            _view_writes.note_view(t)
        return t

    # ---- conversion -------------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """The values as a new NumPy array: a copy, on the CPU too (Paddle's ``numpy()``).

        NOTE: not the tensor's own array, although that would save a copy: a write into it
        would change the tensor behind its version, and a graph that saved the tensor would
        differentiate with the new values, silently. Internal readers use ``_data``.
        """
        host = self._to_host("Tensor.numpy()")
        return host.copy() if host is self._data else host  # (a GPU download is a copy)

    def _to_host(self, what: str) -> np.ndarray:
        """Every host read of a tensor's values goes through here (see ``backend.sync``)."""
        _sync.host_read(what)
        return _device.asnumpy(self._data)

    def __array__(self, dtype=None, copy=None):
        arr = self._to_host("np.asarray(Tensor)")
        return arr if dtype is None else arr.astype(dtype)

    def item(self, *index):
        """The single value as a Python number (or the value at ``index``)."""
        return self._scalar("Tensor.item()", index)

    def _scalar(self, what: str, index=()):
        if not index and self._data.size != 1:
            raise ValueError(
                f"{what} needs a tensor with one element, this one has shape {self.shape}; "
                "pass an index, e.g. x.item(0)"
            )
        return self._to_host(what).item(*index)

    def tolist(self):
        return self._to_host("Tensor.tolist()").tolist()

    def __float__(self) -> float:
        return float(self._scalar("float(Tensor)"))

    def __int__(self) -> int:
        return int(self._scalar("int(Tensor)"))

    def __bool__(self) -> bool:
        return bool(self._scalar("bool(Tensor) (a truth test)"))

    def __index__(self) -> int:
        if self._data.dtype.kind not in "iu":
            raise TypeError(f"only integer tensors can be used as an index, not {self.dtype}")
        return int(self._scalar("Tensor used as an index"))

    def astype(self, dtype) -> Tensor:
        """This tensor cast to ``dtype``; the cast is recorded (grads come back in our dtype)."""
        return apply(_ops.Cast, self, dtype=_dtypes.convert_dtype(dtype))

    cast = astype

    def float(self) -> Tensor:
        """float32, or ``self`` when it already is (Paddle 3's and PyTorch's ``Tensor.float()``:
        the way back from an autocast region's float16). Recorded, as :meth:`to`."""
        return self.to(_dtypes.float32)

    def half(self) -> Tensor:
        """float16, or ``self`` when it already is (PyTorch's ``Tensor.half()``). Recorded."""
        return self.to(_dtypes.float16)

    def to(self, *args, **kwargs) -> Tensor:
        """A copy on a device and/or in a dtype (self when nothing changes). Recorded.

        Paddle's three forms: ``to(dtype)``, ``to(device, dtype=None)``, ``to(other)``
        (``other``'s device and dtype), each with an optional ``blocking``; see
        :func:`minitorch_amp.autograd.tensor_to.parse_to_args`.
        """
        from .tensor_to import tensor_to

        return tensor_to(self, args, kwargs)

    def set_value(self, value) -> None:
        """Overwrite the values in place with ``value`` (same shape and dtype; Paddle's method).

        The tensor keeps its array, so a captured CUDA graph that reads it sees the new
        values: this is how a graphed training step gets its next batch. (Except a tensor
        whose array is a view of another's, the result of reshape, transpose, a slice or a
        split: it gets its own array at its first write, and the other tensor keeps its
        values; see ``_writable``.) A NumPy value is
        copied to the tensor's device (an upload the user asked for, not reported by the
        sync debug mode).

        Raises:
            ValueError: the shapes differ.  TypeError: the dtypes differ.
        """
        source = value._data if isinstance(value, Tensor) else value
        if not _device.is_array(source):
            source = np.asarray(source)
        if tuple(source.shape) != self._data.shape:
            raise ValueError(
                f"set_value: value of shape {list(source.shape)} for a tensor of shape "
                f"{self.shape}; the shapes must be equal"
            )
        if source.dtype != self._data.dtype:
            raise TypeError(
                f"set_value: value of dtype {source.dtype} for a tensor of dtype {self.dtype}; "
                f"cast it first, e.g. value.astype('{self.dtype}')"
            )
        source = _device.to_place(source, self.place)
        data = self._data
        if data.base is not None:  # a view of another tensor's memory: copy on write
            data = self._writable(whole=True)
        Tensor._xp_of(data).copyto(data, source)
        self._version += 1  # an fp16 parameter's fp32 master follows (optimizer/mixed_precision)
        _view_writes.wrote(self)

    def _writable(self, whole: bool = False):
        """This tensor's array, ready for an in-place write of its values (``whole``: all of
        them, so the old values need not be copied).

        NOTE: copy on write. A view op's result (reshape, transpose, squeeze, a basic slice,
        a split piece) shares its input's memory, but versions belong to tensors: a write
        through the view would change the input behind its version, and an op that saved the
        input would differentiate with the new values, silently. So a tensor whose array is
        a view (``.base`` set) first gets an array of its own; the other tensor is untouched
        (Paddle 2.x gives these results their own memory too). The common case, a tensor
        that owns its array (parameters, creation functions), costs one attribute read.
        """
        data = self._data
        if data.base is None:
            return data
        xp = Tensor._xp_of(data)
        own = xp.empty_like(data) if whole else data.copy()
        _memory.track(own)
        self._data = own
        return own

    def copy_(self, src, blocking: bool = True) -> Tensor:
        """:meth:`set_value` from ``src`` that returns ``self`` (Paddle's and PyTorch's name)."""
        self.set_value(src)
        return self

    def cpu(self) -> Tensor:
        return self.to("cpu")

    def cuda(self, device_id=None, blocking=None, non_blocking=None) -> Tensor:
        """A copy on GPU ``device_id`` (Paddle's ``Tensor.cuda``): None is the current GPU
        (GPU 0 while the CPU is current); PyTorch's ``non_blocking`` is taken too."""
        if device_id is None:
            place = _device.current_place()
            device_id = place.index if place.kind == "gpu" else 0
        if isinstance(device_id, bool) or not isinstance(device_id, (int, np.integer)):
            raise TypeError(f"Tensor.cuda: device_id must be an int or None, got {device_id!r}")
        how = {"blocking": blocking, "non_blocking": non_blocking}  # (to refuses both)
        return self.to(f"gpu:{int(device_id)}", **{k: v for k, v in how.items() if v is not None})

    def __repr__(self) -> str:
        host = self._to_host("repr(Tensor)")
        if host.dtype in (_dtypes.bfloat16, *_dtypes.FP8):  # user dtypes print unaligned
            host = host.astype(np.float32)  # exact: every bfloat16 and FP8 is a float32
        body = np.array2string(host, separator=", ", prefix=" " * 7, precision=8)
        return (
            f"Tensor(shape={self.shape}, dtype={self.dtype}, place={self.place!r}, "
            f"stop_gradient={self.stop_gradient},\n       {body})"
        )


# dispatch and the op modules need Tensor defined first; so do the operators and named
# methods, attached to Tensor by tensor_operators when it is imported.
from . import ops as _ops  # noqa: E402
from . import tensor_operators  # noqa: E402, F401 (x + y, x.sum(), ...: each one op)
from .dispatch import apply  # noqa: E402
