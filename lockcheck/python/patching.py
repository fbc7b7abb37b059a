"""Switching tracking on and off: the patched `threading`/`asyncio` names, and locks made before.

`start(recorder)` makes the recorder the active one, replaces the lock
factories (`threading.Lock`, `RLock`, `Condition`, `Semaphore`,
`BoundedSemaphore`, `asyncio.Lock`, `Semaphore`, `BoundedSemaphore`) by the tracked types of
`lockcheck.python.tracked`, and wraps the raw locks already bound to module
globals; `stop()` undoes all of it.  `instrument()` is both as a context
manager.
"""

from __future__ import annotations

import asyncio
import asyncio.locks
import os
import sys
import sysconfig
import threading
from typing import Any, Optional

from lockcheck.python import sites as pysites, tracked
from lockcheck.python import naming  # noqa: F401 - loaded for lockcheck.name/nested (lockcheck.python.hints)
from lockcheck.python.async_lock import TrackedAsyncLock
from lockcheck.python.async_semaphores import TrackedAsyncBoundedSemaphore, TrackedAsyncSemaphore
from lockcheck.python.core import RecorderRef
from lockcheck.python.semaphores import TrackedBoundedSemaphore, TrackedCondition, TrackedSemaphore
from lockcheck.python.tracked import (
    _ORIG_CONDITION, _ORIG_LOCK, _RAW_LOCK_TYPE, _RAW_RLOCK_TYPE, TrackedLock, TrackedRLock, _LockClass, _make_lock,
    _make_rlock,
)

_PATCHES = [
    (threading, "Lock", _LockClass if isinstance(_ORIG_LOCK, type) else _make_lock),
    (threading, "RLock", _make_rlock),
    (threading, "Condition", TrackedCondition),
    (threading, "Semaphore", TrackedSemaphore),
    (threading, "BoundedSemaphore", TrackedBoundedSemaphore),
    (asyncio.locks, "Lock", TrackedAsyncLock),
    (asyncio, "Lock", TrackedAsyncLock),
    (asyncio.locks, "Semaphore", TrackedAsyncSemaphore),
    (asyncio, "Semaphore", TrackedAsyncSemaphore),
    (asyncio.locks, "BoundedSemaphore", TrackedAsyncBoundedSemaphore),
    (asyncio, "BoundedSemaphore", TrackedAsyncBoundedSemaphore),
]
_saved: list[tuple[Any, str, Any]] = []
#: (namespace, attr, what we put there, what was there): undone by `stop`
_wrapped_globals: list[tuple[Any, str, Any, Any]] = []
_SKIP_MODULES = ("threading", "_threading_local", "importlib", "lockcheck", "_pytest", "pytest", "pluggy",
                 "xdist", "execnet", "asyncio", "multiprocessing")
_STDLIB_DIRS = tuple(os.path.abspath(p) + os.sep for p in {sysconfig.get_paths()["stdlib"],
                                                           sysconfig.get_paths()["platstdlib"]})
_SITE_DIRS = tuple(os.path.abspath(p) + os.sep for p in {sysconfig.get_paths()["purelib"],
                                                         sysconfig.get_paths()["platlib"]})
_fork_hook = False


class Preexisting:
    """A lock that existed before tracking began, found in a module's globals or a class."""

    __slots__ = ("name", "where", "tracked", "stdlib")

    def __init__(self, name: str, where: str, tracked: bool, stdlib: bool) -> None:
        self.name = name
        self.where = where
        self.tracked = tracked  # wrapped: tracked from now on (module globals, class attributes)
        self.stdlib = stdlib


#: recorders suspended by a nested `start` (`instrument()` inside a test run under `--lockcheck`)
_outer: list = []


def start(recorder: RecorderRef) -> None:
    """Patch the factories and wrap reachable existing locks; `recorder` gets every event.

    Under a started recorder (the plugin's session), `recorder` nests: it gets the events
    until its `stop`, which gives them back to the outer one (the patches are already there).
    """
    global _fork_hook
    if tracked._rec is not None:
        if tracked._rec is recorder or recorder in _outer:
            raise RuntimeError("lockcheck: this recorder is already started")
        _outer.append(tracked._rec)
        tracked._rec = recorder
        recorder.active = True
        tracked.core_forget()  # the compiled hit path serves the new recorder from now on
        return
    pysites.exclude_test_runner()
    if not _fork_hook and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_in_child)
        _fork_hook = True
    # a multiprocessing child (start method fork) runs its target, never the code that forked
    import multiprocessing.util

    multiprocessing.util.register_after_fork(recorder, type(recorder).process_started)
    tracked._rec = recorder
    recorder.active = True
    for module, attr, value in _PATCHES:
        _saved.append((module, attr, getattr(module, attr)))
        setattr(module, attr, value)
    recorder.preexisting = _wrap_module_globals()


def _after_fork_in_child() -> None:
    """The child of `os.fork()`: the recorder's own locks and the other threads' stacks (see
    `Recorder.after_fork_in_child`)."""
    pysites.registry.after_fork()
    rec = tracked._rec
    if rec is not None:
        rec.after_fork_in_child()


def stop(recorder: Optional[RecorderRef] = None) -> None:
    """Undo `start`: originals back, module globals unwrapped; tracked locks become plain ones."""
    rec = tracked._rec
    if rec is None or (recorder is not None and recorder is not rec):
        return
    if _outer:  # a nested recorder: the outer one gets the events again
        rec.active = False
        tracked._rec = _outer.pop()
        tracked.core_forget()
        return
    for module, attr, value in reversed(_saved):
        setattr(module, attr, value)
    _saved.clear()
    for namespace, attr, wrapper, real in reversed(_wrapped_globals):
        if isinstance(namespace, dict):
            if namespace.get(attr) is wrapper:
                namespace[attr] = real
        elif namespace.__dict__.get(attr) is wrapper:
            setattr(namespace, attr, real)
    _wrapped_globals.clear()
    rec.active = False
    tracked._rec = None
    tracked.core_forget()


def active_recorder() -> Optional[RecorderRef]:
    return tracked._rec


def _wrap_module_globals() -> list[Preexisting]:
    """Locks made before tracking began: the ones reachable are wrapped (same real lock).

    Module globals and class attributes holding a raw `Lock`/`RLock` are replaced by a tracked
    wrapper of the same lock (restored at `stop()`); a `from threading import Lock` binding made
    before is pointed at the patched factory.  Raw locks in those places that cannot be wrapped
    (a Condition's or Semaphore's lock) are listed too: what lockcheck cannot see, it says.
    """
    found: list[Preexisting] = []
    factories = {id(original): patched for (_, _, patched), (_, _, original) in zip(_PATCHES, _saved)}
    for modname, module in list(sys.modules.items()):
        if module is None or modname.split(".", 1)[0] in _SKIP_MODULES:
            continue
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        filename = getattr(module, "__file__", None) or modname
        if pysites.excluded(filename):
            continue
        stdlib = _is_stdlib(filename)
        for attr, value in list(namespace.items()):
            patched = factories.get(id(value))
            if patched is not None and attr in _FACTORY_NAMES:
                namespace[attr] = patched
                _wrapped_globals.append((namespace, attr, patched, value))
                continue
            if isinstance(value, type):
                if getattr(value, "__module__", None) == modname and not attr.startswith("__"):
                    _wrap_class_attrs(value, modname, filename, stdlib, found)
                continue
            wrapper = _wrapper_for(value, f"{modname}.{attr}", filename)
            if wrapper is not None:
                namespace[attr] = wrapper
                _wrapped_globals.append((namespace, attr, wrapper, value))
                found.append(Preexisting(f"{modname}.{attr}", pysites.relpath(filename), True, stdlib))
            elif _untrackable(value):
                found.append(Preexisting(f"{modname}.{attr}", pysites.relpath(filename), False, stdlib))
    return found


_FACTORY_NAMES = frozenset({"Lock", "RLock", "Condition", "Semaphore", "BoundedSemaphore"})


def _wrap_class_attrs(klass: type, modname: str, filename: str, stdlib: bool, found: list[Preexisting]) -> None:
    for attr, value in list(vars(klass).items()):
        name = f"{modname}.{klass.__qualname__}.{attr}"
        wrapper = _wrapper_for(value, name, filename)
        if wrapper is not None:
            try:
                setattr(klass, attr, wrapper)
            except (TypeError, AttributeError):
                found.append(Preexisting(name, pysites.relpath(filename), False, stdlib))
                continue
            _wrapped_globals.append((klass, attr, wrapper, value))
            found.append(Preexisting(name, pysites.relpath(filename), True, stdlib))
        elif _untrackable(value):
            found.append(Preexisting(name, pysites.relpath(filename), False, stdlib))


def _wrapper_for(value: Any, name: str, filename: str) -> Any:
    kind = type(value)
    if kind is _RAW_LOCK_TYPE:
        return TrackedLock._new(pysites.registry.named(name, pysites.relpath(filename)), pysites.new_instance(), value)
    if kind is _RAW_RLOCK_TYPE:
        cls = pysites.registry.named(name, pysites.relpath(filename))
        return TrackedRLock._new(cls, pysites.new_instance(), value)
    return None


def _untrackable(value: Any) -> bool:
    """A Condition or Semaphore made before tracking began (its lock is raw and bound inside it)."""
    kind = type(value)
    return kind in (_ORIG_CONDITION, tracked._ORIG_SEMAPHORE, tracked._ORIG_BSEMAPHORE) and not isinstance(
        getattr(value, "_lock", None) if kind is _ORIG_CONDITION else getattr(getattr(value, "_cond", None), "_lock", None),
        tracked._Tracked)


def _is_stdlib(filename: str) -> bool:
    path = os.path.abspath(filename)
    return path.startswith(_STDLIB_DIRS) and not path.startswith(_SITE_DIRS)
