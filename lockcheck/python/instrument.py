"""Lockdep for live Python code: tracked `threading` and `asyncio` locks.

While a `Recorder` is started (`instrument()` as a context manager, or the
pytest plugin for a whole session), the factories `threading.Lock`,
`threading.RLock`, `threading.Condition`, `threading.Semaphore`,
`threading.BoundedSemaphore`, `asyncio.Lock`, `asyncio.Semaphore` and
`asyncio.BoundedSemaphore` make tracked locks: thin
wrappers around the real lock that turn every acquire and release into a
`lockcheck.events.Event` and feed it to one `Checker` *before* a blocking
acquire waits, so the report exists even when the program then deadlocks.

>>> import threading, lockcheck.python.instrument as pl
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
  `file.py:LINE`.  On Python 3.11+ the site includes the column, so
  `a, b = Lock(), Lock()` makes two classes (`test_x.a`, `test_x.b`); 3.10
  records no columns (one class per line).  Two sites that would get one
  name keep them apart with `#LINE`.  logging's `Handler.createLock` makes
  one class per handler type (`StreamHandler.lock`).  Instances are the lock objects (`0x1`, `0x2`... in creation
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
  `asyncio.Semaphore` and `asyncio.BoundedSemaphore` are read the same way,
  held by asyncio tasks (`lockcheck.python.semaphores.reading`, the one
  place for both); a contended permit is no wait of the wait-for detector.
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
  `concurrent.futures.thread._global_shutdown_lock`) or class attributes
  are replaced by wrappers of the same lock (restored at `stop()`), and a
  `from threading import Lock` binding made before is pointed at the
  patched factory.  Each is listed (`Recorder.preexisting`), and so are
  the Conditions and Semaphores made before, which stay untracked; locks
  held in instance attributes, closures or containers are not reachable.
- **Lifetimes**: a tracked lock collected or `_at_fork_reinit()`-ed while
  held leaves its holder's stack (queued: `__del__` may run anywhere); a
  thread that ends (seen when its thread-local data is dropped) loses its
  stack, and an RLock it still held is reported (`held-at-exit`) when
  another thread takes it; a plain Lock may legally be released by another
  thread later.  In a forked child only the forking thread's stack
  survives; taking a lock another thread held at the fork is
  `held-at-fork`.
- **Transparency**: the tracked types are named as the real ones
  (`_thread.lock`, `threading.Semaphore`...), answer `isinstance` for the
  real types (`__class__`), refuse instantiation, pickling and copying with
  CPython's own messages, and the patched factories pickle by reference as
  `threading.Lock`/`RLock`.
- **Signals and fork**: every thread marks itself busy before it takes the
  recorder's lock; a signal handler (or `__del__`) that runs in a busy
  thread queues its events, applied in order by the next feed.  In a
  forked child the recorder's and the class registry's locks are made anew
  (`os.register_at_fork`).
- **Interrupt contexts and waits** (the pytest plugin starts them): signal
  handlers run as softirqs and finalizers as hardirqs, so lockdep's irq
  checks apply (`lockcheck.python.interrupts`); with `--lockcheck-waits`, waits on
  threads, futures, queues, events and conditions are acquisitions of the
  event's class (DEPT's model, `lockcheck.python.dept`).

The checker is not thread safe: every feed happens under a raw `_thread`
lock that is itself never tracked (and never waited for by its own thread).

Where each part lives: `lockcheck.python.sites` (frames -> creation sites and
class names), `lockcheck.python.tracked` (the tracked lock types, `name`,
`nested`; their compiled hit path is lockcheck/python/_tracked.c), `lockcheck.python.recorder` (tasks, contexts, feeding the checker,
suppressions), `lockcheck.python.patching` (`start`/`stop`: the patched names and
the locks made before).  This module gathers the public names.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Optional

from lockcheck.python.patching import active_recorder, start, stop
from lockcheck.python.recorder import DEFAULT_SUPPRESS, Recorder
from lockcheck.python.naming import name, nested
from lockcheck.python.tracked import SelfDeadlockError

__all__ = [
    "Recorder", "SelfDeadlockError", "instrument", "start", "stop", "active_recorder", "name", "nested",
    "DEFAULT_SUPPRESS",
]


@contextmanager
def instrument(recorder: Optional[Recorder] = None, **options: Any) -> Iterator[Recorder]:
    """Track Python locks inside the block; yields the `Recorder` (its `findings`, `checker`).

    >>> import threading, lockcheck.python.instrument as pl
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
