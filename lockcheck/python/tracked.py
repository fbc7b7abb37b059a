"""The tracked lock types: `threading` and `asyncio` locks that report to the active recorder.

Each wraps (or subclasses) the real lock and turns its acquires and
releases into `Recorder.acquired`/`Recorder.released` calls; with no
recorder active (`_rec is None`) each behaves as the lock it wraps.  Also
here: the factories that `lockcheck.python.patching` installs as
`threading.Lock`/`RLock`, and the annotations `name` and `nested`, which
act on tracked locks.  How each type maps onto lockdep is in the docstring
of `lockcheck.python.instrument`.

Where the compiled core (`lockcheck.python._trackedcore`, lockcheck/python/_tracked.c) is
built, `Lock`, `RLock` and `nested` keep their fields in it and their
`__enter__`/`__exit__`/`acquire`/`release` are its hit path: an uncontended
acquisition of a chain already validated, and the release of the innermost
lock, are recorded there with no Python frame; anything else calls the
`_py_*` methods below, which are those methods themselves in the pure build
(no compiler, or `LOCKCHECK_PURE=1`).
"""

from __future__ import annotations

import _thread
import asyncio
import asyncio.locks
import sys
import threading
import time
from typing import Any, Optional

from lockcheck.python import waitfor as _waitfor
from lockcheck.python.core import CORE, OWNED_CLASSES, RecorderRef, core_forget  # noqa: F401 - re-exported
from lockcheck.python.sites import creation, site_skipped, user_frame

#: the originals, captured at import (before anything is patched)
_ORIG_LOCK = threading.Lock
_ORIG_RLOCK = threading.RLock
_ORIG_CONDITION = threading.Condition
_ORIG_SEMAPHORE = threading.Semaphore
_ORIG_BSEMAPHORE = threading.BoundedSemaphore
_ORIG_ALOCK = asyncio.locks.Lock

_RAW_LOCK_TYPE = type(_thread.allocate_lock())
_RAW_RLOCK_TYPE = type(_ORIG_RLOCK())
_monotonic = time.monotonic

#: the active recorder, set by `lockcheck.python.patching.start` (None: every tracked lock behaves
#: as the raw lock it wraps); a module global because every acquire reads it
_rec: Optional[RecorderRef] = None


_core = CORE
#: the base of the tracked types: the compiled one holds their fields (and the hit path)
_Base: Any = _core.Base if _core is not None else object
#: their fields, as slots of the pure-Python build
_FIELDS = () if _core is not None else ("_real", "_cls", "_inst", "_holder", "_since", "__weakref__")


class SelfDeadlockError(RuntimeError):
    """A blocking acquire of a lock its own context already holds: it would never return."""


# -- tracked threading locks ---------------------------------------------------------------


class _WrapperMeta(type):
    """The tracked wrapper types pass for the real ones: `type(threading.Lock())()` raises
    CPython's own "cannot create '_thread.lock' instances" where the real type does, and
    makes a (tracked) lock where the real type is instantiable (RLock; Lock from 3.13).
    Internally they are made with `_new`."""

    _lc_real_type: Any = None

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        real_type = cls._lc_real_type
        if cls._lc_instantiable:
            return cls._lc_factory(*args, **kwargs)
        raise TypeError(f"cannot create '{real_type.__module__}.{real_type.__name__}' instances")

    def _new(cls, *args: Any) -> Any:
        return type.__call__(cls, *args)


class _Tracked(_Base, metaclass=_WrapperMeta):
    """What every tracked lock has: the real lock, its class, instance and holder.

    Where the compiled core is built, the methods an uncontended acquire and release go through
    (`__enter__`, `__exit__`, `acquire`, `release`) are its C hit path, which calls the
    `_py_*` methods here for everything else (see lockcheck/python/_tracked.c); in the pure build the
    `_py_*` methods are those methods."""

    __slots__ = _FIELDS
    _lc_instantiable = False

    def __getattr__(self, attr: str) -> Any:
        # anything we do not wrap (locked, _recursion_count...) behaves as the real lock's
        return getattr(object.__getattribute__(self, "_real"), attr)

    def __repr__(self) -> str:
        return repr(self._real)

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        # isinstance(lock, _thread.LockType) holds as for the real lock; type(lock) is still ours
        return type(self)._lc_real_type

    def __reduce_ex__(self, protocol: Any) -> Any:
        # what pickle and copy say of the real lock
        raise TypeError(f"cannot pickle '{type(self)._lc_real_type.__module__}."
                        f"{type(self)._lc_real_type.__name__}' object")

    def __del__(self) -> None:
        """Collected while held (`lock.acquire(); del lock`): its holder no longer holds it."""
        try:
            holder = self._holder
        except AttributeError:  # never initialised
            return
        rec = _rec
        if holder is not None and rec is not None:
            rec.dropped(holder, self._cls, self._inst)

    def _at_fork_reinit(self) -> None:
        """The real lock is unlocked anew (logging's fork handlers do it): nobody holds it now."""
        holder, self._holder = self._holder, None
        self._real._at_fork_reinit()
        self._reset_depth()
        rec = _rec
        if holder is not None and rec is not None:
            rec.dropped(holder, self._cls, self._inst, freed=False)

    def _reset_depth(self) -> None:
        pass

    def _py_enter(self) -> bool:
        __tracebackhide__ = True  # pytest: a SelfDeadlockError points at the caller
        return self._acquire(True, -1, sys._getframe(1), 0)

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def _py_acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        __tracebackhide__ = True
        return self._acquire(blocking, timeout, sys._getframe(1), 0)

    def _lc_tried(self, rec: RecorderRef, task: str, comm: str) -> bool:
        """The compiled core took the lock with a non-blocking try that was no hit: its event."""
        rec.acquired(task, comm, self._cls, self._inst, sys._getframe(1), trylock=True)
        return True

    def _lc_contended(self, rec: RecorderRef, task: str, comm: str) -> bool:
        """The compiled hit path recorded the acquire, and the non-blocking try failed: the wait
        (`_recorded_acquire`'s, from there on)."""
        __tracebackhide__ = True
        try:
            _waitfor.wait_thread(self, rec, task, comm, sys._getframe(1))
        except BaseException:
            rec.released(task, self._cls, self._inst)
            raise
        self._took(task)
        return True

    def _is_try(self, rec: RecorderRef, blocking: bool, timeout: float) -> bool:
        return not blocking or (timeout != -1 and rec.settings.timed_is_try)

    def _recorded_acquire(self, rec: RecorderRef, task: str, comm: str, frame: Any, subclass: int,
                          blocking: bool, timeout: float) -> bool:
        """Take the real lock with its event: a trylock is fed once it succeeded; a blocking
        acquire is fed *before* it waits (the report must exist even if it never returns),
        and withdrawn again if it fails or times out.  An untimed one that cannot take the lock
        at once is a wait: `lockcheck.python.waitfor` checks it for a cycle of waits first."""
        __tracebackhide__ = True
        real = self._real
        if self._is_try(rec, blocking, timeout):
            ok = real.acquire(blocking, timeout)
            if ok:
                self._took(task)
                rec.acquired(task, comm, self._cls, self._inst, frame, trylock=True, subclass=subclass)
            return ok
        rec.acquired(task, comm, self._cls, self._inst, frame, subclass=subclass)
        try:
            if timeout == -1:
                ok = True
                if not real.acquire(False):
                    _waitfor.wait_thread(self, rec, task, comm, frame)
            else:
                ok = real.acquire(blocking, timeout)
        except BaseException:
            rec.released(task, self._cls, self._inst)
            raise
        if ok:
            self._took(task)
        else:  # a timed acquire validated as blocking, timed out
            rec.released(task, self._cls, self._inst)
        return ok

    def _took(self, task: str) -> None:
        """The real lock is now held by `task` (subclasses keep their holder bookkeeping here)."""
        raise NotImplementedError


class TrackedLock(*((_Tracked, _core.LockBase) if _core is not None else (_Tracked,))):  # type: ignore[misc]
    """A `threading.Lock` that reports to the active recorder."""

    __slots__ = ()

    def __init__(self, cls: str, inst: str, real: Any = None) -> None:
        self._real = real if real is not None else _thread.allocate_lock()
        self._cls = cls
        self._inst = inst
        self._holder: Optional[str] = None
        self._since = 0.0

    def _acquire(self, blocking: bool, timeout: float, frame: Any, subclass: int) -> bool:
        __tracebackhide__ = True
        rec = _rec
        real = self._real
        if rec is None:
            return real.acquire(blocking, timeout)
        task, comm = rec.thread_task()
        if self._holder == task and timeout == -1 and not self._is_try(rec, blocking, timeout):
            return self._reacquire(rec, task, comm, frame, subclass)
        return self._recorded_acquire(rec, task, comm, frame, subclass, blocking, timeout)

    def _took(self, task: str) -> None:
        self._holder = task
        self._since = _monotonic()

    def _py_enter(self) -> bool:
        """`with lock:` -- the blocking, untimed acquire of `_acquire`, without its general dispatch
        (this is the path almost every Python lock takes, so it is kept short)."""
        __tracebackhide__ = True  # pytest: a SelfDeadlockError points at the caller
        rec = _rec
        if rec is None:
            return self._real.acquire()
        task, comm = rec.thread_task()
        if self._holder == task:
            return self._reacquire(rec, task, comm, sys._getframe(1), 0)
        rec.acquired(task, comm, self._cls, self._inst, sys._getframe(1))
        try:
            if not self._real.acquire(False):  # contended: a wait, checked for a cycle of waits
                _waitfor.wait_thread(self, rec, task, comm, sys._getframe(1))
        except BaseException:
            rec.released(task, self._cls, self._inst)
            raise
        self._holder = task
        self._since = _monotonic()
        return True

    def _reacquire(self, rec: RecorderRef, task: str, comm: str, frame: Any, subclass: int) -> bool:
        """Blocking re-acquire by the holder: fine only if another thread releases it (a signal)."""
        __tracebackhide__ = True
        if self._real.acquire(True, rec.settings.grace):
            # released by another thread meanwhile (its release was recorded for us)
            rec.acquired(task, comm, self._cls, self._inst, frame, subclass=subclass)
            self._took(task)
            return True
        if _waitfor.mixed_thread(self, rec, task, comm, frame):  # report mode: waited, and took it
            rec.acquired(task, comm, self._cls, self._inst, frame, subclass=subclass)
            self._took(task)
            return True
        rec.acquired(task, comm, self._cls, self._inst, frame, subclass=subclass)
        rec.released(task, self._cls, self._inst)
        file, line, at = rec.site(user_frame(frame))
        raise SelfDeadlockError(
            f"lockcheck: {at}: {task} tries to acquire lock {self._cls}@{self._inst}, which it already holds, "
            f"and no other thread released it within {rec.settings.grace:g}s: this acquire would never return "
            f"(possible recursive locking detected)"
        )

    def _py_release(self) -> None:
        rec = _rec
        holder = self._holder
        if rec is not None and holder is not None:
            self._holder = None
            rec.released(holder, self._cls, self._inst)
        try:
            self._real.release()
        except RuntimeError:
            if rec is not None:
                rec.bad_releases += 1
            raise

    def locked(self) -> bool:
        return self._real.locked()

    locked_lock = locked


TrackedLock._lc_real_type = _RAW_LOCK_TYPE


class TrackedRLock(*((_Tracked, _core.RLockBase) if _core is not None else (_Tracked,))):  # type: ignore[misc]
    """A `threading.RLock`: only the outermost acquire and the last release are events."""

    __slots__ = () if _core is not None else ("_depth",)

    def __init__(self, cls: str, inst: str, real: Any = None) -> None:
        self._real = real if real is not None else _ORIG_RLOCK()
        self._cls = cls
        self._inst = inst
        self._holder: Optional[str] = None
        self._since = 0.0
        self._depth = 0
        OWNED_CLASSES.add(cls)

    def _acquire(self, blocking: bool, timeout: float, frame: Any, subclass: int) -> bool:
        rec = _rec
        real = self._real
        if rec is None or real._is_owned():
            ok = real.acquire(blocking, timeout)
            if ok and self._depth:
                self._depth += 1
            return ok
        task, comm = rec.thread_task()
        return self._recorded_acquire(rec, task, comm, frame, subclass, blocking, timeout)

    def _took(self, task: str) -> None:
        self._holder, self._depth = task, 1
        self._since = _monotonic()

    def _py_release(self) -> None:
        real = self._real
        if not real._is_owned():
            try:
                real.release()  # raises RuntimeError: the program's error to see
            except RuntimeError:
                if _rec is not None:
                    _rec.bad_releases += 1
                raise
            return
        if self._depth:
            self._depth -= 1
            if not self._depth:
                self._released()
        real.release()

    def _released(self) -> None:
        holder, self._holder = self._holder, None
        if _rec is not None and holder is not None:
            _rec.released(holder, self._cls, self._inst)

    # Condition.wait: release all levels, and take them back
    def _release_save(self) -> Any:
        depth, self._depth = self._depth, 0
        if depth:
            self._released()
        return (self._real._release_save(), depth)

    def _acquire_restore(self, state: Any) -> None:
        """The blocking re-acquire of `Condition.wait`: validated before it waits, but the holder
        is this thread only once the real lock is taken back -- until then another thread holds
        it, and that thread's release is its own (a contended wait is no recursion)."""
        real_state, depth = state
        rec = _rec
        task = None
        if rec is not None and depth:
            task, comm = rec.thread_task()
            rec.acquired(task, comm, self._cls, self._inst, sys._getframe(1))
        try:
            self._real._acquire_restore(real_state)
        except BaseException:
            if task is not None:
                rec.released(task, self._cls, self._inst)
            raise
        if task is not None:
            self._holder = task
            self._since = _monotonic()
        self._depth = depth

    def _py_is_owned(self) -> bool:
        return self._real._is_owned()

    def _reset_depth(self) -> None:
        self._depth = 0


TrackedRLock._lc_real_type = _RAW_RLOCK_TYPE
TrackedRLock._lc_owned = True  # only its holder may release it (`lockcheck.python.waitfor`)
TrackedRLock._lc_instantiable = True


def _public_methods() -> None:
    """The tracked types' public acquire and release: the compiled hit path's, or the pure ones."""
    if _core is None:
        for kind in (TrackedLock, TrackedRLock):
            kind.__enter__ = kind._py_enter
            kind.acquire = kind._py_acquire
            kind.release = kind._py_release
        TrackedLock.acquire_lock = TrackedLock.acquire
        TrackedLock.release_lock = TrackedLock.release
        TrackedRLock._is_owned = TrackedRLock._py_is_owned
        for func, public in ((_Tracked._py_enter, "__enter__"), (TrackedLock._py_enter, "__enter__"),
                             (_Tracked._py_acquire, "acquire"), (TrackedLock._py_release, "release"),
                             (TrackedRLock._py_release, "release"), (TrackedRLock._py_is_owned, "_is_owned")):
            func.__name__ = public  # as the methods are called (repr, help)
            func.__qualname__ = func.__qualname__.rpartition(".")[0] + "." + public
        return
    for kind, methods in ((TrackedLock, _core.LockBase), (TrackedRLock, _core.RLockBase)):
        for attr, method in vars(methods).items():
            if callable(method) and not attr.startswith("__") or attr in ("__enter__", "__exit__"):
                setattr(kind, attr, method)  # before _Tracked's in the MRO


_public_methods()


# -- factories: the patched names --------------------------------------------------------------


def _make_lock(*args: Any, **kwargs: Any) -> Any:
    return _new_lock(3, args, kwargs)


def _new_lock(depth: int, args: tuple, kwargs: dict) -> Any:
    """A tracked lock keyed by the creating frame `depth` levels up, or a raw one when not tracking."""
    created = creation(depth) if _rec is not None else None
    if created is None:
        return _ORIG_LOCK(*args, **kwargs)
    if args or kwargs:  # as the real factory does: it takes no arguments
        _ORIG_LOCK(*args, **kwargs)
    return TrackedLock._new(*created)


class _FactoryMeta(type):
    """`isinstance(x, threading.Lock)` -- legal once Lock is a class (Python 3.13) -- keeps working."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, cls._lc_kinds)

    def __subclasscheck__(cls, sub: Any) -> bool:
        return isinstance(sub, type) and issubclass(sub, cls._lc_kinds)


class _LockClass(metaclass=_FactoryMeta):
    """`threading.Lock` while patched, where the original is a class: constructing it makes a
    tracked lock (as `_make_lock` does where the original is a function)."""

    _lc_kinds: tuple = (_ORIG_LOCK, TrackedLock) if isinstance(_ORIG_LOCK, type) else (TrackedLock,)

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        return _new_lock(3, args, kwargs)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # as the real type: a subclass would not pickle as a lock (CPython's test_lock_no_subclass)
        raise TypeError("type '_thread.lock' is not an acceptable base type")




def _make_rlock(*args: Any, **kwargs: Any) -> Any:
    created = creation() if _rec is not None else None
    if created is None:
        return _ORIG_RLOCK(*args, **kwargs)
    if args or kwargs:
        _ORIG_RLOCK(*args, **kwargs)
    return TrackedRLock._new(*created)


def _rlock_type_call(*args: Any, **kwargs: Any) -> Any:
    """`type(threading.RLock())()`: a new RLock, as the real type makes; tracked, keyed by the caller."""
    created = creation(3) if _rec is not None else None
    if created is None:
        return _RAW_RLOCK_TYPE(*args, **kwargs)
    if args or kwargs:
        _RAW_RLOCK_TYPE(*args, **kwargs)
    return TrackedRLock._new(*created)


def _lock_type_call(*args: Any, **kwargs: Any) -> Any:
    return _new_lock(4, args, kwargs)


TrackedRLock._lc_factory = staticmethod(_rlock_type_call)
TrackedLock._lc_factory = staticmethod(_lock_type_call)
TrackedLock._lc_instantiable = isinstance(_ORIG_LOCK, type)  # Python 3.13: _thread.lock() makes a lock


class _OrigInstanceCheck(type):
    """`isinstance(x, threading.Condition)` stays true for Conditions made before patching."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return type.__instancecheck__(cls, obj) or isinstance(obj, cls._lc_orig)

    def __subclasscheck__(cls, sub: Any) -> bool:
        return type.__subclasscheck__(cls, sub) or issubclass(sub, cls._lc_orig)


def _pass_for(kind: Any, original: Any) -> None:
    """Names as the original's, so reprs (`<threading.Semaphore at ...>`), pickling by
    reference (multiprocessing's Manager under spawn) and `threading.__all__` checks see it."""
    kind.__name__ = original.__name__
    kind.__qualname__ = original.__qualname__
    kind.__module__ = original.__module__
    kind.__doc__ = original.__doc__




_pass_for(TrackedLock, _RAW_LOCK_TYPE)
_pass_for(TrackedRLock, _RAW_RLOCK_TYPE)
for _factory, _original, _name in ((_make_lock, _ORIG_LOCK, "Lock"), (_make_rlock, _ORIG_RLOCK, "RLock"),
                                   (_LockClass, _ORIG_LOCK, "Lock")):
    # named as the threading attribute they replace: pickle finds them there by reference
    # (multiprocessing's Manager under spawn pickles `threading.Lock`), in a process where
    # threading is not patched the original is found
    _pass_for(_factory, _original)
    _factory.__module__, _factory.__name__, _factory.__qualname__ = "threading", _name, _name


# -- the compiled core's view of the recorder ------------------------------------------------------


def _stats_class() -> type:
    """`CheckerStats` whose `events` and `chain_hits` include what the hit path counted: it
    counts them in C and adds them when either is read or written (`_trackedcore.flush`)."""
    from lockcheck.lockdep.checker import CheckerStats

    def counter(name: str) -> property:
        def get(self: Any) -> int:
            _core.flush()
            return self.__dict__[name]

        def set_(self: Any, value: int) -> None:
            _core.flush()
            self.__dict__[name] = value

        return property(get, set_, doc=f"`CheckerStats.{name}`, with the compiled hit path's count")

    def __getstate__(self: Any) -> dict:
        _core.flush()
        return dict(self.__dict__)

    kind = type("CheckerStats", (CheckerStats,), {
        "__slots__": (), "events": counter("events"), "chain_hits": counter("chain_hits"),
        "__getstate__": __getstate__, "__reduce__": lambda self: (CheckerStats, (), __getstate__(self)),
    })
    kind.__qualname__ = CheckerStats.__qualname__
    kind.__module__ = CheckerStats.__module__
    return kind


_CoreStats: Optional[type] = None
_RECORDER_MODULE = "lockcheck.python.recorder"


def _c_refresh(rec: RecorderRef) -> Optional[tuple]:
    """What the hit path reads of a newly started recorder, or None: not one it may serve (a
    recorder or checker whose feeding differs from `Recorder`'s and `Checker`'s: Python only)."""
    from lockcheck.lockdep import rules
    from lockcheck.lockdep.checker import Checker

    checker = rec.checker
    if getattr(rec, "pre_acquire", None) is not None:
        return None  # a directed scheduler sees every acquire (lockcheck.python.confirm_scheduler)
    kind = type(rec)
    # `Recorder` itself, looked up (not imported: the recorder module is above this one, and is
    # loaded, since `rec` is one of its recorders or of a look-alike)
    recorder = getattr(sys.modules.get(_RECORDER_MODULE), "Recorder", None)
    for attr in ("acquired", "released", "feed", "thread_task", "site", "_feed"):
        if recorder is None or getattr(kind, attr) is not getattr(recorder, attr):
            return None
    for attr in ("feed", "lock_acquire", "validate_chain", "release_innermost"):
        if getattr(type(checker), attr) is not getattr(Checker, attr):
            return None
    if not checker._inline_cache_hits or not hasattr(checker.stats, "__dict__"):
        return None
    global _CoreStats
    if _CoreStats is None:
        _CoreStats = _stats_class()
    if type(checker.stats) is not _CoreStats:
        if type(checker.stats) is not _CoreStats.__base__:
            return None
        checker.stats.__class__ = _CoreStats
    if not (rules.chain_key_is_tuple_hash() and rules.usage_rules_as_compiled()):
        return None  # a chain-key or hardirqs-off rule the core cannot follow: Python only
    return (rec.__dict__, checker.__dict__, checker.tasks, checker.chain_cache, checker._classes,
            checker._nodes, checker.stats.__dict__, rec._local, rec._pending, rec._orphans, rules.compiled_tables())


def _c_site(rec: RecorderRef, frame: Any) -> Optional[tuple]:
    """The site of an acquire called from `frame` (`Recorder.site`), or None: `user_frame` passes
    it over for its caller."""
    if site_skipped(frame.f_code):
        return None
    return rec.site(frame)


if _core is not None:
    from lockcheck.lockdep.checker import MAX_LOCK_DEPTH as _MAX_LOCK_DEPTH
    from lockcheck.events import ACQUIRE as _ACQUIRE
    from lockcheck.events import Event as _Event
    from lockcheck.lockdep.tasks import INITIAL_CHAIN_KEY as _INITIAL_CHAIN_KEY
    from lockcheck.lockdep.tasks import HeldLock as _HeldLock
    from lockcheck.lockdep.tasks import TaskState as _TaskState

    _core.setup(globals(), _c_refresh, _c_site, _Event, _HeldLock, _TaskState, _ACQUIRE, _INITIAL_CHAIN_KEY,
                _MAX_LOCK_DEPTH, TrackedLock, TrackedRLock)
