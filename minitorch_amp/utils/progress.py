"""Progress bars for long loops: tqdm's when it is installed and stderr is a terminal.

The examples and benchmarks wrap every loop that can run for more than a few seconds::

    from minitorch_amp.utils.progress import progress, write

    for step in progress(range(steps), desc="O2"):
        ...
    write("epoch 1: loss = 1.25")  # prints above a live bar instead of through it

Without tqdm (the ``examples`` extra brings it), or when stderr is not a terminal (a log file,
a test capturing output), ``progress`` returns the iterable unchanged and ``write`` is
``print``: nothing but the results reaches the output.
"""

from __future__ import annotations

from collections.abc import Iterable

try:
    from tqdm import tqdm as _tqdm
except ImportError:  # pragma: no cover - depends on the installed extras
    _tqdm = None


def progress(iterable: Iterable, desc: str | None = None, total: int | None = None, **kwargs):
    """``iterable``, shown as a tqdm bar on a terminal (removed when done unless ``leave``).

    Example:
        >>> list(progress(range(3), desc="steps"))  # no terminal here: just the items
        [0, 1, 2]
    """
    if _tqdm is None:
        return iterable
    kwargs.setdefault("leave", False)
    kwargs.setdefault("disable", None)  # None: no bar unless stderr is a terminal
    return _tqdm(iterable, desc=desc, total=total, **kwargs)


def write(message: str) -> None:
    """Print ``message`` on stdout without breaking a live progress bar."""
    if _tqdm is None:
        print(message)
    else:
        _tqdm.write(message)
