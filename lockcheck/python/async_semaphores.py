"""The tracked `asyncio.Semaphore` and `asyncio.BoundedSemaphore`, held by asyncio tasks.

They enter the graph as `threading`'s do (`lockcheck.python.semaphores.reading`, the one
place): a `Semaphore` is acquire-only, a `BoundedSemaphore` is held by the acquiring task until
released (exclusive for a bound of 1).  A permit has no owner, so a contended acquire is no wait
of the wait-for detector (`lockcheck.python.waitfor`): nobody is known to hold what it waits for.
Where the compiled core is built, a free permit's acquire that is a chain-cache hit is recorded
by it, as `asyncio.Lock`'s is (`lockcheck.python.async_lock`).
"""

from __future__ import annotations

import asyncio.locks
import sys
from typing import Optional

from lockcheck.python import tracked as _t
from lockcheck.python.semaphores import reading
from lockcheck.python.sites import creation
from lockcheck.python.tracked import _OrigInstanceCheck, _pass_for

#: the compiled hit path (lockcheck/python/_tracked.c), or None: the pure path (the reference)
_core = _t._core

#: the originals, captured at import (before anything is patched)
_ORIG_ASEMAPHORE = asyncio.locks.Semaphore
_ORIG_ABSEMAPHORE = asyncio.locks.BoundedSemaphore


class _AsyncSemaphoreMixin:
    """What both tracked asyncio semaphores add to the original: the events of `reading`."""

    _lc: Optional[tuple[str, str]] = None
    _lc_held = False
    _lc_mode = 0

    def _lc_init(self, bounded: bool, bound: int) -> None:
        self._lc = creation(3) if _t._rec is not None else None
        self._lc_holders: list = []
        self._lc_held, self._lc_mode = reading(bounded, bound)

    def _lc_fast(self, lc: tuple[str, str]) -> bool:
        """A free permit, nobody queued: taken now (no await between the test and the take) if
        the compiled core records the acquire as a chain-cache hit (and, acquire-only, its
        release); False: nothing was done, the Python path does it all."""
        task = _core.async_acquired(lc[0], lc[1], self._lc_mode)
        if task is None:
            return False
        if self._lc_held:
            self._lc_holders.append(task)
        elif not _core.async_released(lc[0], lc[1], task):
            _t._rec.released(task, lc[0], lc[1])  # type: ignore[union-attr]
        self._value -= 1  # type: ignore[attr-defined]
        return True

    #: `async with` may take the hit path itself (see `lockcheck.python.async_lock`)
    _lc_direct = True

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)  # type: ignore[call-arg]
        cls._lc_direct = cls.acquire is _AsyncSemaphoreMixin.acquire

    async def __aenter__(self) -> None:
        __tracebackhide__ = True
        lc = self._lc
        if self._lc_direct and _core is not None and lc is not None and self._value > 0 and not self._waiters \
                and _t._rec is not None and self._lc_fast(lc):  # type: ignore[attr-defined]
            return None
        await self.acquire()
        return None

    async def __aexit__(self, *exc: object) -> None:
        self.release()

    async def acquire(self) -> bool:
        __tracebackhide__ = True  # pytest: a finding raised here points at the caller
        rec = _t._rec
        lc = self._lc
        if rec is None or lc is None:
            return await super().acquire()  # type: ignore[misc]
        if _core is not None and self._value > 0 and not self._waiters and self._lc_fast(lc):  # type: ignore[attr-defined]
            return True
        cls, inst = lc
        task, comm = rec.async_task()
        rec.acquired(task, comm, cls, inst, sys._getframe(1), self._lc_mode)
        if not self._lc_held:
            rec.released(task, cls, inst)  # acquire-only: validated, never held
            return await super().acquire()  # type: ignore[misc]
        try:
            await super().acquire()  # type: ignore[misc]
        except BaseException:
            rec.released(task, cls, inst)
            raise
        self._lc_holders.append(task)
        return True

    def release(self) -> None:
        super().release()  # type: ignore[misc]  # BoundedSemaphore's ValueError: nothing recorded
        rec = _t._rec
        lc = self._lc
        holders = self._lc_holders if lc is not None else None
        if rec is None or not holders:
            return
        if len(holders) == 1:
            holder = holders.pop()  # the releasing task's, or (another task's release) the oldest
        else:
            task = _core.async_task_key() if _core is not None else None
            if task is None:
                task, _comm = rec.async_task()
            holder = task if task in holders else holders[0]  # a release by another task: the oldest permit
            holders.remove(holder)
        if _core is None or not _core.async_released(lc[0], lc[1], holder):  # type: ignore[index]
            rec.released(holder, *lc)  # type: ignore[misc]


class TrackedAsyncSemaphore(_AsyncSemaphoreMixin, _ORIG_ASEMAPHORE, metaclass=_OrigInstanceCheck):
    """`asyncio.Semaphore`: acquire-only (validated, never held)."""

    _lc_orig = _ORIG_ASEMAPHORE

    def __init__(self, value: int = 1) -> None:
        _ORIG_ASEMAPHORE.__init__(self, value)
        self._lc_init(False, value)


class TrackedAsyncBoundedSemaphore(_AsyncSemaphoreMixin, _ORIG_ABSEMAPHORE, metaclass=_OrigInstanceCheck):
    """`asyncio.BoundedSemaphore`: held by the acquiring task until released."""

    _lc_orig = _ORIG_ABSEMAPHORE

    def __init__(self, value: int = 1) -> None:
        _ORIG_ABSEMAPHORE.__init__(self, value)
        self._lc_init(True, value)


_pass_for(TrackedAsyncSemaphore, _ORIG_ASEMAPHORE)
_pass_for(TrackedAsyncBoundedSemaphore, _ORIG_ABSEMAPHORE)

__all__ = ["TrackedAsyncBoundedSemaphore", "TrackedAsyncSemaphore"]
