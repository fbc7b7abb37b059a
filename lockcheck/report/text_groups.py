"""`--format text` for a run with many circular findings: one block per strongly connected set.

A trace that takes every pair of 1,000 classes both ways has 499,500
distinct cycles: printed one by one they are 600 MB nobody reads, and kept
until the end they took 2.5 GB.  What a person acts on is the set of
classes that are tangled together and a few of the shortest cycles among
them (issue 30).

Circular findings are grouped by the classes of their cycles (union-find):
two cycles sharing a class are in one strongly connected set, so the groups
are the strongly connected components of the union of the reported cycles.
A group with at most `max_per_group` findings is printed as before, each
finding where it came; a larger one is one block, where its first finding
came: its size, its `SHOWN` shortest cycles in the kernel's layout, and the
rest counted.  Memory is bounded by the classes, not the findings: a group
keeps its findings only while it is under the threshold, then only its
`SHOWN` shortest.  Every other finding is printed in order, as before, so
a run under the threshold prints exactly what `text.render` prints.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Optional, TextIO

from lockcheck.lockdep.findings import CIRCULAR, Finding
from lockcheck.report.printk import _Out

if TYPE_CHECKING:
    from lockcheck.report import Summary

#: findings of one strongly connected set printed in full before it is printed as one block
MAX_PER_GROUP = 20
#: the shortest cycles a block prints in full
SHOWN = 3
#: class names a block's heading lists
NAMED = 8


class _Group:
    """One strongly connected set: its findings while few, then its shortest ones."""

    __slots__ = ("count", "first", "kept")

    def __init__(self, seq: int) -> None:
        self.count = 0
        self.first = seq
        #: (seq, finding): every finding while count <= the threshold, else the SHOWN shortest
        self.kept: list[tuple[int, Finding]] = []


def _shortest(kept: list[tuple[int, Finding]]) -> list[tuple[int, Finding]]:
    """The SHOWN shortest cycles, the earliest first among equals."""
    return sorted(kept, key=lambda item: (len(item[1].cycle or ()), item[0]))[:SHOWN]


class GroupedText:
    """A text report written once the run is over, its circular findings grouped (`max_per_group` <= 0: never)."""

    def __init__(self, out: TextIO, max_per_group: int = MAX_PER_GROUP) -> None:
        self.out = out
        self.max_per_group = max_per_group
        self.count = 0
        self.kinds: Counter = Counter()
        self._others: list[tuple[int, Finding]] = []
        self._parent: dict[str, str] = {}
        self._size: dict[str, int] = {}
        self._groups: dict[str, _Group] = {}

    # -- union-find over class names -------------------------------------------------
    def _find(self, cls: str) -> str:
        parent = self._parent
        root = cls
        while parent[root] != root:
            root = parent[root]
        while parent[cls] != root:  # path compression
            parent[cls], cls = root, parent[cls]
        return root

    def _union(self, a: str, b: str) -> str:
        a, b = self._find(a), self._find(b)
        if a == b:
            return a
        if self._size[a] < self._size[b]:
            a, b = b, a
        self._parent[b] = a
        self._size[a] += self._size[b]
        merged, gone = self._groups.get(a), self._groups.pop(b, None)
        if gone is not None:
            if merged is None:
                self._groups[a] = gone
            else:
                merged.count += gone.count
                merged.first = min(merged.first, gone.first)
                merged.kept = self._trim(merged.count, merged.kept + gone.kept)
        return a

    def _trim(self, count: int, kept: list[tuple[int, Finding]]) -> list[tuple[int, Finding]]:
        if self.max_per_group > 0 and count > self.max_per_group:
            return _shortest(kept)
        return sorted(kept, key=lambda item: item[0])

    # -- the writer ------------------------------------------------------------------
    def add(self, finding: Finding) -> None:
        seq = self.count
        self.count += 1
        self.kinds[finding.kind] += 1
        cycle = finding.cycle
        if finding.kind != CIRCULAR or not cycle or len(set(cycle)) < 2:
            self._others.append((seq, finding))
            return
        for cls in cycle:
            if cls not in self._parent:
                self._parent[cls] = cls
                self._size[cls] = 1
        root = cycle[0]
        for cls in cycle[1:]:
            root = self._union(root, cls)
        root = self._find(root)
        group = self._groups.get(root)
        if group is None:
            group = self._groups[root] = _Group(seq)
        group.count += 1
        group.kept.append((seq, finding))
        if self.max_per_group > 0 and group.count > self.max_per_group and len(group.kept) > SHOWN:
            group.kept = _shortest(group.kept)

    def close(self, summary: "Summary") -> None:
        """Print everything in the order it was found (a block where its group began), then the summary."""
        from lockcheck.report.text import print_finding, print_summary

        items: list[tuple[int, Optional[Finding], Optional[tuple[str, _Group]]]] = \
            [(seq, finding, None) for seq, finding in self._others]
        for root, group in self._groups.items():
            if self.max_per_group > 0 and group.count > self.max_per_group:
                items.append((group.first, None, (root, group)))
            else:
                items.extend((seq, finding, None) for seq, finding in group.kept)
        items.sort(key=lambda item: item[0])
        for _, finding, block in items:
            if finding is not None:
                print_finding(finding, summary, self.out)
            else:
                assert block is not None
                self._print_block(block[0], block[1], summary)
        if not summary.quiet:
            print_summary(self.kinds, summary, self.out, blank_first=bool(self.count))

    def _print_block(self, root: str, group: _Group, summary: "Summary") -> None:
        from lockcheck.report.text import print_finding

        pr = _Out(self.out)
        names = sorted(cls for cls in self._parent if self._find(cls) == root)
        listed = ", ".join(names[:NAMED]) + (f", ... ({len(names) - NAMED:,} more)" if len(names) > NAMED else "")
        shown = len(group.kept)
        pr("", f"lockcheck: {group.count:,} circular findings among {len(names):,} lock classes that depend on "
               f"each other (one strongly connected set): {listed}")
        pr(f"lockcheck: the {shown} shortest {'cycle' if shown == 1 else 'cycles'} of this set follow"
           " (--format json lists every finding; --max-per-group N prints up to N in full)")
        for _, finding in group.kept:
            print_finding(finding, summary, self.out)
        pr("", f"lockcheck: and {group.count - shown:,} more circular findings among these {len(names):,} classes")
