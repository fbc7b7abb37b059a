"""asyncio's Semaphore and BoundedSemaphore are tracked as threading's are
(`lockcheck.python.semaphores.reading`): a bounded mutex takes part in cycles across tasks, a
pool of permits is no false alarm, a signal semaphore adds no dependency of its own, and the
program's own errors (over-release) are raised as plain asyncio raises them."""

from __future__ import annotations

import asyncio

import pytest

import lockcheck.python.instrument as pylocks
from lockcheck.events import RREAD, WRITE
from lockcheck.python.semaphores import reading


def kinds(rec: pylocks.Recorder) -> list[str]:
    return [f.kind for f, _ in rec.findings]


def _ab_ba(kind: str) -> pylocks.Recorder:
    """Task one takes the semaphore then the lock; task two, later, the lock then the semaphore."""
    async def scenario() -> None:
        sem = getattr(asyncio, kind)(1)
        lock = asyncio.Lock()

        async def one() -> None:
            async with sem:
                await asyncio.sleep(0)
                async with lock:
                    pass

        async def two() -> None:
            await asyncio.sleep(0.01)
            async with lock:
                async with sem:
                    pass

        await asyncio.gather(one(), two())

    with pylocks.instrument() as rec:
        asyncio.run(scenario())
    return rec


def test_the_reading_is_one_for_threading_and_asyncio() -> None:
    assert reading(False, 1) == (False, RREAD)
    assert reading(True, 1) == (True, WRITE)
    assert reading(True, 3) == (True, RREAD)


def test_patched_and_restored() -> None:
    originals = asyncio.Semaphore, asyncio.BoundedSemaphore
    with pylocks.instrument():
        sem, bsem = asyncio.Semaphore(2), asyncio.BoundedSemaphore(1)
        assert isinstance(sem, originals[0]) and isinstance(bsem, originals[1])
        assert type(sem).__name__ == "Semaphore" and type(bsem).__module__ == "asyncio.locks"
        assert sem._lc is not None and bsem._lc is not None
    assert (asyncio.Semaphore, asyncio.BoundedSemaphore) == originals
    assert (asyncio.locks.Semaphore, asyncio.locks.BoundedSemaphore) == originals


def test_bounded_semaphore_1_ab_ba_across_tasks_is_found() -> None:
    rec = _ab_ba("BoundedSemaphore")
    assert kinds(rec) == ["circular-dependency"]
    assert rec.findings[0][0].task.startswith("Task-")


def test_semaphore_1_ab_ba_follows_the_threading_reading() -> None:
    """A plain `Semaphore(1)` is acquire-only as `threading.Semaphore(1)` is: validated under
    the lock (lock -> sem), never held, so the other order adds nothing and no cycle closes;
    one reading for both libraries (`reading`)."""
    rec = _ab_ba("Semaphore")
    assert kinds(rec) == []
    graph = rec.checker.graph
    under_lock = set(graph.successors("_ab_ba.scenario.lock"))
    assert len(under_lock) == 1  # the semaphore: waited for under the lock
    assert not set(graph.successors(under_lock.pop()))  # never held: nothing taken under it


@pytest.mark.parametrize("make", [lambda: asyncio.Semaphore(3), lambda: asyncio.BoundedSemaphore(3)],
                         ids=["Semaphore", "BoundedSemaphore"])
def test_a_pool_of_permits_is_no_false_alarm(make) -> None:
    """Workers each take a permit, then a shared lock, and the lock alone after."""
    async def scenario() -> None:
        pool = make()
        lock = asyncio.Lock()

        async def worker(i: int) -> None:
            async with pool:
                await asyncio.sleep(0)
                async with lock:
                    pass
            async with lock:
                pass

        await asyncio.gather(*(worker(i) for i in range(9)))

    with pylocks.instrument() as rec:
        asyncio.run(scenario())
    assert kinds(rec) == []
    assert rec.checker.stats.events >= 9 * 3


def test_held_bounded_permits_are_released_on_the_holders_stack() -> None:
    """A permit released by another task (a hand-off) leaves the acquiring task's stack."""
    async def scenario(rec: pylocks.Recorder) -> None:
        sem = asyncio.BoundedSemaphore(2)
        await sem.acquire()
        holders = list(sem._lc_holders)
        assert len(holders) == 1
        assert len(rec.checker.tasks[holders[0]].held) == 1
        await asyncio.get_running_loop().create_task(_release(sem))
        assert sem._lc_holders == []
        assert rec.checker.tasks[holders[0]].held == []

    async def _release(sem) -> None:
        sem.release()

    with pylocks.instrument() as rec:
        asyncio.run(scenario(rec))
    assert kinds(rec) == []


def test_bounded_over_release_raises_as_plain_asyncio() -> None:
    async def scenario() -> str:
        sem = asyncio.BoundedSemaphore(1)
        async with sem:
            pass
        with pytest.raises(ValueError) as info:
            sem.release()
        return str(info.value)

    plain = asyncio.run(scenario())
    with pylocks.instrument() as rec:
        tracked = asyncio.run(scenario())
    assert tracked == plain == "BoundedSemaphore released too many times"
    assert kinds(rec) == []


def test_cancelled_acquire_leaves_nothing_held() -> None:
    async def scenario(rec: pylocks.Recorder) -> None:
        sem = asyncio.BoundedSemaphore(1)
        await sem.acquire()
        waiter = asyncio.ensure_future(sem.acquire())
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        sem.release()
        assert sem._lc_holders == []

    with pylocks.instrument() as rec:
        asyncio.run(scenario(rec))
    assert kinds(rec) == []
    assert all(not t.held for t in rec.checker.tasks.values())


def test_a_subclass_acquire_is_called_by_async_with() -> None:
    """`async with` on a subclass that overrides `acquire` calls it, as plain asyncio does (the
    tracked `__aenter__` takes the hit path itself only for the tracked types' own `acquire`)."""
    calls: list[str] = []

    async def scenario() -> None:
        class CountingLock(asyncio.Lock):
            async def acquire(self) -> bool:
                calls.append("lock")
                return await super().acquire()

        class CountingSemaphore(asyncio.BoundedSemaphore):
            async def acquire(self) -> bool:
                calls.append("sem")
                return await super().acquire()

        lock, sem = CountingLock(), CountingSemaphore(1)
        for _ in range(2):
            async with lock:
                async with sem:
                    pass

    with pylocks.instrument() as rec:
        asyncio.run(scenario())
    assert calls == ["lock", "sem"] * 2
    assert kinds(rec) == []
    assert rec.checker.stats.events >= 8
