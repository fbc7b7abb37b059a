"""Annotations for legitimate lock patterns: `lockcheck.name` and `lockcheck.nested`; and
`lockcheck.class_of`, the class name a lock is reported under.

Safe to call from production code: when lockcheck is not instrumenting
(`lockcheck.python.naming` never imported), they cost one dict lookup and leave
the lock alone.

>>> import threading, lockcheck
>>> lock = lockcheck.name(threading.Lock(), "db.pool_lock")
>>> with lockcheck.nested(lock, 1):
...     pass
"""

from __future__ import annotations

import sys
from typing import Any, Optional

from lockcheck.events import MAX_SUBCLASS


def name(lock: Any, class_name: str) -> Any:
    """Give `lock` its own lock class called `class_name` (lockdep's `lockdep_set_class_and_name`).

    Use it when one creation site makes locks with different roles (a
    factory function): each role gets a class, and their orders are
    checked separately.  Returns `lock`.
    """
    naming = sys.modules.get("lockcheck.python.naming")  # loaded with the patching that tracks locks
    if naming is None:
        return lock
    return naming.name(lock, class_name)


def class_of(lock: Any) -> Optional[str]:
    """The lock class lockcheck reports `lock` under, as suppressions, `order=` and `--order`
    spell it (`app.db.Pool._lock`); None when the lock is not tracked (no instrumentation, or a
    lock made before it started).  Lets a test or a suppression file name a class without
    guessing how lockcheck derives names from creation sites."""
    naming = sys.modules.get("lockcheck.python.naming")
    if naming is None:
        return None
    return naming.class_of(lock)


def subclass_checked(subclass: int) -> int:
    """`subclass`, refused outside lockdep's range here, where the user's call is, rather than as
    a class name no trace can hold later."""
    if not 0 <= subclass <= MAX_SUBCLASS:
        raise ValueError(f"lockcheck.nested: subclass must be 0..{MAX_SUBCLASS} (lockdep's MAX_LOCKDEP_SUBCLASSES)")
    return subclass


def nested(lock: Any, subclass: int = 1) -> Any:
    """A context manager taking `lock` as subclass `subclass` of its class (lockdep's `mutex_lock_nested`).

    ``with parent.lock, lockcheck.nested(child.lock, 1): ...`` -- two locks
    of one class held together on purpose, the inner one validated as
    `CLASS/1`.  Also has `acquire()`/`release()`.
    """
    subclass_checked(subclass)
    naming = sys.modules.get("lockcheck.python.naming")  # loaded with the patching that tracks locks
    if naming is None:
        return _Plain(lock)
    return naming._Nested(lock, subclass)  # `naming.nested` without its second range check


class _Plain:
    """`nested()` without instrumentation: the lock itself, acquired as usual."""

    __slots__ = ("lock",)

    def __init__(self, lock: Any) -> None:
        self.lock = lock

    def acquire(self, *args: Any, **kwargs: Any) -> Any:
        return self.lock.acquire(*args, **kwargs)

    def release(self) -> None:
        self.lock.release()

    def __enter__(self) -> Any:
        return self.lock.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        return self.lock.__exit__(*exc)
