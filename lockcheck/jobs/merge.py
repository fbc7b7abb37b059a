"""The merge, in lockcheck's process: the parts' candidates replayed (exact) or their
summaries applied, in trace order, to the session's one checker."""

from __future__ import annotations

import heapq
from typing import Any, Callable, Iterator, NamedTuple, Optional

from lockcheck import events as E
from lockcheck.jobs.shards import CHAIN, CLASS, NOTE, OPEN, USAGE, Fallback, MapResult, Unsure
from lockcheck.jobs.wire import _Unwire
from lockcheck.lockdep.checker import Checker
from lockcheck.lockdep.findings import Evidence, Finding
from lockcheck.readers import lt


def replay(results: list[MapResult], checker: Checker, opened: Callable[[str, Any], None],
           counts: Optional[dict] = None) -> Iterator[Finding]:
    """Feed every part's candidates to `checker` in trace order; the findings, as they come.

    `opened(name, module)` starts a file's run (the session's `_opened`).
    `counts["tasks"]` counts the tasks met: a task's first event is always a
    candidate, so this is the count one process makes, also when `--first`
    stops the merge early.
    Raises `Fallback` when a candidate leaves the merged state short of
    what its part assumed after it (see the module's docstring).
    """
    import importlib

    streams = [result.candidates for result in results]
    nodes = checker.graph._node
    cache = checker.chain_cache
    tasks = checker.tasks
    unwire = _Unwire()
    last = None
    for key, kind, fields, snapshot, name, module, classes, chains in heapq.merge(*streams, key=_key):
        if key == last:
            continue  # a file's start, or a `#lockcheck-run` line, seen by every part of the file
        last = key
        if kind == OPEN:
            opened(name, importlib.import_module(module))
            continue
        ev = unwire.event(fields)
        if snapshot is not None:
            tasks[ev.task] = unwire.task(snapshot)
        elif ev.op != E.RUN:
            tasks.pop(ev.task, None)
            if counts is not None:
                counts["tasks"] = counts.get("tasks", 0) + 1
        yield from checker.feed(ev)
        if checker.stopped:
            return
        for cls, usage in (classes or {}).items():
            node = nodes.get(cls)
            if node is None or usage & ~node["usage"]:
                raise Fallback(f"{ev.location}: usage of {cls} differs in the merged run")
        for chain in chains:
            if chain not in cache:
                raise Fallback(f"{ev.location}: a chain the part cached was not cached in the merged run")


class _Site(NamedTuple):
    """Where an event was, as far as a dependency's evidence reads it (an `Event`'s fields)."""

    file: str
    line: int
    at: Optional[str]
    ts: Optional[float]


class _Named:
    """The task of a summarised dependency, as far as `Checker.check_prev_add` reads it: its name."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


class _Lock:
    """A held lock of a summarised dependency, as far as the checker's graph checks read it."""

    __slots__ = ("cls", "read", "_site")

    def __init__(self, cls: str, read: int, site: Optional[tuple] = None) -> None:
        self.cls = cls
        self.read = read
        self._site = site

    @property
    def event(self) -> Any:
        """Where the lock was taken (read back from its line if the fast path held it)."""
        site = self._site
        if len(site) == 3:
            return lt.scan_fast(*site)
        return _Site(site[0], site[1], site[2], site[3])


def _unsure(what: str) -> Callable[..., None]:
    def raise_unsure(*args: Any, **kwargs: Any) -> None:
        raise Unsure(f"{what} where the parts meet")
    return raise_unsure


#: what reports on the merged graph (`merge_summaries` makes each raise `Unsure` instead)
_CHECKER_REPORTS = ("report", "print_deadlock_bug", "print_circular_bug")
_IRQ_REPORTS = ("report", "print_usage_bug", "print_irq_inversion_bug", "print_bad_irq_dependency")


def merge_summaries(results: list, checker: Checker, opened: Callable[[str, Any], None]) -> int:
    """Apply every part's summary records to `checker`'s graph in trace order (summary mode).

    `results` are `MapResult`s or `MapStream`s.  Each record is applied as
    the sequential run applies it at that place in the trace (see the
    module's docstring): a class added, a usage bit set (and validated on
    the merged graph), a chain validated unless the merged cache has it
    (each of its dependencies through `Checker.check_prev_add`, which
    searches the merged graph for cycles and irq inversions).  Whatever
    would report raises `Unsure` instead, as does a part that gave up.
    Returns the number of chains validated (the rest of the parts' look-ups were hits).
    """
    import importlib

    from lockcheck.lockdep.usage import USAGE_STATES

    streams = [result.records for result in results]
    graph = checker.graph
    nodes = graph._node
    irq = checker.irq
    cache = checker.chain_cache
    saved = irq.report
    for name in _CHECKER_REPORTS:
        setattr(checker, name, _unsure(name))
    for name in _IRQ_REPORTS:
        setattr(irq, name, _unsure(name))
    check_prev_add = checker.check_prev_add
    mark_lock_irq = irq.mark_lock_irq
    chains = 0
    notes = checker.stats.notes
    last = None
    try:
        # (records sort as their keys: a part's keys are distinct, and two parts share only a file's
        # opening, the same record in each)
        for record in heapq.merge(*streams):
            kind = record[1]
            if kind == CHAIN:
                _, _, chain_key, cacheable, deps = record
                if chain_key in cache:
                    continue  # cached first by another part: a hit in the sequential run
                if cacheable:
                    cache.add(chain_key)
                chains += 1
                for prev_cls, prev_read, nxt_cls, nxt_read, distance, site, held in deps:
                    if not check_prev_add(_Named(site[2]), _Lock(prev_cls, prev_read, held), _Lock(nxt_cls, nxt_read),
                                          distance, _Site(site[0], site[1], site[3], site[4])):
                        raise Unsure("a dependency refused where the parts meet")
            elif kind == CLASS:
                graph.add_class(record[2])
            elif kind == USAGE:
                _, _, cls, bit, read, site = record
                if nodes[cls]["usage"] & (1 << bit):
                    continue  # set first by another part (`IrqValidator.mark_lock`: nothing to do)
                graph.set_usage(cls, bit, Evidence(*site))
                if bit < USAGE_STATES and not mark_lock_irq(None, _Lock(cls, read), bit, None):
                    raise Unsure("a usage bit refused where the parts meet")
            elif kind == NOTE:
                if len(notes) < 20:  # `IrqValidator._note`
                    notes.append(record[2])
            elif kind == OPEN:
                if record[0] != last:  # every part of a file opens it
                    last = record[0]
                    opened(record[2], importlib.import_module(record[3]))
    finally:
        for name in _CHECKER_REPORTS:
            delattr(checker, name)
        for name in _IRQ_REPORTS[1:]:
            delattr(irq, name)
        irq.report = saved
    return chains


def _key(candidate: tuple) -> tuple:
    return candidate[0]


def finish(results: list[MapResult], checker: Checker, context: Any, tasks: int,
           chains: Optional[int] = None) -> None:
    """The run's totals from the parts: events, releases of locks never seen taken, reader stats;
    `tasks` met (`replay`'s count); in summary mode the `chains` the merge validated."""
    if chains is not None:
        checker.stats.chains = chains
        checker.stats.chain_hits = sum(r.validations for r in results) - chains
    checker.stats.events = sum(r.events for r in results)
    checker.stats.unknown_releases = sum(r.unknown_releases for r in results)
    checker.tasks.clear()
    checker._tasks_before = tasks
    stats = {}
    for result in results:
        stats.update(result.reader_stats)
    for index in sorted(stats) if context is not None else ():
        merge = getattr(context.stats, "merge", None)
        if merge is not None:
            merge(stats[index])
