"""``decorate``: prepare models and optimizers for pure-fp16 training (Paddle's O2).

``decorate(level='O2')`` does four things, each switchable:

1. **Casts the models to float16, layer by layer**: every layer's own floating parameters,
   their grads and its buffers (``layer._to_impl(dtype, include_sublayers=False,
   floating_only=True)``), except the layers that must stay float32: batch norm always,
   layer norm for float16 (their statistics need the range; the rule is
   ``nn.layer.convert.stays_float32``, shared with ``Layer.float16()``), and
   ``excluded_layers``.
   Parameters are converted in place, so optimizers built before ``decorate`` still hold them.
2. **Turns on fp32 master weights** in the optimizers (``master_weight=None`` means True):
   each float16 parameter is updated on an fp32 copy that the optimizer keeps, then
   rewritten from it (optimize-cast; see ``minitorch_amp.optimizer``).
3. ``save_dtype``: ``state_dict()`` returns its floating entries cast to that dtype (so a
   checkpoint can be float32 while training is float16); the parameters stay as they are.
4. ``master_grad=True``: after every ``backward()``, the decorated float16 parameters' grads
   become float32 (Paddle's ``set_master_grads``), so clipping, weight decay and the update
   see fp32 gradients instead of ones that under- or overflowed in float16.

``level='O1'`` changes nothing: O1 casts per op inside ``auto_cast`` and keeps fp32 weights.

Example:
    >>> import minitorch_amp as mt
    >>> from minitorch_amp import nn, optimizer
    >>> from minitorch_amp.amp.decorate import decorate
    >>> model = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4))
    >>> opt = optimizer.SGD(0.1, parameters=model.parameters())
    >>> model, opt = decorate(model, opt, level="O2")
    >>> model[0].weight.dtype, model[1].weight.dtype, opt._multi_precision
    (dtype('float16'), dtype('float32'), True)
"""

from __future__ import annotations

import weakref

from ..autograd import engine
from ..autograd.ops.cast import report_cast
from ..autograd.tensor import Tensor
from ..backend import dtypes as _dtypes
from ..backend.cast import cast as _cast
from ..nn.layer.convert import (
    convert_layers_,
    convert_tensor_,
    excluded_layer_ids,
    parse_dtype,
    stays_float32,
)
from ..nn.layer.layers import Layer
from ..optimizer.optimizer import Optimizer

__all__ = ["decorate"]

_SAVE_DTYPES = ("float16", "bfloat16", "float32", "float64")


def decorate(
    models,
    optimizers=None,
    level: str = "O1",
    dtype: str = "float16",
    master_weight: bool | None = None,
    save_dtype: str | None = None,
    master_grad: bool = False,
    excluded_layers=None,
):
    """Decorate models (and optimizers) for AMP; every argument is checked before any change.

    Args:
        models: a Layer or a list of Layers.
        optimizers: None, an Optimizer or a list of Optimizers.
        level: ``'O1'`` (returns the inputs unchanged) or ``'O2'`` (pure float16).
        dtype: ``'float16'`` or ``'bfloat16'``. bfloat16 casts layer norm too (Paddle keeps
            only batch norm in float32 then: bfloat16 has float32's range).
        master_weight: False turns fp32 master weights off; None or True turns them on.
        save_dtype: None, or ``'float16'``/``'bfloat16'``/``'float32'``/``'float64'``: the
            dtype of the floating entries of ``state_dict()``.
        master_grad: cast the decorated float16/bfloat16 parameters' grads to float32 after
            backward.
        excluded_layers: a Layer instance (with its sublayers) or Layer type, or a list of
            them, to keep in float32.

    Returns:
        ``models`` when ``optimizers`` is None, else ``(models, optimizers)``; each a list if
        it was given as a list.

    Raises:
        ValueError: a bad ``level``, ``dtype`` or ``save_dtype``.
        RuntimeError: a model that is not a Layer, an optimizer that is not an Optimizer.
        TypeError: ``models``/``optimizers`` of the wrong kind, a bad ``excluded_layers`` entry.
    """
    if level not in ("O1", "O2"):
        raise ValueError(
            "level should be O1 or O2, O1 represent AMP train mode, O2 represent Pure fp16 "
            "train mode."
        )
    dtype = str(dtype).replace("paddle.", "")
    if dtype not in ("float16", "bfloat16"):
        raise ValueError("dtype only support float16 or bfloat16.")
    if level == "O1":  # nothing to do: O1 keeps fp32 weights and casts per op in auto_cast
        return models if optimizers is None else (models, optimizers)

    model_list = _as_list(
        models, Layer, "models must be either a single model or a list of models."
    )
    for model in model_list:
        if getattr(model, "_is_data_parallel", False):
            raise RuntimeError(
                "For distributed AMP training, you should first use paddle.amp.decorate() to "
                "decorate origin model, and then call paddle.DataParallel get distributed model."
            )
        if not isinstance(model, Layer):
            raise RuntimeError(
                "Current train mode is pure fp16, models should be paddle.nn.Layer, but "
                f"receive {type(model)}."
            )
    opt_list = []
    if optimizers is not None:
        message = "optimizers must be either a single optimizer or a list of optimizers."
        # A sharded optimizer is decorated through the optimizer it wraps (as in Paddle).
        single = getattr(optimizers, "_inner_opt", optimizers)
        opt_list = _as_list(optimizers if single is optimizers else single, Optimizer, message)
        opt_list = [getattr(opt, "_inner_opt", opt) for opt in opt_list]
        for opt in opt_list:
            if not isinstance(opt, Optimizer):
                raise RuntimeError(
                    "Current train mode is pure fp16, optimizers should be "
                    f"paddle.optimizer.Optimizer, but receive {type(opt)}."
                )
    if save_dtype is not None:
        save_dtype = str(save_dtype).replace("paddle.", "")
        if save_dtype not in _SAVE_DTYPES:
            raise ValueError(
                "save_dtype can only be float16 float32 or float64, but your input save_dtype "
                f"is {save_dtype}."
            )
    excluded = excluded_layer_ids(model_list, excluded_layers)

    # Everything is valid: from here on, change things.
    half = parse_dtype(dtype)
    _cast_models(model_list, half, excluded)  # all or nothing: a failure casts no model
    for opt in opt_list:
        opt._multi_precision = master_weight is not False  # Paddle: None means True
    if save_dtype is not None:
        hook = _SaveDtypeHook(save_dtype)
        for model in model_list:
            for layer in model.sublayers(include_self=True):
                layer.register_state_dict_hook(hook)
    if master_grad:
        _register_master_grads(model_list)

    out_models = models if isinstance(models, list) else model_list[0]
    if optimizers is None:
        return out_models
    return out_models, optimizers


def _as_list(value, kind: type, message: str) -> list:
    if isinstance(value, kind):
        return [value]
    if isinstance(value, list):
        return list(value)
    raise TypeError(message)


def _cast_models(models: list, dtype, excluded: set[int]) -> None:
    """Paddle's ``amp_initialize``: cast each layer's own tensors unless it is excluded or
    stays fp32 (``stays_float32(..., 'decorate')``: batch norm, layer norm for float16).

    One conversion for every layer of every model (``convert_layers_``): if it fails (out of
    memory), no tensor of any model was converted.
    """
    named = [
        (prefix, layer)
        for model in models
        for prefix, layer in model.named_sublayers(include_self=True)
        if id(layer) not in excluded and not stays_float32(layer, dtype, "decorate")
    ]
    convert_layers_(named, dtype, None, floating_only=True)
    for model in models:  # Paddle marks excluded layers this way
        for layer in model.sublayers(include_self=True):
            if id(layer) in excluded:
                layer._cast_to_low_precision = False


class _SaveDtypeHook:
    """A state-dict hook: floating entries become ``save_dtype`` copies, names kept.

    Registered on every sublayer (as in Paddle), so it may see an entry a sublayer's hook has
    already cast; those, and entries already in ``save_dtype``, are left as they are.
    """

    def __init__(self, save_dtype: str):
        self.dtype = _dtypes.convert_dtype(save_dtype)

    def __call__(self, state_dict):
        for key, value in state_dict.items():
            data = value._data if isinstance(value, Tensor) else None
            if data is None or not _dtypes.is_floating(data.dtype) or data.dtype == self.dtype:
                continue
            cast = Tensor._wrap(_cast(data, self.dtype))  # a copy: the parameter is untouched
            cast.name = value.name
            cast.persistable = value.persistable
            state_dict[key] = cast
        return state_dict


# ---- master_grad --------------------------------------------------------------------------
# The parameters whose float16 grads become float32 after each backward: id -> parameter,
# held weakly, so a decorated model that is dropped leaves nothing behind. One hook in
# engine.post_backward_hooks serves every decorate(master_grad=True) call.
_master_grad_params: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def _register_master_grads(models: list) -> None:
    for model in models:
        for param in model.parameters():
            _master_grad_params[id(param)] = param
    if _cast_master_grads not in engine.post_backward_hooks:
        engine.post_backward_hooks.append(_cast_master_grads)


def _cast_master_grads() -> None:
    """Paddle's ``set_master_grads``: float16/bfloat16 grads of the registered params -> fp32.

    NOTE: the cast happens once per backward, on the accumulated grad. A later backward adds
    its float16 grad into the float32 one, so gradient accumulation also sums in fp32; after
    ``clear_grad()`` it writes its float16 grad into the float32 buffer (a cast, which the
    engine reports to operator statistics as this hook reports its own).
    """
    for param in list(_master_grad_params.values()):
        grad = param._grad
        if grad is not None and grad._data.dtype in _dtypes.LOW_PRECISION:
            report_cast(grad._data.dtype)  # operator statistics: Paddle's cast kernel
            convert_tensor_(grad, _dtypes.float32)
