"""lockcheck.python.instrument without pytest's plugin: `instrument()` around plain code."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import threading

import pytest

import lockcheck
from lockcheck.python import instrument as pylocks, tracked

_thread_lock_type = type(tracked._ORIG_LOCK())


def kinds(rec: pylocks.Recorder) -> list[str]:
    return [finding.kind for finding, _ in rec.findings]


def test_abba_across_threads_is_found_before_the_deadlock() -> None:
    # a real ABBA deadlock; timed acquires validated as blocking so the test ends
    with pylocks.instrument(timed_is_try=False) as rec:
        a = threading.Lock()
        b = threading.Lock()
        barrier = threading.Barrier(2)
        results = []

        def one(first, second):
            with first:
                barrier.wait()
                got = second.acquire(timeout=0.3)
                results.append(got)
                if got:
                    second.release()

        t1 = threading.Thread(target=one, args=(a, b))
        t2 = threading.Thread(target=one, args=(b, a))
        t1.start(); t2.start(); t1.join(10); t2.join(10)
    assert False in results  # the program really deadlocked (until its timeout)
    assert kinds(rec) == ["circular-dependency"]
    finding = rec.findings[0][0]
    assert sorted(finding.cycle) == ["test_abba_across_threads_is_found_before_the_deadlock.a",
                                     "test_abba_across_threads_is_found_before_the_deadlock.b"]


def test_timed_acquire_is_a_trylock_by_default() -> None:
    with pylocks.instrument() as rec:
        a = threading.Lock()
        b = threading.Lock()
        with a:
            with b:
                pass
        with b:
            assert a.acquire(timeout=1)
            a.release()
            assert a.acquire(blocking=False)
            a.release()
    assert rec.findings == []


def test_class_names_and_sites() -> None:
    class Cache:
        def __init__(self) -> None:
            self._lock = threading.Lock()

    with pylocks.instrument():
        cache = Cache()
        local = threading.RLock()
        renamed = lockcheck.name(threading.Lock(), "db.pool")
        cond = threading.Condition()
    assert lockcheck.class_of(cache._lock) == "test_class_names_and_sites.Cache._lock"  # a local class
    assert lockcheck.class_of(local) == "test_class_names_and_sites.local"
    assert lockcheck.class_of(renamed) == "db.pool"
    assert lockcheck.class_of(cond) == "test_class_names_and_sites.cond"  # a Condition: its lock's class


def test_behaviour_is_unchanged() -> None:
    original_condition = threading.Condition()
    with pylocks.instrument() as rec:
        lock = threading.Lock()
        assert "unlocked" in repr(lock) and not lock.locked()
        with lock:
            assert "locked" in repr(lock) and lock.locked()
        cond = threading.Condition()
        assert isinstance(cond, threading.Condition)
        assert isinstance(original_condition, threading.Condition)
        assert isinstance(threading.Semaphore(2), threading.Semaphore)
        assert isinstance(asyncio.Lock(), asyncio.Lock)
        with pytest.raises(RuntimeError):
            lock.release()  # the program's error to see, not a finding
        with pytest.raises(RuntimeError):
            threading.RLock().release()
    assert rec.findings == []
    assert rec.bad_releases == 2
    assert threading.Lock is tracked._ORIG_LOCK and threading.Condition is tracked._ORIG_CONDITION
    assert type(threading.Lock()) is _thread_lock_type


def test_release_by_another_thread_is_recorded_for_the_holder() -> None:
    with pylocks.instrument(grace=5) as rec:
        signal = threading.Lock()
        signal.acquire()
        threading.Timer(0.05, signal.release).start()
        signal.acquire()  # returns once the timer thread released it
        signal.release()
        outer = threading.Lock()
        with outer:
            pass
    assert rec.findings == []


def test_self_deadlock_raises() -> None:
    with pylocks.instrument(grace=0.05) as rec:
        lock = threading.Lock()
        with lock:
            with pytest.raises(pylocks.SelfDeadlockError):
                lock.acquire()
        with lock:  # the failed acquire left nothing behind
            pass
    assert kinds(rec) == ["recursive-locking"]


def test_nested_annotation() -> None:
    class Node:
        def __init__(self) -> None:
            self.lock = threading.Lock()

    with pylocks.instrument() as rec:
        parent, child = Node(), Node()
        with parent.lock, lockcheck.nested(child.lock, 1):
            pass
    assert rec.findings == []
    with pylocks.instrument() as rec:
        parent, child = Node(), Node()
        with parent.lock, child.lock:
            pass
    assert kinds(rec) == ["recursive-locking"]


def test_stdlib_users_are_clean() -> None:
    with pylocks.instrument() as rec:
        q: queue.Queue = queue.Queue(maxsize=4)

        def produce() -> None:
            for i in range(100):
                q.put(i)

        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            futures = [pool.submit(produce) for _ in range(2)]
            got = [q.get() for _ in range(200)]
            concurrent.futures.wait(futures)
        logging.getLogger("lockcheck-test").warning("tracked too")
    assert sorted(got) == sorted(list(range(100)) * 2)
    assert rec.findings == []
    assert rec.checker.stats.events > 0


def test_semaphores() -> None:
    with pylocks.instrument() as rec:
        items = threading.Semaphore(0)  # a signal: acquire-only, never held
        guard = threading.Lock()

        def producer() -> None:
            for _ in range(20):
                with guard:
                    items.release()

        t = threading.Thread(target=producer)
        t.start()
        for _ in range(20):
            items.acquire()
            with guard:
                pass
        t.join()
    assert rec.findings == []

    with pylocks.instrument() as rec:
        mutex = threading.BoundedSemaphore(1)  # a mutex: held, takes part in cycles
        other = threading.Lock()
        with mutex:
            with other:
                pass
        with other:
            with mutex:
                pass
    assert kinds(rec) == ["circular-dependency"]


def test_module_globals_made_before_start_are_tracked() -> None:
    original = logging._lock
    with pylocks.instrument():
        assert isinstance(logging._lock, tracked.TrackedRLock)
        assert logging._lock._real is original
    assert logging._lock is original


def test_asyncio_tasks_are_contexts() -> None:
    async def scenario() -> None:
        a = asyncio.Lock()
        b = asyncio.Lock()

        async def one() -> None:
            async with a:
                await asyncio.sleep(0)
                async with b:
                    pass

        async def two() -> None:
            await asyncio.sleep(0.01)
            async with b:
                async with a:
                    pass

        await asyncio.gather(one(), two())

    with pylocks.instrument() as rec:
        asyncio.run(scenario())
    assert kinds(rec) == ["circular-dependency"]
    assert rec.findings[0][0].task.startswith("Task-")


def test_condition_wait_is_release_and_reacquire() -> None:
    with pylocks.instrument() as rec:
        cond = threading.Condition()
        ready = []
        waiting = threading.Event()

        def notifier() -> None:
            waiting.wait(10)
            with cond:  # taken only once the main thread's wait has released it
                ready.append(True)
                cond.notify_all()

        def predicate() -> bool:
            waiting.set()  # wait_for asks before it waits: the notifier can only get in then
            return bool(ready)

        threading.Thread(target=notifier).start()
        with cond:
            assert cond.wait_for(predicate, timeout=10)
    assert rec.findings == []
    events = rec.checker.stats.events
    assert events >= 6  # acquire, release (wait), acquire (woken), release; the notifier's pair


def test_isinstance_of_threading_lock_behaves_as_without_instrumentation() -> None:
    """`threading.Lock` is a function up to 3.12 (isinstance raises) and a class from 3.13
    (isinstance works): instrumented, both tracked and raw locks answer as a raw lock would."""
    def check(lock):
        try:
            return ("isinstance", isinstance(lock, threading.Lock))
        except TypeError:
            return ("TypeError",)

    raw = threading.Lock()
    expected = check(raw)
    with pylocks.instrument():
        tracked = threading.Lock()
        assert type(tracked) is not type(raw)
        assert check(tracked) == expected
        assert check(raw) == expected


def test_class_of_an_untracked_lock_is_none() -> None:
    assert lockcheck.class_of(threading.Lock()) is None  # made outside instrumentation
    assert lockcheck.class_of(object()) is None
