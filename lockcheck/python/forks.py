"""What a fork, a multiprocessing target and a thread's end leave behind in the recorder.

A lock held by a thread that is gone -- one that did not survive a fork, the forking
thread whose code never goes on in a multiprocessing child, a thread that ended holding an
RLock -- is held for ever: taking it is the finding (`held-at-fork`, `held-at-exit`).  The
mixin of `lockcheck.python.recorder.Recorder` that keeps those orphans (`Recorder._orphans`).
"""

from __future__ import annotations

import _thread
import os
from typing import Any, Optional

from lockcheck.events import ACQUIRE, Event
from lockcheck.lockdep import findings as F
from lockcheck.lockdep.findings import Finding
from lockcheck.python.core import core_forget
from lockcheck.python.report import HELD_AT_FORK

_NOTHING: list = []


class ForkHandling:
    """The recorder's fork and orphan handling (see the module's docstring); the attributes
    it uses are the recorder's."""

    checker: Any
    _orphans: dict
    _pending: Any
    _local: Any
    active: bool

    def after_fork_in_child(self) -> None:
        """`os.register_at_fork(after_in_child=...)`: the child has one thread, the forking one.

        The feed lock may have been held by another thread at the fork: it is made anew, and so
        is the set of threads inside the recorder.  The rest (the other threads' held stacks)
        waits for the next feed, so that every fork handler -- logging's re-initialising its
        locks, say -- has run by then.
        """
        self._feed_lock = _thread.allocate_lock()
        self._busy = set()
        info = getattr(self._local, "info", None)
        self.forked_from = os.getppid()
        self._pending.append(("fork", info[1] if info is not None else None))
        if self.on_fork_child is not None:
            self.on_fork_child(self)

    def process_started(self) -> None:
        """`multiprocessing.util.register_after_fork`: this forked child now runs a multiprocessing
        target (start method fork), and will exit when it returns.

        The forking thread's frames -- the `with` blocks around `Process.start()`, a pool's own
        lock -- never resume in this child, so what that thread held at the fork is nobody's
        here: locked for ever, as another thread's hold at the fork is, and no lock the target
        takes nests inside it.  The target runs as a new task.
        """
        if not self.active:
            return
        info = getattr(self._local, "info", None)
        if info is None:
            return
        self._pending.append(("process", info[1]))
        del self._local.info  # the next lock operation makes this thread a new task
        core_forget()  # the compiled hit path's copy of it too

    def _process_target(self, task: str) -> None:
        """The forking thread's holds become orphans (see `process_started`); its stack goes."""
        state = self.checker.tasks.pop(task, None)
        if state is None:
            return
        for hlock in state.held:
            self._orphans[hlock.lock, hlock.instance] = ("process", state, hlock)
        self.checker._tasks_before += 1

    def _fork_child(self, task: Optional[str]) -> None:
        """The threads that did not survive the fork: what they held, nobody in the child releases."""
        tasks = self.checker.tasks
        for other in [key for key in tasks if key != task]:
            for hlock in tasks[other].held:
                self._orphans[hlock.lock, hlock.instance] = ("fork", tasks[other], hlock)
            del tasks[other]
            self.checker._tasks_before += 1

    def _orphan_taken(self, ev: Event, orphan: tuple) -> list[Finding]:
        """A lock whose holder is gone is taken: it will never be free (the acquire hangs)."""
        why, gone, hlock = orphan
        state = self.checker.tasks.get(ev.task)
        if state is None:
            return _NOTHING
        if why in ("fork", "process"):
            # next: this acquisition (fed already, so the innermost hold); prev: the hold at the fork
            taking = state.held[-1] if state.held and state.held[-1].instance == ev.instance else None
            finding = self.checker._finding(HELD_AT_FORK, state, ev, lock=hlock.cls, held=hlock.cls,
                                            next=self.checker.snapshot(taking) if taking is not None else None,
                                            prev=self.checker.snapshot(hlock))
            finding.details["holder"] = gone.key
            if why == "process":
                finding.details["process_target"] = True
        else:  # the report of the thread that ended holding it, made when it matters
            finding = self.checker._finding(F.HELD_AT_EXIT, gone, ev, lock=hlock.cls)
            finding.details["task_exit"] = True
            finding.details["taker"] = ev.comm or ev.task
        self.checker.report(finding)
        return self.checker.flush_reports()

    def held_at_start(self, task: str) -> list[Event]:
        """The acquire events of what `task` holds now (a forked child's trace begins with them)."""
        state = self.checker.tasks.get(task)
        if state is None:
            return []
        return [Event(task, ACQUIRE, h.lock, h.instance, h.read, h.trylock, h.subclass) for h in state.held]
