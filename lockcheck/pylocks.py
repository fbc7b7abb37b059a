"""Lockdep for live Python code: tracked `threading` and `asyncio` locks.

While a `Recorder` is started (`instrument()` as a context manager, or the
pytest plugin for a whole session), the factories `threading.Lock`,
`threading.RLock`, `threading.Condition`, `threading.Semaphore`,
`threading.BoundedSemaphore` and `asyncio.Lock` make tracked locks: thin
wrappers around the real lock that turn every acquire and release into a
`lockcheck.events.Event` and feed it to one `Checker` *before* a blocking
acquire waits, so the report exists even when the program then deadlocks.

>>> import threading, lockcheck.pylocks as pl
>>> with pl.instrument() as rec:
...     a = threading.Lock()
...     b = threading.Lock()
...     with a:
...         with b: pass
...     with b:
...         with a: pass
>>> [f.kind for f, context in rec.findings]
['circular-dependency']

How Python locks map onto lockdep (the decisions, in one place):

- **Lock classes** are keyed by the creation site (`file.py:LINE`, lockdep's
  static key) and named after what the lock was assigned to when the
  creating line says so cheaply (`self._lock = threading.Lock()` in a
  method of `Cache` -> `Cache._lock`; a module-level `LOCK = ...` in
  `db.py` -> `db.LOCK`; a local `a = ...` in `test_x` -> `test_x.a`), else
  `file.py:LINE`.  Two sites that would get one name keep them apart with
  `#LINE`.  Instances are the lock objects (`0x1`, `0x2`... in creation
  order).  `lockcheck.name(lock, "...")` gives one lock its own class,
  `lockcheck.nested(lock, n)` acquires it as subclass `n`.
- **Contexts** (lockdep's tasks): a thread for threading locks
  (`MainThread/1`, a new number per thread so reused idents never share a
  held stack), an asyncio task for `asyncio.Lock` (`Task-3/a4`).  Under
  pytest-xdist the worker id is prefixed (`gw0:MainThread/1`).  The
  event's `comm` adds the current test id (`MainThread/1 [tests/t.py::test_a]`),
  which is how reports show in which test each dependency was first seen.
- **Lock**: exclusive.  A `Lock` may legally be released by a thread that
  does not hold it (a signal): the release is recorded for the task that
  acquired it.  A blocking re-acquire of a `Lock` its own context already
  holds is a self-deadlock unless another thread releases it: we wait
  `grace` seconds for that (the signal pattern), then feed the acquire
  (reported as recursive locking) and raise `SelfDeadlockError` instead of
  hanging forever.  This one case is checked after a short wait, not before.
- **RLock**: only the outermost acquire and the last release are events;
  re-entry is recursion on purpose.  `Condition.wait` releases and
  re-acquires it (as `_release_save`/`_acquire_restore`).
- **Condition**: its lock (given, or an RLock keyed by the Condition's
  creation site) is tracked; `wait` is a release then a blocking acquire
  (validated again, as lockdep revalidates `reacquire_held_locks`).  The
  per-waiter locks are `_thread` locks inside threading.py: not tracked.
- **Semaphore**: acquire-only.  A blocking acquire is validated as a
  non-recursive read (`held -> sem` dependencies: "waiting for a permit
  while holding these"), then immediately dropped from the held stack:
  permits have no owner (producers release what consumers acquire), so a
  Semaphore is never a held lock and adds no dependencies of its own.
- **BoundedSemaphore**: a counting lock held by the acquiring context
  until released (a read lock for a bound > 1, exclusive for a bound of
  1), so `BoundedSemaphore(1)` used as a mutex takes part in cycles.  A
  release by a context holding no permit hands back the oldest holder's.
- **Timed acquires** (`timeout=`) and `blocking=False` are trylocks (no
  dependencies, as in lockdep) and are recorded only when they succeed;
  `timed_is_try=False` validates timed acquires like blocking ones.
- **Not our business**: a release that raises `RuntimeError` (not held)
  is the program's error; it is counted (`Recorder.bad_releases`), never
  fed to the checker.  `threading.Event`, `Barrier`, `Thread` internals,
  Condition waiters and Semaphore internals (locks created *inside*
  threading.py), `_thread.allocate_lock()` callers (importlib, and any
  code calling it directly), and locks created by pytest, pluggy, xdist,
  execnet and lockcheck itself stay raw.
- **Locks created before `start()`** are tracked where reachable: raw
  `Lock`/`RLock` objects bound to module globals (e.g. `logging._lock`,
  `concurrent.futures.thread._global_shutdown_lock`) are replaced by
  wrappers of the same lock (restored at `stop()`).  Locks held in
  instance attributes, closures or containers before `start()` are not
  reachable and stay untracked; so do `from threading import Lock`
  bindings made before `start()`.

The checker is not thread safe: every feed happens under a raw `_thread`
lock that is itself never tracked.
"""

from __future__ import annotations

import _thread
import asyncio
import asyncio.locks
import fnmatch
import itertools
import linecache
import os
import re
import sys
import threading
import weakref
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional, TextIO

from lockcheck.checker import Checker
from lockcheck.events import ACQUIRE, READ, RELEASE, WRITE, Event
from lockcheck.findings import Finding

__all__ = [
    "Recorder", "SelfDeadlockError", "instrument", "start", "stop", "active_recorder", "name", "nested",
]

#: the originals, captured at import (before anything is patched)
_ORIG_LOCK = threading.Lock
_ORIG_RLOCK = threading.RLock
_ORIG_CONDITION = threading.Condition
_ORIG_SEMAPHORE = threading.Semaphore
_ORIG_BSEMAPHORE = threading.BoundedSemaphore
_ORIG_ALOCK = asyncio.locks.Lock
_RAW_LOCK_TYPE = type(_thread.allocate_lock())
_RAW_RLOCK_TYPE = type(_ORIG_RLOCK())

#: the active recorder (None: every tracked lock behaves as the raw lock it wraps)
_rec: Optional["Recorder"] = None


class SelfDeadlockError(RuntimeError):
    """A blocking acquire of a lock its own context already holds: it would never return."""


# -- where code is ----------------------------------------------------------------


def _dir_of(module: Any) -> str:
    return os.path.dirname(os.path.abspath(module.__file__)) + os.sep


_THREADING_FILE = os.path.abspath(threading.__file__)
_ASYNCIO_LOCKS_FILE = os.path.abspath(asyncio.locks.__file__)
_ASYNCIO_MIXINS = os.path.abspath(sys.modules["asyncio.mixins"].__file__) if "asyncio.mixins" in sys.modules else ""
_OWN_FILE = os.path.abspath(__file__)
_LOCKCHECK_DIR = os.path.dirname(_OWN_FILE) + os.sep


def _excluded_dirs() -> tuple[str, ...]:
    """Packages whose own locks are not the code under test (the test runner, us); nothing is imported."""
    import importlib.util

    dirs = [_LOCKCHECK_DIR]
    for mod in ("_pytest", "pluggy", "xdist", "execnet", "pytest"):
        module = sys.modules.get(mod)
        origin = getattr(module, "__file__", None)
        if origin is None:
            try:
                spec = importlib.util.find_spec(mod)
            except (ImportError, ValueError):
                spec = None
            origin = spec.origin if spec is not None else None
        if origin:
            dirs.append(os.path.dirname(os.path.abspath(origin)) + os.sep)
    return tuple(dirs)


_EXCLUDED: tuple[str, ...] = (_LOCKCHECK_DIR,)

# frame kinds, cached per code object
_USER, _TRANSPARENT, _RAW = 0, 1, 2
_kinds: dict = {}
_SITE_SKIP = (_OWN_FILE, _ASYNCIO_LOCKS_FILE, _ASYNCIO_MIXINS, _THREADING_FILE)
_site_skip: dict = {}


def _kind_of(code: Any) -> int:
    """How a frame creating a lock counts: user code, transparent (look at its caller), or raw."""
    kind = _kinds.get(code)
    if kind is None:
        path = os.path.abspath(code.co_filename)
        if path in (_OWN_FILE, _ASYNCIO_LOCKS_FILE, _ASYNCIO_MIXINS):
            kind = _TRANSPARENT
        elif path == _THREADING_FILE or path.startswith(_EXCLUDED):
            kind = _RAW  # Event, Barrier, Thread, Semaphore internals; the test runner; us
        else:
            kind = _USER
        _kinds[code] = kind
    return kind


def _user_frame(frame: Any) -> Any:
    """The acquire's call site: the first frame outside threading.py, asyncio's locks and this module."""
    for _ in range(8):
        code = frame.f_code
        skip = _site_skip.get(code)
        if skip is None:
            skip = _site_skip[code] = os.path.abspath(code.co_filename) in _SITE_SKIP
        if not skip or frame.f_back is None:
            return frame
        frame = frame.f_back
    return frame


_relpaths: dict = {}


def _relpath(filename: str) -> str:
    rel = _relpaths.get(filename)
    if rel is None:
        path = os.path.abspath(filename)
        try:
            rel = os.path.relpath(path)
        except ValueError:
            rel = path
        if rel.startswith(".." + os.sep):
            rel = path
        _relpaths[filename] = rel
    return rel


# -- lock classes: keyed by creation site, named after the assignment ----------------

_ASSIGN = re.compile(
    r"^\s*([A-Za-z_][\w.]*)\s*(?::[^=]*)?=\s*(?:[\w.]+\.)?"
    r"(?:Lock|RLock|Condition|Semaphore|BoundedSemaphore|allocate_lock)\s*\("
)


class _Registry:
    """Creation site -> class name, and name -> site to keep names unique."""

    def __init__(self) -> None:
        self.by_site: dict[tuple, str] = {}
        self.sites: dict[str, str] = {}  # class name -> "file.py:LINE"
        self._mutex = _thread.allocate_lock()

    def class_for(self, frame: Any) -> str:
        code = frame.f_code
        key = (code, frame.f_lineno)
        name = self.by_site.get(key)
        if name is None:
            with self._mutex:
                name = self.by_site.get(key)
                if name is None:
                    name = self._new(code, frame.f_lineno, frame)
                    self.by_site[key] = name
        return name

    def _new(self, code: Any, line: int, frame: Any = None) -> str:
        rel = _relpath(code.co_filename)
        site = f"{rel}:{line}"
        name = self._readable(code, line, frame) or f"{os.path.basename(rel)}:{line}"
        if self.sites.get(name, site) != site:
            name = f"{name}#{line}"
        self.sites.setdefault(name, site)
        return name

    @staticmethod
    def _readable(code: Any, line: int, frame: Any = None) -> Optional[str]:
        match = _ASSIGN.match(linecache.getline(code.co_filename, line))
        if match is None:
            return None
        target = match.group(1)
        qualname = getattr(code, "co_qualname", None) or _qualname_from_frame(code, frame)
        if code.co_name == "<module>":
            module = os.path.splitext(os.path.basename(code.co_filename))[0]
            return f"{module}.{target}"
        if target.startswith("self.") or target.startswith("cls."):
            owner = qualname.rsplit(".", 1)[0] if "." in qualname else qualname
            owner = owner.replace(".<locals>", "")
            return f"{owner}.{target.split('.', 1)[1]}"
        return f"{qualname.replace('.<locals>', '')}.{target}"

    def named(self, name: str, where: str) -> str:
        self.sites.setdefault(name, where)
        return name


def _qualname_from_frame(code: Any, frame: Any) -> str:
    """Python 3.10 has no `co_qualname`: a method's owner comes from its `self` or `cls` then."""
    if frame is not None:
        owner = frame.f_locals.get("self", frame.f_locals.get("cls"))
        if owner is not None:
            kind = owner if isinstance(owner, type) else type(owner)
            for klass in kind.__mro__:  # the class that defines this code, not a subclass
                if any(getattr(v, "__code__", None) is code for v in vars(klass).values()):
                    return f"{klass.__qualname__}.{code.co_name}"
    return code.co_name


_registry = _Registry()
_instances = itertools.count(1)
#: task numbers are unique in the process, so a hold recorded by an earlier recorder is never
#: mistaken for one of the current recorder's tasks
_task_numbers = itertools.count(1)


def _creation(depth: int = 2) -> Optional[tuple[str, str]]:
    """(class name, instance) for a lock created by the caller's caller; None: leave it raw."""
    frame = sys._getframe(depth)
    kind = _kind_of(frame.f_code)
    while kind == _TRANSPARENT:
        frame = frame.f_back
        if frame is None:
            return None
        kind = _kind_of(frame.f_code)
    if kind == _RAW:
        return None
    return _registry.class_for(frame), f"{next(_instances):#x}"


# -- the recorder ---------------------------------------------------------------------


class Recorder:
    """One checker fed by every tracked lock while started, with what it found.

    `findings` holds `(finding, context)` pairs in report order; `context`
    is what `set_context` last said (the pytest node id).  `suppress` is a
    list of `"KIND CLASSGLOB..."` rules (see `suppressed`); matching
    findings go to `suppressed_findings` instead.
    """

    def __init__(self, checker: Optional[Checker] = None, *, grace: float = 1.0, timed_is_try: bool = True,
                 suppress: Optional[list[str]] = None, trace: Optional[TextIO] = None,
                 task_prefix: str = "", on_finding: Optional[Callable[[Finding, Optional[str]], None]] = None) -> None:
        self.checker = checker or Checker()
        self.grace = grace
        self.timed_is_try = timed_is_try
        rules = DEFAULT_SUPPRESS + list(suppress or [])
        self.rules = [_parse_rule(rule) for rule in rules if rule.strip() and not rule.lstrip().startswith("#")]
        self.trace = trace
        self.task_prefix = task_prefix
        self.on_finding = on_finding
        self.findings: list[tuple[Finding, Optional[str]]] = []
        self.suppressed_findings: list[tuple[Finding, Optional[str]]] = []
        self.by_context: dict[Optional[str], list[Finding]] = {}
        self.bad_releases = 0
        self.context: Optional[str] = None
        self.check = True  # False: events are recorded `nocheck` (a test switched lockcheck off)
        self.active = False
        self._gen = 0
        self._feed_lock = _thread.allocate_lock()
        self._local = _thread._local()
        self._atasks: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()
        self._sites: dict = {}
        if trace is not None:
            # imported now: nothing may be imported under the feed lock (imports take locks)
            from lockcheck.readers.lt import format_event

            self._format_event = format_event
            trace.write("#lockcheck-trace v1\n")

    # -- context ------------------------------------------------------------
    def set_context(self, context: Optional[str], check: bool = True) -> None:
        """Name what runs from now on (a test id): it shows in reports after each task name."""
        with self._feed_lock:
            self.context = context
            self.check = check
            self._gen += 1
            if self.trace is not None and context is not None:
                self.trace.write(f"# context {context}{'' if check else ' (lockcheck off)'}\n")

    def _comm(self, task: str) -> str:
        return f"{task} [{self.context}]" if self.context else task

    def thread_task(self) -> tuple[str, str]:
        """(task key, comm) of the calling thread."""
        local = self._local
        try:
            gen, task, comm = local.info
        except AttributeError:
            name = threading.current_thread().name.replace(" ", "_").replace("\t", "_").replace('"', "'")
            task = f"{self.task_prefix}{name}/{next(_task_numbers)}"
            gen, comm = -1, task
        if gen != self._gen:
            comm = self._comm(task)
            local.info = (self._gen, task, comm)
        return task, comm

    def async_task(self) -> tuple[str, str]:
        """(task key, comm) of the running asyncio task (the thread outside any task)."""
        current = asyncio.current_task()
        if current is None:
            return self.thread_task()
        task = self._atasks.get(current)
        if task is None:
            name = current.get_name().replace(" ", "_").replace('"', "'")
            task = self._atasks[current] = f"{self.task_prefix}{name}/a{next(_task_numbers)}"
        return task, self._comm(task)

    # -- events -------------------------------------------------------------
    def site(self, frame: Any) -> tuple[str, int, str]:
        """(file, line, `file:LINE`) of an acquire call, cached per code object and line."""
        key = (frame.f_code, frame.f_lineno)
        site = self._sites.get(key)
        if site is None:
            rel = _relpath(frame.f_code.co_filename)
            site = self._sites[key] = (rel, frame.f_lineno, f"{rel}:{frame.f_lineno}")
        return site

    def acquired(self, task: str, comm: str, cls: str, inst: str, frame: Any, mode: int = WRITE,
                 trylock: bool = False, subclass: int = 0) -> list[Finding]:
        """Feed one acquire (call it before a blocking acquire waits); the new findings."""
        frame = _user_frame(frame)
        site = self._sites.get((frame.f_code, frame.f_lineno))
        file, line, at = site if site is not None else self.site(frame)
        ev = Event(task, ACQUIRE, cls, inst, mode, trylock, subclass, None, self.check, at, None, None,
                   file, line, comm)
        return self.feed(ev)

    def released(self, task: str, cls: str, inst: str) -> None:
        """Feed one release by (or for) `task`; holds from before this recorder started are skipped."""
        if task in self.checker.tasks:
            if self.trace is None:
                with self._feed_lock:
                    if self.checker.release_innermost(task, cls, inst):
                        return  # the common case: no event to build, nothing to find
            self.feed(Event(task, RELEASE, cls, inst))

    def feed(self, ev: Event) -> list[Finding]:
        with self._feed_lock:
            found = self.checker.feed(ev)
            if self.trace is not None:
                self.trace.write(self._format_event(ev))
                self.trace.write("\n")
            if found:
                context = self.context
                kept = []
                for finding in found:
                    if self.suppressed(finding):
                        self.suppressed_findings.append((finding, context))
                    else:
                        kept.append(finding)
                        self.findings.append((finding, context))
                        self.by_context.setdefault(context, []).append(finding)
                found = kept
        if found and self.on_finding is not None:
            for finding in found:
                self.on_finding(finding, self.context)
        return found

    def take(self, context: Optional[str]) -> list[Finding]:
        """The findings made in `context` since the last `take` of it."""
        with self._feed_lock:
            return self.by_context.pop(context, [])

    def suppressed(self, finding: Finding) -> bool:
        """`KIND CLASSGLOB...`: the kind matches and every glob matches a class of the finding."""
        if not self.rules:
            return False
        classes = {finding.lock, finding.held, *(finding.cycle or ())} - {None}
        for kind, globs in self.rules:
            if not fnmatch.fnmatchcase(finding.kind, kind):
                continue
            if all(any(fnmatch.fnmatchcase(cls, glob) for cls in classes) for glob in globs):
                return True
        return False

    # -- lifecycle ----------------------------------------------------------
    def start(self) -> "Recorder":
        start(self)
        return self

    def stop(self) -> None:
        stop(self)

    def __enter__(self) -> "Recorder":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def render(self, out: TextIO) -> None:
        """All findings in the kernel's text layout, with the summary line."""
        from lockcheck.report import RENDERERS

        RENDERERS["text"].render([f for f, _ in self.findings], self.summary(), out)

    def summary(self) -> Any:
        from lockcheck import __version__
        from lockcheck.report import Summary

        checker = self.checker
        notes = []
        if self.bad_releases:
            notes.append(f"{self.bad_releases} releases of unlocked locks raised RuntimeError in the program")
        return Summary(events=checker.stats.events, tasks=checker.task_count, classes=checker.graph.n_classes,
                       dependencies=checker.graph.n_dependencies, files=[], version=__version__, notes=notes,
                       suppressed=len(self.suppressed_findings))


#: same-class nesting inside the standard library that is ordered on purpose (lockdep's
#: `lock_set_cmp_fn`): `concurrent.futures._AcquireFutures` takes Future conditions sorted by id()
DEFAULT_SUPPRESS = ["recursive-locking Future._condition"]


def _parse_rule(rule: str) -> tuple[str, list[str]]:
    parts = rule.split()
    return parts[0], parts[1:]


# -- tracked threading locks ---------------------------------------------------------------


class _Tracked:
    """What every tracked lock has: the real lock, its class, instance and holder."""

    __slots__ = ("_real", "_cls", "_inst", "_holder", "__weakref__")

    def __getattr__(self, attr: str) -> Any:
        # anything we do not wrap (locked, _at_fork_reinit...) behaves as the real lock's
        return getattr(object.__getattribute__(self, "_real"), attr)

    def __repr__(self) -> str:
        return repr(self._real)

    def __enter__(self) -> bool:
        __tracebackhide__ = True  # pytest: a SelfDeadlockError points at the caller
        return self._acquire(True, -1, sys._getframe(1), 0)

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        __tracebackhide__ = True
        return self._acquire(blocking, timeout, sys._getframe(1), 0)

    def _is_try(self, rec: Recorder, blocking: bool, timeout: float) -> bool:
        return not blocking or (timeout != -1 and rec.timed_is_try)

    def _recorded_acquire(self, rec: Recorder, task: str, comm: str, frame: Any, subclass: int,
                          blocking: bool, timeout: float) -> bool:
        """Take the real lock with its event: a trylock is fed once it succeeded; a blocking
        acquire is fed *before* it waits (the report must exist even if it never returns),
        and withdrawn again if it fails or times out."""
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


class TrackedLock(_Tracked):
    """A `threading.Lock` that reports to the active recorder."""

    __slots__ = ()

    def __init__(self, cls: str, inst: str, real: Any = None) -> None:
        self._real = real if real is not None else _thread.allocate_lock()
        self._cls = cls
        self._inst = inst
        self._holder: Optional[str] = None

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

    def __enter__(self) -> bool:
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
            self._real.acquire()
        except BaseException:
            rec.released(task, self._cls, self._inst)
            raise
        self._holder = task
        return True

    def _reacquire(self, rec: Recorder, task: str, comm: str, frame: Any, subclass: int) -> bool:
        """Blocking re-acquire by the holder: fine only if another thread releases it (a signal)."""
        __tracebackhide__ = True
        if self._real.acquire(True, rec.grace):
            # released by another thread meanwhile (its release was recorded for us)
            rec.acquired(task, comm, self._cls, self._inst, frame, subclass=subclass)
            self._holder = task
            return True
        rec.acquired(task, comm, self._cls, self._inst, frame, subclass=subclass)
        rec.released(task, self._cls, self._inst)
        file, line, at = rec.site(_user_frame(frame))
        raise SelfDeadlockError(
            f"lockcheck: {at}: {task} tries to acquire lock {self._cls}@{self._inst}, which it already holds, "
            f"and no other thread released it within {rec.grace:g}s: this acquire would never return "
            f"(possible recursive locking detected)"
        )

    def release(self) -> None:
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

    release_lock = release
    locked_lock = locked

    def acquire_lock(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self._acquire(blocking, timeout, sys._getframe(1), 0)


class TrackedRLock(_Tracked):
    """A `threading.RLock`: only the outermost acquire and the last release are events."""

    __slots__ = ("_depth",)

    def __init__(self, cls: str, inst: str, real: Any = None) -> None:
        self._real = real if real is not None else _ORIG_RLOCK()
        self._cls = cls
        self._inst = inst
        self._holder: Optional[str] = None
        self._depth = 0

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

    def release(self) -> None:
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
        real_state, depth = state
        rec = _rec
        if rec is not None and depth:
            task, comm = rec.thread_task()
            rec.acquired(task, comm, self._cls, self._inst, sys._getframe(1))
            self._holder = task
        self._real._acquire_restore(real_state)
        self._depth = depth

    def _is_owned(self) -> bool:
        return self._real._is_owned()


# -- factories: the patched names --------------------------------------------------------------


def _make_lock(*args: Any, **kwargs: Any) -> Any:
    return _new_lock(3, args, kwargs)


def _new_lock(depth: int, args: tuple, kwargs: dict) -> Any:
    """A tracked lock keyed by the creating frame `depth` levels up, or a raw one when not tracking."""
    created = _creation(depth) if _rec is not None else None
    if created is None:
        return _ORIG_LOCK(*args, **kwargs)
    return TrackedLock(*created)


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


_LockClass.__name__ = _LockClass.__qualname__ = "lock"
_LockClass.__module__ = "_thread"


def _make_rlock(*args: Any, **kwargs: Any) -> Any:
    created = _creation() if _rec is not None else None
    if created is None:
        return _ORIG_RLOCK(*args, **kwargs)
    return TrackedRLock(*created)


class _OrigInstanceCheck(type):
    """`isinstance(x, threading.Condition)` stays true for Conditions made before patching."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return type.__instancecheck__(cls, obj) or isinstance(obj, cls._lc_orig)

    def __subclasscheck__(cls, sub: Any) -> bool:
        return type.__subclasscheck__(cls, sub) or issubclass(sub, cls._lc_orig)


class TrackedCondition(_ORIG_CONDITION, metaclass=_OrigInstanceCheck):
    """`threading.Condition` whose default lock is a tracked RLock keyed by the Condition's site."""

    _lc_orig = _ORIG_CONDITION

    def __init__(self, lock: Any = None) -> None:
        if lock is None and _rec is not None:
            created = _creation()
            if created is not None:
                lock = TrackedRLock(*created)
        super().__init__(lock)


TrackedCondition.__name__ = TrackedCondition.__qualname__ = "Condition"


class _SemaphoreMixin:
    """Counting locks (see the module docstring for how each enters the graph)."""

    _lc: Optional[tuple[str, str]]
    _lc_holders: list
    _lc_held = False  # BoundedSemaphore: held until released; Semaphore: acquire-only

    def _lc_init(self) -> None:
        self._lc = _creation(3) if _rec is not None else None
        self._lc_holders = []

    def _lc_mode(self) -> int:
        return READ

    def acquire(self, blocking: bool = True, timeout: Optional[float] = None) -> bool:
        rec = _rec
        lc = self._lc
        if rec is None or lc is None:
            return super().acquire(blocking, timeout)  # type: ignore[misc]
        cls, inst = lc
        frame = sys._getframe(1)
        task, comm = rec.thread_task()
        if not blocking or (timeout is not None and rec.timed_is_try):
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
        rec = _rec
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
            self._lc_init()


class TrackedBoundedSemaphore(_SemaphoreMixin, _ORIG_BSEMAPHORE, metaclass=_OrigInstanceCheck):
    """`threading.BoundedSemaphore`: held by the acquiring context until released."""

    _lc_orig = _ORIG_BSEMAPHORE
    _lc_held = True

    def __init__(self, value: int = 1) -> None:
        _ORIG_BSEMAPHORE.__init__(self, value)
        self._lc_init()

    def _lc_mode(self) -> int:
        return WRITE if self._initial_value == 1 else READ


for _cls, _name in ((TrackedSemaphore, "Semaphore"), (TrackedBoundedSemaphore, "BoundedSemaphore")):
    _cls.__name__ = _cls.__qualname__ = _name


# -- asyncio.Lock ------------------------------------------------------------------------------


class TrackedAsyncLock(_ORIG_ALOCK, metaclass=_OrigInstanceCheck):
    """`asyncio.Lock` held by asyncio tasks (the lock-holding contexts)."""

    _lc_orig = _ORIG_ALOCK

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lc = _creation() if _rec is not None else None
        self._lc_holder: Optional[str] = None

    async def acquire(self) -> bool:
        rec = _rec
        lc = self._lc
        if rec is None or lc is None:
            return await super().acquire()
        cls, inst = lc
        frame = sys._getframe(1)
        task, comm = rec.async_task()
        if self._lc_holder == task:
            try:
                await asyncio.wait_for(super().acquire(), rec.grace)
            except asyncio.TimeoutError:
                rec.acquired(task, comm, cls, inst, frame)
                rec.released(task, cls, inst)
                raise SelfDeadlockError(
                    f"lockcheck: {task} tries to acquire asyncio lock {cls}@{inst}, which it already holds, "
                    f"and no other task released it within {rec.grace:g}s (possible recursive locking detected)"
                ) from None
            rec.acquired(task, comm, cls, inst, frame)
            self._lc_holder = task
            return True
        rec.acquired(task, comm, cls, inst, frame)
        try:
            await super().acquire()
        except BaseException:
            rec.released(task, cls, inst)
            raise
        self._lc_holder = task
        return True

    def release(self) -> None:
        holder = self._lc_holder
        if _rec is not None and holder is not None and self._lc is not None:
            self._lc_holder = None
            _rec.released(holder, *self._lc)
        super().release()


TrackedAsyncLock.__name__ = TrackedAsyncLock.__qualname__ = "Lock"


# -- start / stop --------------------------------------------------------------------------------

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
    global _rec, _EXCLUDED
    if _rec is not None:
        raise RuntimeError("lockcheck: a recorder is already started")
    if len(_EXCLUDED) == 1:
        _EXCLUDED = _excluded_dirs()
        _kinds.clear()
    _rec = recorder
    recorder.active = True
    for module, attr, value in _PATCHES:
        _saved.append((module, attr, getattr(module, attr)))
        setattr(module, attr, value)
    _wrap_module_globals()


def stop(recorder: Optional[Recorder] = None) -> None:
    """Undo `start`: originals back, module globals unwrapped; tracked locks become plain ones."""
    global _rec
    if _rec is None or (recorder is not None and recorder is not _rec):
        return
    for module, attr, value in reversed(_saved):
        setattr(module, attr, value)
    _saved.clear()
    for namespace, attr, wrapper, real in _wrapped_globals:
        if namespace.get(attr) is wrapper:
            namespace[attr] = real
    _wrapped_globals.clear()
    _rec.active = False
    _rec = None


def active_recorder() -> Optional[Recorder]:
    return _rec


def _wrap_module_globals() -> None:
    """Locks made at import time, bound to module globals: wrap them (same real lock)."""
    for modname, module in list(sys.modules.items()):
        if module is None or modname.split(".", 1)[0] in _SKIP_MODULES:
            continue
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        filename = getattr(module, "__file__", None) or modname
        if os.path.abspath(filename).startswith(_EXCLUDED):
            continue
        for attr, value in list(namespace.items()):
            kind = type(value)
            if kind is _RAW_LOCK_TYPE:
                wrapper: Any = TrackedLock(_global_class(modname, attr, filename), f"{next(_instances):#x}", value)
            elif kind is _RAW_RLOCK_TYPE:
                wrapper = TrackedRLock(_global_class(modname, attr, filename), f"{next(_instances):#x}", value)
            else:
                continue
            namespace[attr] = wrapper
            _wrapped_globals.append((namespace, attr, wrapper, value))


def _global_class(modname: str, attr: str, filename: str) -> str:
    return _registry.named(f"{modname}.{attr}", _relpath(filename))


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


# -- annotations (lockcheck.name / lockcheck.nested) ------------------------------------------------


def _target(lock: Any) -> Any:
    """The tracked object behind `lock` (a Condition's lock), or None for an untracked one."""
    if isinstance(lock, _Tracked):
        return lock
    inner = getattr(lock, "_lock", None)
    if isinstance(inner, _Tracked):
        return inner
    return None


def name(lock: Any, class_name: str) -> Any:
    """Give one lock its own lock class (lockdep's `lockdep_set_class_and_name`); returns the lock."""
    target = _target(lock)
    if target is not None:
        target._cls = _registry.named(class_name, "lockcheck.name")
    elif isinstance(lock, (_SemaphoreMixin, TrackedAsyncLock)) and getattr(lock, "_lc", None) is not None:
        lock._lc = (_registry.named(class_name, "lockcheck.name"), lock._lc[1])
    return lock


class _Nested:
    """One acquisition of `lock` as subclass N (lockdep's `mutex_lock_nested`)."""

    __slots__ = ("lock", "subclass")

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

    def __enter__(self) -> bool:
        target = _target(self.lock)
        if target is None:
            return self.lock.__enter__()
        return target._acquire(True, -1, sys._getframe(1), self.subclass)

    def __exit__(self, *exc: Any) -> None:
        self.lock.release()


def nested(lock: Any, subclass: int = 1) -> _Nested:
    """`with lockcheck.nested(child.lock, 1):` takes `lock` as its class's subclass 1 (0..7).

    Use it where two locks of one class are legitimately held together
    (parent then child): the inner one validates as `CLASS/1`.
    """
    if not 0 <= subclass <= 7:
        raise ValueError("lockcheck.nested: subclass must be 0..7 (lockdep's MAX_LOCKDEP_SUBCLASSES)")
    return _Nested(lock, subclass)
