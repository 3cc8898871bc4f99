"""Whether ops record the graph: ``no_grad`` turns recording off, as a context or decorator."""

from __future__ import annotations

import contextvars
import functools

_enabled = contextvars.ContextVar("minitorch_amp_grad_enabled", default=True)


def is_grad_enabled() -> bool:
    """True when new ops record the graph for backward."""
    return _enabled.get()


class _GradMode:
    """Sets grad mode to ``self._mode`` inside a ``with`` block or a decorated function."""

    _mode = True

    def __init__(self):
        self._tokens = []

    def __enter__(self):
        self._tokens.append(_enabled.set(self._mode))
        return self

    def __exit__(self, *exc_info):
        _enabled.reset(self._tokens.pop())
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return func(*args, **kwargs)

        return wrapper


class no_grad(_GradMode):  # noqa: N801 - Paddle's and PyTorch's name
    """Ops inside do not record the graph; results have ``stop_gradient=True``.

    Example:
        >>> import minitorch_amp as mt
        >>> w = mt.ones([2]); w.stop_gradient = False
        >>> with mt.no_grad():
        ...     y = w * 2
        >>> y.stop_gradient
        True
    """

    _mode = False


class enable_grad(_GradMode):  # noqa: N801
    """Turn recording back on inside a ``no_grad`` region."""

    _mode = True


class set_grad_enabled(_GradMode):  # noqa: N801
    """``with set_grad_enabled(flag):`` records the graph iff ``flag``."""

    def __init__(self, mode: bool):
        super().__init__()
        self._mode = bool(mode)

    def __call__(self, func):
        mode = self._mode

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
                return func(*args, **kwargs)

        return wrapper
