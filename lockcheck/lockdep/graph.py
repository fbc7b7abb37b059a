"""The dependency graph: lock classes and the orders in which they were taken.

A plain `networkx.DiGraph` (users may load a saved graph and run any
networkx algorithm on it) with documented attributes:

Nodes are class names as reports print them (`NAME` or `NAME/N` for a
subclass).  Node attributes:

- `usage` (int): lockdep's usage bits (`LOCK_USED_IN_HARDIRQ` ... see
  `lockcheck.lockdep.usage`), 0 when the class was only seen in process context
  with irqs off;
- `usage_traces` (dict[int, Evidence]): where each usage bit was first set.

An edge `A -> B` means B was acquired while A was held (lockdep's
`A.locks_after` / `B.locks_before` pair).  Edge attributes:

- `dep` (int): the dependency types seen, a mask of `DEP_SR` (shared A,
  recursive-reader B), `DEP_ER`, `DEP_SN`, `DEP_EN` (exclusive A,
  non-recursive B), as modern lockdep's `lock_list.dep`;
- `distance` (int): 1 when B was taken directly after A at least once;
- `evidence` (Evidence): where B was first taken while A was held;
- `held` (Evidence): where that A had been taken;
- `origin` (str, optional): the run or file a merged edge came from.

The edge dict of each node keeps insertion order, so a breadth-first search
visits dependencies in first-seen order, as lockdep's list walk does.

The checker reads and grows the graph's dicts directly (`DepGraph._succ`,
`_pred`, `_node`: those of networkx's `DiGraph`, the same objects), so a
check imports networkx only when something asks for `DepGraph.nx` (saving
the graph, a diff, a user's algorithm): most of a plain check's start-up
otherwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

from lockcheck.lockdep.findings import Evidence
from lockcheck.lockdep.topo_order import TopologicalOrder

if TYPE_CHECKING:  # networkx is imported when a graph is first looked at as one (`DepGraph.nx`)
    import networkx as nx

# Dependency-type bits (lockdep's DEP_*_BIT): bit = exclusive(prev) + 2 * non_recursive(next)
DEP_SR_BIT, DEP_ER_BIT, DEP_SN_BIT, DEP_EN_BIT = 0, 1, 2, 3
DEP_SR, DEP_ER, DEP_SN, DEP_EN = 1, 2, 4, 8
#: dependencies that start at an exclusive holder
DEP_E_MASK = DEP_ER | DEP_EN
#: dependencies whose next lock is not a recursive reader
DEP_N_MASK = DEP_SN | DEP_EN
DEP_NAMES = {DEP_SR: "SR", DEP_ER: "ER", DEP_SN: "SN", DEP_EN: "EN"}
#: usage bits USED_IN_{HARD,SOFT}IRQ{,_READ} (lockcheck.lockdep.usage): the "irq-safe" bits
_USED_IN_MASK = 0b00110011


def calc_dep(prev_read: int, next_read: int) -> int:
    """The dependency type of `prev -> next` (lockdep's `__calc_dep_bit`).

    >>> calc_dep(0, 0) == DEP_EN   # writer then writer
    True
    >>> calc_dep(1, 2) == DEP_SR   # reader then recursive reader
    True
    """
    return 1 << ((prev_read == 0) + ((next_read != 2) << 1))


def reverse_dep(dep: int) -> int:
    """The same dependencies seen from `next` (lockdep's `locks_before` mask: swap ER and SN)."""
    return (dep & (DEP_SR | DEP_EN)) | ((dep & DEP_ER) << 1) | ((dep & DEP_SN) >> 1)


def dep_text(dep: int) -> str:
    """`EN|SR` style text of a dependency mask."""
    return "|".join(name for bit, name in sorted(DEP_NAMES.items(), reverse=True) if dep & bit) or "-"


class DepGraph(TopologicalOrder):
    """Lock classes and dependencies, with where each was first seen.

    >>> g = DepGraph()
    >>> g.add_dependency("A", "B", DEP_EN, Evidence("t.lt", 3, "T1"))
    True
    >>> list(g.nx.successors("A"))
    ['B']
    """

    def __init__(self, graph: Optional["nx.DiGraph"] = None) -> None:
        #: the networkx view of the graph, made on first use (`nx`); it shares the dicts below
        self._nx: Optional["nx.DiGraph"] = graph
        if graph is None:
            #: class -> {next: edge attributes}, class -> {prev: the same dicts}, class -> node attributes
            #: (networkx's `DiGraph._succ`, `_pred`, `_node`)
            self._succ: dict = {}
            self._pred: dict = {}
            self._node: dict = {}
        else:
            self._succ, self._pred, self._node = graph._succ, graph._pred, graph._node
        # A topological order of the classes, kept up to date as edges are added
        # (Pearce-Kelly), so a search for a path that cannot exist is skipped.
        # None: unknown (recomputed on demand); False: the graph has a cycle
        # (only weak cycles through recursive readers are ever stored).
        self._ord: Optional[dict] = None
        #: position -> class, for every position in `_ord` (positions are distinct)
        self._at: dict = {}
        self._cyclic = False
        #: edges added so far (`_insert_new`), and the side of a search `may_reach` completed
        #: without finding a path: (src, dst, edges then, forward?, classes), reused by the
        #: `_order_edge(dst, src)` of the dependency check_noncircular cleared (`topo_order`)
        self._edges = 0
        self._probe: Optional[tuple] = None
        #: the lowest and highest positions in `_ord` (positions need not be 0..n-1: a class
        #: that nothing leads to can always go first, one that leads nowhere last)
        self._lo = 0
        self._hi = -1
        #: classes with any irq-safe (USED_IN) usage bit: none means no irq check can fail
        self.irq_safe_classes = 0
        #: class -> the USED_IN bits of it and of every class with a path to it (`irq_safe_reach`);
        #: None: not computed yet (built on first use, then kept up to date)
        self._irq_reach: Optional[dict] = None
        #: called with the evidence of each new dependency; what it returns is kept instead.  The
        #: pytest plugin adds the program's call stack there: only new dependencies pay for one
        self.evidence_hook: Optional[Callable[[Evidence], Evidence]] = None
        if graph is not None:
            self.invalidate_order()

    @property
    def nx(self) -> "nx.DiGraph":
        """The graph as a `networkx.DiGraph` (made, and networkx imported, on first use).

        The DiGraph holds this graph's own dicts: a change made through
        either is seen by both.
        """
        graph = self._nx
        if graph is None:
            import networkx

            graph = networkx.DiGraph()
            graph._node = self._node
            graph._adj = self._succ  # networkx sets `_succ` with it
            graph._pred = self._pred
            self._nx = graph
        return graph

    def _changed(self) -> None:
        """networkx's `_clear_cache` after an edge or class added behind the DiGraph's back."""
        graph = self._nx
        if graph is not None and graph.__networkx_cache__:
            graph.__networkx_cache__.clear()

    # -- classes ---------------------------------------------------------
    def add_class(self, name: str) -> None:
        if name not in self._succ:
            # networkx's add_node(name, usage=0, usage_traces={}), on the dicts
            self._succ[name] = {}
            self._pred[name] = {}
            self._node[name] = {"usage": 0, "usage_traces": {}}
            self._changed()
            if self._irq_reach is not None:
                self._irq_reach[name] = 0
            if self._ord is not None:
                self._place_last(name)

    def remove_class(self, name: str) -> bool:
        """`zap_class()`: the class, its usage and every dependency from or to it are forgotten
        (networkx's remove_node, on the dicts); False: no such class."""
        if name not in self._succ:
            return False
        for nxt in self._succ.pop(name):
            if nxt != name:
                del self._pred[nxt][name]
        for prev in self._pred.pop(name):
            if prev != name:
                del self._succ[prev][name]
        del self._node[name]
        self._changed()
        self.invalidate_order()
        return True

    def usage(self, name: str) -> int:
        node = self._node.get(name)
        return node["usage"] if node else 0

    def set_usage(self, name: str, bit: int, evidence: Evidence) -> bool:
        """Record usage bit `bit` of a class; False if it was already set (first trace kept)."""
        self.add_class(name)
        node = self._node[name]
        mask = 1 << bit
        if node["usage"] & mask:
            return False
        if not node["usage"] & _USED_IN_MASK and mask & _USED_IN_MASK:
            self.irq_safe_classes += 1
        node["usage"] |= mask
        node["usage_traces"][bit] = evidence
        if mask & _USED_IN_MASK and self._irq_reach is not None:
            self._spread_irq_reach(name, mask)
        return True

    # -- which irq-safe classes lead where ---------------------------------
    def irq_safe_reach(self, name: str) -> int:
        """The irq-safe (USED_IN) usage bits of `name` and of every class with a path to it.

        A superset of what lockdep's backward searches for irq-safe classes
        (check_irq_usage, check_usage_backwards) can find, which also
        follow only strong paths: when it has none of the bits searched
        for, the search would find nothing and is skipped.  Kept up to date
        as bits and dependencies are added; each class gains each of the
        four bits at most once, so the upkeep is linear in the graph.

        >>> g = DepGraph()
        >>> _ = g.add_dependency("A", "B", DEP_EN, Evidence("t.lt", 1, "T1"))
        >>> g.irq_safe_reach("B")
        0
        >>> _ = g.set_usage("A", 0, Evidence("t.lt", 2, "T1"))  # A taken in a hardirq
        >>> g.irq_safe_reach("B")
        1
        """
        reach = self._irq_reach
        if reach is None:
            reach = self._irq_reach = {node: 0 for node in self._node}
            for node, data in self._node.items():
                bits = data.get("usage", 0) & _USED_IN_MASK
                if bits:
                    self._spread_irq_reach(node, bits)
        return reach.get(name, 0)

    def _spread_irq_reach(self, start: str, bits: int) -> None:
        """Add `bits` to the reach of `start` and of everything after it that lacks them."""
        reach = self._irq_reach
        succ = self._succ
        new = bits & ~reach[start]
        if not new:
            return
        reach[start] |= new
        stack = [(start, new)]
        while stack:
            node, bits = stack.pop()
            for other in succ[node]:
                missing = bits & ~reach[other]
                if missing:
                    reach[other] |= missing
                    stack.append((other, missing))

    # -- dependencies ----------------------------------------------------
    def add_dependency(self, prev: str, next: str, dep: int, evidence: Evidence,
                       distance: int = 1, held: Optional[Evidence] = None,
                       origin: Optional[str] = None) -> bool:
        """Add `prev -> next` or widen its type; True if the edge is new."""
        self.add_class(prev)
        self.add_class(next)
        attrs = self._succ[prev].get(next)
        if attrs is not None:
            attrs["dep"] |= dep
            if distance == 1:
                attrs["distance"] = 1
            return False
        if self.evidence_hook is not None:
            evidence = self.evidence_hook(evidence)
        data = {"dep": dep, "distance": distance, "evidence": evidence}
        if held is not None:
            data["held"] = held
        if origin is not None:
            data["origin"] = origin
        self._insert_new(prev, next, data)
        return True

    def add_new_dependency(self, prev: str, next: str, dep: int, evidence: Evidence, distance: int,
                           held: Evidence) -> None:
        """`add_dependency` of an edge the caller knows is new, between two known classes
        (`Checker.check_prev_add` has just looked): the same edge, without looking again."""
        if self.evidence_hook is not None:
            evidence = self.evidence_hook(evidence)
        self._insert_new(prev, next, {"dep": dep, "distance": distance, "evidence": evidence, "held": held})

    def _insert_new(self, prev: str, next: str, data: dict) -> None:
        """A new edge between two known classes, as networkx's add_edge(prev, next, **data) would
        store it, and what every new dependency brings: its place in the topological order and
        the irq-safe reach it passes on.  The one way an edge is added (a dependency, a merge)."""
        self._succ[prev][next] = data
        self._pred[next][prev] = data
        self._edges += 1
        self._changed()
        self._order_edge(prev, next)
        if self._irq_reach is not None and self._irq_reach[prev]:
            self._spread_irq_reach(next, self._irq_reach[prev])

    # -- reachability pruning -------------------------------------------
    def invalidate_order(self) -> None:
        """Call after changing `self.nx` directly (merging, loading)."""
        self._ord = None
        self._at = {}
        self._cyclic = False
        self._probe = None
        self._irq_reach = None
        self.irq_safe_classes = sum(1 for data in self._node.values() if (data.get("usage") or 0) & _USED_IN_MASK)

    def successors(self, name: str) -> dict:
        """`{next: attrs}` in first-seen order (the hot path reads this dict directly)."""
        return self._succ.get(name, {})

    @property
    def n_classes(self) -> int:
        return len(self._node)

    @property
    def n_dependencies(self) -> int:
        return sum(map(len, self._succ.values()))

    # -- merging ---------------------------------------------------------
    def merge(self, other: "DepGraph", origin: Optional[str] = None) -> None:
        """Fold `other` into this graph: union of classes, usage bits and edges.

        Earliest evidence wins where both have one (ordered by file, line), so
        merging is associative and order-independent.  Nothing is validated:
        `lockcheck.store.baseline.merge_checked` merges edge by edge through a
        checker, reporting the cycles the union closes.
        """
        self.merge_classes(other)
        for prev, nexts in list(other._succ.items()):
            for next, data in list(nexts.items()):
                self.merge_edge(prev, next, data, origin)
        self.invalidate_order()

    def merge_classes(self, other: "DepGraph") -> None:
        """The classes of `other` with their usage bits (earliest trace of each bit kept)."""
        for name, data in list(other._node.items()):
            self.add_class(name)
            node = self._node[name]
            node["usage"] |= data.get("usage", 0)
            traces = node["usage_traces"]
            for bit, ev in data.get("usage_traces", {}).items():
                if bit not in traces or _order(ev) < _order(traces[bit]):
                    traces[bit] = ev
            for key, shown in (("wait", "waits"), ("lock_type", None)):
                value = data.get(key)  # of two differing values the least: merging stays order-free
                if value is not None and (node.get(key) is None or tuple(value) < tuple(node[key])):
                    node[key] = tuple(value)
                    if shown is not None:
                        node[shown] = data.get(shown)
        self._irq_reach = None  # usage bits were or-ed in directly
        self.irq_safe_classes = sum(1 for data in self._node.values() if (data.get("usage") or 0) & _USED_IN_MASK)

    def merge_edge(self, prev: str, next: str, data: dict, origin: Optional[str] = None) -> None:
        """One edge of another graph: added (its origin set), or OR-ed into ours with the earliest evidence."""
        self.add_class(prev)
        self.add_class(next)
        attrs = self._succ[prev].get(next)
        if attrs is None:
            copy = dict(data)
            if origin is not None and "origin" not in copy:
                copy["origin"] = origin
            self._insert_new(prev, next, copy)
            return
        attrs["dep"] |= data["dep"]
        attrs["distance"] = min(attrs.get("distance", 1), data.get("distance", 1))
        if _edge_order(data) < _edge_order(attrs):
            for key in ("evidence", "held", "origin"):
                if key in data:
                    attrs[key] = data[key]
                else:
                    attrs.pop(key, None)


#: bounds of `_region`'s window that leave that side open
#: what a class's node may keep beyond its usage (set by `lockcheck.lockdep.waits`): `wait`,
#: `(outer, inner)`; `waits`, its `O:I` text as reports print it; `lock_type`, `(LD_LOCK_*, inner)`
CLASS_PROPS = ("wait", "waits", "lock_type")


def _order(evidence: Evidence) -> tuple:
    """A total order of evidence: earliest file and line first; ties broken by every other field."""
    return (evidence.file, evidence.line, evidence.task, evidence.at or "",
            evidence.ts is not None, evidence.ts or 0.0, evidence.stack or ())


def _edge_order(data: dict) -> tuple:
    """Which of two copies of an edge a merge keeps: earliest evidence, then held, then origin.

    A total order over everything a merge copies, so that the result does
    not depend on which graph was merged first.
    """
    held = data.get("held")
    return (_order(data["evidence"]), held is not None, _order(held) if held is not None else (),
            data.get("origin") or "")
