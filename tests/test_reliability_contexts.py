"""One ``auto_cast`` or grad-mode object may be entered by several threads, tasks or frames.

What an object restores on exit (the AMP state, grad mode, the cast cache) is saved per
thread and per asyncio task, never on the object: two threads inside the same ``with ctx:``
each see the state it sets, and each gets its own state back when it leaves. The same object
nests inside itself, and a decorated function may run in several threads at once.
"""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

import minitorch_amp as mt
from minitorch_amp import amp
from minitorch_amp.backend import cast_counter

F16, F32 = np.dtype("float16"), np.dtype("float32")
ITERATIONS = 200


def in_two_threads(body) -> None:
    """Run ``body(barrier)`` in two threads at once; re-raise the first failure here."""
    barrier = threading.Barrier(2, timeout=10)
    errors = []

    def run():
        try:
            body(barrier)
        except BaseException as exc:  # reported in the main thread
            errors.append(exc)
            barrier.abort()  # the other thread stops waiting instead of hanging

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:  # a broken barrier only says that the other thread failed first
        real = [e for e in errors if not isinstance(e, threading.BrokenBarrierError)]
        raise (real or errors)[0]


def amp_off_and_grad_on() -> bool:
    return amp.amp_state() is None and mt.is_grad_enabled()


def matmul_dtype():
    return mt.matmul(mt.ones([2, 3]), mt.ones([3, 2])).dtype


# grad-mode objects that turn recording off, by name
GRAD_OFF = {"no_grad": mt.no_grad, "set_grad_enabled(False)": lambda: mt.set_grad_enabled(False)}


def test_one_auto_cast_shared_by_two_threads_casts_inside_and_is_off_after():
    ctx = amp.auto_cast(level="O2", use_promote=False)

    def body(barrier):
        for _ in range(ITERATIONS):
            with ctx:
                barrier.wait()  # both threads are inside the same object now
                state = amp.amp_state()
                assert state is not None and state.level == "O2" and not state.use_promote
                assert matmul_dtype() == F16
                assert mt.exp(mt.ones([2])).dtype == F16  # black at O1, fp16 here
                barrier.wait()  # and neither has left yet
            assert amp.amp_state() is None
            assert matmul_dtype() == F32

    in_two_threads(body)
    assert amp.amp_state() is None


@pytest.mark.parametrize("name", GRAD_OFF)
def test_one_grad_mode_object_shared_by_two_threads(name):
    ctx = GRAD_OFF[name]()
    w = mt.ones([2])
    w.stop_gradient = False

    def body(barrier):
        for _ in range(ITERATIONS):
            with ctx:
                barrier.wait()
                assert not mt.is_grad_enabled(), name
                assert (w * 2).stop_gradient
                barrier.wait()
            assert mt.is_grad_enabled()
            assert not (w * 2).stop_gradient

    in_two_threads(body)
    assert mt.is_grad_enabled()


def test_one_enable_grad_shared_by_two_threads_inside_their_own_no_grad():
    ctx = mt.enable_grad()

    def body(barrier):
        with mt.no_grad():
            for _ in range(ITERATIONS):
                with ctx:
                    barrier.wait()
                    assert mt.is_grad_enabled()
                    barrier.wait()
                assert not mt.is_grad_enabled()
        assert mt.is_grad_enabled()

    in_two_threads(body)


def test_a_thread_never_sees_the_state_another_thread_set():
    # while one thread is inside no_grad, the other, inside auto_cast, still records the graph;
    # and the first still runs in float32
    cast, no_grad = amp.auto_cast(), mt.no_grad()
    roles = iter(["cast", "no_grad"])
    lock = threading.Lock()

    def body(barrier):
        with lock:
            role = next(roles)
        for _ in range(ITERATIONS):
            with cast if role == "cast" else no_grad:
                barrier.wait()
                if role == "cast":
                    assert amp.amp_state() is not None and mt.is_grad_enabled()
                else:
                    assert amp.amp_state() is None and not mt.is_grad_enabled()
                barrier.wait()
            assert amp_off_and_grad_on()

    in_two_threads(body)


def test_the_same_object_nests_inside_itself():
    cast, no_grad = amp.auto_cast(level="O2"), mt.no_grad()
    with cast:
        with no_grad, cast:
            with no_grad:
                assert amp.amp_state().level == "O2" and not mt.is_grad_enabled()
            assert amp.amp_state().level == "O2" and not mt.is_grad_enabled()
        assert amp.amp_state().level == "O2" and mt.is_grad_enabled()
        with amp.auto_cast(enable=False):
            with cast:
                assert amp.amp_state().level == "O2"
            assert amp.amp_state() is None  # the inner exit restored "off", not "O2"
        assert amp.amp_state().level == "O2"
    assert amp_off_and_grad_on()


def test_a_parameter_is_cast_once_until_the_outermost_exit_of_a_nested_object():
    cast = amp.auto_cast()
    w = mt.ones([3, 2])
    w.stop_gradient = False
    x = mt.ones([2, 3]).astype("float16")
    cast_counter.reset_cast_counts()
    with cast:
        mt.matmul(x, w)
        with cast:
            mt.matmul(x, w)  # the inner exit must not drop the outer region's cache
        mt.matmul(x, w)
    assert cast_counter.cast_counts()["weight"] == 1
    with cast:
        mt.matmul(x, w)  # a new outermost region: a new cache
    assert cast_counter.cast_counts()["weight"] == 2


def test_a_decorated_function_runs_in_two_threads_at_once():
    @amp.auto_cast(level="O2", use_promote=False)
    def cast_step(barrier):
        barrier.wait()
        assert amp.amp_state().level == "O2"
        assert mt.exp(mt.ones([2])).dtype == F16
        barrier.wait()

    @mt.no_grad()
    def frozen_step(barrier):
        barrier.wait()
        assert not mt.is_grad_enabled()
        barrier.wait()

    def body(barrier):
        for _ in range(ITERATIONS):
            cast_step(barrier)
            assert amp.amp_state() is None
            frozen_step(barrier)
            assert mt.is_grad_enabled()

    in_two_threads(body)


def test_a_decorated_function_may_call_itself():
    @amp.auto_cast(level="O2")
    def depth(n):
        assert amp.amp_state().level == "O2"
        return 0 if n == 0 else 1 + depth(n - 1)

    assert depth(5) == 5
    assert amp.amp_state() is None


def test_asyncio_tasks_sharing_one_object_each_get_their_state_back():
    cast, no_grad = amp.auto_cast(), mt.no_grad()

    async def task(first_in: bool):
        for _ in range(20):
            with cast, no_grad:
                # the other task enters and leaves while this one waits inside
                await asyncio.sleep(0 if first_in else 0.0001)
                assert amp.amp_state() is not None and not mt.is_grad_enabled()
            assert amp_off_and_grad_on()

    async def main():
        await asyncio.gather(task(True), task(False))

    asyncio.run(main())
    assert amp_off_and_grad_on()


@pytest.mark.parametrize("make", [amp.auto_cast, mt.no_grad], ids=["auto_cast", "no_grad"])
def test_exit_without_enter_in_this_thread_says_so_and_changes_nothing(make):
    ctx = make()
    with pytest.raises(RuntimeError, match="without a matching __enter__ in this thread"):
        ctx.__exit__(None, None, None)
    entered = threading.Event()
    leave = threading.Event()

    def holder():
        with ctx:
            entered.set()
            leave.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    entered.wait(10)
    try:  # the other thread's block is not this thread's to leave
        with pytest.raises(RuntimeError, match="without a matching __enter__ in this thread"):
            ctx.__exit__(None, None, None)
    finally:
        leave.set()
        thread.join()
    assert amp_off_and_grad_on()


@pytest.mark.parametrize("arg", ["custom_white_list", "custom_black_list"])
def test_a_lone_op_name_is_refused_with_the_advice_to_wrap_it_in_a_list(arg):
    # a string is iterable: "exp" used to be read as the ops 'e', 'x', 'p'
    with pytest.raises(TypeError, match=rf"{arg} must be a list or set of op names.*\['exp'\]"):
        amp.auto_cast(**{arg: "exp"})
    with pytest.raises(TypeError, match=rf"{arg} must be a list or set of op names, got 3"):
        amp.auto_cast(**{arg: 3})
    assert amp.amp_state() is None
    with amp.auto_cast(**{arg: ("exp",)}):
        assert mt.exp(mt.ones([2])).dtype == (F16 if arg == "custom_white_list" else F32)
