"""``add_note``: a line added to an exception on its way up, on every supported Python.

The all-or-nothing paths (``Layer.to``, ``set_state_dict``, the optimizer's step) let the
original error through and add what they put back. ``BaseException.add_note`` exists from
Python 3.11, whose tracebacks print ``exc.__notes__`` under the message. On Python 3.10
the note still goes into ``__notes__`` (code that reads the notes sees the same list), and,
since 3.10 prints no notes, it is also appended to the message when the exception keeps its
message as ``args[0]`` and prints it as it is (``RuntimeError``, ``ValueError``...). An
exception with its own ``__str__`` (``KeyError``, ``OSError``) keeps its message: its
arguments mean more than text.
"""

from __future__ import annotations

# Python 3.11+; a test sets it to False to run the 3.10 path on a newer Python
HAS_BUILTIN_ADD_NOTE = hasattr(BaseException, "add_note")


def add_note(exc: BaseException, note: str) -> None:
    """Add ``note`` to ``exc`` so that its traceback shows it, on Python 3.10 too.

    Example:
        >>> exc = RuntimeError("disk full")
        >>> add_note(exc, "nothing was written")
        >>> exc.__notes__
        ['nothing was written']
    """
    if HAS_BUILTIN_ADD_NOTE:
        exc.add_note(note)
    else:
        add_note_without_builtin(exc, note)


def add_note_without_builtin(exc: BaseException, note: str) -> None:
    r"""Python 3.10's ``add_note``: ``__notes__`` as 3.11 keeps it, and the note in the message.

    Example:
        >>> exc = RuntimeError("disk full")
        >>> add_note_without_builtin(exc, "nothing was written")
        >>> exc.__notes__, str(exc)
        (['nothing was written'], 'disk full\nnothing was written')
    """
    notes = getattr(exc, "__notes__", None)
    if not isinstance(notes, list):
        notes = []
    notes.append(note)
    exc.__notes__ = notes
    if type(exc).__str__ is not BaseException.__str__:
        return
    if not exc.args:
        exc.args = (note,)
    elif len(exc.args) == 1 and isinstance(exc.args[0], str):
        exc.args = (f"{exc.args[0]}\n{note}",)
