"""``ParamAttr``: how a layer should create one of its parameters (Paddle's ``paddle.ParamAttr``).

Layers take ``weight_attr`` / ``bias_attr`` arguments. Each may be:

* ``None``: defaults (a generated name, the layer's default initializer, trainable);
* a :class:`ParamAttr`;
* an initializer (``nn.initializer.Normal(std=0.02)``), short for ``ParamAttr(initializer=...)``;
* a string, short for ``ParamAttr(name=...)``;
* ``False``: do not create this parameter at all (for example a Linear without bias).
"""

from __future__ import annotations

from ..backend import device as _device
from ..backend import dtypes as _dtypes
from .initializer import Constant, Initializer, XavierUniform, global_initializer
from .parameter import Parameter, unique_name


class ParamAttr:
    """Creation settings for one parameter.

    Args:
        name: the parameter's name; generated (``linear_0.w_0``) when None.
        initializer: an :mod:`~minitorch_amp.nn.initializer` object; the layer's default
            (Xavier uniform for weights, zeros for biases) when None.
        learning_rate: a multiplier of the optimizer's learning rate for this parameter
            (stored as ``param.optimize_attr['learning_rate']``).
        regularizer: a weight-decay regularizer for this parameter only (e.g.
            ``minitorch_amp.regularizer.L2Decay(1e-4)``); it takes precedence over the
            optimizer's ``weight_decay``. Stored as ``param.regularizer``.
        trainable: False creates a frozen parameter (``stop_gradient=True``).
        do_model_average: accepted for Paddle compatibility; has no effect.
        need_clip: False exempts the parameter from gradient clipping.

    Example:
        >>> from minitorch_amp import nn
        >>> attr = nn.ParamAttr(initializer=nn.initializer.Constant(0.5), trainable=False)
        >>> layer = nn.Linear(2, 3, weight_attr=attr)
        >>> float(layer.weight.numpy()[0, 0]), layer.weight.trainable
        (0.5, False)
    """

    def __init__(
        self,
        name: str | None = None,
        initializer: Initializer | None = None,
        learning_rate: float = 1.0,
        regularizer=None,
        trainable: bool = True,
        do_model_average: bool = True,
        need_clip: bool = True,
    ):
        if name is not None and not isinstance(name, str):
            raise TypeError(f"ParamAttr name must be a string or None, got {type(name).__name__}")
        if initializer is not None and not isinstance(initializer, Initializer):
            raise TypeError(
                "ParamAttr initializer must be an nn.initializer object (e.g. "
                f"nn.initializer.Normal(std=0.02)), got {type(initializer).__name__}"
            )
        if learning_rate < 0:
            raise ValueError(f"ParamAttr learning_rate must be >= 0, got {learning_rate}")
        if regularizer is not None and not callable(regularizer):
            raise TypeError(
                "ParamAttr regularizer must be a regularizer such as L2Decay(1e-4), got "
                f"{type(regularizer).__name__}"
            )
        self.name = name
        self.initializer = initializer
        self.learning_rate = float(learning_rate)
        self.regularizer = regularizer
        self.trainable = bool(trainable)
        self.do_model_average = bool(do_model_average)
        self.need_clip = bool(need_clip)

    @staticmethod
    def _to_attr(arg) -> ParamAttr | bool:
        """Normalise a ``weight_attr``/``bias_attr`` argument to a ParamAttr (or False)."""
        if arg is None or arg is True:
            return ParamAttr()
        if arg is False:
            return False
        if isinstance(arg, ParamAttr):
            return arg
        if isinstance(arg, Initializer):
            return ParamAttr(initializer=arg)
        if isinstance(arg, str):
            return ParamAttr(name=arg)
        raise TypeError(
            "a parameter attribute must be None, False, a ParamAttr, an initializer or a name "
            f"string, got {type(arg).__name__}"
        )

    def __repr__(self) -> str:
        return (
            f"ParamAttr(name={self.name!r}, initializer={self.initializer!r}, "
            f"learning_rate={self.learning_rate}, trainable={self.trainable}, "
            f"need_clip={self.need_clip})"
        )


def create_parameter(
    shape,
    dtype,
    attr=None,
    is_bias: bool = False,
    default_initializer: Initializer | None = None,
    name_prefix: str = "param",
) -> Parameter | None:
    """A new Parameter on the current device, built as ``attr`` says (None if ``attr`` is False).

    The initializer is, first found: ``attr.initializer``, the one
    :func:`~.initializer.set_global_initializer` set, ``default_initializer``, then
    Paddle's defaults, Xavier uniform for weights and zeros for biases (and for integer
    dtypes). The name is ``attr.name`` or ``<name_prefix>.w_N`` / ``<name_prefix>.b_N``.
    ``Layer.create_parameter`` calls this with the layer's full name as the prefix.
    """
    attr = ParamAttr._to_attr(attr)
    if attr is False:
        return None
    shape = [int(n) for n in shape]
    if any(n < 0 for n in shape):
        raise ValueError(f"create_parameter: shape {shape} has a negative dimension")
    dt = _dtypes.convert_dtype(dtype)
    init = attr.initializer or global_initializer(is_bias) or default_initializer
    if init is None:
        init = Constant(0.0) if is_bias or not _dtypes.is_floating(dt) else XavierUniform()
    array = init._generate(shape, dt, _device.xp_for(_device.current_place()))
    name = attr.name or unique_name(f"{name_prefix}.{'b' if is_bias else 'w'}")
    param = Parameter._from_array(array, name, attr.trainable)
    param.optimize_attr = {"learning_rate": attr.learning_rate}
    param.need_clip = attr.need_clip
    if attr.regularizer is not None:
        param.regularizer = attr.regularizer
    return param
