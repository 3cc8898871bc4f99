"""Whether ops record the graph: ``no_grad`` turns recording off, as a context or decorator.

Also home of :class:`ReentrantContext`, the base of every context object in the package
(``no_grad`` and friends here, ``amp.auto_cast`` above), which keeps what a ``with`` block must
restore per thread and per asyncio task instead of on the shared object.
"""

from __future__ import annotations

import contextvars
import functools
import inspect

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
        if inspect.isgeneratorfunction(func):
            return self._wrap_generator(func)

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self:
                return func(*args, **kwargs)

        return wrapper

    def _wrap_generator(self, func):
        """``func`` (a generator function) whose every step runs inside the block.

        NOTE: the plain wrapper would leave the block as soon as the generator object is
        made, before its body runs. The caller's code between two steps runs outside, as
        with Paddle's and PyTorch's decorators."""

        @functools.wraps(func)
        def generator(*args, **kwargs):
            gen = func(*args, **kwargs)
            try:
                with self:
                    response = gen.send(None)
                while True:
                    try:
                        request = yield response
                    except GeneratorExit:
                        with self:
                            gen.close()
                        raise
                    except BaseException as exc:
                        with self:
                            response = gen.throw(exc)
                    else:
                        with self:
                            response = gen.send(request)
            except StopIteration as stop:
                return stop.value

        return generator


class _GradMode(ReentrantContext):
    """Sets grad mode to ``self._mode`` inside a ``with`` block or a decorated function."""

    _mode = True

    def _enter(self):
        return _enabled.set(self._mode)

    def _exit(self, token) -> None:
        _enabled.reset(token)


class _Bare(_GradMode):
    """A mode that takes no argument, so it also decorates bare: ``@no_grad`` as
    ``@no_grad()`` (PyTorch takes both; Paddle writes ``@paddle.no_grad()``)."""

    def __new__(cls, func=None):
        if func is None:
            return super().__new__(cls)
        if callable(func):
            return cls()(func)
        raise TypeError(
            f"{cls.__name__}() takes no arguments, got {func!r}: write `with {cls.__name__}():`"
            f", `@{cls.__name__}()` or `@{cls.__name__}`"
        )


class no_grad(_Bare):  # noqa: N801 - Paddle's and PyTorch's name
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


class enable_grad(_Bare):  # noqa: N801
    """Turn recording back on inside a ``no_grad`` region."""

    _mode = True


class set_grad_enabled(_GradMode):  # noqa: N801
    """``with set_grad_enabled(flag):`` records the graph iff ``flag``."""

    def __init__(self, mode: bool):
        self._mode = bool(mode)
