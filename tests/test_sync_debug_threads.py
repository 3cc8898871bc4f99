"""The sync debug mode belongs to the thread (and asyncio task) that set it.

Each thread starts in ``"default"``, whatever other threads have set; ``set_sync_debug_mode``
and ``with sync_debug_mode(...)`` change only the calling thread's (or task's) mode, so a
thread checking its training step in ``"error"`` does not fail another thread's ``.item()``,
and blocks that overlap in time in two threads each restore their own thread's mode.
(PyTorch's mode is one process-wide setting; see docs/porting.md.)
"""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp.device import (
    SyncError,
    get_sync_debug_mode,
    set_sync_debug_mode,
    sync_debug_mode,
)


@pytest.fixture(autouse=True)
def _default_mode():
    yield
    set_sync_debug_mode("default")


def in_thread(body):
    """Run ``body()`` in a new thread; return what it returned, or raise what it raised."""
    result = {}

    def run():
        try:
            result["value"] = body()
        except BaseException as exc:  # handed to the caller
            result["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive()
    if "error" in result:
        raise result["error"]
    return result["value"]


def test_overlapping_blocks_in_two_threads_each_restore_their_own_mode():
    # A enters "error", B enters "warn", A leaves, B leaves: the order that left the
    # process in "error" when the mode was one global.
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def thread_a():
        with sync_debug_mode("error"):
            a_in.set()
            b_in.wait(10)
            seen["a inside"] = get_sync_debug_mode()
        a_out.set()
        seen["a after"] = get_sync_debug_mode()

    def thread_b():
        a_in.wait(10)
        with sync_debug_mode("warn"):
            b_in.set()
            a_out.wait(10)
            seen["b inside"] = get_sync_debug_mode()
        seen["b after"] = get_sync_debug_mode()

    threads = [threading.Thread(target=thread_a), threading.Thread(target=thread_b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert seen == {"a inside": 2, "b inside": 1, "a after": 0, "b after": 0}
    assert get_sync_debug_mode() == 0
    assert mt.to_tensor([1.5]).item() == 1.5


def test_a_thread_in_error_mode_does_not_fail_another_threads_reads():
    entered, done = threading.Event(), threading.Event()

    def checked_step():
        with sync_debug_mode("error"):
            entered.set()
            done.wait(10)
            with pytest.raises(SyncError):
                mt.to_tensor([1.0]).item()

    thread = threading.Thread(target=checked_step)
    thread.start()
    try:
        assert entered.wait(10)
        assert get_sync_debug_mode() == 0
        assert mt.to_tensor([2.5]).item() == 2.5  # this thread's read: no error
    finally:
        done.set()
        thread.join(timeout=30)


def test_a_new_thread_starts_in_default_mode_whatever_the_others_set():
    set_sync_debug_mode("error")
    assert in_thread(get_sync_debug_mode) == 0
    assert in_thread(lambda: mt.to_tensor([3.0]).item()) == 3.0
    assert get_sync_debug_mode() == 2  # and a thread's setting stays in that thread
    in_thread(lambda: set_sync_debug_mode("warn"))
    assert get_sync_debug_mode() == 2


def test_asyncio_tasks_each_keep_their_own_mode():
    async def checked(started: asyncio.Event, release: asyncio.Event):
        with sync_debug_mode("error"):
            started.set()
            await release.wait()  # another task runs while this one is in "error"
            return get_sync_debug_mode()

    async def unchecked(started: asyncio.Event, release: asyncio.Event):
        await started.wait()
        value = mt.to_tensor([4.0]).item(), get_sync_debug_mode()
        release.set()
        return value

    async def main():
        started, release = asyncio.Event(), asyncio.Event()
        return await asyncio.gather(checked(started, release), unchecked(started, release))

    assert asyncio.run(main()) == [2, (4.0, 0)]


# ---- what the mode may be set to ------------------------------------------------------------
@pytest.mark.parametrize(
    "bad",
    [2.0, 1.0, 0.0, np.float64(2), "2", "ERROR", False, np.bool_(True), [2]],
    ids=repr,
)
def test_a_mode_that_is_not_a_name_or_the_ints_0_1_2_is_refused_and_the_mode_kept(bad):
    set_sync_debug_mode("warn")
    with pytest.raises(ValueError, match=r"'default', 'warn' or 'error'.*ints 0, 1, 2"):
        set_sync_debug_mode(bad)
    assert get_sync_debug_mode() == 1


@pytest.mark.parametrize("given", [0, 1, 2, np.int64(2), np.int32(1)], ids=repr)
def test_python_and_numpy_ints_0_1_2_are_accepted(given):
    set_sync_debug_mode(given)
    assert get_sync_debug_mode() == int(given)
    assert type(get_sync_debug_mode()) is int
