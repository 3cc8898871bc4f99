"""The two debugging tools' way into ``apply``: add or remove one forward observer."""

from __future__ import annotations

from collections.abc import Callable

from ...autograd.dispatch import hooks


def install(observer: Callable) -> None:
    """Add ``observer`` to ``hooks.observers`` (a new tuple; the old one is never mutated)."""
    if observer not in hooks.observers:
        hooks.observers = (*hooks.observers, observer)


def uninstall(observer: Callable) -> None:
    """Remove exactly ``observer``, so the observers are what they were before."""
    hooks.observers = tuple(f for f in hooks.observers if f is not observer)
