"""The dependencies a lockdep report shows, into the dependency graph (as kstate does for /proc/lockdep).

A report holds a piece of the kernel's dependency graph; lockcheck puts it
back, so reports from many boots meet, and cycles no single report shows are
found (`lockcheck check boot1.log boot2.log`, `--baseline`), and `graph` and
`diff` work on logs.  What enters the graph, each validated on the way in
(`observed.add_checked_dependency`):

- the chain of a circular report: `-> #0 -> #1 -> ... -> #N` (the kernel
  prints it in reverse order; each entry's class was taken while the one
  printed below it was held);
- the held-lock list, in the order listed: each lock was taken while the
  one listed before it was held.  Entries whose usage is all dots (`{....}`)
  are passed over, as `check_prevs_add()` passes over `check=0` locks:
  that is how `rcu_read_lock` and `lockdep_set_novalidate_class()` locks
  (`&dev->mutex`) look, and lockdep gives them no dependencies (the cost: a
  spinlock only ever taken with irqs off adds its held-list dependencies
  through chains only).  A class held twice in a row (a nest_lock) adds
  nothing;
- the `-> (CLASS){usage} {` paths of irq reports (both directions);
- the usage bits of every class printed with its `{usage}` string.

What the report is about is not added: the dependency whose check raised it
(the held lock -> the lock being acquired) was reported, not added, by the
kernel too.  Every dependency is exclusive -> exclusive (`DEP_EN`): reports
do not print read/write types.  The held list may also join locks of two irq
contexts (an interrupt's locks above the interrupted task's) and trylocks,
which lockdep does not chain; the report does not say which.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterator, Optional

from lockcheck.lockdep import findings as F
from lockcheck.lockdep.findings import Evidence, Finding
from lockcheck.readers.splat import Splat, SplatLock, pick_site

if TYPE_CHECKING:
    from lockcheck.lockdep.checker import Checker

#: the task name reports' dependencies carry when the report named none
REPORT_TASK = "<kernel report>"


def dependencies(splat: Splat) -> Iterator[tuple[str, str, Evidence]]:
    """(before, after, where) for every dependency the report shows, in the order it printed them.

    >>> s = Splat("circular-dependency", "dmesg", 1, task="t/1")
    >>> from lockcheck.readers.splat import SplatLink
    >>> s.chain = [SplatLink(1, SplatLock("B", "+.+.", line=9)), SplatLink(0, SplatLock("A", "+.+.", line=12))]
    >>> s.held_locks = [SplatLock("rcu_read_lock", "....", line=20), SplatLock("B", "+.+.", line=21)]
    >>> [(a, b, ev.line) for a, b, ev in dependencies(s)]
    [('A', 'B', 9)]
    """
    if splat.kind == F.CIRCULAR:
        links = splat.links_by_depth()
        for before, after in zip(links, links[1:]):
            if after.depth == before.depth + 1:
                yield before.lock.name, after.lock.name, splat.evidence(after.lock.line, pick_site(after.frames))
    previous = None
    for lock in splat.held_locks:
        if _unchecked(lock):
            continue
        if previous is not None and previous.name != lock.name:
            yield previous.name, lock.name, splat.evidence(lock.line, lock.at)
        previous = lock
    d = splat.details
    # print_shortest_lock_dependencies prints leaf first: forwards searches go root -> leaf
    forwards_paths = [d.get("unsafe_path", [])]
    backwards_paths = [d.get("safe_path", [])]
    if d.get("forwards", True):
        forwards_paths.append(d.get("path", []))
    else:
        backwards_paths.append(d.get("path", []))
    for path in backwards_paths:
        for (before, _), (after, frames) in zip(path, path[1:]):
            yield before.name, after.name, splat.evidence(after.line, pick_site(frames))
    for path in forwards_paths:
        for (after, frames), (before, _) in zip(path, path[1:]):
            yield before.name, after.name, splat.evidence(after.line, pick_site(frames))


def _unchecked(lock: SplatLock) -> bool:
    """A held entry that looks like a `check=0` lock: never marked with any irq usage."""
    return not lock.usage or set(lock.usage) == {"."} or lock.name == "<RELEASED>"


def printed_locks(splat: Splat) -> Iterator[SplatLock]:
    """Every lock the report printed with its usage characters."""
    for lock in (splat.lock, splat.held):
        if lock is not None:
            yield lock
    for link in splat.chain:
        yield link.lock
    yield from splat.held_locks
    d = splat.details
    for key in ("other", "safe", "unsafe"):
        if isinstance(d.get(key), SplatLock):
            yield d[key]
    for key in ("path", "safe_path", "unsafe_path"):
        for lock, _ in d.get(key, []):
            yield lock


def add_splat(splat: Splat, checker: "Checker", spelling: Optional[Callable[[str], str]] = None) -> list[Finding]:
    """Put a report's usage bits and dependencies into the checker's graph; the cycles that closed.

    `spelling` names each class's node: the collector gives every class that
    differs only in its per-boot `#N` (`events#14` in one boot, `events#7`
    in another) the spelling first seen, so reports of many boots count and
    graph one class, not one per numbering.
    """
    same = spelling or (lambda name: name)
    from lockcheck.kernel.state import usage_bits
    from lockcheck.lockdep.observed import add_checked_dependency
    from lockcheck.lockdep.tasks import TaskState

    graph = checker.graph
    for lock in printed_locks(splat):
        if lock.usage:
            name = same(lock.name)
            graph.add_class(name)
            where = splat.evidence(lock.line, lock.at)
            for bit in usage_bits(lock.usage):
                graph.set_usage(name, bit, where)
    task = TaskState(f"{splat.file}:{splat.line}", splat.task or REPORT_TASK)
    found: list[Finding] = []
    for before, after, evidence in dependencies(splat):
        found.extend(add_checked_dependency(checker, task, same(before), same(after), evidence, origin=splat.file))
    return found
