"""The annotations `lockcheck.name` and `lockcheck.nested`, acting on tracked locks.

`name` gives one lock its own class (lockdep's `lockdep_set_class_and_name`); `nested` takes
a lock as subclass N (`mutex_lock_nested`).  Where the compiled core is built, `nested`'s
`__enter__`/`__exit__` are its hit path.
"""

from __future__ import annotations

import sys
from typing import Any, Optional

from lockcheck.python.async_lock import TrackedAsyncLock
from lockcheck.python.core import CORE as _core
from lockcheck.python.core import OWNED_CLASSES
from lockcheck.python.hints import subclass_checked
from lockcheck.python.semaphores import _SemaphoreMixin
from lockcheck.python.sites import registry
from lockcheck.python.tracked import TrackedRLock, _Tracked

def _target(lock: Any) -> Any:
    """The tracked object behind `lock` (a Condition's lock), or None for an untracked one."""
    if isinstance(lock, _Tracked):
        return lock
    inner = getattr(lock, "_lock", None)
    if isinstance(inner, _Tracked):
        return inner
    return None


def class_of(lock: Any) -> Optional[str]:
    """The class `lock` is tracked under (`hints.class_of`), or None."""
    target = _target(lock)
    if target is not None:
        return target._cls
    if isinstance(lock, (_SemaphoreMixin, TrackedAsyncLock)):
        tracked = getattr(lock, "_lc", None)
        return tracked[0] if tracked is not None else None
    return None


def name(lock: Any, class_name: str) -> Any:
    """Give one lock its own lock class (lockdep's `lockdep_set_class_and_name`); returns the lock."""
    target = _target(lock)
    if target is not None:
        target._cls = registry.named(class_name, "lockcheck.name")
        if isinstance(target, TrackedRLock):
            OWNED_CLASSES.add(target._cls)
    elif isinstance(lock, (_SemaphoreMixin, TrackedAsyncLock)) and getattr(lock, "_lc", None) is not None:
        lock._lc = (registry.named(class_name, "lockcheck.name"), lock._lc[1])
    return lock


class _Nested(_core.Nested if _core is not None else object):  # type: ignore[misc]
    """One acquisition of `lock` as subclass N (lockdep's `mutex_lock_nested`).

    With the compiled core, its fields and `__enter__`/`__exit__` are the core's (the hit path of
    a tracked lock, taken as the subclass), which calls `_py_enter`/`_py_exit` for the rest."""

    __slots__ = () if _core is not None else ("lock", "subclass")

    if _core is None:
        def __init__(self, lock: Any, subclass: int) -> None:
            self.lock = lock
            self.subclass = subclass

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        target = _target(self.lock)
        if target is None:
            return self.lock.acquire(blocking, timeout)
        return target._acquire(blocking, timeout, sys._getframe(1), self.subclass)

    def release(self) -> None:
        self.lock.release()

    def _py_enter(self) -> bool:
        target = _target(self.lock)
        if target is None:
            return self.lock.__enter__()
        return target._acquire(True, -1, sys._getframe(1), self.subclass)

    def _py_exit(self, *exc: Any) -> None:
        self.lock.release()

    if _core is None:
        __enter__ = _py_enter
        __exit__ = _py_exit


def nested(lock: Any, subclass: int = 1) -> _Nested:
    """`with lockcheck.nested(child.lock, 1):` takes `lock` as its class's subclass 1 (0..7).

    Use it where two locks of one class are legitimately held together
    (parent then child): the inner one validates as `CLASS/1`.
    """
    return _Nested(lock, subclass_checked(subclass))
