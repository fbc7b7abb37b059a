"""Waits on events under locks (`pytest --lockcheck --lockcheck-waits`): DEPT's model on lockdep's graph.

Many Python deadlocks are not lock against lock: a thread holding a lock
joins a thread, waits for a future, a queue or an event, and whatever would
complete that wait needs the same lock.  Lockdep cannot see these; the
kernel's DEPT proposal (and, in lockdep itself, the `lockdep_map` that
`flush_work()` takes and `process_one_work()` holds around a work item)
treats a wait as an acquisition of the awaited *event*, which is how they
are modelled here:

- **Event classes.**  Each waitable object made by the code under test
  (`threading.Thread`, `concurrent.futures.Future`, `queue.Queue`,
  `threading.Event`, `threading.Condition`, `asyncio.Event`,
  `asyncio.Queue`) gets an event class keyed by its creation site, named as
  lock classes are, after what the creating line assigns it to:
  `Thread(test_x.t)`, `Future(test_x.fut)` (the `submit` call's site),
  `Queue(test_x.q)` and `Queue.join(test_x.q)`, `Event(test_x.done)`,
  `Condition(test_x.cond)`, `asyncio.Event(...)`, `asyncio.Queue(...)`.
  Objects made by the standard library itself (the executor's worker
  threads, a Queue's own Conditions, a Thread's `_started` Event) and by
  the test runner are not tracked.
- **A wait** while the context (thread or asyncio task) holds locks is fed
  as a blocking acquire of the event class, released when the wait
  returns: `held -> EVENT` dependencies, validated like any acquisition
  (so the report exists before a wait that never returns).  Waits:
  `Thread.join()`, `Future.result()`/`exception()`,
  `concurrent.futures.wait()`, `Queue.get()` (blocking) and
  `Queue.join()`, `Event.wait()`, `Condition.wait()`/`wait_for()` (the
  Condition's own lock excepted: `wait` releases it), `asyncio.Event.wait()`,
  `asyncio.Queue.get()`/`join()`.  A wait with a timeout is a trylock
  (no dependency) unless `lockcheck_timed_acquire = blocking`.
- **The signalling context** adds `EVENT -> lock` for each lock it needs
  before the wait can complete.  A thread's whole `run()` holds its
  `Thread(...)` class, and an executor's work item holds its
  `Future(...)` class while it runs (as `process_one_work()` holds the
  work's map), so every lock they take leads from the event.  For the
  other events the signal is one call -- `Future.set_result()`/
  `set_exception()`, `Queue.put()`, `Queue.task_done()`, `Event.set()`,
  `Condition.notify()`/`notify_all()`, `asyncio.Event.set()`,
  `asyncio.Queue.put_nowait()`/`put()`/`task_done()` -- and the locks held
  at that call (a Condition's own lock excepted) lead from the event.

A cycle through an event class is then an ordinary circular dependency,
reported in the kernel's layout, and the Python report adds which waits
and signals make its event classes ("waits for completion of ...").

Limits (what DEPT does and this does not):

- For one-call signals only the locks *held at the signal* count: a
  producer that takes and releases a lock before `put()` is not seen as
  needing it (DEPT tracks an event context from its start; a Python
  program has no mark for where a producer's work on one item begins).
- A wait's class is its object's creation site: two queues made on one
  line are one class (as two locks are), which can join waits that never
  meet.  Objects made before tracking began get no class and are not seen.
- Waits that are not method calls on those types are not seen: `await`
  on an `asyncio.Future` or task (C-implemented), `as_completed`,
  `Queue.put()` on a full bounded queue, `SimpleQueue`, `Barrier`,
  `multiprocessing`, `select`/sockets.
- Like lockdep, it reports what *can* deadlock in some interleaving, from
  one run that did not: a join of a thread that had already ended counts.

Every patched method keeps its signature, return value and exceptions
(`functools.wraps`, the original called with the caller's arguments), and
`stop()` puts the originals back.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import concurrent.futures.thread
import functools
import linecache
import os
import queue
import re
import sys
import threading
import weakref
from typing import Any, Callable, Optional

from lockcheck.python import naming, semaphores, sites as pysites, tracked
from lockcheck.lockdep.tasks import TaskState
from lockcheck.python.event_classes import EVENTS, describe, is_event  # noqa: F401 - is_event, describe: re-exported

#: waitable object -> (event class, instance); weak: the objects live as the program says
_objects: "weakref.WeakKeyDictionary[Any, tuple[str, str]]" = weakref.WeakKeyDictionary()
#: (owner, attribute, original): undone by `stop`
_saved: list[tuple[Any, str, Any]] = []
_names: dict[str, str] = {}  # event class -> creation site (two sites never share a name)
_by_site: dict[tuple, str] = {}

_ORIG_CONDITION = tracked._ORIG_CONDITION
#: frames seen through when looking for where a waitable was made: the library that made it
_LIB_DIRS = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep for m in (concurrent.futures, asyncio))
_LIB_FILES = (os.path.abspath(threading.__file__), os.path.abspath(queue.__file__))
#: ours: always looked past (the patched `__init__`, the tracked Condition's)
_OWN_FILES = (os.path.abspath(__file__), os.path.abspath(tracked.__file__), os.path.abspath(semaphores.__file__))
_TARGET = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*(?::[^=]*)?=(?!=)")
_lib_codes: dict = {}

# -- event classes: creation sites -------------------------------------------------------------


def _maker_frame(depth: int, through: bool) -> Any:
    """The frame that made a waitable; None when that is the standard library or the test runner.

    `through`: look past threading, queue, concurrent.futures and asyncio to the code that
    asked them (a Future is made by `submit`); otherwise an object those modules make for
    themselves (a Queue's Conditions, an Event's) is theirs, not a wait of the program's.
    """
    try:
        frame = sys._getframe(depth)
    except ValueError:
        return None
    while frame is not None:
        code = frame.f_code
        lib = _lib_codes.get(code)
        if lib is None:
            path = os.path.abspath(code.co_filename)
            lib = _lib_codes[code] = 2 if path in _OWN_FILES else 1 if (
                path in _LIB_FILES or path.startswith(_LIB_DIRS)) else 0
        if not lib:
            break
        if lib == 1 and not through:
            return None
        frame = frame.f_back
    if frame is None:
        return None
    filename = frame.f_code.co_filename
    if pysites.excluded(filename) or _in_stdlib(filename):
        return None
    return frame


def _in_stdlib(filename: str) -> bool:
    from lockcheck.python.patching import _is_stdlib

    return _is_stdlib(filename)


def _class_for(frame: Any, kind: str) -> str:
    """The event class of a `kind` made at `frame`, named as lock classes are (`pysites`)."""
    code = frame.f_code
    key = (code, frame.f_lasti, kind)
    name = _by_site.get(key)
    if name is not None:
        return name
    rel = pysites.relpath(code.co_filename)
    site = f"{rel}:{frame.f_lineno}"
    match = _TARGET.match(linecache.getline(code.co_filename, frame.f_lineno))
    if match is not None:
        target = match.group(1)
        qualname = getattr(code, "co_qualname", code.co_name).replace(".<locals>", "")
        if code.co_name == "<module>":
            stem = f"{os.path.splitext(os.path.basename(code.co_filename))[0]}.{target}"
        elif target.startswith(("self.", "cls.")):
            owner = qualname.rsplit(".", 1)[0]
            stem = f"{owner}.{target.split('.', 1)[1]}"
        else:
            stem = f"{qualname}.{target}"
    else:
        stem = f"{os.path.basename(rel)}:{frame.f_lineno}"
    name = f"{kind}({stem})"
    if _names.get(name, site) != site:
        name = f"{kind}({stem}#{frame.f_lineno})"
    _names.setdefault(name, site)
    EVENTS.setdefault(name, (kind, site))
    _by_site[key] = name
    return name


def _made(obj: Any, kind: str, depth: int = 3) -> None:
    """`obj` was just made: an event class for it, if user code made it while recording."""
    if tracked._rec is None:
        return
    frame = _maker_frame(depth, kind == "Future")
    if frame is not None:
        _objects[obj] = (_class_for(frame, kind), pysites.new_instance())


def _event_of(obj: Any, kind: str) -> Optional[tuple[str, str]]:
    """(class, instance) of a tracked object's `kind` of event: `Queue.join` is a Queue's second."""
    entry = _objects.get(obj)
    if entry is None:
        return None
    cls, inst = entry
    if kind == cls.split("(", 1)[0]:
        return entry
    name = kind + cls[cls.index("("):]
    EVENTS.setdefault(name, (kind, EVENTS[cls][1]))
    return name, inst


# -- waits and signals -------------------------------------------------------------------


def _task(rec: Any, is_async: bool) -> tuple[str, str]:
    """The waiting or signalling context: the asyncio task, or the thread outside any loop
    (an `asyncio.Queue` filled by synchronous code before the loop runs)."""
    if is_async:
        try:
            return rec.async_task()
        except RuntimeError:  # no running event loop
            pass
    return rec.thread_task()


def _wait_begin(rec: Any, event: tuple[str, str], frame: Any, is_async: bool = False,
                except_lock: Any = None) -> Optional[str]:
    """Feed the wait as a blocking acquire of the event class; the task to release it for, or None.

    A context holding nothing adds no dependency: nothing is fed (the common case costs one look).
    `except_lock`: a Condition's own lock, which its `wait` releases (never held across the wait).
    """
    task, comm = _task(rec, is_async)
    state = rec.checker.tasks.get(task)
    if state is None or not state.held:
        return None
    cls, inst = event
    if except_lock is not None:
        target = naming._target(except_lock)
        if target is not None and any(h.lock == target._cls and h.instance == target._inst for h in state.held):
            # the rest of the held stack, each lock leading to the event (its own lock is let go)
            held = [h for h in state.held if not (h.lock == target._cls and h.instance == target._inst)]
            _depend(rec, task, comm, held, (cls, inst), frame, waits=True)
            return None
    rec.acquired(task, comm, cls, inst, frame)
    return task


def _wait_end(rec: Any, task: Optional[str], event: tuple[str, str]) -> None:
    if task is not None:
        rec.released(task, event[0], event[1])


def _signal(rec: Any, event: tuple[str, str], frame: Any, is_async: bool = False, except_lock: Any = None) -> None:
    """The event is signalled: every lock the context holds now leads from the event class."""
    task, comm = _task(rec, is_async)
    state = rec.checker.tasks.get(task)
    if state is None or not state.held:
        return
    skip = None
    if except_lock is not None:
        target = naming._target(except_lock)
        if target is not None:
            skip = (target._cls, target._inst)
    held = [h for h in state.held if h.cls not in EVENTS and (h.lock, h.instance) != skip and h.check]
    if held:
        _depend(rec, task, comm, held, event, frame, waits=False)


def _depend(rec: Any, task: str, comm: str, held: list, event: tuple[str, str], frame: Any, waits: bool) -> None:
    """Add `held -> event` (a wait) or `event -> held` (a signal) for each held lock, validated.

    Fed as acquisitions of a context of its own (`TASK~wait`, `TASK~signal`) that takes the two
    classes in that order, as merged graphs are replayed: each new dependency is checked
    against the graph, and a cycle it closes is reported with the real context's name.  That
    context marks no irq usage (its acquisitions are not real ones).
    """
    from lockcheck.events import ACQUIRE, RELEASE, Event

    if _thread_busy(rec):
        return  # a signal handler or finalizer inside the recorder: not a wait to model
    checker = rec.checker
    succ = checker.graph.nx._succ
    cls, inst = event

    def known(hlock: Any) -> bool:
        first, second = (hlock.cls, cls) if waits else (cls, hlock.cls)
        return second in succ.get(first, ())

    new = [hlock for hlock in held if not known(hlock)]
    if not new:
        return  # every dependency known: checked when it was added
    key = f"{task}~{'wait' if waits else 'signal'}"
    site = rec.site(pysites.user_frame(frame))
    for hlock in new:
        state = checker.tasks.get(key)
        if state is None:
            state = checker.tasks[key] = TaskState(key, comm)
            state.set_irq_unknown()
        state.name = comm
        hev = hlock.event
        held_ev = Event(key, ACQUIRE, hlock.lock, hlock.instance, hlock.read, subclass=hlock.subclass, at=hev.at,
                        file=hev.file, line=hev.line, comm=comm)
        event_ev = Event(key, ACQUIRE, cls, inst, at=site[2], file=site[0], line=site[1], comm=comm)
        outer, inner = (held_ev, event_ev) if waits else (event_ev, held_ev)
        try:
            rec.feed(outer)
            rec.feed(inner, frame)
            rec.feed(Event(key, RELEASE, inner.lock, inner.instance))
            rec.feed(Event(key, RELEASE, outer.lock, outer.instance))
        finally:
            state = checker.tasks.get(key)
            if state is not None and not state.held:
                del checker.tasks[key]


def _hold(rec: Any, task: str, comm: str, event: tuple[str, str]) -> None:
    """The context that will signal `event` begins: it holds the event class (at the object's
    creation site) until it signals, so each lock it takes leads from the event."""
    from lockcheck.events import ACQUIRE, WRITE, Event

    cls, inst = event
    site = EVENTS[cls][1]
    file, _, line = site.rpartition(":")
    rec.feed(Event(task, ACQUIRE, cls, inst, WRITE, True, 0, None, rec.check, site, None, None, file, int(line),
                   comm))


def _thread_busy(rec: Any) -> bool:
    import _thread

    return _thread.get_ident() in rec._busy


def _timed(rec: Any, block: bool, timeout: Optional[float]) -> bool:
    """A wait that cannot wait for ever: a trylock, no dependency (unless timed acquires are blocking)."""
    return not block or (timeout is not None and rec.settings.timed_is_try)


# -- the patches --------------------------------------------------------------------------


def _patch(owner: Any, attr: str, make: Callable[[Any], Any]) -> None:
    original = owner.__dict__[attr]
    wrapper = make(original)
    if not isinstance(wrapper, (staticmethod, classmethod)):
        functools.update_wrapper(wrapper, original)
    _saved.append((owner, attr, original))
    setattr(owner, attr, wrapper)


def _init(kind: str) -> Callable[[Any], Any]:
    def make(original: Any) -> Any:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            if tracked._rec is not None and self not in _objects:
                _made(self, kind)
        return __init__
    return make


def _waiter(kind: str, timed: Callable[..., bool] = lambda rec, *a, **k: False,
            lock_of: Optional[Callable[[Any], Any]] = None) -> Callable[[Any], Any]:
    """A blocking method of a waitable: the wait is fed around the original call."""
    def make(original: Any) -> Any:
        def wait(self: Any, *args: Any, **kwargs: Any) -> Any:
            rec = tracked._rec
            if rec is None:
                return original(self, *args, **kwargs)
            event = _event_of(self, kind)
            try:
                untracked = event is None or timed(rec, *args, **kwargs)
            except TypeError:  # arguments the method does not take: the original says so
                untracked = True
            if untracked:
                return original(self, *args, **kwargs)
            task = _wait_begin(rec, event, sys._getframe(1), except_lock=lock_of(self) if lock_of else None)
            try:
                return original(self, *args, **kwargs)
            finally:
                _wait_end(rec, task, event)
        return wait
    return make


def _async_waiter(kind: str) -> Callable[[Any], Any]:
    def make(original: Any) -> Any:
        async def wait(self: Any, *args: Any, **kwargs: Any) -> Any:
            rec = tracked._rec
            event = _event_of(self, kind) if rec is not None else None
            if event is None:
                return await original(self, *args, **kwargs)
            task = _wait_begin(rec, event, sys._getframe(1), is_async=True)
            try:
                return await original(self, *args, **kwargs)
            finally:
                _wait_end(rec, task, event)
        return wait
    return make


def _signaller(kind: str, is_async: bool = False, lock_of: Optional[Callable[[Any], Any]] = None
               ) -> Callable[[Any], Any]:
    """A method that completes waits: the locks held now lead from the event."""
    def make(original: Any) -> Any:
        def signal(self: Any, *args: Any, **kwargs: Any) -> Any:
            rec = tracked._rec
            if rec is not None:
                event = _event_of(self, kind)
                if event is not None:
                    _signal(rec, event, sys._getframe(1), is_async, lock_of(self) if lock_of else None)
            return original(self, *args, **kwargs)
        return signal
    return make


def _thread_join(original: Any) -> Any:
    def join(self: Any, timeout: Optional[float] = None) -> None:
        rec = tracked._rec
        event = _objects.get(self) if rec is not None else None
        if (event is None or _timed(rec, True, timeout) or not self._started.is_set()
                or self is threading.current_thread()):
            return original(self, timeout)  # (not started, or itself: the original raises)
        task = _wait_begin(rec, event, sys._getframe(1))
        try:
            return original(self, timeout)
        finally:
            _wait_end(rec, task, event)
    return join


def _thread_bootstrap(original: Any) -> Any:
    """The thread's whole run holds its event class: every lock it takes leads from it."""
    def _bootstrap_inner(self: Any) -> None:
        rec = tracked._rec
        event = _objects.get(self) if rec is not None else None
        if event is None:
            return original(self)
        return _run_holding(rec, rec.thread_task(self.name), event, original, self)
    return _bootstrap_inner


def _work_item_run(original: Any) -> Any:
    """An executor's work item holds its future's event class while it runs (`process_one_work`)."""
    def run(self: Any) -> None:
        rec = tracked._rec
        event = _objects.get(self.future) if rec is not None else None
        if event is None:
            return original(self)
        return _run_holding(rec, rec.thread_task(), event, original, self)
    return run


def _run_holding(rec: Any, context: tuple, event: tuple, original: Any, obj: Any) -> Any:
    """`original(obj)` with `event` held by the context (task, comm) for the whole call: what
    completes the event is everything that call does."""
    task, comm = context
    _hold(rec, task, comm, event)
    try:
        return original(obj)
    finally:
        if tracked._rec is rec:
            rec.released(task, event[0], event[1])


def _futures_wait(original: Any) -> Any:
    def wait(fs: Any, timeout: Optional[float] = None, return_when: str = concurrent.futures.ALL_COMPLETED) -> Any:
        rec = tracked._rec
        if rec is None or _timed(rec, True, timeout):
            return original(fs, timeout, return_when)
        fs = list(fs) if not isinstance(fs, (set, frozenset, list, tuple)) else fs
        frame = sys._getframe(1)
        for fut in fs:
            event = _objects.get(fut)
            if event is not None:
                # each wait validated in turn (a wait for several is a wait for each of them)
                _wait_end(rec, _wait_begin(rec, event, frame), event)
        return original(fs, timeout, return_when)
    return wait


def _timed_get(rec: Any, block: bool = True, timeout: Optional[float] = None) -> bool:
    return _timed(rec, block, timeout)


def _timed_wait(rec: Any, timeout: Optional[float] = None) -> bool:
    return _timed(rec, True, timeout)


def _cond_lock(cond: Any) -> Any:
    return cond._lock


def start(rec: Any) -> None:
    """Patch the waitables (once per `stop`): `rec` is the recorder the waits are fed to."""
    if _saved:
        return
    futures = concurrent.futures
    _patch(threading.Thread, "__init__", _init("Thread"))
    _patch(threading.Thread, "join", _thread_join)
    _patch(threading.Thread, "_bootstrap_inner", _thread_bootstrap)
    _patch(futures.Future, "__init__", _init("Future"))
    _patch(futures.Future, "result", _waiter("Future", _timed_wait))
    _patch(futures.Future, "exception", _waiter("Future", _timed_wait))
    _patch(futures.Future, "set_result", _signaller("Future"))
    _patch(futures.Future, "set_exception", _signaller("Future"))
    _patch(futures.thread._WorkItem, "run", _work_item_run)
    _patch_function(futures, "wait", _futures_wait)
    _patch(queue.Queue, "__init__", _init("Queue"))
    _patch(queue.Queue, "get", _waiter("Queue", _timed_get))
    _patch(queue.Queue, "put", _signaller("Queue"))
    _patch(queue.Queue, "join", _waiter("Queue.join"))
    _patch(queue.Queue, "task_done", _signaller("Queue.join"))
    _patch(threading.Event, "__init__", _init("Event"))
    _patch(threading.Event, "wait", _waiter("Event", _timed_wait))
    _patch(threading.Event, "set", _signaller("Event"))
    _patch(_ORIG_CONDITION, "__init__", _init("Condition"))
    _patch(_ORIG_CONDITION, "wait", _waiter("Condition", _timed_wait, _cond_lock))
    _patch(_ORIG_CONDITION, "notify", _signaller("Condition", lock_of=_cond_lock))
    _patch(asyncio.Event, "__init__", _init("asyncio.Event"))
    _patch(asyncio.Event, "wait", _async_waiter("asyncio.Event"))
    _patch(asyncio.Event, "set", _signaller("asyncio.Event", is_async=True))
    _patch(asyncio.Queue, "__init__", _init("asyncio.Queue"))
    _patch(asyncio.Queue, "get", _async_waiter("asyncio.Queue"))
    _patch(asyncio.Queue, "put_nowait", _signaller("asyncio.Queue", is_async=True))
    _patch(asyncio.Queue, "join", _async_waiter("asyncio.Queue.join"))
    _patch(asyncio.Queue, "task_done", _signaller("asyncio.Queue.join", is_async=True))


def _patch_function(module: Any, attr: str, make: Callable[[Any], Any]) -> None:
    original = getattr(module, attr)
    wrapper = functools.update_wrapper(make(original), original)
    _saved.append((module, attr, original))
    setattr(module, attr, wrapper)


def stop() -> None:
    """Put every original back (objects made meanwhile keep their class until collected)."""
    for owner, attr, original in reversed(_saved):
        setattr(owner, attr, original)
    _saved.clear()
