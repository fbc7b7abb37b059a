"""The wait-for graph: which thread or asyncio task waits for which lock, and who holds it.

Lock-order checking (`lockcheck.lockdep.checker`) finds deadlocks that *could*
happen; this module sees the one that *is* happening.  A tracked lock whose
blocking acquire cannot take the lock at once (a non-blocking try failed)
calls `wait_thread` (or `wait_task` for an `asyncio.Lock`): the context is
registered as waiting for that lock, and the chain

    holder(L) -> the lock it waits for -> its holder -> ...

is followed.  If it comes back to the acquiring context, every context on
it is blocked for good: the acquire raises `DeadlockError` in the acquiring
context (mode `raise`, the default) or files the report and keeps waiting
(mode `report`).  The uncontended path never comes here, so the check costs
nothing unless a lock is contended.

Holders are what the tracked locks record (`_holder`, `_lc_holder`): the
context that took the lock, as lockdep takes a mutex's owner.  A `Lock` (or
an `asyncio.Lock`) may still be released by a context that does not hold it
(a lock used as a signal), which would break the cycle; so a cycle through
one of those is reported only if it still stands after `grace` seconds
(the recorder's, as for a re-acquire of a held `Lock`).  A cycle of RLocks
only is certain at once.  Timed acquires (`acquire(timeout=...)`) end by
themselves and are never part of the graph.

The mixed case -- a blocking `threading` acquire on the thread of a running
event loop, for a lock that a suspended task of that same loop took (across
an `await`) -- is certain too: the task can only resume, and release, when
the loop thread returns.  `loop_holder` finds that task.
"""

from __future__ import annotations

import _thread
import asyncio
import io
import os
import sys
import time
from typing import Any, Optional

from lockcheck.lockdep import findings as F
from lockcheck.python import deadlock_report as _deadlock_report  # noqa: F401 - registers the report's layout
from lockcheck.python import report as python
from lockcheck.python.core import RecorderRef
from lockcheck.python.settings import OFF, RAISE, REPORT
from lockcheck.python.sites import relpath, user_frame
from lockcheck.python.stacks import capture

#: what a detected cycle does (`Settings.deadlock`; re-exported for callers of this module)
MODES = (RAISE, REPORT, OFF)

_monotonic = time.monotonic


class DeadlockError(RuntimeError):
    """A blocking acquire that would never return: its lock's holder waits, transitively, for a
    lock the acquiring thread or task holds.  The message is the full report."""

    def __init__(self, report: str, finding: Optional[F.Finding] = None) -> None:
        super().__init__(report)
        self.finding = finding


class Wait:
    """One context blocked in an acquire: who (task key, display name, thread), on what, since when."""

    __slots__ = ("task", "comm", "lock", "site", "since", "ident", "atask")

    def __init__(self, task: str, comm: str, lock: Any, site: str, atask: Any = None) -> None:
        self.task = task
        self.comm = comm
        self.lock = lock
        self.site = site
        self.since = _monotonic()
        self.ident = _thread.get_ident()
        self.atask = atask  # the asyncio.Task that waits (None: a thread)


#: task key -> its wait; a thread or task waits for at most one lock at a time
waits: dict[str, Wait] = {}
#: serialises register-and-check, so of two contexts closing one cycle the second sees the
#: first's wait; re-entrant, since a signal handler may take a contended lock in the middle
_wf_lock = _thread.RLock()


def holder(lock: Any) -> Optional[str]:
    """The task key of the context holding tracked `lock` (None: free, or not known)."""
    held = getattr(lock, "_holder", None)
    if held is None:
        held = getattr(lock, "_lc_holder", None)
    return held


def lock_name(lock: Any) -> str:
    """`CLASS@INSTANCE` of a tracked lock."""
    lc = getattr(lock, "_lc", None)
    if lc is not None:
        return f"{lc[0]}@{lc[1]}"
    return f"{lock._cls}@{lock._inst}"


def find_cycle(task: str, lock: Any) -> Optional[list[Wait]]:
    """The waits of the cycle `task` closes by waiting for `lock`, the acquirer's first; else None.

    Follows holder -> its wait -> that lock's holder... (the kernel has no
    such check; this is the wait-for graph of a database's deadlock detector).
    A chain that ends (a holder that runs) or loops without `task` is no cycle of ours.
    """
    first = waits.get(task)
    if first is None:
        return None
    chain = [first]
    seen = {task}
    current = holder(lock)
    while current is not None:
        if current == task:
            return chain
        if current in seen:
            return None
        seen.add(current)
        wait = waits.get(current)
        if wait is None:
            return None
        chain.append(wait)
        current = holder(wait.lock)
    return None


def _certain(chain: list[Wait]) -> bool:
    """Only owner-released locks (RLocks) on the cycle: nobody outside it can break it."""
    return all(getattr(wait.lock, "_lc_owned", False) for wait in chain)


def _still(chain: list[Wait]) -> bool:
    """The same waits still stand, each lock still held by the next context of the cycle."""
    n = len(chain)
    for i, wait in enumerate(chain):
        if waits.get(wait.task) is not wait or holder(wait.lock) != chain[(i + 1) % n].task:
            return False
    return True


# -- threads --------------------------------------------------------------------------------

#: how often a wait that closes no cycle looks again whether its lock's holder has ended
POLL = 0.25


def wait_thread(lock: Any, rec: RecorderRef, task: str, comm: str, frame: Any) -> None:
    """Block in `lock`'s real acquire, a non-blocking try of which failed; check the wait first.

    Returns with the lock taken; raises `DeadlockError` (mode `raise`) when the
    wait closes a cycle.  The wait is registered only for as long as it lasts.
    """
    __tracebackhide__ = True
    real = lock._real
    if rec.settings.deadlock == OFF:
        real.acquire()
        return
    wait = Wait(task, comm, lock, rec.site(_user(frame))[2])
    outer, chain = _register(wait)
    try:
        if chain is None:
            _acquire_watching(lock, rec, wait, frame)
            return
        if not _certain(chain):
            if real.acquire(True, rec.settings.grace):
                return  # released by someone outside the cycle: it was no deadlock
            with _wf_lock:
                if not _still(chain):
                    chain = None
            if chain is None:
                real.acquire()
                return
        _found(rec, deadlock_finding(rec, chain[0], chain_contexts(rec, chain), frame))
        real.acquire()  # mode report: keep waiting (a hang report will show it)
    finally:
        _unwait(task, wait, outer)


def _acquire_watching(lock: Any, rec: RecorderRef, wait: Wait, frame: Any) -> None:
    """Take `lock`, waiting as long as it takes -- unless its holder is a thread that has ended.

    An RLock held by an ended thread is held for ever (only its owner may release it): the wait
    can never end, which is certain, so it is a `deadlock` as a cycle of waits is.  A `Lock` may
    still be released by another thread (a signal): reported only if it is still held by the
    ended thread after `grace` seconds.  The holder may end while we wait, so the wait wakes
    every `POLL` seconds to look (the uncontended path never comes here).
    """
    __tracebackhide__ = True
    real = lock._real
    timeout = 0.0
    while not real.acquire(True, timeout):
        timeout = POLL
        gone = _ended_holder(rec, lock)
        if gone is None:
            continue
        if not _certain([wait]):
            if real.acquire(True, rec.settings.grace):
                return
            if holder(lock) != gone:
                continue
        # an RLock's acquire filed lockdep's held-at-exit already (Recorder._orphan_taken): not twice
        filed = (lock._cls, lock._inst) in rec._orphans
        _found(rec, ended_finding(rec, wait, gone, frame), file=not filed)
        real.acquire()  # mode report: keep waiting (a hang report will show it)
        return


def _ended_holder(rec: RecorderRef, lock: Any) -> Optional[str]:
    """The task key of `lock`'s holder if that thread has ended (its end is applied first)."""
    if rec._pending:
        rec.drain()
    key = holder(lock)
    return key if key is not None and key in rec.ended_holding else None


def _register(wait: Wait) -> tuple[Optional[Wait], Optional[list[Wait]]]:
    """Record that `wait.task` waits for `wait.lock` and look for the cycle that closes, in one
    step under the wait-for lock; returns the wait it interrupts (a signal handler's) and the cycle."""
    with _wf_lock:
        outer = waits.get(wait.task)
        waits[wait.task] = wait
        return outer, find_cycle(wait.task, wait.lock)


def _unwait(task: str, wait: Wait, outer: Optional[Wait]) -> None:
    """The wait is over; a signal handler's wait gives the interrupted one back (`outer`)."""
    if waits.get(task) is wait:
        if outer is not None:
            waits[task] = outer
        else:
            del waits[task]


def _found(rec: RecorderRef, finding: F.Finding, file: bool = True) -> None:
    """File the finding (the test fails with it), then raise it here (mode raise) or print it."""
    __tracebackhide__ = True
    text = render(finding, rec)
    if file:
        rec.add_finding(finding)
    if rec.settings.deadlock == RAISE:
        raise DeadlockError(text, finding)
    if rec.settings.report_fd is not None:  # the real stderr: a test's captured output may never be shown
        write_fd(rec.settings.report_fd, text + "\n")
    else:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()


def mixed_thread(lock: Any, rec: RecorderRef, task: str, comm: str, frame: Any) -> bool:
    """A blocking re-acquire of `lock` by the thread that holds it, on a running event loop:
    if a suspended task of that loop took it, that is the mixed deadlock; raise (or report).
    Called after the grace wait failed; False: not the mixed case (plain recursion)."""
    __tracebackhide__ = True
    if rec.settings.deadlock == OFF:
        return False
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return False
    suspended = loop_holder(rec, loop, task, lock)
    if suspended is None:
        return False
    atask, key, where = suspended
    wait = Wait(task, comm, lock, rec.site(_user(frame))[2], asyncio.current_task(loop))
    outer = waits.get(task)
    waits[task] = wait
    try:
        name = lock_name(lock)
        running = wait.atask.get_name() if wait.atask is not None else "a callback"
        contexts = [
            _context(wait.comm, task, f"the event loop's thread, running {running}", "the event loop", None,
                     name, wait.site, rec._comm(key), 0.0),
            _context(rec._comm(key), key, "asyncio task, suspended", name, _taken_at(rec, task, lock),
                     None, where, wait.comm, None),
        ]
        finding = deadlock_finding(rec, wait, contexts, frame, mixed=True)
        _found(rec, finding)
        lock._real.acquire()
        return True
    finally:
        _unwait(task, wait, outer)


def loop_holder(rec: RecorderRef, loop: Any, task: str, lock: Any) -> Optional[tuple[Any, str, str]]:
    """The suspended task of `loop` inside whose `with` (or between acquire and release) `lock`
    is held: (the task, its key, where it is suspended), or None.

    The thread (`task`) holds `lock`; the checker knows where it took it.  The
    holding task is the one, not running now, whose coroutine chain is suspended
    in the function that made that acquisition.
    """
    site = _held_site(rec, task, lock)
    if site is None:
        return None
    file, line = site
    current = asyncio.current_task(loop)
    for atask in asyncio.all_tasks(loop):
        if atask is current or atask.done():
            continue
        for frame in atask.get_stack():
            code = frame.f_code
            if relpath(code.co_filename) != file:
                continue
            if frame.f_lineno >= line and line in {ln for _, _, ln in code.co_lines()}:
                key, _ = _async_key(rec, atask)
                return atask, key, f"{file}:{frame.f_lineno}"
    return None


def _held_site(rec: RecorderRef, task: str, lock: Any) -> Optional[tuple[str, int]]:
    state = rec.checker.tasks.get(task)
    if state is None:
        return None
    for hlock in list(state.held):
        if hlock.lock.partition("/")[0] == lock._cls and hlock.instance == lock._inst:
            ev = hlock.event
            return ev.file, ev.line
    return None


def _async_key(rec: RecorderRef, atask: Any) -> tuple[str, str]:
    """The recorder's key for an asyncio task that is not the running one."""
    key = rec._atasks.get(atask)
    if key is None:
        name = atask.get_name().replace(" ", "_").replace('"', "'")
        key = f"{rec.task_prefix}{name}"
    return key, rec._comm(key)


# -- asyncio tasks ---------------------------------------------------------------------------


async def wait_task(lock: Any, acquire: Any, rec: RecorderRef, task: str, comm: str, frame: Any) -> None:
    """`wait_thread` for an `asyncio.Lock` that is locked: `acquire` is the real (super) acquire."""
    __tracebackhide__ = True
    if rec.settings.deadlock == OFF:
        await acquire()
        return
    wait = Wait(task, comm, lock, rec.site(_user(frame))[2], asyncio.current_task())
    outer, chain = _register(wait)
    try:
        if chain is None:
            await acquire()
            return
        try:
            # an asyncio.Lock has no owner: any task may release it, so the cycle must last
            await asyncio.wait_for(acquire(), rec.settings.grace)
            return
        except asyncio.TimeoutError:
            pass
        with _wf_lock:
            if not _still(chain):
                chain = None
        if chain is None:
            await acquire()
            return
        _found(rec, deadlock_finding(rec, chain[0], chain_contexts(rec, chain), frame))
        await acquire()
    finally:
        _unwait(task, wait, outer)


# -- the finding --------------------------------------------------------------------------


def _context(task: str, key: str, kind: str, holds: str, holds_at: Optional[str], waits_for: Optional[str],
             waits_at: str, held_by: str, waited: Optional[float]) -> dict:
    """One context of a cycle as the report shows it (`Finding.details["contexts"]`)."""
    return {"task": task, "key": key, "kind": kind, "holds": holds, "holds_at": holds_at,
            "waits_for": waits_for, "waits_at": waits_at, "held_by": held_by,
            "for": None if waited is None else round(waited, 3)}


def chain_contexts(rec: RecorderRef, chain: list[Wait]) -> list[dict]:
    """The contexts of a cycle of lock waits: each holds the lock the one before it waits for."""
    now = _monotonic()
    n = len(chain)
    return [
        _context(wait.comm, wait.task, "asyncio task" if wait.atask is not None else "thread",
                 lock_name(chain[i - 1].lock), _taken_at(rec, wait.task, chain[i - 1].lock),
                 lock_name(wait.lock), wait.site, chain[(i + 1) % n].comm, now - wait.since)
        for i, wait in enumerate(chain)
    ]


def deadlock_finding(rec: RecorderRef, first: Wait, contexts: list[dict], frame: Any,
                     mixed: bool = False) -> F.Finding:
    """The `deadlock` finding: `contexts` (see `_context`), the acquiring one (`first`) first."""
    cls = lock_name(first.lock).rpartition("@")[0]
    cycle = [c["waits_for"].rpartition("@")[0] for c in reversed(contexts) if c["waits_for"]]
    finding = F.Finding(kind=F.DEADLOCK, task=first.comm, lock=cls, location=first.site,
                        held=None if mixed else contexts[0]["holds"].rpartition("@")[0],
                        cycle=cycle if len(cycle) > 1 else None, site=first.site)
    finding.details["contexts"] = contexts
    finding.details["mixed"] = mixed
    if frame is not None and rec.settings.stack_depth:
        finding.details["stack"] = capture(_user(frame), rec.settings.stack_depth)
    return finding


def ended_finding(rec: RecorderRef, wait: Wait, gone: str, frame: Any) -> F.Finding:
    """The `deadlock` finding of a wait for a lock whose holder, `gone`, has ended."""
    name = lock_name(wait.lock)
    comm, taken = rec.ended_holding[gone]
    contexts = [
        _context(wait.comm, wait.task, "thread", "nothing it waits on", None, name, wait.site, comm,
                 _monotonic() - wait.since),
        _context(comm, gone, "thread, ended", name, taken.get((wait.lock._cls, wait.lock._inst)), None,
                 "its end, holding the lock", "nobody: it has ended", None),
    ]
    finding = F.Finding(kind=F.DEADLOCK, task=wait.comm, lock=name.rpartition("@")[0], location=wait.site,
                        site=wait.site)
    finding.details["contexts"] = contexts
    finding.details["ended"] = True
    if frame is not None and rec.settings.stack_depth:
        finding.details["stack"] = capture(_user(frame), rec.settings.stack_depth)
    return finding


def _taken_at(rec: RecorderRef, task: str, lock: Any) -> Optional[str]:
    """Where `task` took `lock` (the checker's held stack), with how long ago."""
    state = rec.checker.tasks.get(task)
    if state is None:
        return None
    cls, _, inst = lock_name(lock).rpartition("@")
    for hlock in list(state.held):
        if hlock.lock.partition("/")[0] == cls and hlock.instance == inst:
            return hlock.event.at
    return None


def render(finding: F.Finding, rec: RecorderRef) -> str:
    """The finding as the plugin shows it (`lockcheck.python.report_short`, or with the kernel's
    layout `lockcheck.python.deadlock_report`)."""
    if getattr(rec.settings, "report_style", "kernel") == "python":
        from lockcheck.python import report_short as short

        return short.render(finding, rec.settings.stack_depth, short.Paths())
    out = io.StringIO()
    python.print_finding(finding, rec.summary(), out, rec.settings.stack_depth)
    return out.getvalue().strip("\n")


def _user(frame: Any) -> Any:
    return user_frame(frame)


def write_fd(fd: int, text: str) -> None:
    """Write to a file descriptor in whole (no Python file object: its lock may be held)."""
    data = text.encode("utf-8", "replace")
    while data:
        try:
            n = os.write(fd, data)
        except OSError:
            return
        data = data[n:]
