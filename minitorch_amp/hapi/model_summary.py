"""``summary(net, input_size)``: one forward pass, and a table of every layer's shapes and
parameter counts, printed the way ``paddle.summary`` prints it.

Forward post hooks record, for each layer that ran (containers left out), the shapes of its
inputs and output and the number of its own parameters. The rows follow the order in which
the layers *finished*, so a block comes after the layers inside it; a layer called twice has
one row (the last call's shapes). The sizes in MB count 4 bytes per element, whatever the
dtypes, and the forward/backward figure is twice the elements of every row's output.

NOTE: as in Paddle, only the parameters of the layers in the table are counted: a parameter
created directly on the top layer of a model that has sublayers is left out, and a parameter
shared by two layers (tied weights) is counted in both rows.
"""

from __future__ import annotations

import math
import numbers
from collections import OrderedDict

from ..autograd.creation import rand
from ..autograd.grad_mode import no_grad
from ..autograd.tensor import Tensor
from ..nn.layer.container import LayerList, Sequential
from ..nn.layer.layers import Layer

_WIDTHS = {"layer": 15, "input": 20, "output": 20, "params": 15}
_TABLE_WIDTH = 75


def summary(net: Layer, input_size=None, dtypes=None, input=None) -> dict:  # noqa: A002
    """Print a table of ``net``'s layers (input and output shapes, parameter counts) and
    return ``{'total_params': N, 'trainable_params': M}``.

    Args:
        net: the model; one forward runs under ``no_grad`` with every layer in eval mode
            (each layer's own mode is restored afterwards).
        input_size: the input's shape, a tuple of ints (``None`` or -1 allowed once, for the
            batch, read as 1) or an int (a 1-D input); for a model with several inputs, a list
            of shapes (or a tuple of them). As in Paddle, a list's items are ints (each a 1-D
            input), tuples or ``InputSpec``s, never lists. Objects with a ``shape`` and no
            values (Paddle's ``InputSpec``) are read as their shape; an array or a Tensor is
            refused (``TypeError``), as is a dim that is not an int, before anything runs.
        dtypes: the inputs' dtypes: one for all, or one per input (default float32). The
            inputs are uniform samples in [0, 1) cast to these dtypes.
        input: the input itself (a Tensor, or a list or dict passed as one argument);
            ``input_size`` and ``dtypes`` are then not used.

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp import nn
        >>> net = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
        >>> info = mt.summary(net, (1, 4))  # doctest: +ELLIPSIS
        ---------------------------------------------------------------------------
         Layer (type)       Input Shape          Output Shape         Param #
        ===========================================================================
        ...
        Total params: 23
        Trainable params: 23
        Non-trainable params: 0
        ...
        >>> info
        {'total_params': 23, 'trainable_params': 23}
    """
    if not isinstance(net, Layer):
        raise TypeError(f"summary: net must be an nn.Layer, got {type(net).__name__}")
    if input_size is None and input is None:
        raise ValueError(
            "summary: give input_size (the input's shape, e.g. (1, 3, 28, 28)) or input "
            "(the input itself); both are None"
        )
    if input_size is None:
        input_size = _shapes_of(input)
    text, info = summary_string(net, _check_sizes(_as_sizes(input_size)), dtypes, input)
    print(text)
    return info


def summary_string(model: Layer, input_size=None, dtypes=None, input=None):  # noqa: A002
    """The table :func:`summary` prints and the counts it returns, as ``(text, info)``."""
    if isinstance(input_size, tuple):
        input_size = [input_size]
    if not isinstance(dtypes, list | tuple):
        dtypes = _same_dtype(input_size, dtypes or "float32")
    rows: OrderedDict[str, dict] = OrderedDict()
    top_has_sublayers = bool(model.sublayers())
    handles = []
    modes = [(layer, layer.training) for layer in model.sublayers(include_self=True)]
    try:
        for layer in model.sublayers(include_self=True):
            if isinstance(layer, Sequential | LayerList) or (layer is model and top_has_sublayers):
                continue
            handles.append(layer.register_forward_post_hook(_recorder(rows)))
        model.eval()
        with no_grad():
            if input is not None:
                model(input)
            else:
                model(*_build_inputs(input_size, dtypes))
    finally:
        for handle in handles:
            handle.remove()
        for layer, training in modes:
            layer.training = training
    return _table(rows, input_size)


def _recorder(rows: OrderedDict):
    def hook(layer, inputs, output):
        suffix = layer.full_name().rsplit("_", 1)[-1]
        index = int(suffix) if suffix.isdigit() else len(rows)
        params = [p for p in layer._parameters.values() if p is not None]
        rows[f"{type(layer).__name__}-{index + 1}"] = {
            "input_shape": _shape_of(inputs, missing=None),
            "output_shape": _shape_of(output, missing=[]),
            "params": sum(math.prod(p.shape) for p in params),
            "trainable": sum(
                math.prod(p.shape)
                for p in params
                if getattr(p, "trainable", True) and not p.stop_gradient
            ),
        }

    return hook


def _shape_of(value, missing):
    """Nested lists of shapes, ``missing`` where a value has none (Paddle: None for an
    input, [] for an output)."""
    if isinstance(value, list | tuple):
        return [_shape_of(v, missing) for v in value]
    return list(value.shape) if hasattr(value, "shape") else missing


def _numel(shape) -> int:
    if all(isinstance(n, numbers.Integral) for n in shape):
        return math.prod(shape)
    return sum(_numel(s) for s in shape if s is not None)


def _table(rows: OrderedDict, input_size):
    widths = dict(_WIDTHS)
    for key, row in rows.items():
        for col, text in (("layer", key), ("input", row["input_shape"])):
            widths[col] = max(widths[col], len(str(text)))
        widths["output"] = max(widths["output"], len(str(row["output_shape"])))
        widths["params"] = max(widths["params"], len(str(row["params"])))
    table = max(_TABLE_WIDTH, sum(widths.values()) + 5)
    cols = widths["layer"], widths["input"], widths["output"], widths["params"]

    def line(*cells) -> str:
        # Paddle's centred columns, without the trailing blanks centring leaves
        return " ".join(f"{c!s:^{w}}" for c, w in zip(cells, cols)).rstrip()

    lines = ["-" * table, line("Layer (type)", "Input Shape", "Output Shape", "Param #")]
    lines.append("=" * table)
    for key, row in rows.items():
        lines.append(line(key, row["input_shape"], row["output_shape"], f"{row['params']:,}"))
    total = sum(row["params"] for row in rows.values())
    trainable = sum(row["trainable"] for row in rows.values())
    outputs = sum(_numel(row["output_shape"]) for row in rows.values())
    mb = 4.0 / 1024**2
    input_mb = sum(abs(math.prod(s)) for s in _flat_shapes(input_size)) * mb
    pass_mb, params_mb = 2.0 * outputs * mb, total * mb
    lines += [
        "=" * table,
        f"Total params: {total:,}",
        f"Trainable params: {trainable:,}",
        f"Non-trainable params: {total - trainable:,}",
        "-" * table,
        f"Input size (MB): {input_mb:0.2f}",
        f"Forward/backward pass size (MB): {pass_mb:0.2f}",
        f"Params size (MB): {params_mb:0.2f}",
        f"Estimated Total Size (MB): {input_mb + pass_mb + params_mb:0.2f}",
        "-" * table,
    ]
    return "\n".join(lines) + "\n", {"total_params": total, "trainable_params": trainable}


# ---- input sizes ---------------------------------------------------------------------------------
def _is_shape(size) -> bool:
    return isinstance(size, list | tuple) and all(not isinstance(n, list | tuple) for n in size)


def _shapes_of(input):  # noqa: A002
    if isinstance(input, Tensor):
        return tuple(input.shape)
    if isinstance(input, list | tuple):
        return [tuple(t.shape) for t in input]
    if isinstance(input, dict):
        return [tuple(t.shape) for t in input.values()]
    raise ValueError(
        f"summary: input must be a Tensor, a list or tuple of Tensors or a dict of them, got "
        f"{type(input).__name__}; or give input_size instead"
    )


def _as_sizes(input_size):
    """Paddle's reading: an int is a 1-D shape; a tuple is one shape (or, holding shapes, one
    per input); a list holds one shape per input, each an int, a tuple or an InputSpec; an
    InputSpec is its shape. Anything else is refused here, before the model runs."""
    if isinstance(input_size, numbers.Integral) and not isinstance(input_size, bool):
        return (int(input_size),)
    if isinstance(input_size, tuple):
        return input_size
    if _is_input_spec(input_size):
        return tuple(input_size.shape)
    if isinstance(input_size, list):
        return [_list_item(n) for n in input_size]
    hint = ""
    if hasattr(input_size, "shape"):  # an array or a Tensor: its values would be ignored
        hint = "; for an array of sizes pass tuple(sizes.tolist()), for the input itself input="
    raise TypeError(
        "summary: input_size must be a shape tuple, an int, an InputSpec or a list of them, "
        f"got {type(input_size).__name__} {input_size!r}{hint}"
    )


def _list_item(item):
    """One input's size inside a list: an int (a 1-D shape), a tuple or an InputSpec."""
    if isinstance(item, numbers.Integral) and not isinstance(item, bool):
        return (int(item),)
    if isinstance(item, tuple):
        return item
    if _is_input_spec(item):
        return tuple(item.shape)
    raise TypeError(
        "summary: each item of a list input_size is one input's size, an int, a tuple or an "
        f"InputSpec, got {type(item).__name__} {item!r} (as in Paddle); write a shape as a "
        "tuple, e.g. [(1, 4)] for one input of shape [1, 4]"
    )


def _is_input_spec(value) -> bool:
    """Paddle's ``InputSpec`` or alike: a ``shape`` attribute and no values of its own (an
    array or a Tensor has ``__array__``, and its values are no size)."""
    return hasattr(value, "shape") and not hasattr(value, "__array__")


def _check_sizes(size):
    if not isinstance(size, list | tuple):
        raise TypeError(
            f"summary: input_size holds {size!r} beside shapes: give every input's shape as "
            "a tuple of ints"
        )
    if not _is_shape(size):
        return [_check_sizes(s) for s in size]
    for n in size:
        if n is not None and (isinstance(n, bool) or not isinstance(n, numbers.Integral)):
            raise TypeError(
                f"summary: input_size {size} has the dim {n!r}: dims are ints (None or -1 "
                "for the batch)"
            )
    unknown = [n for n in size if n is None or n == -1]
    if len(unknown) > 1:
        raise ValueError(
            f"summary: input_size {size} has {len(unknown)} unknown dims; only the batch dim "
            "may be None or -1"
        )
    for n in size:
        if n is not None and n != -1 and n <= 0:
            raise ValueError(f"summary: input_size {size} has a dim <= 0: give positive sizes")
    return tuple(1 if n is None or n == -1 else int(n) for n in size)


def _same_dtype(input_size, dtype):
    if _is_shape(input_size):
        return [dtype]
    return [_same_dtype(s, dtype) for s in input_size]


def _build_inputs(input_size, dtypes):
    if _is_shape(input_size):
        dtype = dtypes[0] if isinstance(dtypes, list | tuple) else dtypes
        return rand(list(input_size)).astype(dtype)
    return [_build_inputs(s, d) for s, d in zip(input_size, dtypes)]


def _flat_shapes(input_size):
    if _is_shape(input_size):
        return [input_size]
    return [s for item in input_size for s in _flat_shapes(item)]


__all__ = ["summary", "summary_string"]
