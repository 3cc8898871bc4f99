"""The debugging tools' way into ``apply`` and backward: add or remove one observer."""

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


def install_counter(counter: Callable) -> None:
    """Add ``counter`` to ``hooks.counters`` (kernels that run outside ``apply``)."""
    if counter not in hooks.counters:
        hooks.counters = (*hooks.counters, counter)


def uninstall_counter(counter: Callable) -> None:
    """Remove exactly ``counter`` from ``hooks.counters``."""
    hooks.counters = tuple(f for f in hooks.counters if f is not counter)


def install_grad_observer(observer: Callable) -> None:
    """Add ``observer`` to ``hooks.grad_observers`` (run after every op's backward)."""
    if observer not in hooks.grad_observers:
        hooks.grad_observers = (*hooks.grad_observers, observer)


def uninstall_grad_observer(observer: Callable) -> None:
    """Remove exactly ``observer`` from ``hooks.grad_observers``."""
    hooks.grad_observers = tuple(f for f in hooks.grad_observers if f is not observer)
