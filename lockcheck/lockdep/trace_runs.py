"""Where traces begin and what a capture's tasks forget, as a part of the checker (`Checker`
inherits it).

A checker reads one trace after another (runs meet in one graph), and a capture starts
mid-flight and never shows a task exit: these are the points where the checker's per-task
state is started, switched to a capture's lenient rules, reset on lost events, or trimmed,
kept apart from lockdep's per-event rules so that those read as the kernel's.
"""

from __future__ import annotations

from typing import Optional

from lockcheck.events import Event
from lockcheck.lockdep.rules import INITIAL_CHAIN_KEY
from lockcheck.lockdep.tasks import RecentLocks, usage_needs

#: a capture's task that holds nothing and took no lock for this many events forgets its recent
#: locks (`Checker.forget_recent_locks`)
IDLE_EVENTS = 1 << 18


class TraceRuns:
    """The trace-and-capture half of `Checker`: its state is the checker's own."""

    def start_trace(self) -> None:
        """Another trace file begins: another run, where no task holds anything yet.

        The dependency graph, the chain cache and the problems already
        reported carry over: that is how lock orders seen in different runs
        meet.  A task named alike in two traces is two tasks.
        """
        self._tasks_before += len(self.tasks)
        self.tasks.clear()

    def open_trace(self, capture: bool, strict_start: Optional[bool] = None, irq_state: bool = True,
                   forget_idle: bool = False, contention: bool = True) -> None:
        """A trace file begins (`start_trace`); a capture also switches to mid-flight rules
        (`start_capture`) unless `strict_start` (default: the option), and a trace that
        is no capture switches back.  Readers call this through their context; a RUN
        event (`#lockcheck-run`) does the same inside a file.

        `irq_state=False`: the trace carries no irq context at all (perf script), so
        its acquisitions say nothing about irq usage: they mark only USED, never
        irq-safe or irq-unsafe (taking them as "irqs on, process context" would
        make any lock another trace saw in a handler inconsistent).

        `forget_idle`: a capture's idle tasks forget their recent locks
        (`forget_recent_locks`).
        """
        self.start_trace()
        self.forget_after = IDLE_EVENTS if forget_idle else None
        self._swept = self.stats.events
        self.irq_state = irq_state
        self.contention_checked = contention  # (`readers.run_rules`: `lockdep.more_ops`)
        self.irq.preempt_rt = self.options.preempt_rt  # (a file's header may say so: RUN)
        if strict_start is None:
            strict_start = self.options.strict_start
        self.options.lenient_start = self._lenient_always
        if capture and not strict_start:
            self.start_capture()

    @property
    def task_count(self) -> int:
        """Tasks seen in all the traces read so far."""
        return self._tasks_before + len(self.tasks)

    def forget_recent_locks(self) -> int:
        """Idle tasks of a capture forget the locks they took; how many tasks forgot.

        A capture shows no task exit, so every task it ever showed keeps its
        `RecentLocks` (up to 4096 locks): over a long capture of short-lived
        tasks that grows with the length of the trace, not with what is live
        (10x the events, 2.2x the memory).  Lockdep itself keeps nothing of
        a released lock; the recent locks only tell a second release of a
        lock the task took in the capture (reported) from the release of one
        taken before it began (counted).  A task that holds nothing and has
        taken no lock for `forget_after` events forgets them, as
        `RecentLocks` forgets a lock after 4096 others: a release of a lock
        it does not hold is then counted, like one taken before the capture.
        Everything a report may cite stays: irq state and irq-event stamps
        and sites, name, CPU.  Called when a new task appears, at most every
        `forget_after / 8` events, so what is kept grows only as tasks come.
        """
        self._swept = now = self.stats.events
        if self.forget_after is None:
            return 0
        limit = now - self.forget_after
        forgot = 0
        for task in self.tasks.values():
            recent = task.acquired_ever
            if recent is not None and recent.last < limit and len(recent) and not task.held:
                recent.forget()
                forgot += 1
        self.stats.forgotten += forgot
        return forgot

    def start_capture(self) -> None:
        """From now on the input is a capture that started mid-flight: releases of
        locks a task was never seen to acquire are counted, not reported."""
        self.options.lenient_start = True
        for task in self.tasks.values():
            if task.acquired_ever is None:
                task.acquired_ever = RecentLocks()

    def _op_lost_events(self, ev: Event) -> None:
        """Events were lost on a CPU: what its tasks hold is unknown, so start them afresh."""
        for other in self.tasks.values():
            if other.cpu == ev.cpu and (other.held or other.irq_context):
                other.held.clear()
                other.pins = {}
                other.chain_key = INITIAL_CHAIN_KEY
                other.stale = other.moves = None
                other.hardirq_depth = other.softirq_depth = 0
                other.hardirqs_enabled = other.softirqs_enabled = True
                other.usage_need = usage_needs(other)
                if self.options.lenient_start:
                    other.acquired_ever = RecentLocks()
                self.stats.lost_resets += 1
