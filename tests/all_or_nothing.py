"""Helpers for the all-or-nothing tests: snapshots of a model's state, and failure injection.

* ``state_of(model)``: everything a conversion or a load may touch, per tensor (parameters,
  buffers, their gradients): the objects, dtypes, shapes, devices, bits and versions.
* ``failing_at(k, make_error, (module, "name"), ...)`` wraps each named function of each module
  with one shared counter; the k-th call among all of them raises ``make_error()`` instead of
  running, every other call runs normally. Calls made while an exception is being handled
  (the code under test putting things back) are neither counted nor failed: one fault at a time.
"""

from __future__ import annotations

import contextlib
import sys
from unittest import mock


def owned_tensors(model) -> dict:
    """Every tensor of ``model`` by name: parameters, buffers and their grads (``.grad``)."""
    found = {}
    for prefix, layer in model.named_sublayers(include_self=True):
        for store in (layer._parameters, layer._buffers):
            for key, t in store.items():
                if t is None:
                    continue
                name = f"{prefix}.{key}" if prefix else key
                found[name] = t
                if t._grad_value is not None:
                    found[f"{name}.grad"] = t._grad_value
    return found


def state_of(model) -> dict:
    """What must survive a failed conversion or load bit for bit (arrays' identity aside)."""
    state = {
        name: (id(t), t._data.dtype, t._data.shape, t.place, t._data.tobytes(), t._version)
        for name, t in owned_tensors(model).items()
    }
    state["stale grads"] = [p._grad_stale for p in model.parameters()]
    state["layer dtypes"] = [layer._dtype for layer in model.sublayers(include_self=True)]
    return state


def values_of(model) -> dict:
    """``state_of`` without object identities: what a fresh copy of the model can match."""
    return {k: v[1:] if isinstance(v, tuple) else v for k, v in state_of(model).items()}


def arrays_of(model) -> dict:
    """The array each tensor of ``owned_tensors`` holds."""
    return {name: t._data for name, t in owned_tensors(model).items()}


class FailAt:
    """A shared call counter that raises at call number ``at`` (1-based)."""

    def __init__(self, at: int, make_error):
        self.at = at
        self.make_error = make_error
        self.calls = 0

    @property
    def fired(self) -> bool:
        return self.calls >= self.at

    def wrap(self, function):
        def wrapped(*args, **kwargs):
            if sys.exc_info()[1] is not None:  # recovering from a failure: one fault at a time
                return function(*args, **kwargs)
            self.calls += 1
            if self.calls == self.at:
                raise self.make_error()
            return function(*args, **kwargs)

        return wrapped


@contextlib.contextmanager
def failing_at(at: int, make_error, *targets):
    """Patch every ``(module, name)`` in ``targets`` so that call ``at`` among them raises."""
    injected = FailAt(at, make_error)
    with contextlib.ExitStack() as stack:
        for module, name in targets:
            wrapped = injected.wrap(getattr(module, name))
            stack.enter_context(mock.patch.object(module, name, wrapped))
        yield injected
