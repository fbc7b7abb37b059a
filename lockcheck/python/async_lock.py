"""The tracked `asyncio.Lock`: held by asyncio tasks, the lock-holding contexts of a loop.

Reads the active recorder where the lock types keep it (`lockcheck.python.tracked._rec`);
a contended acquire is a wait of `lockcheck.python.waitfor.wait_task`.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any, Optional

from lockcheck.python import tracked as _t
from lockcheck.python import waitfor as _waitfor
from lockcheck.python.sites import creation
from lockcheck.python.tracked import _ORIG_ALOCK, SelfDeadlockError, _monotonic, _OrigInstanceCheck, _pass_for

class TrackedAsyncLock(_ORIG_ALOCK, metaclass=_OrigInstanceCheck):
    """`asyncio.Lock` held by asyncio tasks (the lock-holding contexts)."""

    _lc_orig = _ORIG_ALOCK

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lc = creation() if _t._rec is not None else None
        self._lc_holder: Optional[str] = None
        self._lc_since = 0.0

    async def acquire(self) -> bool:
        __tracebackhide__ = True  # pytest: a DeadlockError points at the caller
        rec = _t._rec
        lc = self._lc
        if rec is None or lc is None:
            return await super().acquire()
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
        if _t._rec is not None and holder is not None and self._lc is not None:
            self._lc_holder = None
            _t._rec.released(holder, *self._lc)
        super().release()


_pass_for(TrackedAsyncLock, _ORIG_ALOCK)
