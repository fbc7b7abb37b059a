"""The tracked `threading.Condition`, `Semaphore` and `BoundedSemaphore`.

A Condition's default lock is a tracked RLock named by the Condition's site; a semaphore is
a counting lock (`reading` says how each kind enters the graph, for asyncio's too).  They read the active recorder where the lock types keep it
(`lockcheck.python.tracked._rec`).
"""

from __future__ import annotations

import sys
from typing import Any, Optional

from lockcheck.events import RREAD, WRITE
from lockcheck.python import tracked as _t
from lockcheck.python.sites import creation
from lockcheck.python.tracked import (
    _ORIG_BSEMAPHORE, _ORIG_CONDITION, _ORIG_SEMAPHORE, TrackedRLock, _OrigInstanceCheck, _pass_for,
)

class TrackedCondition(_ORIG_CONDITION, metaclass=_OrigInstanceCheck):
    """`threading.Condition` whose default lock is a tracked RLock keyed by the Condition's site."""

    _lc_orig = _ORIG_CONDITION

    def __init__(self, lock: Any = None) -> None:
        if lock is None and _t._rec is not None:
            created = creation()
            if created is not None:
                lock = TrackedRLock._new(*created)
        super().__init__(lock)




def reading(bounded: bool, bound: int) -> tuple[bool, int]:
    """How a semaphore enters the graph, for `threading`'s and `asyncio`'s alike (the one place):
    (held, mode).  A `Semaphore` is acquire-only (validated as a recursive read, never held:
    permits have no owner, producers release what consumers acquire); a `BoundedSemaphore` is
    held by the acquiring context until released, exclusive for a bound of 1 (a mutex: it takes
    part in cycles), else a recursive read (one context may hold several permits)."""
    if not bounded:
        return False, RREAD
    return True, (WRITE if bound == 1 else RREAD)


class _SemaphoreMixin:
    """Counting locks (see `reading` for how each enters the graph)."""

    _lc: Optional[tuple[str, str]]
    _lc_holders: list
    _lc_held = False  # BoundedSemaphore: held until released; Semaphore: acquire-only

    def _lc_init(self, bounded: bool, bound: int) -> None:
        self._lc = creation(3) if _t._rec is not None else None
        self._lc_holders = []
        self._lc_held, self._lc_rmode = reading(bounded, bound)

    def _lc_mode(self) -> int:
        return self._lc_rmode

    def acquire(self, blocking: bool = True, timeout: Optional[float] = None) -> bool:
        rec = _t._rec
        lc = self._lc
        if rec is None or lc is None:
            return super().acquire(blocking, timeout)  # type: ignore[misc]
        cls, inst = lc
        frame = sys._getframe(1)
        task, comm = rec.thread_task()
        if not blocking or (timeout is not None and rec.settings.timed_is_try):
            ok = super().acquire(blocking, timeout)  # type: ignore[misc]
            if ok and self._lc_held:
                rec.acquired(task, comm, cls, inst, frame, self._lc_mode(), trylock=True)
                self._lc_holders.append(task)
            return ok
        rec.acquired(task, comm, cls, inst, frame, self._lc_mode())
        if not self._lc_held:
            rec.released(task, cls, inst)  # acquire-only: validated, never held
            return super().acquire(blocking, timeout)  # type: ignore[misc]
        try:
            ok = super().acquire(blocking, timeout)  # type: ignore[misc]
        except BaseException:
            rec.released(task, cls, inst)
            raise
        if ok:
            self._lc_holders.append(task)
        else:
            rec.released(task, cls, inst)
        return ok

    __enter__ = acquire

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def release(self, n: int = 1) -> None:
        super().release(n)  # type: ignore[misc]
        rec = _t._rec
        lc = self._lc
        if rec is None or lc is None or not self._lc_held:
            return
        holders = self._lc_holders
        for _ in range(n):
            if not holders:
                break
            task, _comm = rec.thread_task()
            holder = task if task in holders else holders[0]
            holders.remove(holder)
            rec.released(holder, *lc)


class TrackedSemaphore(_SemaphoreMixin, _ORIG_SEMAPHORE, metaclass=_OrigInstanceCheck):
    """`threading.Semaphore`: acquire-only (validated, never held)."""

    _lc_orig = _ORIG_SEMAPHORE

    def __init__(self, value: int = 1) -> None:
        # also called unbound by threading.BoundedSemaphore.__init__ (it names the module global)
        _ORIG_SEMAPHORE.__init__(self, value)
        if type(self) is TrackedSemaphore:
            self._lc_init(False, value)


class TrackedBoundedSemaphore(_SemaphoreMixin, _ORIG_BSEMAPHORE, metaclass=_OrigInstanceCheck):
    """`threading.BoundedSemaphore`: held by the acquiring context until released."""

    _lc_orig = _ORIG_BSEMAPHORE
    _lc_held = True

    def __init__(self, value: int = 1) -> None:
        _ORIG_BSEMAPHORE.__init__(self, value)
        self._lc_init(True, value)


_pass_for(TrackedSemaphore, _ORIG_SEMAPHORE)
_pass_for(TrackedBoundedSemaphore, _ORIG_BSEMAPHORE)
_pass_for(TrackedCondition, _ORIG_CONDITION)
