"""Merging saved graphs (`--baseline`) into a checker's graph, validating each dependency.

`DepGraph.merge` unites graphs without looking: two baselines whose union
closes a cycle (main saw A -> B, a nightly run B -> A) would merge into a
cyclic graph and `check` would say "no problems found", though finding
exactly such cross-run cycles is what baselines are for.  `merge_checked`
adds another graph's dependencies one at a time as lockdep's
`check_prev_add` adds a new one: a dependency (of a type the graph does not
have yet) that closes a strong cycle with what is already merged is
reported as `circular-dependency` -- or `recursive-locking` for a class
that reaches itself -- with the chain's evidence from the saved graphs, and
left out, as the kernel leaves out a dependency it reports.  Classes and
their usage bits are merged first; everything else is as `DepGraph.merge`.

>>> from lockcheck.lockdep.checker import Checker
>>> from lockcheck.lockdep.graph import DEP_EN
>>> main, nightly = DepGraph(), DepGraph()
>>> _ = main.add_dependency("A", "B", DEP_EN, Evidence("main.lt", 3, "T1"))
>>> _ = nightly.add_dependency("B", "A", DEP_EN, Evidence("nightly.lt", 7, "T2"))
>>> checker = Checker()
>>> merge_checked(checker, main, "main.json"), [f.cycle for f in merge_checked(checker, nightly, "nightly.json")]
([], [['A', 'B']])
"""

from __future__ import annotations

from typing import Optional

from lockcheck import events as E
from lockcheck.lockdep import rules
from lockcheck.lockdep.checker import Checker
from lockcheck.events import Event
from lockcheck.lockdep.findings import Evidence, Finding
from lockcheck.lockdep.graph import DEP_EN, DEP_ER, DEP_SN, DEP_SR, DepGraph
from lockcheck.lockdep.tasks import HeldLock, TaskState

#: dependency type bit -> (prev read, next read) that produce it (`calc_dep` inverted)
DEP_MODES = {DEP_EN: (E.WRITE, E.WRITE), DEP_ER: (E.WRITE, E.RREAD),
             DEP_SN: (E.READ, E.WRITE), DEP_SR: (E.READ, E.RREAD)}


def merge_checked(checker: Checker, other: DepGraph, origin: Optional[str] = None) -> list[Finding]:
    """Merge `other` into `checker.graph`; the findings for the dependencies that close a cycle."""
    graph = checker.graph
    graph.merge_classes(other)
    found: list[Finding] = []
    for prev, nxt, data in other.nx.edges(data=True):
        attrs = graph.nx._succ.get(prev, {}).get(nxt)
        new_types = data["dep"] & ~(attrs["dep"] if attrs is not None else 0)
        if new_types and _reported(checker, prev, nxt, new_types, data, origin):
            found.extend(checker.flush_reports())
            continue
        graph.merge_edge(prev, nxt, data, origin)
    return found


def check_wait_contexts(checker: Checker) -> list[Finding]:
    """`check_wait_context()` on every direct dependency of the merged graph, once all are merged.

    A dependency `prev -> next` taken directly (distance 1; lockdep adds
    one only between locks of one irq context) means `next` was acquired
    with `prev` held, so a saved graph whose trace knew both classes' wait
    types holds none that breaks them: the kernel reports such an
    acquisition and adds no dependency.  One graph may have taken the locks
    without wait types and another say them (a capture of an old kernel and
    one of a new): the union then shows the invalid wait context neither run
    could, reported where the dependency was first seen.  Run after every
    baseline is merged, so the order of `--baseline` options does not matter.
    """
    checker.adopt_graph_props()
    if not checker.wait_locks:
        return []
    for prev, nxt, data in list(checker.graph.nx.edges(data=True)):
        if data.get("distance", 1) != 1 or rules.class_lock(nxt) not in checker.wait_locks:
            continue
        evidence: Evidence = data["evidence"]
        held: Evidence = data.get("held") or evidence
        task = TaskState(data.get("origin") or evidence.file, evidence.task)
        prev_ev = Event(task.key, E.ACQUIRE, prev, at=held.at, ts=held.ts, file=held.file, line=held.line,
                        comm=held.task)
        ev = Event(task.key, E.ACQUIRE, nxt, at=evidence.at, ts=evidence.ts, file=evidence.file,
                   line=evidence.line, comm=evidence.task)
        task.held = [HeldLock(prev, rules.class_lock(prev), None, 0, 0, False, True, None, 0, False, 0, prev_ev)]
        checker.check_wait_context(task, HeldLock(nxt, rules.class_lock(nxt), None, 0, 0, False, True, None, 0,
                                                  False, 0, ev), ev)
    return checker.flush_reports()


def _reported(checker: Checker, prev: str, nxt: str, types: int, data: dict, origin: Optional[str]) -> bool:
    """Whether adding `prev -> nxt` with these dependency types closes a cycle (then reported)."""
    evidence: Evidence = data["evidence"]
    held: Evidence = data.get("held") or evidence
    task = TaskState(origin or evidence.file, evidence.task)
    for bit, (prev_read, next_read) in DEP_MODES.items():
        if not types & bit:
            continue
        prev_ev = Event(task.key, E.ACQUIRE, prev, mode=prev_read, at=held.at, ts=held.ts, file=held.file,
                        line=held.line, comm=held.task)
        ev = Event(task.key, E.ACQUIRE, nxt, mode=next_read, at=evidence.at, ts=evidence.ts, file=evidence.file,
                   line=evidence.line, comm=evidence.task)
        prev_lock = _held(prev, prev_read, prev_ev)
        next_lock = _held(nxt, next_read, ev)
        target = checker.check_noncircular(next_lock, prev_lock)
        if target is None:
            continue
        task.held = [prev_lock]
        if target.cls == next_lock.cls and target.parent is None:
            checker.print_deadlock_bug(task, prev_lock, next_lock, ev)
        else:
            checker.print_circular_bug(task, target, next_lock, prev_lock, ev)
        return True
    return False


def _held(cls: str, read: int, ev: Event) -> HeldLock:
    return HeldLock(cls, cls, None, 0, read, False, True, None, 0, False, 0, ev)
