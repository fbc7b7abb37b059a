"""Locks made by a lock factory (a function that returns a new lock) are classed by the caller's
site when it assigns the result, as the kernel's `mutex_init()` gives each caller its own key."""

from __future__ import annotations

import threading
from collections import defaultdict

from lockcheck.python import instrument as pylocks


class Scheduler:
    """apscheduler's BaseScheduler: every lock made by `_create_lock`, which a subclass may override."""

    def __init__(self) -> None:
        self._jobstores_lock = self._create_lock()
        self._listeners_lock = self._create_lock()

    def _create_lock(self) -> threading.RLock:
        return threading.RLock()

    def start(self) -> None:
        with self._jobstores_lock:
            with self._listeners_lock:  # two locks, always in this order: no problem
                pass


def _make_lock() -> threading.Lock:
    return threading.Lock()


def _made_by_a_factory_of_a_factory() -> threading.Lock:
    return _make_lock()


def test_each_assignment_of_a_factorys_lock_is_its_own_class() -> None:
    with pylocks.instrument() as rec:
        scheduler = Scheduler()
        scheduler.start()
        other = Scheduler()
        other.start()
        first = _made_by_a_factory_of_a_factory()
    assert not rec.findings, [f.kind for f, _ in rec.findings]
    assert scheduler._jobstores_lock._cls == other._jobstores_lock._cls == "Scheduler._jobstores_lock"
    assert scheduler._listeners_lock._cls == "Scheduler._listeners_lock"
    assert first._cls.endswith("first")


def test_a_factorys_locks_not_assigned_stay_one_class() -> None:
    """`defaultdict(make_lock)` makes its locks where a key is first looked up: those sites say
    nothing of what the lock is, so the factory's line stays the class (two of them held together
    is lockdep's recursive locking, as before)."""
    with pylocks.instrument() as rec:
        locks: defaultdict = defaultdict(_make_lock)
        with locks["a"]:
            with locks["b"]:
                pass
    assert locks["a"]._cls == locks["b"]._cls
    assert [f.kind for f, _ in rec.findings] == ["recursive-locking"]
