"""Task states and candidates as plain tuples: what crosses a pipe (or a Dask worker's
connection) between a part and the merge, each shared object pickled once."""

from __future__ import annotations

import functools
from operator import attrgetter
from typing import NamedTuple, Optional

from lockcheck.events import Event
from lockcheck.lockdep.findings import Evidence
from lockcheck.lockdep.tasks import HeldLock, RecentLocks, TaskState, irq_event, usage_needs
from lockcheck.readers import lt

#: an event as plain data (its fields in `Event.__slots__` order: `Event(*fields)` rebuilds it)
_EVENT_FIELDS = attrgetter(*Event.__slots__)


class TaskSnapshot(NamedTuple):
    """A task's state just before a candidate event: what the merge's checker puts back.

    Plain tuples all the way down (a held lock is `_held_row`), so that
    thousands of them cross a pipe at the speed of pickling tuples.
    """

    key: str
    name: str
    held: tuple
    chain_key: int
    hardirq_depth: int
    softirq_depth: int
    hardirqs_enabled: bool
    softirqs_enabled: bool
    cpu: Optional[int]
    #: the locks among those the event can ask about that the task was seen to take (captures)
    acquired: Optional[tuple]
    irq_events: dict
    irq_known: bool


class Candidate(NamedTuple):
    """An event the merge must feed (or a file's start), with where it sits in the trace."""

    #: (file index, line, order within the part): sorts as the sequential run reads
    key: tuple
    kind: int
    #: the event's fields (`_EVENT_FIELDS`)
    event: Optional[tuple] = None
    task: Optional[TaskSnapshot] = None
    #: OPEN: the file's name and format module
    name: str = ""
    module: str = ""
    #: after the private checker applied it: the usage bits of the classes it touched
    classes: Optional[dict] = None
    #: ... and the chain keys of the task's stack that it had cached
    chains: tuple = ()


class _Wire:
    """Events and held locks as tuples, each made once: a lock held across many candidates is
    one object in the pickle (its memo), not one per candidate."""

    def __init__(self) -> None:
        self._events: dict[int, tuple] = {}
        self._held: dict[int, tuple] = {}

    def event(self, ev: Event) -> tuple:
        known = self._events.get(id(ev))
        if known is not None and known[0] is ev:
            return known[1]
        fields = _EVENT_FIELDS(ev)
        self._events[id(ev)] = (ev, fields)
        return fields

    def held(self, h: HeldLock) -> tuple:
        known = self._held.get(id(h))
        if known is not None and known[0] is h and known[1] == h.references:
            return known[2]
        source = h._source
        if h._event is None and isinstance(source, functools.partial) and source.func is lt.scan_fast:
            # a hold of the fast path whose event nothing asked for yet: its line goes, unread
            event: tuple = source.args
        else:
            event = self.event(h.event)
        row = (h.cls, h.lock, h.instance, h.subclass, h.read, h.trylock, h.check, h.nest, h.irq_context,
               h.hardirqs_off, h.references, h.prev_chain_key, event)
        self._held[id(h)] = (h, h.references, row)
        return row

    def task(self, task: TaskState, ev: Event) -> TaskSnapshot:
        acquired = None
        if task.acquired_ever is not None:
            asked = {(ev.lock, ev.instance)}
            if ev.nest is not None:
                asked.add(tuple(ev.nest))
            asked.update(tuple(h.nest) for h in task.held if h.nest is not None)
            acquired = tuple(key for key in asked if key in task.acquired_ever)
        return TaskSnapshot(task.key, task.name, tuple(self.held(h) for h in task.held), task.chain_key,
                            task.hardirq_depth, task.softirq_depth, task.hardirqs_enabled, task.softirqs_enabled,
                            task.cpu, acquired, _irq_rows(task), task.irq_known)


def _irq_rows(task: TaskState) -> tuple:
    """`TaskState.irq_events` as plain data: `("stamp", n)` and `(op, stamp, *Evidence fields)`."""
    rows = []
    for op, value in list(task.irq_events.items()):
        if op == "stamp":
            rows.append((op, value))
        else:
            stamp, ev = irq_event(task, op)  # type: ignore[misc]
            rows.append((op, stamp, ev.file, ev.line, ev.task, ev.at, ev.ts))
    return tuple(rows)


def _irq_events(rows: tuple) -> dict:
    events: dict = {}
    for row in rows:
        events[row[0]] = row[1] if len(row) == 2 else (row[1], Evidence(*row[2:]))
    return events


class _Unwire:
    """The merge's side of `_Wire`: one `Event` per event tuple, fresh held locks per restore."""

    def __init__(self) -> None:
        self._events: dict[int, tuple] = {}

    def event(self, fields: tuple) -> Event:
        known = self._events.get(id(fields))
        if known is not None and known[0] is fields:
            return known[1]
        ev = Event(*fields)
        self._events[id(fields)] = (fields, ev)
        return ev

    def task(self, snap: tuple) -> TaskState:
        """A fresh `TaskState` equal to the one snapshotted (a `TaskSnapshot` as a plain tuple)."""
        key, name, rows, chain_key, hardirq_depth, softirq_depth, hardirqs_enabled, softirqs_enabled, cpu, \
            acquired, irq_rows, irq_known = snap
        task = TaskState(key, name)
        held = task.held
        for row in rows:
            event = row[12]
            if len(event) == 3:  # (line, file, line number): read back only if asked, as the fast path does
                h = HeldLock.deferred(functools.partial(lt.scan_fast, *event), *row[:11])
            else:
                h = HeldLock(*row[:11], self.event(event))
            h.prev_chain_key = row[11]
            held.append(h)
        task.chain_key = chain_key
        task.hardirq_depth = hardirq_depth
        task.softirq_depth = softirq_depth
        task.hardirqs_enabled = hardirqs_enabled
        task.softirqs_enabled = softirqs_enabled
        task.cpu = cpu
        if acquired is not None:
            task.acquired_ever = RecentLocks()
            for lock in acquired:
                task.acquired_ever.add(lock)
        task.irq_events = _irq_events(irq_rows)
        task.irq_known = irq_known
        task.usage_need = usage_needs(task)
        return task


def _held_site(h: HeldLock) -> tuple:
    """Where a held lock was taken: `(file, line, at, ts)`, or the fast path's unread `(line text,
    file, line number)` (4 and 3 items), read by the merge only for a dependency it adds."""
    source = h._source
    if h._event is None and isinstance(source, functools.partial) and source.func is lt.scan_fast:
        return source.args
    ev = h.event
    return (ev.file, ev.line, ev.at, ev.ts)


def _plain(candidates: list) -> list:
    """Candidates as plain tuples: they cross a pipe several times faster than named ones (no
    Python-level __new__)."""
    return [(c.key, c.kind, c.event, tuple(c.task) if c.task is not None else None, c.name, c.module, c.classes,
             c.chains) for c in candidates]
