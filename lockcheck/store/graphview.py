"""Views of a dependency graph small enough to read: `graph --cycles-only` and `--focus CLASS`.

A kernel boot's graph has thousands of classes; graphviz cannot lay it out in minutes, and a
person cannot read it when it can.  What a reader wants is either the cycles (the strongly
connected sets of classes, and the cycles the findings report -- a circular finding's closing
dependency was refused, so its cycle is no strongly connected set of the graph) or one class
with the classes a few dependencies away.  Both views are subgraphs: every class and edge kept
carries its attributes unchanged, so DOT, GraphML and JSON write them as they write the whole.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Iterable, Optional

from lockcheck.errors import UsageError
from lockcheck.lockdep.findings import CIRCULAR, Finding
from lockcheck.lockdep.graph import DepGraph


@dataclass(frozen=True)
class GraphView:
    """What `lockcheck graph` keeps of the graph; the default keeps everything."""

    cycles_only: bool = False
    #: class names or glob patterns (`&rq->*`) to centre on
    focus: tuple[str, ...] = ()
    #: how many dependencies away from a focus class, in either direction
    depth: int = 1

    @property
    def whole(self) -> bool:
        return not self.cycles_only and not self.focus


def cycle_edges(graph: DepGraph, findings: Iterable[Finding]) -> set[tuple[str, str]]:
    """The dependencies on some cycle: inside a strongly connected set of classes, or along a
    circular finding's chain (its refused closing dependency is not in the graph: DOT draws it)."""
    import networkx as nx

    edges: set[tuple[str, str]] = set()
    for component in nx.strongly_connected_components(graph.nx):
        if len(component) > 1:
            edges.update(graph.nx.subgraph(component).edges)
    edges.update((u, v) for u, v in nx.selfloop_edges(graph.nx))
    for finding in findings:
        if finding.kind == CIRCULAR and finding.cycle:
            cycle = list(finding.cycle)
            edges.update(edge for edge in zip(cycle, cycle[1:]) if graph.nx.has_edge(*edge))
    return edges


def _focus_classes(graph: DepGraph, patterns: Iterable[str], cycles_only: bool = False) -> set[str]:
    """The classes each pattern names: itself when it is a class, else the classes it globs."""
    found: set[str] = set()
    for pattern in patterns:
        if pattern in graph.nx:
            found.add(pattern)
            continue
        matched = {name for name in graph.nx.nodes if fnmatchcase(name, pattern)}
        if not matched:
            where = "on a cycle" if cycles_only else "of the graph"
            raise UsageError(f"--focus {pattern}: no lock class {where} has that name "
                             f"({graph.n_classes} classes; a glob such as '&rq->*' matches several)")
        found |= matched
    return found


def neighbourhood(graph: DepGraph, centres: set[str], depth: int) -> set[str]:
    """The classes at most `depth` dependencies from a centre, following edges either way."""
    seen = set(centres)
    queue = deque((name, 0) for name in centres)
    while queue:
        name, dist = queue.popleft()
        if dist == depth:
            continue
        for other in (*graph.nx.successors(name), *graph.nx.predecessors(name)):
            if other not in seen:
                seen.add(other)
                queue.append((other, dist + 1))
    return seen


def _finding_classes(finding: Finding) -> set[str]:
    names = set(finding.cycle or ())
    names.add(finding.lock)
    if finding.held is not None:
        names.add(finding.held)
    return names


def apply_view(graph: DepGraph, findings: list[Finding], view: Optional[GraphView]) -> tuple[DepGraph, list[Finding]]:
    """The graph and findings `view` keeps.

    `cycles_only` keeps the dependencies on a cycle and their classes, and the circular
    findings; `focus` then keeps the classes within `depth` of the focus classes, and the
    findings all of whose classes are kept (so DOT still draws a kept cycle's closing edge).
    """
    if view is None or view.whole:
        return graph, findings
    if view.depth < 0:
        raise UsageError(f"--depth {view.depth}: must be 0 or more")
    sub = graph
    if view.cycles_only:
        edges = cycle_edges(graph, findings)
        findings = [f for f in findings if f.kind == CIRCULAR and f.cycle]
        classes = {name for edge in edges for name in edge}
        classes.update(name for f in findings for name in _finding_classes(f) if name in graph.nx)
        nxg = graph.nx.edge_subgraph(edges).copy()
        nxg.add_nodes_from((name, graph.nx.nodes[name]) for name in classes)
        sub = DepGraph(nxg)
    if view.focus:
        keep = neighbourhood(sub, _focus_classes(sub, view.focus, view.cycles_only), view.depth)
        sub = DepGraph(sub.nx.subgraph(keep).copy())
    kept = set(sub.nx.nodes)
    findings = [f for f in findings if _finding_classes(f) <= kept]
    return sub, findings
