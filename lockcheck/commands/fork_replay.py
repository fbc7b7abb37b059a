"""The forked children of a session the pytest plugin recorded, each checked as the process it was.

A forked child starts with its parent's lock graph as it was at the fork and adds its own; the
parent never sees the child's later dependencies, nor the child the parent's.  So a cycle is
real only when one process made or inherited all of its dependencies: the parent's A -> B
after the fork and the child's B -> A cannot deadlock (two processes), while the parent's
A -> B before the fork and the child's B -> A can (the child inherited A -> B).  The merged
trace lists the session's events, then each child's part (`plugin_meta.Fork`), so one checker
over the whole file sees every child against the parent's whole run.

Here each child's part is checked by a copy of the checker as its parent was at the fork --
the parent's events up to the line its `fork` record names, then the child's own -- and a
child of a child likewise.  One pass over the parent's events up to its last fork, one copy
per fork at a time.  Only the findings made in a child's part are this module's; the check's
own pass keeps those of the session's part (`in_child`).
"""

from __future__ import annotations

import copy
from typing import Callable, Iterable, Iterator, Optional

from lockcheck.errors import TraceError
from lockcheck.events import Event
from lockcheck.lockdep.checker import Checker
from lockcheck.lockdep.findings import Finding
from lockcheck.readers import lt
from lockcheck.readers.plugin_meta import Fork, PluginMeta

Transform = Callable[[Iterable[Event]], Iterable[Event]]


def in_child(meta: PluginMeta, line: int) -> bool:
    """Trace line `line` is a forked child's (the check's own pass reports only the session's)."""
    return meta.child_at(line) is not None


def check_children(path: str, meta: PluginMeta, initial: Checker,
                   transform: Optional[Transform] = None) -> list[Finding]:
    """The findings of every forked child's part of trace `path`, each child checked from the
    state its parent had at the fork (`initial`: the checker before the trace's first event)."""
    if not meta.forks:
        return []
    forks = meta.forks
    parts: list[list[tuple[int, str]]] = [[] for _ in forks]
    first = forks[0].base
    index = 0
    name, lines = _open(path)
    try:  # the children's parts (they follow the session's events, in order), kept for their turn
        for lineno, line in enumerate(lines, 1):
            if lineno <= first:
                continue
            while index < len(forks) and lineno > forks[index].end:
                index += 1
            if index == len(forks):
                break
            parts[index].append((lineno, line))
    finally:
        close = getattr(lines, "close", None)
        if close is not None:
            close()
    parents = _parents(forks)
    last = max((f.at for f, parent in zip(forks, parents) if parent is None), default=0)
    return _children(copy.deepcopy(initial), name, None, meta, parts, parents, transform,
                     _session_lines(path, min(last, first)))


def _open(path: str) -> tuple[str, Iterator[str]]:
    """(the name findings give it, its lines from the start): standard input was spooled for this."""
    from lockcheck.commands.plugin_stdin import rewind
    from lockcheck.readers.source import STDIN, open_lines

    if path == STDIN:
        rewind()
    return open_lines(path)


def _parents(forks: list[Fork]) -> list[Optional[int]]:
    """Each part's parent part: the last one before it with the parent's pid (pids are reused in a
    long session; the merge puts a parent before its children); None: the session's process."""
    last: dict[int, int] = {}
    parents: list[Optional[int]] = []
    for index, fork in enumerate(forks):
        parents.append(last.get(fork.parent))
        last[fork.pid] = index
    return parents


def _session_lines(path: str, last: int) -> Iterator[tuple[int, str]]:
    _, lines = _open(path)
    try:
        for lineno, line in enumerate(lines, 1):
            if lineno > last:
                return
            yield lineno, line
    finally:
        close = getattr(lines, "close", None)
        if close is not None:
            close()


def _children(checker: Checker, name: str, me: Optional[int], meta: PluginMeta,
              parts: list[list[tuple[int, str]]], parents: list[Optional[int]],
              transform: Optional[Transform], lines: Iterable[tuple[int, str]]) -> list[Finding]:
    """Feed the lines of the process of part `me` (None: the session's) to `checker`, copying it
    at each fork point into the child's own check; the findings of part `me` and its children's."""
    forks = meta.forks
    base = forks[me].base if me is not None else 0
    mine = sorted((index for index, parent in enumerate(parents) if parent == me and index != me),
                  key=lambda index: forks[index].at)
    found: list[Finding] = []

    def fork_now(own_line: int) -> None:
        while mine and forks[mine[0]].at <= own_line:
            child = mine.pop(0)
            found.extend(_children(copy.deepcopy(checker), name, child, meta, parts, parents, transform,
                                   parts[child]))

    fork_now(0)
    for lineno, line in lines:
        made = _feed(checker, name, lineno, line, transform)
        if me is not None:
            found.extend(made)
        fork_now(lineno - base)
    fork_now(1 << 62)  # a fork after the last line this process wrote (or its part was lost)
    return found


def _feed(checker: Checker, name: str, lineno: int, line: str, transform: Optional[Transform]) -> list[Finding]:
    """One trace line to `checker`: its findings (none for a comment, or a line the check's own
    pass reports as an error)."""
    if not line or line[0] == "#" or not line.strip():
        return []
    try:
        ev = lt.scan_fast(line, name, lineno) or lt.parse_line(line, name, lineno)
    except TraceError:
        return []
    if ev is None:
        return []
    found: list[Finding] = []
    for event in (transform([ev]) if transform is not None else (ev,)):
        found.extend(checker.feed(event))
    return found


__all__ = ["Fork", "check_children", "in_child"]
