"""A write into a tensor's memory bumps the versions of the views that share it.

A view op's result (reshape, transpose, a slice, a split piece) shares its source's memory.
Versions belong to tensors (see ``versions``), so a write into the source
(``d.set_value(...)``, ``d[0] = 5``, ``set_state_dict``) changed what the view holds without
changing the view's version: ``v = d.reshape([4])``, ``y = (v * w).sum()``, then
``d.set_value(...)`` gave ``w`` the gradient of the new values, silently. PyTorch shares one
version counter among a tensor and its views and raises at backward; this module gives the
same answer without a shared counter: every tensor made around a view of another array is
noted here, by the array that owns the memory, and a write into an owner's memory bumps the
version of each view still alive and still on that memory. Backward's check then refuses
what an op saved from the view, as it refuses what it saved from the source.

(A write into a view never reaches its source: the view gets its own memory first, see
``Tensor._writable``. So only owners' writes are announced here. ``x.detach()`` shares ``x``'s
very array: both are noted, and a write into either bumps the other.)

The cost: a view op's result is noted with one weak reference (a plain op's result owns its
array and costs nothing); a write into a tensor that no view shares costs one dict lookup.
"""

from __future__ import annotations

import weakref

from ..backend import is_array

_views: dict[int, dict] = {}  # id(owning array) -> {id(tensor): weak reference to it}
_prune_at = 1024  # the table's size that triggers dropping dead entries (then doubled)


def owner(array):
    """The array that owns ``array``'s memory (itself, unless it is a view)."""
    base = array.base
    while base is not None and is_array(base):  # (NumPy collapses chains: one step, mostly)
        array, base = base, base.base
    return array


def note_view(tensor) -> None:
    """Note ``tensor``, whose array is a view of another array's memory (or is another
    tensor's very array). Noting a tensor twice keeps one entry.

    NOTE: keyed by ``id``, not a ``WeakSet``: a set compares equal hashes with ``==``, and a
    Tensor's ``==`` is elementwise. The dead are dropped when an owner's entries double (at
    16, 32, 64, ...), so many live views of one source cost linear time, not quadratic."""
    global _prune_at
    key = id(owner(tensor._data))
    views = _views.get(key)
    if views is None:
        if len(_views) >= _prune_at:
            _prune()
            _prune_at = max(1024, 2 * len(_views))
        _views[key] = {id(tensor): weakref.ref(tensor)}
        return
    n = len(views)
    if n >= 16 and not n & (n - 1):  # a power of two: drop the dead
        for k in [k for k, ref in views.items() if ref() is None]:
            del views[k]
    views[id(tensor)] = weakref.ref(tensor)


def _live(array):
    """The live tensors noted on ``array``'s memory (``array`` owning it) that are on it still
    (a view that got its own memory since, or a dead array's reused id: not on it)."""
    views = _views.get(id(array))
    if not views:
        return ()
    found = (ref() for ref in list(views.values()))
    return [t for t in found if t is not None and owner(t._data) is array]


def wrote(tensor) -> None:
    """``tensor``'s memory was written in place: every live view of it is written too."""
    for view in _live(tensor._data):
        if view is not tensor:
            view._version += 1


def shares_memory(tensor) -> bool:
    """Whether another live tensor noted here shares ``tensor``'s memory."""
    others = [t for t in _live(owner(tensor._data)) if t is not tensor]
    return bool(others) or tensor._data.base is not None


def _prune() -> None:
    for key in [k for k, views in _views.items() if all(r() is None for r in views.values())]:
        del _views[key]
