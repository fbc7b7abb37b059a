"""Saved graphs: JSON schema round trip, GraphML, DOT, errors, and merge algebra (hypothesis)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockcheck.commands.cli import main
from lockcheck.errors import TraceError
from lockcheck.lockdep.findings import Evidence
from lockcheck.lockdep.graph import DEP_EN, DEP_ER, DEP_SN, DEP_SR, DepGraph
from lockcheck.store.graphfile import (
    SCHEMA_VERSION,
    graph_from_graphml,
    graph_from_json,
    graph_to_graphml,
    graph_to_json,
    load_graph,
    load_graph_with_findings,
    save_graph,
    write_dot,
)


def sample_graph() -> DepGraph:
    g = DepGraph()
    g.add_dependency("&mm->mmap_sem", "&anon_vma->rwsem", DEP_EN, Evidence("a.lt", 3, "T1", "mm/mmap.c:12", 1.5),
                     held=Evidence("a.lt", 2, "T1", "mm/mmap.c:10"))
    g.add_dependency("&anon_vma->rwsem", "B", DEP_SR | DEP_EN, Evidence("b.lt", 9, "T2"), distance=2,
                     origin="machine-2")
    g.set_usage("B", 2, Evidence("b.lt", 8, "T2"))
    g.add_class("lonely")
    return g


def graph_state(g: DepGraph) -> tuple:
    nodes = [(n, d["usage"], sorted(d["usage_traces"].items())) for n, d in g.nx.nodes(data=True)]
    edges = [(u, v, sorted(d.items())) for u, v, d in g.nx.edges(data=True)]
    return nodes, edges


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_json_round_trip_keeps_everything_in_order():
    g = sample_graph()
    doc = graph_to_json(g)
    assert doc["lockcheck-graph"] == SCHEMA_VERSION
    assert doc["dependencies"][1]["dep"] == ["EN", "SR"]
    assert doc["dependencies"][1]["origin"] == "machine-2"
    back = graph_from_json(json.loads(json.dumps(doc)))
    assert graph_state(back) == graph_state(g)
    assert list(back.successors("&mm->mmap_sem")) == ["&anon_vma->rwsem"]


def test_graphml_round_trip(tmp_path: Path):
    g = sample_graph()
    assert graph_state(graph_from_graphml(graph_to_graphml(g))) == graph_state(g)
    path = tmp_path / "g.graphml"
    save_graph(g, str(path))
    assert graph_state(load_graph(str(path))) == graph_state(g)


def test_save_load_json_file_with_findings(tmp_path: Path):
    from lockcheck.lockdep.findings import CIRCULAR, Finding

    path = tmp_path / "g.json"
    finding = Finding(kind=CIRCULAR, task="T", lock="A", held="B", location="x.lt:3", cycle=["A", "B"])
    save_graph(sample_graph(), str(path), [finding])
    graph, records = load_graph_with_findings(str(path))
    assert graph.n_dependencies == 2
    assert records[0]["cycle"] == ["A", "B"]


def test_dot_highlights_cycles():
    g = DepGraph()
    g.add_dependency("A", "B", DEP_EN, Evidence("a.lt", 1, "T1"))
    g.add_dependency("B", "A", DEP_EN, Evidence("b.lt", 1, "T2"))  # a merged graph may hold a cycle
    g.add_dependency("C", "D", DEP_EN, Evidence("c.lt", 1, "T3"))
    out = io.StringIO()
    write_dot(g, out)
    text = out.getvalue()
    assert text.startswith("digraph lockcheck {")
    assert '"A" -> "B" [label="EN\\na.lt:1", color=red' in text
    assert '"C" -> "D" [label="EN\\nc.lt:1"];' in text


@pytest.mark.parametrize("text, line, message", [
    ("{\n  \"lockcheck-graph\": 1,\n  oops\n}", 3, "not a lockcheck graph"),
    ('{"classes": []}', 1, 'no "lockcheck-graph" key'),
    ('{"lockcheck-graph": 99}', 1, "unsupported lockcheck-graph version 99"),
    ('{"lockcheck-graph": 1, "dependencies": [{"from": "A", "to": "B", "dep": ["XX"], '
     '"evidence": {"file": "f", "line": 1, "task": "T"}}]}', 1, "unknown dependency type 'XX'"),
    ('{"lockcheck-graph": 1, "dependencies": [{"from": "A", "to": "B", "dep": ["EN"]}]}', 1,
     "dependencies[0].evidence: missing"),
])
def test_bad_graph_files_are_trace_errors(tmp_path: Path, text: str, line, message: str):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(TraceError) as info:
        load_graph(str(path))
    assert info.value.line == line
    assert message in info.value.message


def test_bad_baseline_is_exit_2_without_traceback(tmp_path: Path):
    trace = tmp_path / "t.lt"
    trace.write_text("T1 acquire A\nT1 release A\n")
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    code, _, err = run("check", str(trace), "--baseline", str(bad))
    assert code == 2
    assert err.startswith(f"{bad}:1:2: not a lockcheck graph")
    assert "Traceback" not in err


def test_graph_command_writes_each_format(tmp_path: Path):
    trace = tmp_path / "t.lt"
    trace.write_text("T1 acquire A at=f.c:1\nT1 acquire B at=f.c:2\nT1 release B\nT1 release A\n")
    for ext in ("json", "graphml", "dot"):
        out = tmp_path / f"g.{ext}"
        code, _, err = run("graph", str(trace), "-o", str(out))
        assert code == 0, err
        assert out.exists()
    assert load_graph(str(tmp_path / "g.json")).nx.has_edge("A", "B")
    assert load_graph(str(tmp_path / "g.graphml")).nx.has_edge("A", "B")
    code, _, err = run("graph", str(trace), "-o", str(tmp_path / "g.png"))
    assert code == 2 and "cannot tell the graph format" in err


# -- merging is associative and order-independent --------------------------------

NAMES = st.sampled_from(["A", "B", "C", "D", "E"])
EVIDENCE = st.builds(Evidence, st.sampled_from(["x.lt", "y.lt"]), st.integers(1, 3),
                     st.sampled_from(["T1", "T2"]), st.sampled_from([None, "f.c:1", "g.c:2"]))


@st.composite
def graphs(draw) -> DepGraph:
    g = DepGraph()
    for prev, nxt, dep, ev, held, distance in draw(st.lists(
            st.tuples(NAMES, NAMES, st.sampled_from([DEP_EN, DEP_ER, DEP_SN, DEP_SR]), EVIDENCE,
                      st.one_of(st.none(), EVIDENCE), st.integers(1, 3)), max_size=8)):
        if prev != nxt:
            g.add_dependency(prev, nxt, dep, ev, distance=distance, held=held)
    for name, bit, ev in draw(st.lists(st.tuples(NAMES, st.integers(0, 9), EVIDENCE), max_size=4)):
        g.set_usage(name, bit, ev)
    return g


def canonical(g: DepGraph) -> tuple:
    """Node and edge sets with attributes, independent of insertion order."""
    nodes = sorted((n, d["usage"], sorted(d["usage_traces"].items())) for n, d in g.nx.nodes(data=True))
    edges = sorted((u, v, sorted(d.items())) for u, v, d in g.nx.edges(data=True))
    return nodes, edges


def merge_all(*parts: DepGraph) -> DepGraph:
    result = DepGraph()
    for part in parts:
        result.merge(part)
    return result


@settings(max_examples=150, deadline=None)
@given(graphs(), graphs(), graphs())
def test_merge_is_associative_and_order_independent(a: DepGraph, b: DepGraph, c: DepGraph):
    left = merge_all(merge_all(a, b), c)
    right = merge_all(a, merge_all(b, c))
    assert canonical(left) == canonical(right)
    assert canonical(merge_all(c, b, a)) == canonical(left)
    assert canonical(merge_all(b, a, c)) == canonical(left)


@settings(max_examples=60, deadline=None)
@given(graphs())
def test_json_round_trip_property(g: DepGraph):
    assert graph_state(graph_from_json(json.loads(json.dumps(graph_to_json(g))))) == graph_state(g)
