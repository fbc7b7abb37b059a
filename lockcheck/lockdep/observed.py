"""Dependencies observed outside a trace (a /proc/lockdep dump, a kernel report), added as lockdep adds them.

A trace's dependencies enter the graph through the checker, one acquisition
at a time.  Some inputs state dependencies directly instead: `/proc/lockdep`
lists them (`lockcheck.kernel.state`), a lockdep report prints a chain of them and
a held-lock list (`lockcheck.kernel.splat_deps`).  Each such dependency is
validated the way lockdep's `check_prev_add()` validates a new one: a
dependency that would close a cycle with those already in the graph (from
this input, an earlier one, or a baseline) is reported, not added, so the
graph stays acyclic and the cycle is found even when no single input shows
it.  Such a dependency is taken as exclusive -> exclusive (`DEP_EN`), the
strongest type: none of these inputs prints read/write types.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from lockcheck.events import Event
from lockcheck.lockdep.findings import Evidence, Finding
from lockcheck.lockdep.graph import DEP_EN

if TYPE_CHECKING:
    from lockcheck.lockdep.checker import Checker
    from lockcheck.lockdep.tasks import TaskState


def add_checked_dependency(checker: "Checker", task: "TaskState", before: str, after: str, evidence: Evidence,
                           distance: int = 1, origin: Optional[str] = None) -> list[Finding]:
    """Add `before -> after` to the checker's graph unless it closes a cycle; the findings it raised.

    `task` stands for whoever held `before` (its name is printed in a report);
    `evidence` is where the dependency was seen; `distance` is 1 for a direct
    dependency (lockdep's `lock_list.distance`).

    >>> from lockcheck.lockdep.checker import Checker
    >>> from lockcheck.lockdep.tasks import TaskState
    >>> c, t = Checker(), TaskState("dump", "/proc/lockdep")
    >>> add_checked_dependency(c, t, "A", "B", Evidence("lockdep", 3, t.name))
    []
    >>> [f.cycle for f in add_checked_dependency(c, t, "B", "A", Evidence("lockdep", 9, t.name))]
    [['A', 'B']]
    """
    from lockcheck.lockdep.tasks import HeldLock

    graph = checker.graph
    attrs = graph.nx._succ.get(before, {}).get(after)
    if attrs is not None:
        attrs["distance"] = min(attrs["distance"], distance)
        return []
    ev = Event(task.key, "acquire", after, file=evidence.file, line=evidence.line, at=evidence.at, ts=evidence.ts)
    prev = HeldLock(before, before, None, 0, 0, False, True, None, 0, False, 0, ev)
    nxt = HeldLock(after, after, None, 0, 0, False, True, None, 0, False, 0, ev)
    graph.add_class(before)
    graph.add_class(after)
    target = checker.check_noncircular(nxt, prev)
    if target is None:
        graph.add_dependency(before, after, DEP_EN, evidence, distance, origin=origin)
        return []
    if target.cls == nxt.cls and target.parent is None:
        checker.print_deadlock_bug(task, prev, nxt, ev)
    else:
        checker.print_circular_bug(task, target, nxt, prev, ev)
    new, checker._pending = checker._pending, []
    checker.findings.extend(new)
    return new
