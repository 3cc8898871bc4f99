"""When the host waits for the device: the sync debug mode, and checks the device reports later.

A GPU runs ahead of Python: a kernel launch returns at once and the host goes on queueing
work. Two things stop that. Reading device data on the host (``loss.item()``,
``float(t)``, ``if t:``, ``t.numpy()``) waits until every queued kernel has finished, so the
GPU drains and idles while Python catches up. And uploading host-built data inside an op
(a table built with NumPy, a list turned into an array) is a transfer that a CUDA graph
cannot record. A training step that does neither can run ahead of the host and can be
captured and replayed as a graph.

:func:`set_sync_debug_mode` (PyTorch's name) makes every such place speak up:

* ``"default"`` (0): nothing is reported;
* ``"warn"`` (1): a ``SyncWarning`` naming the call site;
* ``"error"`` (2): a :class:`SyncError` naming the call site; nothing has been read yet.

The mode belongs to the thread (and asyncio task) that sets it, as ``auto_cast`` does: a
thread checking its training step in ``"error"`` does not fail another thread's reads, and a
new thread starts in ``"default"``. PyTorch's mode is one process-wide setting.

The library calls :func:`host_read` before each of its host reads of device data and
:func:`upload` before each upload of host-built data inside an op. On the NumPy backend the
same calls are made at the same places, although a NumPy "device" array is already on the
host: that is what lets the CPU test suite prove that a training step, after its first
iteration, neither synchronises nor transfers on a GPU. On the GPU in ``"error"`` mode,
CuPy's own detector is also switched on for the calling thread, as a second net for a read
the library forgot to declare (it is per thread, not per task: asyncio tasks sharing a thread
share it).

Deferred checks. Some ops must validate data that lives on the device (a label outside
``[0, classes)``). Checking it on the host would be a synchronisation in every step, so on
the GPU the op ORs the verdict into a persistent device flag (:func:`defer`) and the report
is made at the next host read, which waits for the device anyway: like CUDA's device-side
asserts, the error surfaces at the next synchronisation, one read of a flag later.

Example:
    >>> import minitorch_amp as mt
    >>> from minitorch_amp.backend import sync
    >>> x = mt.to_tensor([1.0, 2.0])
    >>> with sync.sync_debug_mode("error"):
    ...     y = x * 2                      # queued work: fine
    ...     try:
    ...         y.item(0)
    ...     except sync.SyncError as err:
    ...         print(str(err).split(":")[0])
    Tensor.item() synchronises
"""

from __future__ import annotations

import contextlib
import contextvars
import numbers
import os
import sys
import warnings

import numpy as np

from . import device as _device

__all__ = [
    "SyncError",
    "SyncWarning",
    "check",
    "defer",
    "defer_flag",
    "device_flag",
    "get_sync_debug_mode",
    "host_read",
    "run_deferred",
    "set_sync_debug_mode",
    "sync_debug_mode",
    "to_device",
    "upload",
]

_MODES = {"default": 0, "warn": 1, "error": 2}
# The mode of this thread or asyncio task: a thread starts with 0 ("default").
# NOTE: one module global (PyTorch's way) lets a thread checking its step in "error" fail every
# other thread's reads, and two overlapping `with` blocks in two threads leave the process in
# whichever mode the first one saw on entry. A ContextVar is per thread and per task.
_mode = contextvars.ContextVar("minitorch_amp_sync_debug_mode", default=0)
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class SyncError(RuntimeError):
    """A host read or an upload happened while the sync debug mode is ``"error"``."""


class SyncWarning(UserWarning):
    """A host read or an upload happened while the sync debug mode is ``"warn"``."""


def set_sync_debug_mode(debug_mode) -> None:
    """Report host reads of device data and uploads inside ops: PyTorch's function.

    Sets the mode of the calling thread (or asyncio task) only; other threads keep theirs,
    and a new thread starts in ``"default"``. (PyTorch's mode is process-wide.)

    Args:
        debug_mode: ``"default"`` or 0 (silent), ``"warn"`` or 1, ``"error"`` or 2.

    Raises:
        ValueError: any other value (also ``2.0`` or ``True``); the mode is kept.
    """
    if isinstance(debug_mode, str) and debug_mode in _MODES:
        mode = _MODES[debug_mode]
    elif isinstance(debug_mode, numbers.Integral) and not isinstance(debug_mode, bool):
        mode = int(debug_mode) if debug_mode in (0, 1, 2) else None
    else:
        mode = None
    if mode is None:
        raise ValueError(
            "sync debug mode must be 'default', 'warn' or 'error' (or the ints 0, 1, 2), "
            f"got {debug_mode!r}"
        )
    _mode.set(mode)
    _cupy_detector(mode == 2)


def get_sync_debug_mode() -> int:
    """The calling thread's mode as PyTorch returns it: 0 default, 1 warn, 2 error."""
    return _mode.get()


@contextlib.contextmanager
def sync_debug_mode(debug_mode):
    """:func:`set_sync_debug_mode` for a ``with`` block in this thread; the thread's previous
    mode comes back after (also when blocks in other threads overlap it in time)."""
    previous = _mode.get()
    set_sync_debug_mode(debug_mode)
    try:
        yield
    finally:
        set_sync_debug_mode(previous)


def _cupy_detector(on: bool) -> None:
    """CuPy's (deprecated, thread-local) synchronisation detector: on only in error mode."""
    if _device.cupy is None:
        return
    try:
        from cupy._core import syncdetect
    except ImportError:  # a CuPy without it: our own checks still run
        return
    syncdetect._thread_local.allowed = not on


def host_read(what: str) -> None:
    """Declare a host read of device data, or a wait for the device (``what`` names it, e.g.
    ``'Tensor.item()'``).

    Reports it as the mode says, then runs the deferred checks: the read is about to wait
    for the device anyway, so reading their flags costs no extra synchronisation.

    Raises:
        SyncError: in ``"error"`` mode (before anything is read).
    """
    if _mode.get():
        _report(f"{what} synchronises: the host waits until the GPU has done its queued work")
    if _deferred:
        run_deferred()


def upload(what: str) -> None:
    """Declare an upload of host-built data inside an op (``what`` names it).

    Raises:
        SyncError: in ``"error"`` mode (before anything is uploaded).
    """
    if _mode.get():
        _report(f"{what} uploads host data to the device, which a CUDA graph cannot record")


def to_device(value, like, what: str):
    """``value`` as an array on ``like``'s device, declaring an upload if it is host data.

    An array already there is returned as it is. Anything else (a NumPy array for a CuPy
    ``like``, a list, a number) is copied in, and that upload is reported as ``what``; on the
    CPU a NumPy array counts as device data, but a list or a number does not.
    """
    xp = _device.get_array_module(like)
    if _device.get_array_module(value) is xp and _device.is_array(value):
        return value
    upload(what)
    return xp.asarray(value)


def _report(message: str) -> None:
    mode = _mode.get()
    frame = _user_frame()
    where = f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}"
    text = (
        f"{message} (at {where}); set_sync_debug_mode is "
        f"{'error' if mode == 2 else 'warn'}. Keep such reads out of the training step, "
        "or set minitorch_amp.device.set_sync_debug_mode('default')."
    )
    if mode == 2:
        raise SyncError(text)
    warnings.warn_explicit(
        text,
        SyncWarning,
        frame.f_code.co_filename,
        frame.f_lineno,
        module=frame.f_globals.get("__name__"),
        registry=frame.f_globals.setdefault("__warningregistry__", {}),
    )


def _user_frame():
    """The innermost frame outside minitorch_amp: the user's line that caused the report."""
    frame = sys._getframe(1)
    inner = frame
    while frame is not None:
        if not os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE + os.sep):
            return frame
        frame = frame.f_back
    return inner


# ---- checks the device reports at the next host read ----------------------------------------
_deferred: dict = {}


def defer(key, flag, report) -> None:
    """Have ``report(host_value_of_flag)`` run at the next host read (on the CPU: now).

    ``flag`` is a persistent device array that kernels keep writing (an OR of verdicts, a
    counter); ``key`` names the check, so registering it again in every step keeps one
    entry. ``report`` may raise or warn, and returns True to keep the check registered.
    A NumPy flag is already on the host, so its check runs at once: on the CPU an error is
    raised by the call that caused it.
    """
    if isinstance(flag, np.ndarray):
        report(flag)
        return
    _deferred[key] = (flag, report)


def run_deferred() -> None:
    """Read every deferred flag (one small copy each) and let its check report."""
    for key, (flag, report) in list(_deferred.items()):
        if key not in _deferred:  # an earlier report unregistered it
            continue
        del _deferred[key]
        if report(_device.asnumpy(flag)):
            _deferred.setdefault(key, (flag, report))


_flags: dict = {}  # check key -> its persistent device bool [1]


def check(key, bad, values, noun: str, error) -> None:
    """Raise ``error(what)`` if any element of the bool array ``bad`` is set.

    On the CPU at once, with ``what`` naming the first bad value (``f"{noun} {value}"``,
    ``value`` taken from ``values`` at the same position). On the GPU the verdict is ORed
    into a persistent device flag for ``key`` (two small kernels, no host read) and the error
    is raised at the next host read, with ``what`` = ``f"a {noun}"`` and a note that it was
    found on the GPU; the op carries on with whatever safe value it substitutes. ``key``
    names the check (the op and its parameters): nothing in it may change every step.

    Example:
        >>> import numpy as np
        >>> ids = np.array([3, 9])
        >>> check("demo", ids > 5, ids, "id", lambda what: ValueError(f"{what} is too big"))
        Traceback (most recent call last):
        ValueError: id 9 is too big
    """
    if _device.get_array_module(bad) is np:  # (a 0-d comparison gives a NumPy scalar)
        if np.any(bad):
            index = int(np.flatnonzero(bad)[0])
            raise error(f"{noun} {np.asarray(values).flat[index]}")
        return
    flag = device_flag(key, bad)
    _device.cupy.logical_or(flag, bad.any(), out=flag)
    defer_flag(key, flag, noun, error)


def device_flag(key, like):
    """The persistent device bool [1] of check ``key`` on ``like``'s device (made once): what
    :func:`check` ORs its verdict into, and what a kernel that checks its own input sets
    (``cuda/cross_entropy.cu``'s labels). Hand it to :func:`defer_flag` after the launch."""
    key = (key, like.device.id)
    flag = _flags.get(key)
    if flag is None:
        with like.device:
            flag = _flags[key] = _device.cupy.zeros(1, dtype=bool)
    return flag


def defer_flag(key, flag, noun: str, error) -> None:
    """Raise ``error(f"a {noun}")`` at the next host read if ``flag`` (from
    :func:`device_flag` for ``key``) is set then, noting that the GPU found it; the flag is
    cleared first."""

    def report(value):
        if value[0]:
            flag.fill(False)
            found = error(f"a {noun}")
            raise type(found)(f"{found}; found on the GPU, in a step since the last host read")

    defer((key, flag.device.id), flag, report)
