"""The hang report: when a test hangs, who holds which tracked lock and who waits for what.

pytest-timeout's and faulthandler's stack dumps show where each thread
is, never which thread holds the lock another waits for.  `hang_report`
says it, from what lockcheck already knows:

- every live thread and every asyncio task that holds or waits for a
  tracked lock: the locks it holds (class@instance, where it took them,
  for how long), and what it is blocked on -- a tracked lock (which, where,
  since when, held by whom) or, for a thread, the line it is at now;
- the cycle of waits, if there is one (`lockcheck.python.waitfor`).

It is printed before the stack dumps: under pytest-timeout (`dump_stacks`
is wrapped: both its signal and thread methods call it), under
`faulthandler_timeout` (a timer of our own fires just before faulthandler's),
and by the plugin's own `--lockcheck-hang-report=SECONDS`, which prints it
and the stacks without ending the test.

Everything here runs in a signal handler or a timer thread while other
threads are stuck: it takes no lock (tracked or not) and reads the shared
state by copying it.
"""

from __future__ import annotations

import _thread
import dataclasses
import gc
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Optional

from lockcheck.python import waitfor
from lockcheck.python.waitfor import write_fd

if TYPE_CHECKING:
    from lockcheck.python.recorder import Recorder


def _held_times() -> dict[tuple[str, str], float]:
    """(class, instance) -> when it was taken, for every tracked lock held now.

    The tracked locks keep when they were taken; they are found through the
    garbage collector, which is slow (a big heap: a fraction of a second) but
    only done once, for a report of a test that already hangs.
    """
    from lockcheck.python.async_lock import TrackedAsyncLock
    from lockcheck.python.tracked import _Tracked

    times: dict[tuple[str, str], float] = {}
    for obj in gc.get_objects():
        if isinstance(obj, _Tracked):
            if obj._holder is not None:
                times[obj._cls, obj._inst] = obj._since
        elif isinstance(obj, TrackedAsyncLock):
            # an asyncio.Lock subclass made while tracking was off has no lockcheck state
            lc = getattr(obj, "_lc", None)
            if lc is not None and getattr(obj, "_lc_holder", None) is not None:
                times[lc] = obj._lc_since
    return times


def _thread_names() -> dict[int, str]:
    """ident -> name of each live thread, read without threading's own lock (which may be held)."""
    active = dict(getattr(threading, "_active", {}))
    return {ident: thread.name for ident, thread in active.items()}


def _all_tasks() -> list[Any]:
    """Every asyncio task not done, on any loop in any thread (asyncio only lists one loop's)."""
    import asyncio.tasks as at

    found: list[Any] = []
    for name in ("_all_tasks", "_scheduled_tasks", "_eager_tasks"):
        tasks = getattr(at, name, None)
        if tasks is None:
            continue
        try:
            found.extend(list(tasks))
        except RuntimeError:  # changed while copied (another thread): what was copied is enough
            continue
    return [task for task in dict.fromkeys(found) if not task.done()]


def _where(frame: Any) -> str:
    """`file:LINE in function` of the innermost frame, and of the program's own frame nearest to
    it when that one is in the standard library (`threading.py:331 in wait` says little)."""
    from lockcheck.python.sites import relpath

    def one(f: Any) -> str:
        return f"{relpath(f.f_code.co_filename)}:{f.f_lineno} in {f.f_code.co_name}"

    where = one(frame)
    caller = frame
    while caller is not None and _stdlib(caller.f_code.co_filename):
        caller = caller.f_back
    if caller is not None and caller is not frame:
        where += f", called from {one(caller)}"
    return where


def _stdlib(path: str) -> bool:
    import sysconfig

    stdlib = sysconfig.get_paths()["stdlib"]
    return path.startswith(stdlib) and "site-packages" not in path


def hang_report(rec: "Recorder", why: str) -> str:
    """The report, as text (see the module docstring); `why` says what triggered it."""
    now = time.monotonic()
    times = _held_times()
    waits = dict(waitfor.waits)
    tasks = dict(rec.checker.tasks)
    names = _thread_names()
    frames = sys._current_frames()
    by_ident = dict(rec.thread_keys)
    lines = [f"lockcheck: hang report ({why}): the tracked locks each thread and asyncio task holds, "
             f"and what it waits for"]
    def held_lines(key: str) -> list[str]:
        state = tasks.get(key)
        held = list(state.held) if state is not None else []
        wait = waits.get(key)
        if wait is not None and held:
            # a blocking acquire is on the held stack before it waits: that one is not held yet
            cls, _, inst = waitfor.lock_name(wait.lock).rpartition("@")
            if held[-1].lock.partition("/")[0] == cls and held[-1].instance == inst:
                held.pop()
        out = []
        for hlock in held:
            since = times.get((hlock.lock.partition("/")[0], hlock.instance))
            age = f", held for {now - since:.2f}s" if since else ""
            out.append(f"    holds {hlock.cls}@{hlock.instance}, taken at: {hlock.event.at or '?'}{age}")
        return out

    def wait_line(wait: waitfor.Wait) -> str:
        name = waitfor.lock_name(wait.lock)
        cls, _, inst = name.rpartition("@")
        owner_key = waitfor.holder(wait.lock)
        owner_state = tasks.get(owner_key) if owner_key is not None else None
        owner = owner_state.name if owner_state is not None else owner_key or "nobody known"
        return (f"    BLOCKED: waits for {name}, at: {wait.site}, for {now - wait.since:.2f}s, "
                f"held by {owner}")

    me = _thread.get_ident()
    for ident, frame in frames.items():
        key = by_ident.get(ident)
        if ident == me and (key is None or (key not in waits and not held_lines(key))):
            continue  # the thread reporting (a timer); under a signal, the interrupted one is kept
        name = names.get(ident, "<not a threading.Thread>")
        state = tasks.get(key) if key is not None else None
        lines.append(f"  thread {name} (ident {ident}){': ' + state.name if state is not None else ''}")
        lines += held_lines(key) if key is not None else []
        wait = waits.get(key) if key is not None else None
        if wait is not None:
            lines.append(wait_line(wait))
        else:
            lines.append(f"    at: {_where(frame)}")
    for task in _all_tasks():
        key = rec._atasks.get(task)
        state = tasks.get(key) if key is not None else None
        wait = waits.get(key) if key is not None else None
        if state is None and wait is None:
            continue  # holds and waits for no tracked lock: the stack dumps show it
        lines.append(f"  asyncio task {task.get_name()}: {state.name if state is not None else key}")
        lines += held_lines(key)
        if wait is not None:
            lines.append(wait_line(wait))
        else:
            stack = task.get_stack()
            if stack:
                lines.append(f"    suspended at: {_where(stack[-1])}")
    seen: set = set()
    for key, wait in waits.items():
        chain = waitfor.find_cycle(key, wait.lock)
        if chain is None or frozenset(w.task for w in chain) in seen:
            continue
        seen.add(frozenset(w.task for w in chain))
        steps = " -> ".join(f"{w.comm} waits for {waitfor.lock_name(w.lock)}" for w in chain)
        lines.append(f"  wait-for cycle: {steps} -> held by {chain[0].comm}: a deadlock")
    if not seen:
        lines.append("  wait-for cycle: none among the tracked locks")
    return "\n".join(lines) + "\n"


class HangTimer:
    """Calls `fire()` once, `seconds` after `start`, unless cancelled first.

    A raw `_thread` thread sleeping on a raw lock: made with tracked
    `threading` primitives it would show in the reports it makes, and the
    program's own hang could block it.
    """

    def __init__(self, seconds: float, fire: Callable[[], None]) -> None:
        self.seconds = seconds
        self.fire = fire
        self._cancel = _thread.allocate_lock()
        self._cancel.acquire()

    def start(self) -> "HangTimer":
        _thread.start_new_thread(self._run, ())
        return self

    def cancel(self) -> None:
        if self._cancel.locked():
            self._cancel.release()

    def _run(self) -> None:
        if self._cancel.acquire(True, self.seconds):
            return
        try:
            self.fire()
        except Exception:  # noqa: BLE001 - a report that fails must not add a traceback to a hang
            pass


def stderr_fd(config: Any) -> Optional[int]:
    """The file descriptor pytest's faulthandler plugin writes its dumps to (the real stderr)."""
    try:
        from _pytest import faulthandler as pf
    except ImportError:
        return None
    key = getattr(pf, "fault_handler_stderr_fd_key", None)
    if key is not None and key in config.stash:
        return config.stash[key]
    key = getattr(pf, "fault_handler_stderr_key", None)  # pytest < 8: a file object
    if key is not None and key in config.stash:
        return config.stash[key].fileno()
    return None


class HangHooks:
    """Where the pytest plugin prints hang reports: pytest-timeout's dumps, faulthandler_timeout,
    and `--lockcheck-hang-report=SECONDS` (0: not)."""

    def __init__(self, config: Any, rec: "Recorder", seconds: float) -> None:
        self.config = config
        self.rec = rec
        self.seconds = seconds
        self.item: Any = None
        self._timers: list[HangTimer] = []
        self._patched: Optional[tuple[Any, Any]] = None

    def install(self) -> None:
        """Wrap pytest-timeout's `dump_stacks` (both its methods call it before the stacks)."""
        module = sys.modules.get("pytest_timeout")
        original = getattr(module, "dump_stacks", None)
        if original is None or self._patched is not None:
            return
        hooks = self

        def dump_stacks(terminal: Any) -> None:
            try:
                timeout = getattr(hooks.item, "nodeid", "a test")
                terminal.write(hang_report(hooks.rec, f"pytest-timeout: {timeout} timed out"))
            except Exception:  # noqa: BLE001 - the stacks must still be dumped
                pass
            original(terminal)

        dump_stacks.__wrapped__ = original  # type: ignore[attr-defined]
        module.dump_stacks = dump_stacks
        self._patched = (module, original)

    def uninstall(self) -> None:
        self.test_ended()
        if self._patched is not None:
            module, original = self._patched
            module.dump_stacks = original
            self._patched = None

    def test_started(self, item: Any) -> None:
        """Arm the timers of this test: faulthandler's (just before it dumps), and our own."""
        self.item = item
        fd = stderr_fd(self.config)
        if fd is None:
            fd = 2
        if self.rec.settings.report_fd != fd:  # where mode `report` writes: known once pytest configured
            self.rec.settings = dataclasses.replace(self.rec.settings, report_fd=fd)
        try:
            fault = float(self.config.getini("faulthandler_timeout") or 0)
        except (ValueError, TypeError):
            fault = 0.0
        if fault > 0:
            # faulthandler's own C thread dumps at `fault`; ours must run, and write, before it
            early = fault - min(0.5, fault / 4)
            self._timers.append(HangTimer(early, lambda: write_fd(fd, hang_report(
                self.rec, f"faulthandler_timeout: {item.nodeid} ran {fault:g}s"))).start())
        if self.seconds > 0:
            self._timers.append(HangTimer(self.seconds, lambda: self._own(fd, item)).start())

    def _own(self, fd: int, item: Any) -> None:
        """`--lockcheck-hang-report`: the report, then every thread's stack; the test goes on."""
        import faulthandler

        write_fd(fd, f"\n{'+' * 20} lockcheck: {item.nodeid} still runs after {self.seconds:g}s {'+' * 20}\n")
        write_fd(fd, hang_report(self.rec, f"--lockcheck-hang-report={self.seconds:g}: {item.nodeid}"))
        faulthandler.dump_traceback(file=fd, all_threads=True)

    def test_ended(self) -> None:
        for timer in self._timers:
            timer.cancel()
        self._timers = []
        self.item = None
