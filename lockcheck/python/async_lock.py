"""The tracked `asyncio.Lock`: held by asyncio tasks, the lock-holding contexts of a loop.

Reads the active recorder where the lock types keep it (`lockcheck.python.tracked._rec`);
a contended acquire is a wait of `lockcheck.python.waitfor.wait_task`.  Where the compiled core
is built, a free lock's acquire that is a chain-cache hit, and the release of the innermost
lock, are recorded by it (`_trackedcore.async_acquired`/`async_released`, the same events and
held stacks as the Python path, which does everything else).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any, Optional

from lockcheck.python import tracked as _t
from lockcheck.python import waitfor as _waitfor
from lockcheck.python.sites import creation
from lockcheck.python.tracked import _ORIG_ALOCK, SelfDeadlockError, _monotonic, _OrigInstanceCheck, _pass_for

#: the compiled hit path (lockcheck/python/_tracked.c), or None: the pure path (the reference)
_core = _t._core

class TrackedAsyncLock(_ORIG_ALOCK, metaclass=_OrigInstanceCheck):
    """`asyncio.Lock` held by asyncio tasks (the lock-holding contexts)."""

    _lc_orig = _ORIG_ALOCK

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lc = creation() if _t._rec is not None else None
        self._lc_holder: Optional[str] = None
        self._lc_since = 0.0

    #: `async with` may take the hit path itself: `acquire` is this class's (a subclass that
    #: overrides it gets its own `acquire` called, as `asyncio.Lock.__aenter__` calls it)
    _lc_direct = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._lc_direct = cls.acquire is TrackedAsyncLock.acquire

    async def __aenter__(self) -> None:
        """`async with lock:` -- a free lock's hit is taken here, without the `acquire` coroutine
        (the one frame less pays for part of the recording)."""
        __tracebackhide__ = True
        lc = self._lc
        if self._lc_direct and _core is not None and lc is not None and not self._locked and not self._waiters \
                and _t._rec is not None:
            task = _core.async_acquired(lc[0], lc[1], 0)
            if task is not None:
                self._locked = True
                self._lc_holder, self._lc_since = task, _monotonic()
                return None
        await self.acquire()
        return None

    async def __aexit__(self, *exc: Any) -> None:
        self.release()

    async def acquire(self) -> bool:
        __tracebackhide__ = True  # pytest: a DeadlockError points at the caller
        rec = _t._rec
        lc = self._lc
        if rec is None or lc is None:
            return await super().acquire()
        if _core is not None and not self._locked and not self._waiters:
            # free, nobody queued: taken now (no await between the test and the take), and
            # recorded in C when it is a chain-cache hit (`_trackedcore.async_acquired`)
            task = _core.async_acquired(lc[0], lc[1], 0)
            if task is not None:
                self._locked = True
                self._lc_holder, self._lc_since = task, _monotonic()
                return True
        cls, inst = lc
        frame = sys._getframe(1)
        task, comm = rec.async_task()
        if self._lc_holder == task:
            try:
                await asyncio.wait_for(super().acquire(), rec.settings.grace)
            except asyncio.TimeoutError:
                rec.acquired(task, comm, cls, inst, frame)
                rec.released(task, cls, inst)
                raise SelfDeadlockError(
                    f"lockcheck: {task} tries to acquire asyncio lock {cls}@{inst}, which it already holds, "
                    f"and no other task released it within {rec.settings.grace:g}s (possible recursive locking detected)"
                ) from None
            rec.acquired(task, comm, cls, inst, frame)
            self._lc_holder, self._lc_since = task, _monotonic()
            return True
        rec.acquired(task, comm, cls, inst, frame)
        try:
            if self._locked:  # a wait: checked for a cycle of waits first
                await _waitfor.wait_task(self, super().acquire, rec, task, comm, frame)
            else:
                await super().acquire()
        except BaseException:
            rec.released(task, cls, inst)
            raise
        self._lc_holder, self._lc_since = task, _monotonic()
        return True

    def release(self) -> None:
        holder = self._lc_holder
        if holder is not None:
            lc = self._lc
            if lc is not None and _t._rec is not None:
                self._lc_holder = None
                if _core is None or not _core.async_released(lc[0], lc[1], holder):
                    _t._rec.released(holder, *lc)
                elif self._locked:  # asyncio.Lock.release (3.10-3.13), without its frame
                    self._locked = False
                    self._wake_up_first()
                    return
        _release(self)


_release = _ORIG_ALOCK.release  # its own release, without a super() per call
_pass_for(TrackedAsyncLock, _ORIG_ALOCK)
