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

_views: dict[int, list] = {}  # id(owning array) -> weak references to tensors on its memory
_prune_at = 1024  # the table's size that triggers dropping dead entries (then doubled)


def owner(array):
    """The array that owns ``array``'s memory (itself, unless it is a view)."""
    base = array.base
    while base is not None and is_array(base):  # (NumPy collapses chains: one step, mostly)
        array, base = base, base.base
    return array


def note_view(tensor) -> None:
    """Note ``tensor``, whose array is a view of another array's memory."""
    global _prune_at
    key = id(owner(tensor._data))
    refs = _views.get(key)
    ref = weakref.ref(tensor)
    if refs is None:
        if len(_views) >= _prune_at:
            _prune()
            _prune_at = max(1024, 2 * len(_views))
        _views[key] = [ref]
        return
    if len(refs) >= 8:  # a long-lived source viewed every step: keep the live ones only
        refs[:] = [r for r in refs if r() is not None]
    refs.append(ref)


def wrote(tensor) -> None:
    """``tensor``'s memory was written in place: every live view of it is written too."""
    array = tensor._data
    refs = _views.get(id(array))
    if not refs:
        return
    for ref in refs:
        view = ref()
        # (a view that got its own memory since, or a dead array's reused id: not written)
        if view is not None and view is not tensor and owner(view._data) is array:
            view._version += 1


def shares_memory(tensor) -> bool:
    """Whether another live tensor noted here shares ``tensor``'s memory."""
    array = owner(tensor._data)
    for ref in _views.get(id(array), ()):
        other = ref()
        if other is not None and other is not tensor and owner(other._data) is array:
            return True
    return tensor._data.base is not None


def _prune() -> None:
    for key in [k for k, refs in _views.items() if all(r() is None for r in refs)]:
        del _views[key]
