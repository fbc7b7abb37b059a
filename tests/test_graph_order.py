"""The incremental topological order of `DepGraph` and the cycle search it prunes.

The order is kept up to date edge by edge (Pearce-Kelly, plus the O(1)
moves of sources and sinks); `Checker.check_noncircular` skips every class
the order proves cannot lead to the target.  Held here to plain networkx
algorithms on random insertion sequences.
"""

from __future__ import annotations

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lockcheck.lockdep import topo_order as graph_module
from lockcheck.lockdep.checker import Checker
from lockcheck.lockdep.findings import Evidence
from lockcheck.lockdep.graph import DEP_EN, DEP_ER, DEP_SN, DEP_SR, DepGraph
from lockcheck.lockdep.tasks import HeldLock

NODES = [f"C{i}" for i in range(9)]
edges = st.lists(st.tuples(st.sampled_from(NODES), st.sampled_from(NODES)), max_size=40)
EV = Evidence("gen.lt", 1, "T1")


def _acyclic_without_loops(graph: nx.DiGraph) -> bool:
    view = nx.restricted_view(graph, [], list(nx.selfloop_edges(graph)))
    return nx.is_directed_acyclic_graph(view)


@settings(max_examples=300, deadline=None)
@given(edges, st.lists(st.sampled_from(NODES), max_size=5))
def test_order_stays_topological_and_cycles_are_noticed(insertions, registered_first) -> None:
    graph = DepGraph()
    for name in registered_first:  # classes seen on their own first get positions up front
        graph.add_class(name)
    graph.topological_order()  # from now on the order is maintained, not recomputed
    for u, v in insertions:
        graph.add_dependency(u, v, DEP_EN, EV)
        order = graph.topological_order()
        if _acyclic_without_loops(graph.nx):
            assert order is not None
            assert set(order) == set(graph.nx.nodes)
            assert len(set(order.values())) == len(order)  # positions are distinct
            for a, b in graph.nx.edges:
                if a != b:
                    assert order[a] < order[b], (a, b, order)
        else:
            assert order is None
            break


MANY = [f"C{i}" for i in range(30)]


@pytest.mark.parametrize("gap", [1, 2, 3, 1 << 20])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(insertions=st.lists(st.tuples(st.sampled_from(MANY), st.sampled_from(MANY)), min_size=10, max_size=120),
       queries=st.lists(st.tuples(st.sampled_from(MANY), st.sampled_from(MANY)), max_size=10))
def test_two_way_moves_keep_the_order_and_answer_reachability(monkeypatch, gap, insertions, queries) -> None:
    """Moves into gaps (room: `gap`; 1 leaves none, so Pearce-Kelly's full move runs) and the
    budgeted two-way searches: a valid order with distinct positions, `may_reach` never wrong."""
    monkeypatch.setattr(graph_module, "_GAP", gap)
    monkeypatch.setattr(graph_module, "_FIRST_BUDGET", 2)  # both sides of a search run out of budget often
    graph = DepGraph()
    graph.topological_order()
    for u, v in insertions:
        graph.add_dependency(u, v, DEP_EN, EV)
        order = graph.topological_order()
        if order is None:
            assert not _acyclic_without_loops(graph.nx)
            return
        assert graph._at == {position: name for name, position in order.items()}
        for a, b in graph.nx.edges:
            if a != b:
                assert order[a] < order[b], (a, b)
        for src, dst in queries:
            if src in order and dst in order and src != dst:
                if nx.has_path(graph.nx, src, dst):
                    assert graph.may_reach(src, dst)
                elif order[src] < order[dst]:
                    assert not graph.may_reach(src, dst)


def test_a_chain_rooted_backwards_moves_one_class_per_link() -> None:
    """Every class gets a dependency into it before it links to the chain: no O(1) move applies,
    and a one-way reorder would move the whole chain each time; the two-way one moves one class."""
    graph = DepGraph()
    graph.topological_order()
    n = 300
    for i in range(n - 1, -1, -1):
        graph.add_dependency("root", f"C{i}", DEP_EN, EV)
        before = dict(graph.topological_order())
        graph.add_dependency(f"C{i}", f"C{i + 1}", DEP_EN, EV)
        after = graph.topological_order()
        assert [name for name in before if before[name] != after[name]] in ([], [f"C{i}"])
        assert not graph.may_reach(f"C{i + 1}", f"C{i}")
    order = graph.topological_order()
    assert sorted(order, key=order.__getitem__) == ["root"] + [f"C{i}" for i in range(n + 1)]


def _held(cls: str, read: int = 0) -> HeldLock:
    return HeldLock(cls, cls, None, 0, read, False, True, None, 0, False, 0, None)


dep_types = st.sampled_from([DEP_EN, DEP_EN, DEP_EN, DEP_ER, DEP_SN, DEP_SR])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(NODES), st.sampled_from(NODES), dep_types), max_size=30),
       st.sampled_from(NODES), st.sampled_from(NODES), st.sampled_from([0, 1, 2]), st.sampled_from([0, 1, 2]))
def test_pruned_search_finds_what_the_unpruned_one_finds(insertions, src, dst, src_read, dst_read) -> None:
    """With or without the order (and its O(1) exits), the same path, class for class."""
    pruned, plain = Checker(), Checker()
    pruned.graph.topological_order()
    for checker in (pruned, plain):
        checker.graph.add_class(src)
        checker.graph.add_class(dst)
    for u, v, dep in insertions:
        for checker in (pruned, plain):
            checker.graph.add_dependency(u, v, dep, EV)
    plain.graph._cyclic = True  # no order: the search visits everything reachable
    plain.graph._ord = None

    def path(checker: Checker):
        entry = checker.check_noncircular(_held(src, src_read), _held(dst, dst_read))
        found = []
        while entry is not None:
            found.append(entry.cls)
            entry = entry.parent
        return found

    assert path(pruned) == path(plain)
    if all(dep == DEP_EN for _, _, dep in insertions) and src != dst:
        # only exclusive dependencies: every path is strong, so found == reachable
        assert bool(path(pruned)) == nx.has_path(pruned.graph.nx, src, dst)


def test_a_chain_built_last_link_first_moves_one_class_per_link() -> None:
    """The shape that made appending quadratic: each new class goes in front, nothing else moves."""
    graph = DepGraph()
    graph.topological_order()
    n = 200
    for i in range(n - 1, -1, -1):
        before = dict(graph.topological_order())
        graph.add_dependency(f"C{i}", f"C{i + 1}", DEP_EN, EV)
        after = graph.topological_order()
        moved = [name for name in before if before[name] != after[name]]
        assert moved == []  # C(i+1) kept its place; C(i) is new and went first
    order = graph.topological_order()
    assert sorted(order, key=order.__getitem__) == [f"C{i}" for i in range(n + 1)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.tuples(st.just("edge"), st.sampled_from(NODES), st.sampled_from(NODES)),
                          st.tuples(st.just("usage"), st.sampled_from(NODES), st.sampled_from(range(8)))),
                max_size=40),
       st.integers(0, 40))
def test_irq_safe_reach_is_the_union_over_ancestors(steps, first_query) -> None:
    """The kept-up-to-date reach equals the irq-safe bits of each class and its ancestors."""
    graph = DepGraph()
    for i, (what, a, b) in enumerate(steps):
        if i == first_query:
            graph.irq_safe_reach(a)  # from here on it is maintained, not rebuilt
        if what == "edge":
            graph.add_dependency(a, b, DEP_EN, EV)
        else:
            graph.set_usage(a, b, EV)
    for node in graph.nx.nodes:
        expected = 0
        for other in nx.ancestors(graph.nx, node) | {node}:
            expected |= graph.usage(other) & 0b00110011
        assert graph.irq_safe_reach(node) == expected


def test_a_class_moved_between_two_moved_ones_moves_alone(monkeypatch) -> None:
    """X moves in before V, not packed against it (room left on both sides); then Y must go
    between X and V: it moves alone into that room, where the full move would have searched
    everything V leads to (and moved it)."""
    graph = DepGraph()
    graph.topological_order()
    k = 50
    for i in range(k):
        graph.add_dependency("V", f"S{i}", DEP_EN, EV)
    graph.add_dependency("P", "X", DEP_EN, EV)  # X is no source: it cannot simply go first
    graph.add_dependency("X", "V", DEP_EN, EV)  # X is after V: it moves just before it
    order = graph.topological_order()
    assert order["P"] < order["X"] < order["V"] - 1
    assert order["V"] - order["X"] <= graph_module._SPAN  # near V, not anywhere below it
    graph.add_dependency("X", "Y", DEP_EN, EV)  # Y new, placed last
    whole = []
    region = graph_module._region

    def counted(start, adjacency, order, lo, hi, budget=None):
        if budget is None:
            whole.append(start)
        return region(start, adjacency, order, lo, hi, budget)

    monkeypatch.setattr(graph_module, "_region", counted)
    before = sorted(order, key=order.__getitem__)
    graph.add_dependency("Y", "V", DEP_EN, EV)
    order = graph.topological_order()
    assert whole == []  # no side searched to its end
    after = sorted(order, key=order.__getitem__)
    assert [name for name in after if name != "Y"] == [name for name in before if name != "Y"]
    assert order["X"] < order["Y"] < order["V"]
    assert all(order[a] < order[b] for a, b in graph.nx.edges)


@pytest.mark.parametrize("gap", [1, 2, 1 << 20])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(insertions=st.lists(st.tuples(st.sampled_from(MANY), st.sampled_from(MANY), st.sampled_from("aaqe")),
                           min_size=10, max_size=120))
def test_a_side_may_reach_completed_is_moved_without_searching_again(monkeypatch, gap, insertions) -> None:
    """check_noncircular asks `may_reach(v, u)` before `u -> v` is added; the side it completed is
    what `_order_edge` moves.  Held to networkx: a valid order with distinct positions, the same
    answer as `has_path`, and a stale side never used (`q`: a question not followed by its edge,
    the irq check refused it; `e`: an edge added without a question, as a merge does)."""
    monkeypatch.setattr(graph_module, "_GAP", gap)
    monkeypatch.setattr(graph_module, "_FIRST_BUDGET", 2)
    graph = DepGraph()
    for name in MANY:
        graph.add_class(name)
    graph.topological_order()
    for u, v, how in insertions:
        if u == v:
            continue
        if how != "e":
            reach = graph.may_reach(v, u)
            if not reach:
                assert not nx.has_path(graph.nx, v, u)
            if how == "q" or reach:
                continue
        elif nx.has_path(graph.nx, v, u):
            continue
        graph.add_dependency(u, v, DEP_EN, EV)
        order = graph.topological_order()
        assert order is not None
        assert graph._at == {position: name for name, position in order.items()}
        for a, b in graph.nx.edges:
            assert order[a] < order[b], (a, b)


def test_an_edge_may_reach_cleared_is_ordered_without_a_second_search(monkeypatch) -> None:
    """The side `may_reach(v, u)` completed is the side `_order_edge(u, v)` moves: adding the
    edge right after runs no search of its own unless the gap had to be renumbered first."""
    import random

    searches, spreads = [], []
    region, spread = graph_module._region, graph_module.TopologicalOrder._spread
    monkeypatch.setattr(graph_module, "_region", lambda *a: searches.append(a[0]) or region(*a))
    monkeypatch.setattr(graph_module.TopologicalOrder, "_spread", lambda self: spreads.append(1) or spread(self))
    graph = DepGraph()
    names = [f"c{i}" for i in range(60)]
    for name in names:
        graph.add_class(name)
    graph.topological_order()
    rng = random.Random(3)
    moved_as_searched = 0
    for _ in range(600):
        u, v = rng.sample(names, 2)
        searches.clear()
        if graph.may_reach(v, u):
            continue
        searched = bool(searches)
        searches.clear()
        spreads.clear()
        graph.add_dependency(u, v, DEP_EN, EV)
        if searched and not spreads:
            assert searches == [], (u, v)
            moved_as_searched += 1
    assert moved_as_searched > 50


def test_classes_moved_between_moved_ones_leave_room_without_renumbering(monkeypatch) -> None:
    """Each new class N(i) goes between N(i-1) and V, the last moved one and the class it went
    before: moves spaced across the room (not packed against V) leave room for each next one,
    so fifteen levels deep the order was never renumbered (packed: a `_spread` at every level,
    linear in the classes each time, the super-linear part of `dense`)."""
    spreads = []
    spread = graph_module.TopologicalOrder._spread
    monkeypatch.setattr(graph_module.TopologicalOrder, "_spread", lambda self: spreads.append(1) or spread(self))
    graph = DepGraph()
    graph.topological_order()
    for i in range(20):
        graph.add_dependency("V", f"S{i}", DEP_EN, EV)
    graph.add_dependency("P", "N0", DEP_EN, EV)
    graph.add_dependency("N0", "V", DEP_EN, EV)
    for i in range(1, 16):
        graph.add_dependency(f"N{i - 1}", f"N{i}", DEP_EN, EV)
        graph.add_dependency(f"N{i}", "V", DEP_EN, EV)
    order = graph.topological_order()
    assert spreads == []
    assert sorted(order, key=order.__getitem__)[:18] == ["P"] + [f"N{i}" for i in range(16)] + ["V"]
    assert all(order[a] < order[b] for a, b in graph.nx.edges)
