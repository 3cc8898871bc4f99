"""``Layer``: the base class of every model piece (Paddle's ``paddle.nn.Layer``).

A Layer owns three kinds of state, found by attribute assignment alone::

    class MLP(nn.Layer):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 8)                       # a sublayer
            self.scale = self.create_parameter([8])         # a Parameter
            self.register_buffer("steps", mt.zeros([1]))    # a buffer: state, but not trained

Assigning a :class:`Parameter` registers it in ``_parameters``, a Layer in ``_sub_layers``, and
a plain Tensor in ``_buffers`` (non-persistable unless made with :meth:`register_buffer`). From
these, ``parameters()``, ``state_dict()`` and ``train()``/``eval()`` walk the whole tree.

Names come in two kinds. *Structured* names say where a tensor sits (``fc.weight``) and key
the state dict. *Unique* names are global, Paddle style: every layer gets a full name from its
class (``Linear`` -> ``linear_0``) and its parameters are ``linear_0.w_0`` and ``linear_0.b_0``.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Iterator

from ...autograd.tensor import Tensor
from ...backend import dtypes as _dtypes
from ..param_attr import create_parameter
from ..parameter import Parameter, unique_name
from .convert import ConvertMixin
from .hooks import HookRemoveHelper
from .printing import PrintingMixin
from .state_dict import collect_state_dict, load_state_dict
from .torch_compat import TorchLayerMethods, missing_attribute


def _camel_to_snake(name: str) -> str:
    """``BatchNorm1D`` -> ``batch_norm1d``, ``ReLU`` -> ``re_lu`` (Paddle's rule)."""
    s = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", s).lower()


class Layer(ConvertMixin, PrintingMixin, TorchLayerMethods):
    """Base class for all layers: subclass it, create state in ``__init__``, write ``forward``.

    ``to``, ``float`` and ``float16`` come from :class:`~.convert.ConvertMixin`; ``repr`` and
    ``extra_repr`` from :class:`~.printing.PrintingMixin`.

    Args:
        name_scope: prefix of the layer's unique full name (default: the class name in
            snake case, so ``Linear`` layers are ``linear_0``, ``linear_1``, ...).
        dtype: the default dtype of parameters created by :meth:`create_parameter`.

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp import nn
        >>> class Net(nn.Layer):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.linear1 = nn.Linear(3, 4)
        ...         self.linear2 = nn.Linear(4, 1)
        ...     def forward(self, x):
        ...         return self.linear2(nn.functional.relu(self.linear1(x)))
        >>> net = Net()
        >>> [name for name, _ in net.named_parameters()]
        ['linear1.weight', 'linear1.bias', 'linear2.weight', 'linear2.bias']
        >>> net(mt.ones([2, 3])).shape
        [2, 1]
    """

    training: bool

    def __init__(self, name_scope: str | None = None, dtype="float32"):
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_dtype", str(_dtypes.convert_dtype(dtype)))
        scope = name_scope or _camel_to_snake(type(self).__name__)
        object.__setattr__(self, "_full_name", unique_name(scope))
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_sub_layers", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistable_buffer_names_set", set())
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())
        object.__setattr__(self, "_forward_post_hooks", OrderedDict())
        object.__setattr__(self, "_state_dict_hooks", OrderedDict())
        object.__setattr__(self, "_cast_to_low_precision", True)  # False: decorate excluded it

    # ---- forward --------------------------------------------------------------------------
    def forward(self, *inputs, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must implement forward()")

    def __call__(self, *inputs, **kwargs):
        """Run the pre hooks, ``forward``, then the post hooks.

        A pre hook ``hook(layer, inputs)`` may return new inputs (a tuple, or one value);
        a post hook ``hook(layer, inputs, output)`` may return a new output.
        """
        for hook in list(self._forward_pre_hooks.values()):
            result = hook(self, inputs)
            if result is not None:
                inputs = result if isinstance(result, tuple) else (result,)
        output = self.forward(*inputs, **kwargs)
        for hook in list(self._forward_post_hooks.values()):
            result = hook(self, inputs, output)
            if result is not None:
                output = result
        return output

    def register_forward_pre_hook(self, hook: Callable) -> HookRemoveHelper:
        """Call ``hook(layer, inputs)`` before every forward; see :meth:`__call__`."""
        handle = HookRemoveHelper(self._forward_pre_hooks)
        self._forward_pre_hooks[handle._id] = hook
        return handle

    def register_forward_post_hook(self, hook: Callable) -> HookRemoveHelper:
        """Call ``hook(layer, inputs, output)`` after every forward; see :meth:`__call__`."""
        handle = HookRemoveHelper(self._forward_post_hooks)
        self._forward_post_hooks[handle._id] = hook
        return handle

    # ---- names and modes ------------------------------------------------------------------
    def full_name(self) -> str:
        """The layer's unique name, e.g. ``linear_0``."""
        return self._full_name

    def train(self, mode=None) -> Layer:
        """Training mode for all sublayers (dropout drops, batch norm learns); no argument."""
        if mode is not None:
            raise TypeError(
                f"Layer.train() takes no argument (Paddle's), got train({mode!r}): write "
                "model.eval() for PyTorch's train(False), model.train() for train(True)"
            )
        for layer in self.sublayers(include_self=True):
            layer.training = True
        return self

    def eval(self) -> Layer:
        """Inference mode for this layer and every sublayer."""
        for layer in self.sublayers(include_self=True):
            layer.training = False
        return self

    def apply(self, fn: Callable[[Layer], None]) -> Layer:
        """Call ``fn`` on every sublayer (children first) and then on this layer."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # ---- creating and registering state ----------------------------------------------------
    def create_parameter(
        self, shape, attr=None, dtype=None, is_bias: bool = False, default_initializer=None
    ) -> Parameter | None:
        """A new Parameter of ``shape``, named ``<full_name>.w_N`` (or ``.b_N`` for a bias).

        The initializer is, first found: ``attr.initializer``, the one
        ``nn.initializer.set_global_initializer`` set, ``default_initializer``, then
        Xavier uniform for weights and zeros for biases (Paddle's defaults). Returns None when
        ``attr`` is False. The result is not registered until assigned to an attribute.
        """
        dt = self._dtype if dtype is None else dtype
        prefix = self._full_name
        return create_parameter(shape, dt, attr, is_bias, default_initializer, prefix)

    def _check_state_name(self, kind: str, name, store: dict) -> None:
        if "_parameters" not in self.__dict__:
            raise RuntimeError(
                f"call super().__init__() in {type(self).__name__}.__init__ before adding a {kind}"
            )
        if not isinstance(name, str):
            raise TypeError(f"the name of a {kind} must be a string, got {type(name).__name__}")
        if not name or "." in name:
            raise KeyError(f"{kind} name {name!r} must be non-empty and contain no '.'")
        if name not in store and hasattr(self, name):
            raise KeyError(f"{type(self).__name__} already has an attribute {name!r}")

    def add_parameter(self, name: str, parameter: Parameter | None) -> Parameter | None:
        """Register ``parameter`` (or a None placeholder) as attribute ``name``."""
        self._check_state_name("parameter", name, self._parameters)
        if parameter is not None and not isinstance(parameter, Parameter):
            raise TypeError(
                f"add_parameter({name!r}) needs a Parameter, got {type(parameter).__name__}; "
                "create one with create_parameter()"
            )
        self._parameters[name] = None
        setattr(self, name, parameter)
        return parameter

    def add_sublayer(self, name: str, sublayer: Layer | None) -> Layer | None:
        """Register ``sublayer`` as attribute ``name`` and return it."""
        if not isinstance(name, str) or not name or "." in name:
            raise KeyError(f"sublayer name {name!r} must be a non-empty string without '.'")
        if sublayer is not None and not isinstance(sublayer, Layer):
            raise TypeError(f"add_sublayer({name!r}) needs a Layer, got {type(sublayer).__name__}")
        self._sub_layers.setdefault(name, None)  # keeps its place when replaced
        setattr(self, name, sublayer)
        return sublayer

    def register_buffer(self, name: str, tensor: Tensor | None, persistable: bool = True) -> None:
        """Register ``tensor`` as state that is not trained (running statistics, counters).

        A persistable buffer is saved in :meth:`state_dict`; a non-persistable one is not.
        """
        self._check_state_name("buffer", name, self._buffers)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"register_buffer({name!r}) needs a Tensor, got {type(tensor).__name__}"
            )
        if isinstance(tensor, Parameter):
            raise TypeError(f"register_buffer({name!r}) got a Parameter; use add_parameter")
        self._buffers[name] = tensor
        if persistable:
            self._non_persistable_buffer_names_set.discard(name)
        else:
            self._non_persistable_buffer_names_set.add(name)

    # ---- attribute access ----------------------------------------------------------------
    def __setattr__(self, name: str, value) -> None:
        """Register Parameters, Layers and Tensors; anything else is a plain attribute.

        A registered name accepts only its own kind or None (None keeps the slot empty, as
        ``bias_attr=False`` does). A new plain Tensor becomes a non-persistable buffer.
        """
        d = self.__dict__
        if "_parameters" not in d:
            if isinstance(value, (Tensor, Layer)):
                raise RuntimeError(
                    f"call super().__init__() in {type(self).__name__}.__init__ before "
                    f"assigning {name!r}"
                )
            object.__setattr__(self, name, value)
            return
        params, layers, buffers = d["_parameters"], d["_sub_layers"], d["_buffers"]
        if isinstance(value, Parameter):
            target = params
        elif isinstance(value, Layer) and name not in params:
            target = layers
        elif isinstance(value, Tensor) and name not in params and name not in layers:
            target = buffers
            if name not in buffers:  # only register_buffer makes a persistable buffer
                self._non_persistable_buffer_names_set.add(name)
        else:
            for kind, store in (("Parameter", params), ("Layer", layers), ("Tensor", buffers)):
                if name in store:
                    if value is not None:
                        raise TypeError(
                            f"{type(self).__name__}.{name} holds a {kind}; assign a {kind} or "
                            f"None, not {type(value).__name__} (to change a parameter's values "
                            "keep the object and use set_state_dict or an initializer)"
                        )
                    store[name] = None  # keep the slot, drop the value
                    return
            object.__setattr__(self, name, value)
            return
        for store in (params, layers, buffers):  # a name lives in exactly one place
            if store is not target:
                store.pop(name, None)
        if target is not buffers:
            self._non_persistable_buffer_names_set.discard(name)
        d.pop(name, None)
        target[name] = value

    def __getattr__(self, name: str):
        # Only called when normal lookup fails, so registered state never shadows a method.
        d = self.__dict__
        for store in ("_parameters", "_sub_layers", "_buffers"):
            if store in d and name in d[store]:
                return d[store][name]
        raise missing_attribute(self, name)  # with what to use for a PyTorch name

    def __delattr__(self, name: str) -> None:
        for store in (self._parameters, self._sub_layers, self._buffers):
            if name in store:
                del store[name]
                self._non_persistable_buffer_names_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        extra = [*self._parameters, *self._sub_layers, *self._buffers]
        return sorted(set(super().__dir__()) | set(extra))

    # ---- walking the tree ----------------------------------------------------------------
    def named_sublayers(
        self, prefix: str = "", include_self: bool = False, layers_set=None
    ) -> Iterator[tuple[str, Layer]]:
        """``(structured_name, layer)`` for every sublayer, depth first, each layer once."""
        if layers_set is None:
            layers_set = set()
        if include_self:
            if id(self) in layers_set:  # shared layer, already listed with its sublayers
                return
            layers_set.add(id(self))
            yield prefix, self
        for key, layer in self._sub_layers.items():
            if layer is None:
                continue
            sub_prefix = f"{prefix}.{key}" if prefix else key
            yield from layer.named_sublayers(sub_prefix, True, layers_set)

    def sublayers(self, include_self: bool = False) -> list[Layer]:
        return [layer for _, layer in self.named_sublayers(include_self=include_self)]

    def named_children(self) -> Iterator[tuple[str, Layer]]:
        """Direct sublayers only, each once."""
        seen = set()
        for name, layer in self._sub_layers.items():
            if layer is not None and id(layer) not in seen:
                seen.add(id(layer))
                yield name, layer

    def children(self) -> Iterator[Layer]:
        for _, layer in self.named_children():
            yield layer

    def _named_state(self, store: str, prefix: str, include_sublayers: bool):
        layers = (
            self.named_sublayers(prefix, include_self=True)
            if include_sublayers
            else [(prefix, self)]
        )
        seen = set()
        for layer_prefix, layer in layers:
            for key, value in getattr(layer, store).items():
                if value is None or id(value) in seen:
                    continue
                seen.add(id(value))
                yield (f"{layer_prefix}.{key}" if layer_prefix else key), value

    def named_parameters(
        self, prefix: str = "", include_sublayers: bool = True
    ) -> Iterator[tuple[str, Parameter]]:
        """``('linear1.weight', param)``...: own parameters first, then sublayers' in order.

        A parameter shared by two layers is listed once, under its first name.
        """
        yield from self._named_state("_parameters", prefix, include_sublayers)

    def parameters(self, include_sublayers: bool = True) -> list[Parameter]:
        """Every parameter, in a stable order (that of :meth:`named_parameters`)."""
        return [p for _, p in self.named_parameters(include_sublayers=include_sublayers)]

    def named_buffers(
        self, prefix: str = "", include_sublayers: bool = True
    ) -> Iterator[tuple[str, Tensor]]:
        yield from self._named_state("_buffers", prefix, include_sublayers)

    def buffers(self, include_sublayers: bool = True) -> list[Tensor]:
        return [b for _, b in self.named_buffers(include_sublayers=include_sublayers)]

    def clear_gradients(self, set_to_zero: bool = True) -> None:
        """Zero (or, with ``set_to_zero=False``, drop) the grad of every trainable parameter."""
        for p in self.parameters():
            if p.trainable:
                p.clear_grad(set_to_zero)

    # ---- state dict ------------------------------------------------------------------------
    def state_dict(
        self,
        destination=None,
        include_sublayers: bool = True,
        structured_name_prefix: str = "",
        use_hook: bool = True,
    ) -> OrderedDict:
        """Structured name -> Tensor for every parameter and persistable buffer.

        The layer's own tensors (no copies): per layer its parameters, its buffers, then
        sublayers. Then state-dict hooks run (not with ``use_hook=False``) and may replace them.

        Example:
            >>> from minitorch_amp import nn
            >>> list(nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1D(2)).state_dict())
            ['0.weight', '0.bias', '1.weight', '1.bias', '1._mean', '1._variance']
        """
        prefix = structured_name_prefix
        return collect_state_dict(self, destination, include_sublayers, prefix, use_hook)

    def register_state_dict_hook(self, hook: Callable) -> HookRemoveHelper:
        """Call ``hook(state_dict)`` at the end of this layer's :meth:`state_dict`; the hook
        sees the entries collected so far and may return a replacement dict (Paddle)."""
        handle = HookRemoveHelper(self._state_dict_hooks)
        self._state_dict_hooks[handle._id] = hook
        return handle

    _register_state_dict_hook = register_state_dict_hook  # Paddle's name

    def set_state_dict(
        self, state_dict: dict, use_structured_name: bool = True
    ) -> tuple[list[str], list[str]]:
        """Copy values from ``state_dict`` into this layer's tensors, in place; returns
        ``(missing_keys, unexpected_keys)``. Parameters keep their identity, dtype and device.

        ``use_structured_name=False`` keys by unique names (``linear_0.w_0``). Every value is
        checked (shape, numbers, what an integer tensor can hold) and staged before the first
        write: any error leaves the layer untouched. See ``state_dict.py``.
        """
        return load_state_dict(self, state_dict, use_structured_name)

    load_dict = set_state_dict
    set_dict = set_state_dict
