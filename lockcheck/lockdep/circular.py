"""lockdep's `check_noncircular()`: the breadth-first search of the dependency graph for a
path that a new dependency would close into a cycle, as a part of the checker (`Checker`
inherits it).
"""

from __future__ import annotations

from collections import deque
from typing import Optional

from lockcheck.lockdep.graph import DEP_E_MASK, DEP_N_MASK
from lockcheck.lockdep.tasks import HeldLock


class CircularSearch:
    """The search half of `Checker` (it reads the checker's graph)."""

    def check_noncircular(self, src: HeldLock, target: HeldLock) -> Optional["BfsEntry"]:
        """Forward BFS from `src` for a strong path back to `target`'s class (lockdep's __bfs).

        As in the kernel, a class is marked visited before the strength
        test, and a path ending in a recursive-read edge only matches when
        the target is held exclusively (`hlock_conflict`).

        With a topological order of the graph at hand, classes ordered after
        the target cannot lead to it and are never queued: the search visits
        the same classes that matter in the same order, so it finds the same
        path, only sooner (and none at all when the source is after the target).
        """
        scls = src.cls
        tcls = target.cls
        exclusive_target = target.read == 0
        if scls == tcls and (exclusive_target or src.read != 2):
            return BfsEntry(scls, None, src.read == 2, 0, None)
        succ = self.graph._succ
        direct = succ[scls].get(tcls)
        if direct is not None:
            return _direct_match(src, direct, tcls, exclusive_target)
        # a path into the target needs a dependency into it; one out of the source, one out of it
        into, out = self.graph._pred[tcls], succ[scls]  # (a self-loop leads nowhere)
        if not into or not out or (len(into) == 1 and tcls in into) or (len(out) == 1 and scls in out):
            return None
        root = BfsEntry(scls, None, src.read == 2, 0, None)
        order = self.graph.topological_order()
        if order is not None:
            limit = order[tcls]
            if order[root.cls] > limit:
                return None
            # a two-way search proves most impossible paths for about twice its smaller side,
            # where the search below would visit everything reachable in the window to find nothing
            if not self.graph.may_reach(root.cls, tcls):
                return None
        accessed = {root.cls}
        queue: deque = deque()
        popleft = queue.popleft
        push = queue.append
        if order is None:
            for ncls, attrs in succ[root.cls].items():
                push((ncls, attrs, root))
        else:
            for ncls, attrs in succ[root.cls].items():
                if order[ncls] <= limit:
                    push((ncls, attrs, root))
        while queue:
            cls, attrs, parent = popleft()
            if cls in accessed:
                continue
            accessed.add(cls)
            dep = attrs["dep"]
            if parent.only_xr:
                dep &= DEP_E_MASK  # -(*R)-> -(S*)-> is not a strong path
                if not dep:
                    continue
            entry = BfsEntry(cls, parent, not (dep & DEP_N_MASK), dep, attrs)
            if cls == tcls and (exclusive_target or not entry.only_xr):
                return entry
            if order is None:
                for ncls, nattrs in succ[cls].items():
                    push((ncls, nattrs, entry))
            else:
                for ncls, nattrs in succ[cls].items():
                    if order[ncls] <= limit:
                        push((ncls, nattrs, entry))
        return None


def _direct_match(src: HeldLock, attrs: dict, tcls: str, exclusive_target: bool) -> Optional["BfsEntry"]:
    """The BFS's answer when the source has a dependency straight into the target, without the search.

    The root's dependencies are queued first, so that one is the target's
    first entry in the queue; the first entry of a class to be dequeued marks
    it visited whatever its strength, so it alone decides: a match, or no
    match at all.  The search would visit every other successor of the
    source before dequeuing it (O(out-degree) per check: with every pair of
    1,000 classes taken both ways, most of the run's time).
    """
    root = BfsEntry(src.cls, None, src.read == 2, 0, None)
    dep = attrs["dep"]
    if root.only_xr:
        dep &= DEP_E_MASK  # -(*R)-> -(S*)-> is not a strong path
        if not dep:
            return None
    entry = BfsEntry(tcls, root, not (dep & DEP_N_MASK), dep, attrs)
    return entry if exclusive_target or not entry.only_xr else None


class BfsEntry:
    """A visited dependency in a graph search (lockdep's `struct lock_list` with its parent link)."""

    __slots__ = ("cls", "parent", "only_xr", "dep", "attrs")

    def __init__(self, cls: str, parent: Optional["BfsEntry"], only_xr: bool, dep: int,
                 attrs: Optional[dict]) -> None:
        self.cls = cls
        self.parent = parent
        self.only_xr = only_xr
        self.dep = dep
        self.attrs = attrs


