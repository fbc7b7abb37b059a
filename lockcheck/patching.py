"""Switching tracking on and off: the patched `threading`/`asyncio` names, and locks made before.

`start(recorder)` makes the recorder the active one, replaces the lock
factories (`threading.Lock`, `RLock`, `Condition`, `Semaphore`,
`BoundedSemaphore`, `asyncio.Lock`) by the tracked types of
`lockcheck.tracked`, and wraps the raw locks already bound to module
globals; `stop()` undoes all of it.  `instrument()` is both as a context
manager.
"""

from __future__ import annotations

import _thread
import asyncio
import asyncio.locks
import sys
import threading
from contextlib import contextmanager
from typing import Any, Iterator, Optional

from lockcheck import pysites, tracked
from lockcheck.recorder import Recorder
from lockcheck.tracked import (
    _ORIG_LOCK, _ORIG_RLOCK, TrackedAsyncLock, TrackedBoundedSemaphore, TrackedCondition, TrackedLock,
    TrackedRLock, TrackedSemaphore, _LockClass, _make_lock, _make_rlock,
)

_RAW_LOCK_TYPE = type(_thread.allocate_lock())
_RAW_RLOCK_TYPE = type(_ORIG_RLOCK())

_PATCHES = [
    (threading, "Lock", _LockClass if isinstance(_ORIG_LOCK, type) else _make_lock),
    (threading, "RLock", _make_rlock),
    (threading, "Condition", TrackedCondition),
    (threading, "Semaphore", TrackedSemaphore),
    (threading, "BoundedSemaphore", TrackedBoundedSemaphore),
    (asyncio.locks, "Lock", TrackedAsyncLock),
    (asyncio, "Lock", TrackedAsyncLock),
]
_saved: list[tuple[Any, str, Any]] = []
_wrapped_globals: list[tuple[dict, str, Any, Any]] = []
_SKIP_MODULES = ("threading", "_threading_local", "importlib", "lockcheck", "_pytest", "pytest", "pluggy",
                 "xdist", "execnet", "asyncio", "multiprocessing")


def start(recorder: Recorder) -> None:
    """Patch the factories and wrap reachable existing locks; `recorder` gets every event."""
    if tracked._rec is not None:
        raise RuntimeError("lockcheck: a recorder is already started")
    pysites.exclude_test_runner()
    tracked._rec = recorder
    recorder.active = True
    for module, attr, value in _PATCHES:
        _saved.append((module, attr, getattr(module, attr)))
        setattr(module, attr, value)
    _wrap_module_globals()


def stop(recorder: Optional[Recorder] = None) -> None:
    """Undo `start`: originals back, module globals unwrapped; tracked locks become plain ones."""
    rec = tracked._rec
    if rec is None or (recorder is not None and recorder is not rec):
        return
    for module, attr, value in reversed(_saved):
        setattr(module, attr, value)
    _saved.clear()
    for namespace, attr, wrapper, real in _wrapped_globals:
        if namespace.get(attr) is wrapper:
            namespace[attr] = real
    _wrapped_globals.clear()
    rec.active = False
    tracked._rec = None


def active_recorder() -> Optional[Recorder]:
    return tracked._rec


def _wrap_module_globals() -> None:
    """Locks made at import time, bound to module globals: wrap them (same real lock)."""
    for modname, module in list(sys.modules.items()):
        if module is None or modname.split(".", 1)[0] in _SKIP_MODULES:
            continue
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        filename = getattr(module, "__file__", None) or modname
        if pysites.excluded(filename):
            continue
        for attr, value in list(namespace.items()):
            kind = type(value)
            if kind is _RAW_LOCK_TYPE:
                wrapper: Any = TrackedLock(_global_class(modname, attr, filename), pysites.new_instance(), value)
            elif kind is _RAW_RLOCK_TYPE:
                wrapper = TrackedRLock(_global_class(modname, attr, filename), pysites.new_instance(), value)
            else:
                continue
            namespace[attr] = wrapper
            _wrapped_globals.append((namespace, attr, wrapper, value))


def _global_class(modname: str, attr: str, filename: str) -> str:
    return pysites.registry.named(f"{modname}.{attr}", pysites.relpath(filename))


@contextmanager
def instrument(recorder: Optional[Recorder] = None, **options: Any) -> Iterator[Recorder]:
    """Track Python locks inside the block; yields the `Recorder` (its `findings`, `checker`).

    >>> import threading, lockcheck.pylocks as pl
    >>> with pl.instrument() as rec:
    ...     lock = threading.RLock()
    ...     with lock:
    ...         with lock: pass
    >>> rec.findings
    []
    """
    rec = recorder or Recorder(**options)
    start(rec)
    try:
        yield rec
    finally:
        stop(rec)
