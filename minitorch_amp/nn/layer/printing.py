"""How a Layer prints: ``Name(settings)`` and its sublayers indented below, like PyTorch."""

from __future__ import annotations


class PrintingMixin:
    """``repr(layer)`` and the hook subclasses fill in, ``extra_repr``."""

    def extra_repr(self) -> str:
        """Layer settings shown inside ``Name(...)``; subclasses override."""
        return ""

    def __repr__(self) -> str:
        return layer_repr(self)


def layer_repr(layer) -> str:
    """``repr(layer)``: the class name, ``extra_repr()`` and each sublayer on its own line.

    Example:
        >>> from minitorch_amp import nn
        >>> print(nn.Sequential(nn.Linear(2, 3), nn.ReLU()))
        Sequential(
          (0): Linear(in_features=2, out_features=3, dtype=float32)
          (1): ReLU()
        )
    """
    extra = layer.extra_repr()
    children = [
        f"({name}): {_indent(repr(sub), 2)}"
        for name, sub in layer._sub_layers.items()
        if sub is not None
    ]
    text = type(layer).__name__ + "("
    if extra and "\n" in extra:
        text += "\n  " + "\n  ".join(extra.split("\n")) + "\n"
    else:
        text += extra
    if children:
        text += "\n  " + "\n  ".join(children) + "\n"
    return text + ")"


def _indent(text: str, spaces: int) -> str:
    lines = text.split("\n")
    return "\n".join([lines[0]] + [" " * spaces + line for line in lines[1:]])
