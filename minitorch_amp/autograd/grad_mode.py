"""Whether ops record the graph: ``no_grad`` turns recording off, as a context or decorator.

Also home of :class:`ReentrantContext`, the base of every context object in the package
(``no_grad`` and friends here, ``amp.auto_cast`` above), which keeps what a ``with`` block must
restore per thread and per asyncio task instead of on the shared object.
"""

from __future__ import annotations

import contextvars
import functools

_enabled = contextvars.ContextVar("minitorch_amp_grad_enabled", default=True)

# The open ``with`` blocks of this thread or asyncio task, innermost last: (object, saved) pairs,
# where ``saved`` is whatever the object's ``_enter`` returned (ContextVar tokens).
_open_blocks = contextvars.ContextVar("minitorch_amp_open_blocks", default=())


def is_grad_enabled() -> bool:
    """True when new ops record the graph for backward."""
    return _enabled.get()


class ReentrantContext:
    """A context manager and decorator whose exit restores what its enter set.

    Subclasses implement ``_enter() -> saved`` (set ContextVars, return their tokens) and
    ``_exit(saved)`` (reset them). One object may be entered by several threads or asyncio
    tasks at once, nested inside itself, and used as a decorator of a function that runs in
    several threads: each entry's tokens go on a stack held in a ContextVar, so every thread
    and task restores its own state.

    NOTE: the obvious version keeps the tokens on ``self``. Two threads inside one shared
    object then pop each other's tokens: ``reset`` raises "created in a different Context"
    and the thread's state stays changed after the block.
    """

    def _enter(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def _exit(self, saved) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def __enter__(self):
        saved = self._enter()
        _open_blocks.set((*_open_blocks.get(), (self, saved)))
        return self

    def __exit__(self, *exc_info):
        blocks = _open_blocks.get()
        # the innermost block of this object (a generator may leave its block inside another)
        for i in range(len(blocks) - 1, -1, -1):
            if blocks[i][0] is self:
                break
        else:
            raise RuntimeError(
                f"{type(self).__name__}.__exit__ without a matching __enter__ in this thread "
                "or task; enter and leave a block in the same thread, with a `with` statement"
            )
        _open_blocks.set(blocks[:i] + blocks[i + 1 :])
        self._exit(blocks[i][1])
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self:
                return func(*args, **kwargs)

        return wrapper


class _GradMode(ReentrantContext):
    """Sets grad mode to ``self._mode`` inside a ``with`` block or a decorated function."""

    _mode = True

    def _enter(self):
        return _enabled.set(self._mode)

    def _exit(self, token) -> None:
        _enabled.reset(token)


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
        self._mode = bool(mode)
