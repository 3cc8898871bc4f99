"""Forward-hook handles: what ``Layer.register_forward_pre_hook`` / ``_post_hook`` return."""

from __future__ import annotations

import itertools
import weakref
from collections import OrderedDict

_hook_ids = itertools.count()


class HookRemoveHelper:
    """A handle whose ``.remove()`` unregisters the hook it was returned for.

    It holds only a weak reference to the layer's hook table, so a forgotten handle keeps
    no layer alive; removing twice, or after the layer is gone, does nothing.

    Example:
        >>> import minitorch_amp as mt
        >>> from minitorch_amp import nn
        >>> layer = nn.Identity()
        >>> handle = layer.register_forward_post_hook(lambda layer, inputs, out: out * 2)
        >>> float(layer(mt.to_tensor(1.0)))
        2.0
        >>> handle.remove()
        >>> float(layer(mt.to_tensor(1.0)))
        1.0
    """

    def __init__(self, hooks: OrderedDict):
        self._hooks = weakref.ref(hooks)
        self._id = next(_hook_ids)

    def remove(self) -> None:
        hooks = self._hooks()
        if hooks is not None:
            hooks.pop(self._id, None)
