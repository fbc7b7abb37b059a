"""Per-task lockdep state: held-lock stacks, irq state, and findings built from them.

The checker (`checker.py`) and the irq validator (`irq.py`) both read and
change a task's state and both report findings about it; this module is
what they share, so neither has to call back into the other (lockdep's
`struct task_struct` fields `held_locks`, `curr_chain_key` and
`irqtrace`, and the `print_*` helpers that snapshot them).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Optional

from lockcheck.events import Event
from lockcheck.lockdep.findings import Evidence, Finding, LockSnapshot
from lockcheck.lockdep.graph import DepGraph
from lockcheck.lockdep import rules
from lockcheck.lockdep.rules import INITIAL_CHAIN_KEY, usage_index
from lockcheck.lockdep.usage import usage_chars

__all__ = ["INITIAL_CHAIN_KEY", "HeldLock", "RecentLocks", "TaskState", "usage_index", "usage_needs"]


class HeldLock:
    """One entry of a task's held-lock stack (lockdep's `struct held_lock`)."""

    __slots__ = (
        "cls", "lock", "instance", "subclass", "read", "trylock", "check", "nest",
        "irq_context", "hardirqs_off", "references", "prev_chain_key", "_event", "_source", "held_evidence",
    )

    def __init__(self, cls: str, lock: str, instance: Optional[str], subclass: int, read: int,
                 trylock: bool, check: bool, nest: Optional[tuple], irq_context: int,
                 hardirqs_off: bool, references: int, event: Event) -> None:
        self.cls = cls
        self.lock = lock
        self.instance = instance
        self.subclass = subclass
        self.read = read
        self.trylock = trylock
        self.check = check
        self.nest = nest
        self.irq_context = irq_context
        self.hardirqs_off = hardirqs_off
        self.references = references
        self.prev_chain_key = INITIAL_CHAIN_KEY
        self._event = event
        self._source: Optional[Callable[[], Event]] = None
        #: the `held` evidence of the dependencies taken under this hold (`Checker.check_prev_add`):
        #: one object for all of them, not one each (a lock that nests ten others: ten dependencies)
        self.held_evidence: Optional[Evidence] = None

    @classmethod
    def deferred(cls, source: Callable[[], Event], *fields: Any) -> "HeldLock":
        """A held lock whose event is read back only if a report or a new dependency needs it.

        The fast path (`lockcheck.engine.fast_lt`) holds a lock without building its
        event; `source()` builds it from the trace line when asked.
        """
        hlock = cls(*fields, None)  # type: ignore[arg-type]
        hlock._source = source
        return hlock

    def reacquired(self, irq_context: int, hardirqs_off: bool) -> "HeldLock":
        """A new entry for this lock re-acquired (`reacquire_held_locks`) in this irq state: the
        same fields and the same event (or the same deferred reading of it, still unread)."""
        hlock = HeldLock(self.cls, self.lock, self.instance, self.subclass, self.read, self.trylock, self.check,
                         self.nest, irq_context, hardirqs_off, self.references, self._event)
        hlock._source = self._source
        return hlock

    @property
    def event(self) -> Event:
        """Where this hold began (the acquisition's event)."""
        event = self._event
        if event is None:
            event = self._event = self._source()  # type: ignore[misc]
            self._source = None
        return event

    def matches(self, lock: str, instance: Optional[str]) -> bool:
        """lockdep's `match_held_lock`: the same lock object, or any lock of a merged entry's class."""
        if self.lock == lock and self.instance == instance:
            return True
        # a nest_lock-merged entry stands for every instance of its (subclass 0) class
        return bool(self.references) and self.subclass == 0 and self.lock == lock


class RecentLocks:
    """The locks a task of a capture acquired lately: a set of `(lock, instance)` bounded in size.

    A capture starts mid-flight, so a release of a lock the task does not
    hold is counted, not reported, when the task was never seen acquiring
    it (it was taken before the capture began).  Remembering every lock a
    task ever took grows with the distinct addresses of the capture
    (millions in a long one); remembering the last `LIMIT` is what a double
    release needs (it follows the first within a few distinct locks).  A
    release of a lock not held that was acquired more than `LIMIT` other
    locks ago is counted as one taken before the capture.

    >>> recent = RecentLocks(limit=2)
    >>> for lock in ("A", "B", "A", "C"):
    ...     recent.add((lock, None))
    >>> ("A", None) in recent, ("B", None) in recent
    (True, False)
    """

    __slots__ = ("_locks", "_limit", "last")

    #: locks remembered per task
    LIMIT = 4096

    def __init__(self, limit: int = LIMIT) -> None:
        self._locks: OrderedDict = OrderedDict()
        self._limit = limit
        #: when the latest lock was added (the checker's event count; see `Checker.forget_recent_locks`)
        self.last = 0

    def forget(self) -> None:
        """Remember nothing (the task is idle: see `Checker.forget_recent_locks`)."""
        self._locks.clear()

    def add(self, key: tuple) -> None:
        locks = self._locks
        if key in locks:
            locks.move_to_end(key)
            return
        locks[key] = None
        if len(locks) > self._limit:
            locks.popitem(last=False)

    def __contains__(self, key: object) -> bool:
        return key in self._locks

    def __len__(self) -> int:
        return len(self._locks)


class TaskState:
    """Per-task lockdep state: held stack, chain key, irq state."""

    __slots__ = (
        "key", "name", "held", "chain_key", "hardirq_depth", "softirq_depth",
        "hardirqs_enabled", "softirqs_enabled", "cpu", "acquired_ever", "irq_events", "usage_need",
        "irq_known", "stale", "moves", "hardirq_threaded", "pins",
    )

    def __init__(self, key: str, name: str) -> None:
        self.key = key
        self.name = name
        self.held: list[HeldLock] = []
        self.chain_key = INITIAL_CHAIN_KEY
        self.hardirq_depth = 0
        self.softirq_depth = 0
        self.hardirqs_enabled = True
        self.softirqs_enabled = True
        self.cpu: Optional[int] = None
        self.acquired_ever: Optional[RecentLocks] = None
        #: "stamp" and op -> (stamp, Evidence) (see irq.py), or a deferred reading of it: read through `irq_event`
        self.irq_events: dict[str, object] = {}
        #: False when the trace carries no irq context (`set_irq_unknown`)
        self.irq_known = True
        self.usage_need = usage_needs(self)
        #: the held entries from this index on have stale chain keys, and so has `chain_key`
        #: (`lockcheck.lockdep.lazy_release`; None: every key is valid)
        self.stale: Optional[int] = None
        #: what `lazy_release` knows of the stack while `stale` is set (None otherwise)
        self.moves: Any = None
        #: the hardirq handler running runs as a thread (`hardirq-enter threaded`: the kernel's
        #: `curr->hardirq_threaded`); while set, the fast paths leave the task to the checker
        self.hardirq_threaded = False
        #: held entry -> its `hlock->pin_count` (`lock_pin_lock()`; kept here, not on the entry: the plugin's
        #: C core makes entries slot by slot); while any, the fast paths leave the task to the checker
        self.pins: dict = {}

    def set_irq_unknown(self) -> None:
        """The trace never says this task's irq state: its acquisitions mark only USED."""
        self.irq_known = False
        self.usage_need = usage_needs(self)

    @property
    def irq_context(self) -> int:
        """lockdep's `irq_context`: bit 1 hardirq, bit 0 softirq."""
        return (2 if self.hardirq_depth else 0) | (1 if self.softirq_depth else 0)


# -- irq state of a task ------------------------------------------------------------------


def irq_event(task: "TaskState", op: str) -> Optional[tuple]:
    """`task.irq_events[op]`, `(stamp, Evidence)` or None, its evidence read back now if deferred.

    The `.lt` fast path (`lockcheck.engine.fast_lt`) records an irq-state change
    without reading its line: `(stamp, read, *where)`, where `read(*where)`
    makes the `Evidence` -- only when a report (or `lockcheck.jobs`) asks.
    """
    seen = task.irq_events.get(op)
    if seen is not None and len(seen) > 2:  # type: ignore[arg-type]
        seen = task.irq_events[op] = (seen[0], seen[1](*seen[2:]))  # type: ignore[index]
    return seen  # type: ignore[return-value]




def hardirqs_off(task: "TaskState") -> bool:
    """Whether an acquisition now happens with hardirqs disabled."""
    return rules.hardirqs_off(task.hardirqs_enabled, task.hardirq_depth)


def softirqs_enabled(task: "TaskState") -> bool:
    return task.softirqs_enabled and task.softirq_depth == 0


def irq_state_text(task: "TaskState") -> str:
    """The `[HC0[0]:SC0[0]:HE1:SE1]` part of the kernel's usage reports.

    HC and SC are `lockdep_hardirq_context()` / `curr->softirq_context`,
    nesting counts (HC2 in a nested handler), as are the bracketed
    preempt-count fields; the kernel's `softirq_count()` also counts
    `local_bh_disable()` sections (2 each), which a trace does not number,
    so `[n]` is the handler nesting only.
    """
    hc, sc = task.hardirq_depth, task.softirq_depth
    he = 0 if hardirqs_off(task) else 1
    se = 1 if softirqs_enabled(task) else 0
    return f"[HC{hc}[{hc}]:SC{sc}[{sc}]:HE{he}:SE{se}]"


def usage_needs(task: "TaskState") -> list[int]:
    """The usage bits a checked acquisition sets, for each `usage_index`, in the task's irq state now.

    lockdep's mark_usage: USED_IN_{HARD,SOFT}IRQ in a handler (not for
    trylocks), ENABLED_HARDIRQ when taken with hardirqs on (and
    ENABLED_SOFTIRQ if softirqs are on too), and USED; the _READ variants for
    readers.  Kept per task and refreshed on irq events (from a table of the
    eight irq states), so the common acquisition costs one list index and
    one mask test.
    """
    if not task.irq_known:
        return rules.USED_ONLY
    return rules.USAGE_NEEDS[(bool(task.hardirq_depth), bool(task.softirq_depth), bool(task.softirqs_enabled))]


# -- findings about a task ---------------------------------------------------------------


def snapshot(graph: DepGraph, hlock: HeldLock) -> LockSnapshot:
    """A held lock as a report prints it (`#i: CLASS{usage}, at: ...`)."""
    ev = hlock.event
    return LockSnapshot(
        name=hlock.cls, instance=hlock.instance, usage=usage_chars(graph.usage(hlock.cls)), at=ev.at,
        mode=hlock.read, acquired=Evidence(ev.file, ev.line, ev.comm or ev.task, ev.at, ev.ts),
        references=hlock.references, waits=graph._node.get(hlock.cls, _NO_NODE).get("waits"),
    )


_NO_NODE: dict = {}


def task_finding(graph: DepGraph, kind: str, task: TaskState, ev: Event, lock: str,
                 held: Optional[str] = None, **fields: Any) -> Finding:
    """A finding about `task` at `ev`, with its held locks as they are now (`lockdep_print_held_locks`)."""
    fields.setdefault("held_locks", [snapshot(graph, h) for h in task.held])
    return Finding(kind=kind, task=task.name, lock=lock, held=held, location=ev.location, site=ev.at, **fields)
