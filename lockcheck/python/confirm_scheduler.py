"""The directed scheduler of `--lockcheck-confirm` (DeadlockFuzzer, Joshi et al., PLDI 2009).

A circular-dependency finding says that the threads of a test *could* deadlock; a
re-run of the test confirms it by making them do so.  Each edge of the cycle is an
acquisition site: "class B taken at `file:LINE` while class A is held".  While a
re-run goes on, the recorder calls `DirectedScheduler.pre_acquire` before every
acquire that may block (`Recorder.pre_acquire`; the compiled hit path stands aside
while it is set, so every acquire comes through the pure path).  A thread that is
about to take the lock of an edge while it holds the edge's previous lock is held
there -- a bounded wait, `pause` seconds -- until a thread stands at every other
edge of the cycle too.  Then all of them go on at once: each holds the lock the
next one wants, they block, and the runtime detector (`lockcheck.python.waitfor`)
sees the cycle of waits and breaks it with `DeadlockError`.  A pause that ends with
no partner is recorded, so a re-run that never deadlocks can say why.

Everything here is bounded: one pause per arrival, and none after `deadline`
(the re-run's time limit), so a test that depends on timing only slows down.
"""

from __future__ import annotations

import _thread
import time
from typing import Any, NamedTuple, Optional

from lockcheck.lockdep.findings import Finding

_monotonic = time.monotonic
_sleep = time.sleep
#: how often a paused thread looks whether its partners arrived (seconds)
POLL = 0.002


class Edge(NamedTuple):
    """One dependency of a cycle: `cls` taken at `site` while `held` is held, first by `task`
    (its display name, which carries its test: `Thread-1/3 [tests/test_x.py::test_a]`)."""

    held: str
    cls: str
    site: str
    task: str
    stack: Optional[tuple] = None


def cycle_edges(finding: Finding) -> list[Edge]:
    """The edges of a circular-dependency finding, in the cycle's order (empty: no chain kept).

    The chain runs from the deepest link (the first lock taken after the new one) to
    depth 0, the acquisition that closed the cycle; each link's class is taken while
    the class before it (circularly) is held."""
    links = sorted(finding.chain, key=lambda link: -link.depth)
    if len(links) < 2:
        return []
    return [Edge(links[i - 1].cls, link.cls, link.evidence.at or link.evidence.location, link.evidence.task,
                 link.evidence.stack or (finding.details.get("stack") if link.depth == 0 else None))
            for i, link in enumerate(links)]


def test_of(comm: str) -> Optional[str]:
    """The test id a task's display name carries (`name/N [test id]`), or None."""
    name, sep, rest = comm.partition(" [")
    return rest[:-1] if sep and rest.endswith("]") else None


def thread_of(comm: str) -> str:
    """The task part of a display name, without its test."""
    return comm.partition(" [")[0]


def _base(cls: str) -> str:
    return cls.partition("/")[0]


class DirectedScheduler:
    """Holds threads at the cycle's sites until the whole cycle stands; see the module docstring.

    After a run: `met` (every edge had a thread at once, the interleaving in `meeting`),
    `reached` (edge index -> threads that got there holding its previous lock) and
    `lonely` (edge indexes a thread waited at, alone, until its pause ended)."""

    def __init__(self, rec: Any, edges: list[Edge], pause: float = 0.5, deadline: Optional[float] = None) -> None:
        self.rec = rec
        self.edges = edges
        self.pause = pause
        self.deadline = deadline
        self._lock = _thread.allocate_lock()
        self._sites: dict[str, list[int]] = {}
        for i, edge in enumerate(edges):
            self._sites.setdefault(edge.site, []).append(i)
        self.parked: dict[int, str] = {}
        self.met = False
        self.meeting: list[tuple[str, Edge]] = []
        self.reached: dict[int, set[str]] = {}
        self.lonely: set[int] = set()
        self.pauses = 0

    # -- the recorder's hook ---------------------------------------------------
    def pre_acquire(self, task: str, cls: str, site: str) -> None:
        """`Recorder.pre_acquire`: pause here if this acquire closes an edge of the cycle."""
        candidates = self._sites.get(site)
        if candidates is None:
            return
        index = self._edge(task, cls, candidates)
        if index is None:
            return
        with self._lock:
            self.reached.setdefault(index, set()).add(task)
            if self.met or index in self.parked or task in self.parked.values() or self._late():
                return
            self.parked[index] = task
            if len(self.parked) == len(self.edges):
                self.met = True  # every edge stands: all go on now, and block on each other
                self.meeting = [(self.parked[i], self.edges[i]) for i in range(len(self.edges))]
                return
            self.pauses += 1
        until = _monotonic() + self.pause
        while not self.met and _monotonic() < until and not self._late():
            _sleep(POLL)
        with self._lock:
            if not self.met:
                self.lonely.add(index)
                if self.parked.get(index) == task:
                    del self.parked[index]

    def _edge(self, task: str, cls: str, candidates: list[int]) -> Optional[int]:
        """The edge this acquire closes: its class, at its site, with its previous class held."""
        held = self._held(task)
        for i in candidates:
            edge = self.edges[i]
            if _base(edge.cls) == _base(cls) and (held is None or _base(edge.held) in held):
                return i
        return None

    def _held(self, task: str) -> Optional[set[str]]:
        """The classes `task` holds now (None: unknown, so any)."""
        state = self.rec.checker.tasks.get(task)
        if state is None:
            return set()
        try:
            return {_base(h.lock) for h in list(state.held)}
        except AttributeError:
            return None

    def _late(self) -> bool:
        return self.deadline is not None and _monotonic() >= self.deadline

    # -- switching it on and off ----------------------------------------------
    def install(self) -> None:
        """Every acquire through the pure path, this scheduler told of each."""
        from lockcheck.python.core import core_forget

        self.rec.pre_acquire = self.pre_acquire
        core_forget()

    def uninstall(self) -> None:
        from lockcheck.python.core import core_forget

        if self.rec.pre_acquire == self.pre_acquire:
            self.rec.pre_acquire = None
        core_forget()

    def why_not(self) -> str:
        """Why this run did not deadlock, as far as the scheduler can tell."""
        never = [i for i in range(len(self.edges)) if i not in self.reached]
        if never:
            edge = self.edges[never[0]]
            return (f"no thread reached {edge.site} (taking {edge.cls} while holding {edge.held}) in the re-run: "
                    f"the test did not take that path again")
        if self.met:
            return ("the threads met at their sites but did not block each other: they took other instances "
                    "of the classes (the classes form a cycle, these locks did not)")
        if self.lonely:
            edge = self.edges[min(self.lonely)]
            return (f"the other thread never reached its site while the first waited at {edge.site} (holding "
                    f"{edge.held}, {self.pause:g}s): something else orders them (an Event, a join, a queue...)")
        return "every site was reached, but never while another thread waited at its own"
