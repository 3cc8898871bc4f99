"""Containers: Sequential (a pipeline), LayerList (a list) and LayerDict (a dict) of layers.

Each registers its members as sublayers, so their parameters appear in ``parameters()`` and
``state_dict()`` under the member's key: ``'0.weight'`` in a Sequential or LayerList,
``'encoder.weight'`` for a named Sequential entry or a LayerDict key.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from .layers import Layer


def _check_layer(container: str, layer) -> Layer:
    if not isinstance(layer, Layer):
        raise TypeError(f"{container} holds Layers, got {type(layer).__name__}")
    return layer


def _check_name(container: str, name) -> str:
    """``name`` if it can key a sublayer (a non-empty str without '.'), else KeyError."""
    if not isinstance(name, str) or not name or "." in name:
        raise KeyError(f"{container} key {name!r} must be a non-empty string without '.'")
    return name


def _all_layers(items) -> bool:
    return all(isinstance(item, Layer) for item in items)


def _is_pair(pair) -> bool:
    """Whether ``pair`` is a ``(str, Layer)`` pair."""
    return (
        isinstance(pair, (list, tuple))
        and len(pair) == 2
        and isinstance(pair[0], str)
        and isinstance(pair[1], Layer)
    )


def _check_pairs(container: str, pairs) -> list[tuple[str, Layer]]:
    """Every ``(name, layer)`` pair of ``pairs`` checked, before any is added."""
    checked = []
    for pair in pairs:
        if not (isinstance(pair, (list, tuple)) and len(pair) == 2):
            raise TypeError(f"{container} takes a mapping or (key, layer) pairs, got {pair!r}")
        checked.append((_check_name(container, pair[0]), _check_layer(container, pair[1])))
    return checked


def _list_index(container: str, index: int, length: int) -> int:
    """``index`` made non-negative, or IndexError."""
    if not -length <= index < length:
        raise IndexError(f"{container} index {index} is out of range (length {length})")
    return index + length if index < 0 else index


class Sequential(Layer):
    """Layers applied one after another: ``forward(x)`` is ``layer_n(...layer_1(x))``.

    Built from layers (named ``'0'``, ``'1'``, ...) or from ``(name, layer)`` pairs.

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp import nn
        >>> model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
        >>> len(model), model(mt.ones([2, 4])).shape
        (3, [2, 1])
        >>> named = nn.Sequential(("fc", nn.Linear(2, 2)), ("act", nn.Tanh()))
        >>> named.fc is named[0]
        True
    """

    def __init__(self, *layers):
        super().__init__()
        for name, layer in self._entries(layers):
            self.add_sublayer(name, layer)

    @staticmethod
    def _entries(layers: tuple) -> list[tuple[str, Layer]]:
        """``(name, layer)`` for every argument, all checked before any is added.

        Either every argument is a Layer, or every one is a ``(str, Layer)`` pair (Paddle).
        A list of layers as the one argument is refused: it would read as one pair.
        """
        if _all_layers(layers):
            return [(str(i), layer) for i, layer in enumerate(layers)]
        if all(_is_pair(pair) for pair in layers):
            return _check_pairs("Sequential", layers)
        bad = next((a for a in layers if not isinstance(a, Layer) and not _is_pair(a)), None)
        if len(layers) == 1 and isinstance(bad, (list, tuple)) and _all_layers(bad):
            raise TypeError(
                "Sequential takes its layers as arguments, got one list of them (which would "
                "read as a (name, layer) pair): write nn.Sequential(*layers)"
            )
        got = "a mix of both" if bad is None else f"{type(bad).__name__} {bad!r}"
        raise TypeError(
            f"Sequential holds Layers, or (str name, Layer) pairs, got {got}: write "
            "nn.Sequential(*layers) or nn.Sequential(('fc', layer), ...)"
        )

    def __getitem__(self, index):
        """An int (position), a str (name) or a slice (a new Sequential of the same layers)."""
        layers = list(self._sub_layers.values())
        if isinstance(index, slice):
            return type(self)(*layers[index])
        if isinstance(index, str):
            return self._sub_layers[index]
        return layers[_list_index("Sequential", index, len(layers))]

    def __setitem__(self, index, layer: Layer) -> None:
        _check_layer("Sequential", layer)
        if isinstance(index, int):
            keys = list(self._sub_layers)
            index = keys[_list_index("Sequential", index, len(keys))]
        setattr(self, str(index), layer)

    def __delitem__(self, index) -> None:
        if isinstance(index, int):
            keys = list(self._sub_layers)
            index = keys[_list_index("Sequential", index, len(keys))]
        del self._sub_layers[str(index)]

    def __len__(self) -> int:
        return len(self._sub_layers)

    def __iter__(self) -> Iterator[Layer]:
        return iter(self._sub_layers.values())

    def forward(self, input):  # noqa: A002 - Paddle's argument name
        out = input
        for layer in self._sub_layers.values():
            out = layer(out)
        return out


class LayerList(Layer):
    """A list of layers whose parameters are registered (a plain Python list hides them).

    Example:
        >>> from minitorch_amp import nn
        >>> blocks = nn.LayerList([nn.Linear(2, 2) for _ in range(3)])
        >>> _ = blocks.append(nn.Linear(2, 1))
        >>> len(blocks), len(blocks.parameters())
        (4, 8)
    """

    def __init__(self, sublayers: Iterable[Layer] | None = None):
        super().__init__()
        if sublayers is not None:
            self.extend(sublayers)

    def _renumber(self, layers: list[Layer]) -> None:
        """Store ``layers`` under keys ``'0'..'n-1'`` (after an insert or a delete)."""
        self._sub_layers.clear()
        for i, layer in enumerate(layers):
            self._sub_layers[str(i)] = layer

    def __getitem__(self, index):
        layers = list(self._sub_layers.values())
        if isinstance(index, slice):
            return type(self)(layers[index])
        return layers[_list_index("LayerList", index, len(layers))]

    def __setitem__(self, index: int, layer: Layer) -> None:
        index = _list_index("LayerList", index, len(self))
        self._sub_layers[str(index)] = _check_layer("LayerList", layer)

    def __delitem__(self, index) -> None:
        layers = list(self._sub_layers.values())
        if isinstance(index, slice):
            del layers[index]
        else:
            del layers[_list_index("LayerList", index, len(layers))]
        self._renumber(layers)

    def __len__(self) -> int:
        return len(self._sub_layers)

    def __iter__(self) -> Iterator[Layer]:
        return iter(self._sub_layers.values())

    def append(self, sublayer: Layer) -> LayerList:
        """Add ``sublayer`` at the end; returns the list (Paddle)."""
        return self.extend([sublayer])

    def insert(self, index: int, sublayer: Layer) -> None:
        """Insert ``sublayer`` before position ``index`` (``-len <= index <= len``)."""
        length = len(self)
        if not -length <= index <= length:
            raise IndexError(f"LayerList.insert index {index} is out of range (length {length})")
        layers = list(self._sub_layers.values())
        layers.insert(index, _check_layer("LayerList", sublayer))
        self._renumber(layers)

    def extend(self, sublayers: Iterable[Layer]) -> LayerList:
        """Append every layer of ``sublayers`` (all checked first); returns the list."""
        if isinstance(sublayers, Layer):
            raise TypeError("LayerList.extend takes an iterable of Layers; use append(layer)")
        layers = [_check_layer("LayerList", layer) for layer in sublayers]
        for layer in layers:
            self._sub_layers[str(len(self))] = layer
        return self

    def forward(self, *inputs, **kwargs):
        raise NotImplementedError(
            "LayerList has no forward(); iterate over it in your own Layer's forward"
        )


class LayerDict(Layer):
    """A dict of layers, in insertion order, registered under their keys.

    Example:
        >>> from minitorch_amp import nn
        >>> heads = nn.LayerDict({"cls": nn.Linear(4, 2), "reg": nn.Linear(4, 1)})
        >>> list(heads.keys()), "cls" in heads
        (['cls', 'reg'], True)
    """

    def __init__(self, sublayers: Mapping[str, Layer] | Iterable | None = None):
        super().__init__()
        if sublayers is not None:
            self.update(sublayers)

    def __getitem__(self, key: str) -> Layer:
        return self._sub_layers[key]

    def __setitem__(self, key: str, sublayer: Layer) -> None:
        self.update([(key, sublayer)])

    def __delitem__(self, key: str) -> None:
        del self._sub_layers[key]

    def __len__(self) -> int:
        return len(self._sub_layers)

    def __iter__(self) -> Iterator[str]:
        return iter(self._sub_layers)

    def __contains__(self, key: str) -> bool:
        return key in self._sub_layers

    def clear(self) -> None:
        self._sub_layers.clear()

    def pop(self, key: str) -> Layer:
        return self._sub_layers.pop(key)

    def keys(self):
        return self._sub_layers.keys()

    def items(self):
        return self._sub_layers.items()

    def values(self):
        return self._sub_layers.values()

    def update(self, sublayers) -> None:
        """Add entries from a mapping or an iterable of ``(key, layer)`` pairs.

        Every entry is checked before any is added: a bad one leaves the dict as it was.
        """
        pairs = sublayers.items() if isinstance(sublayers, Mapping) else sublayers
        for key, layer in _check_pairs("LayerDict", pairs):
            self.add_sublayer(key, layer)

    def forward(self, *inputs, **kwargs):
        raise NotImplementedError("LayerDict has no forward(); index it in your own forward")
