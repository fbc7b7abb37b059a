"""The dependency graph: lock classes and the orders in which they were taken.

A plain `networkx.DiGraph` (users may load a saved graph and run any
networkx algorithm on it) with documented attributes:

Nodes are class names as reports print them (`NAME` or `NAME/N` for a
subclass).  Node attributes:

- `usage` (int): lockdep's usage bits (`LOCK_USED_IN_HARDIRQ` ... see
  `lockcheck.usage`), 0 when the class was only seen in process context
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
"""

from __future__ import annotations

from typing import Iterable, Iterator, Optional

import networkx as nx

from lockcheck.findings import Evidence

# Dependency-type bits (lockdep's DEP_*_BIT): bit = exclusive(prev) + 2 * non_recursive(next)
DEP_SR_BIT, DEP_ER_BIT, DEP_SN_BIT, DEP_EN_BIT = 0, 1, 2, 3
DEP_SR, DEP_ER, DEP_SN, DEP_EN = 1, 2, 4, 8
#: dependencies that start at an exclusive holder
DEP_E_MASK = DEP_ER | DEP_EN
#: dependencies whose next lock is not a recursive reader
DEP_N_MASK = DEP_SN | DEP_EN
DEP_NAMES = {DEP_SR: "SR", DEP_ER: "ER", DEP_SN: "SN", DEP_EN: "EN"}


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


class DepGraph:
    """Lock classes and dependencies, with where each was first seen.

    >>> g = DepGraph()
    >>> g.add_dependency("A", "B", DEP_EN, Evidence("t.lt", 3, "T1"))
    True
    >>> list(g.nx.successors("A"))
    ['B']
    """

    def __init__(self, graph: Optional[nx.DiGraph] = None) -> None:
        self.nx: nx.DiGraph = graph if graph is not None else nx.DiGraph()

    # -- classes ---------------------------------------------------------
    def add_class(self, name: str) -> None:
        if name not in self.nx._succ:
            self.nx.add_node(name, usage=0, usage_traces={})

    def usage(self, name: str) -> int:
        node = self.nx._node.get(name)
        return node["usage"] if node else 0

    def set_usage(self, name: str, bit: int, evidence: Evidence) -> bool:
        """Record usage bit `bit` of a class; False if it was already set (first trace kept)."""
        self.add_class(name)
        node = self.nx._node[name]
        mask = 1 << bit
        if node["usage"] & mask:
            return False
        node["usage"] |= mask
        node["usage_traces"][bit] = evidence
        return True

    # -- dependencies ----------------------------------------------------
    def add_dependency(self, prev: str, next: str, dep: int, evidence: Evidence,
                       distance: int = 1, held: Optional[Evidence] = None,
                       origin: Optional[str] = None) -> bool:
        """Add `prev -> next` or widen its type; True if the edge is new."""
        self.add_class(prev)
        self.add_class(next)
        attrs = self.nx._succ[prev].get(next)
        if attrs is not None:
            attrs["dep"] |= dep
            if distance == 1:
                attrs["distance"] = 1
            return False
        data = {"dep": dep, "distance": distance, "evidence": evidence}
        if held is not None:
            data["held"] = held
        if origin is not None:
            data["origin"] = origin
        self.nx.add_edge(prev, next, **data)
        return True

    def successors(self, name: str) -> dict:
        """`{next: attrs}` in first-seen order (the hot path reads this dict directly)."""
        return self.nx._succ.get(name, {})

    def predecessors(self, name: str) -> dict:
        return self.nx._pred.get(name, {})

    def edges(self) -> Iterator[tuple[str, str, dict]]:
        return iter(self.nx.edges(data=True))

    @property
    def n_classes(self) -> int:
        return self.nx.number_of_nodes()

    @property
    def n_dependencies(self) -> int:
        return self.nx.number_of_edges()

    # -- merging ---------------------------------------------------------
    def merge(self, other: "DepGraph", origin: Optional[str] = None) -> None:
        """Fold `other` into this graph: union of classes, usage bits and edges.

        Earliest evidence wins where both have one (ordered by file, line), so
        merging is associative and order-independent.
        """
        for name, data in other.nx.nodes(data=True):
            self.add_class(name)
            node = self.nx._node[name]
            node["usage"] |= data.get("usage", 0)
            traces = node["usage_traces"]
            for bit, ev in data.get("usage_traces", {}).items():
                if bit not in traces or _order(ev) < _order(traces[bit]):
                    traces[bit] = ev
        for prev, next, data in other.nx.edges(data=True):
            attrs = self.nx._succ[prev].get(next)
            if attrs is None:
                copy = dict(data)
                if origin is not None and "origin" not in copy:
                    copy["origin"] = origin
                self.nx.add_edge(prev, next, **copy)
                continue
            attrs["dep"] |= data["dep"]
            attrs["distance"] = min(attrs.get("distance", 1), data.get("distance", 1))
            if _order(data["evidence"]) < _order(attrs["evidence"]):
                for key in ("evidence", "held", "origin"):
                    if key in data:
                        attrs[key] = data[key]
                    else:
                        attrs.pop(key, None)


def _order(evidence: Evidence) -> tuple:
    return (evidence.file, evidence.line, evidence.task, evidence.at or "")


def merged(graphs: Iterable[DepGraph]) -> DepGraph:
    """One graph holding every class and dependency of `graphs`."""
    result = DepGraph()
    for graph in graphs:
        result.merge(graph)
    return result
