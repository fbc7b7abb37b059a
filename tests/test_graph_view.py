"""`lockcheck graph --cycles-only` and `--focus CLASS --depth N`: a large graph cut down to what a
person can read, in every graph format, with the kept classes' attributes unchanged."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import networkx as nx
import pytest

from lockcheck.commands.cli import main
from lockcheck.lockdep.findings import Evidence
from lockcheck.lockdep.graph import DEP_EN, DepGraph
from lockcheck.store.graphview import GraphView, apply_view, neighbourhood

from testdata import TRACES


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(args) + ["--no-config", "--no-progress"], stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def chain_trace(path: Path, n: int, cycle: bool = True) -> Path:
    """c0 -> c1 -> ... -> c(n-1), each pair nested by its own task, and (with `cycle`) one AB-BA
    between `&x->lock` and `&y->lock` off to the side."""
    lines = ["#lockcheck-trace v1"]
    for i in range(n - 1):
        task = f"T{i % 50}"
        lines += [f"{task} acquire c{i}", f"{task} acquire c{i + 1}", f"{task} release c{i + 1}",
                  f"{task} release c{i}"]
    if cycle:
        lines += ["A acquire &x->lock", "A acquire &y->lock", "A release &y->lock", "A release &x->lock",
                  "B acquire &y->lock", "B acquire &x->lock", "B release &x->lock", "B release &y->lock"]
    path.write_text("\n".join(lines) + "\n")
    return path


def saved(path: Path) -> dict:
    return json.loads(path.read_text())


def test_cycles_only_on_3000_classes_gives_the_one_cycle(tmp_path: Path) -> None:
    trace = chain_trace(tmp_path / "big.lt", 3000)
    start = time.perf_counter()
    status, _, err = run("graph", "--cycles-only", str(trace), "-o", str(tmp_path / "cycle.json"))
    took = time.perf_counter() - start
    assert status == 0, err
    doc = saved(tmp_path / "cycle.json")
    assert sorted(c["name"] for c in doc["classes"]) == ["&x->lock", "&y->lock"]
    assert [(d["from"], d["to"]) for d in doc["dependencies"]] == [("&x->lock", "&y->lock")]
    [finding] = doc["findings"]
    assert finding["kind"] == "circular-dependency" and sorted(finding["cycle"]) == ["&x->lock", "&y->lock"]
    assert "2 lock classes, 1 dependency (of 3002 and 3000)" in err
    assert took < 30, took
    # DOT draws the cycle: both classes red, the refused closing dependency dashed
    assert run("graph", "--cycles-only", str(trace), "-o", str(tmp_path / "cycle.dot"))[0] == 0
    dot = (tmp_path / "cycle.dot").read_text()
    assert '"c1"' not in dot
    assert '"&x->lock" [label="&x->lock", color=red, penwidth=2];' in dot
    assert '"&y->lock" [label="&y->lock", color=red, penwidth=2];' in dot
    [closing] = [line for line in dot.splitlines() if "style=dashed" in line]
    assert closing.startswith('  "&y->lock" -> "&x->lock" [label="circular-dependency')
    # the whole graph is still there without the option
    assert run("graph", str(trace), "-o", str(tmp_path / "all.json"))[0] == 0
    assert len(saved(tmp_path / "all.json")["classes"]) == 3002


def test_cycles_only_without_a_cycle_is_an_empty_graph(tmp_path: Path) -> None:
    trace = chain_trace(tmp_path / "clean.lt", 20, cycle=False)
    status, _, err = run("graph", "--cycles-only", str(trace), "-o", str(tmp_path / "g.json"))
    assert status == 0 and "0 lock classes, 0 dependencies (of 20 and 19)" in err
    assert saved(tmp_path / "g.json")["classes"] == []


def _cyclic_graph() -> DepGraph:
    """A -> B -> C -> A (a strongly connected set, as merged graphs can have), C -> D -> E."""
    graph = nx.DiGraph()
    for i, (u, v) in enumerate([("A", "B"), ("B", "C"), ("C", "A"), ("C", "D"), ("D", "E")]):
        graph.add_edge(u, v, dep=DEP_EN, evidence=Evidence("m.lt", i + 1, "T1"))
    for name in graph.nodes:
        graph.nodes[name]["usage"] = 0
    return DepGraph(graph)


def test_cycles_only_keeps_strongly_connected_classes() -> None:
    graph = _cyclic_graph()
    sub, findings = apply_view(graph, [], GraphView(cycles_only=True))
    assert set(sub.nx.nodes) == {"A", "B", "C"}
    assert set(sub.nx.edges) == {("A", "B"), ("B", "C"), ("C", "A")}
    assert sub.nx.edges["A", "B"]["evidence"] == Evidence("m.lt", 1, "T1")  # attributes kept
    assert graph.n_classes == 5  # the graph itself is untouched


def test_focus_keeps_the_neighbourhood_both_ways() -> None:
    graph = _cyclic_graph()
    assert neighbourhood(graph, {"D"}, 1) == {"C", "D", "E"}
    assert neighbourhood(graph, {"E"}, 2) == {"C", "D", "E"}
    assert neighbourhood(graph, {"E"}, 0) == {"E"}
    sub, _ = apply_view(graph, [], GraphView(focus=("D",), depth=1))
    assert set(sub.nx.edges) == {("C", "D"), ("D", "E")}
    # with --cycles-only first: the neighbourhood within the cycles
    sub, _ = apply_view(graph, [], GraphView(cycles_only=True, focus=("A",), depth=1))
    assert set(sub.nx.nodes) == {"A", "B", "C"}


def test_focus_on_the_command_line(tmp_path: Path) -> None:
    trace = chain_trace(tmp_path / "chain.lt", 100)
    status, _, err = run("graph", "--focus", "c50", "--depth", "2", str(trace), "-o", str(tmp_path / "f.json"))
    assert status == 0, err
    doc = saved(tmp_path / "f.json")
    assert sorted(c["name"] for c in doc["classes"]) == ["c48", "c49", "c50", "c51", "c52"]
    assert len(doc["dependencies"]) == 4 and doc.get("findings", []) == []
    # a glob, repeated --focus, and GraphML
    status, _, err = run("graph", "--focus", "&x->*", "--focus", "c0", str(trace), "-o", str(tmp_path / "f.graphml"))
    assert status == 0, err
    names = set(nx.read_graphml(tmp_path / "f.graphml").nodes)
    assert names == {"&x->lock", "&y->lock", "c0", "c1"}


@pytest.mark.parametrize("args, message", [
    (["--focus", "nosuch"], "--focus nosuch: no lock class of the graph has that name"),
    (["--focus", "c1", "--depth", "-1"], "--depth -1: must be 0 or more"),
    (["--cycles-only", "--focus", "c1"], "--focus c1: no lock class on a cycle has that name"),
])
def test_bad_focus_is_a_usage_error(tmp_path: Path, args: list, message: str) -> None:
    trace = chain_trace(tmp_path / "chain.lt", 5)
    status, _, err = run("graph", *args, str(trace), "-o", str(tmp_path / "g.json"))
    assert status == 2 and message in err, err
    assert not (tmp_path / "g.json").exists()


def test_shipped_trace_cycles_only(tmp_path: Path) -> None:
    status, _, err = run("graph", "--cycles-only", str(TRACES), "-o", str(tmp_path / "g.json"))
    assert status == 0, err
    names = {c["name"] for c in saved(tmp_path / "g.json")["classes"]}
    assert {"&dev->lock", "&queue->lock", "&a->lock", "&b->lock"} <= names
