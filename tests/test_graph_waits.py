"""Saved graphs keep each class's wait type and lock type (issue 29): a graph saved from a trace
with `wait=` judges a later trace that takes the same locks without them as the first trace's
checker would (`--baseline`, `diff`, in JSON and GraphML); old graph files still load."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from lockcheck.commands.cli import main
from lockcheck.lockdep.graph import DepGraph
from lockcheck.store.graphfile import load_graph

# a clean trace that says every class's wait type: raw_spinlock_t, spinlock_t, mutex, local_lock_t
DECLARED = """\
T1 acquire raw wait=spin:spin
T1 acquire inner wait=spin:spin
T1 release inner
T1 release raw
T1 acquire mtx wait=sleep:sleep
T1 acquire sl wait=config:config
T1 release sl
T1 release mtx
T1 acquire pcpu type=percpu wait=config:config
T1 release pcpu
"""
# the same locks without wait types (as a capture of a kernel before 5.9 gives them):
# a spinlock_t under a raw_spinlock_t
UNDECLARED = """\
T2 acquire raw
T2 acquire sl
T2 release sl
T2 release raw
"""
# an old graph file: written before classes had `wait` and `type`
OLD_GRAPH = {
    "lockcheck-graph": 1, "generator": "lockcheck 0.1.0",
    "classes": [{"name": "A", "usage": ["INITIAL USE"]}, {"name": "B", "usage": 0}],
    "dependencies": [{"from": "A", "to": "B", "dep": ["EN"], "distance": 1,
                      "evidence": {"file": "old.lt", "line": 2, "task": "T1"}}],
}


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


@pytest.fixture
def traces(tmp_path: Path) -> Path:
    (tmp_path / "a.lt").write_text(DECLARED)
    (tmp_path / "b.lt").write_text(UNDECLARED)
    return tmp_path


def findings(text: str) -> list[dict]:
    return json.loads(text)["findings"]


@pytest.mark.parametrize("ext", ["json", "graphml"])
def test_a_saved_graph_keeps_wait_and_lock_types(traces: Path, ext: str) -> None:
    graph_path = traces / f"g.{ext}"
    assert run("check", str(traces / "a.lt"), "--save-graph", str(graph_path))[0] == 0
    nodes = load_graph(str(graph_path)).nx.nodes
    assert nodes["raw"]["wait"] == (2, 2) and nodes["sl"]["wait"] == (3, 3) and nodes["mtx"]["wait"] == (4, 4)
    assert nodes["pcpu"]["lock_type"] == (1, 3)
    assert "lock_type" not in nodes["raw"]
    if ext == "json":
        classes = {c["name"]: c for c in json.loads(graph_path.read_text())["classes"]}
        assert classes["sl"]["wait"] == "3:3" and classes["pcpu"]["type"] == "percpu"
        assert "type" not in classes["sl"]


@pytest.mark.parametrize("ext", ["json", "graphml"])
@pytest.mark.parametrize("jobs", [[], ["--jobs", "2"]])
def test_a_baseline_with_wait_types_judges_a_trace_without_them(traces: Path, ext: str, jobs: list) -> None:
    graph_path = traces / f"g.{ext}"
    assert run("graph", str(traces / "a.lt"), "-o", str(graph_path))[0] == 0
    assert run("check", str(traces / "b.lt"))[0] == 0  # alone, nothing says sl may not nest in raw
    status, out, _ = run("check", "--format", "json", *jobs, "--baseline", str(graph_path), str(traces / "b.lt"))
    assert status == 1
    found = findings(out)
    assert [f["kind"] for f in found] == ["invalid-wait-context"]
    assert found[0]["lock"] == "sl" and found[0]["held"] == "raw"
    # the same verdict as the trace that says the wait types itself
    (traces / "c.lt").write_text(UNDECLARED.replace("raw\n", "raw wait=spin:spin\n", 1)
                                 .replace("sl\n", "sl wait=config:config\n", 1))
    status_c, out_c, _ = run("check", "--format", "json", str(traces / "c.lt"))
    assert status_c == 1
    alone = findings(out_c)[0]
    assert (alone["kind"], alone["lock"], alone["held"], alone["details"]) == \
        (found[0]["kind"], found[0]["lock"], found[0]["held"], found[0]["details"])


def test_merged_baselines_keep_wait_types(traces: Path) -> None:
    g1, g2, merged = traces / "g1.json", traces / "g2.json", traces / "m.json"
    run("graph", str(traces / "a.lt"), "-o", str(g1))
    (traces / "other.lt").write_text("T3 acquire x wait=sleep:sleep\nT3 release x\n")
    run("graph", str(traces / "other.lt"), "-o", str(g2))
    assert run("graph", "--baseline", str(g1), "--baseline", str(g2), str(traces / "other.lt"), "-o", str(merged))[0] == 0
    classes = {c["name"]: c.get("wait") for c in json.loads(merged.read_text())["classes"]}
    assert classes["sl"] == "3:3" and classes["x"] == "4:4" and classes["raw"] == "2:2"
    assert run("check", "--baseline", str(merged), str(traces / "b.lt"))[0] == 1


@pytest.mark.parametrize("order", ["types first", "dependency first"])
def test_two_baselines_one_with_the_types_one_with_the_dependency(traces: Path, order: str) -> None:
    """One graph says the wait types (no offending dependency), the other took sl under raw without
    them: merged, the union shows the invalid wait context, whichever is given first, once."""
    typed, untyped = traces / "typed.json", traces / "untyped.json"
    run("graph", str(traces / "a.lt"), "-o", str(typed))
    run("graph", str(traces / "b.lt"), "-o", str(untyped))
    (traces / "other.lt").write_text("T9 acquire z\nT9 release z\n")
    graphs = [typed, untyped] if order == "types first" else [untyped, typed]
    status, out, _ = run("check", "--format", "json", "--baseline", str(graphs[0]), "--baseline", str(graphs[1]),
                         str(traces / "other.lt"))
    assert status == 1
    (found,) = findings(out)
    assert (found["kind"], found["lock"], found["held"]) == ("invalid-wait-context", "sl", "raw")
    assert found["location"] == f"{traces / 'b.lt'}:2"  # where the dependency was first seen
    # and with the trace that made the dependency read again: still one finding
    status, out, _ = run("check", "--format", "json", "--baseline", str(graphs[0]), "--baseline", str(graphs[1]),
                         str(traces / "b.lt"))
    assert status == 1 and len(findings(out)) == 1
    # each graph alone: nothing
    assert run("check", "--baseline", str(untyped), str(traces / "other.lt"))[0] == 0
    assert run("check", "--baseline", str(typed), str(traces / "other.lt"))[0] == 0


def test_merging_differing_wait_types_does_not_depend_on_order() -> None:
    one, two = DepGraph(), DepGraph()
    for graph, wait in ((one, (3, 3)), (two, (2, 2))):
        graph.add_class("L")
        graph.nx.nodes["L"].update(wait=wait, waits=f"{wait[0]}:{wait[1]}")
    ab, ba = DepGraph(), DepGraph()
    ab.merge(one), ab.merge(two)
    ba.merge(two), ba.merge(one)
    assert ab.nx.nodes["L"]["wait"] == ba.nx.nodes["L"]["wait"] == (2, 2)
    assert ab.nx.nodes["L"]["waits"] == "2:2"


@pytest.mark.parametrize("new", ["b.lt", "gb.json"])
def test_diff_against_a_graph_with_wait_types(traces: Path, new: str) -> None:
    run("graph", str(traces / "a.lt"), "-o", str(traces / "g.json"))
    run("graph", str(traces / "b.lt"), "-o", str(traces / "gb.json"))
    status, out, _ = run("diff", str(traces / "g.json"), str(traces / new))
    assert status == 1
    assert "invalid-wait-context  sl (holding raw)" in out


def test_diff_says_when_a_class_wait_type_changed(traces: Path) -> None:
    (traces / "a2.lt").write_text(DECLARED.replace("sl wait=config:config", "sl wait=spin:spin"))
    run("graph", str(traces / "a.lt"), "-o", str(traces / "g.json"))
    run("graph", str(traces / "a2.lt"), "-o", str(traces / "g2.json"))
    status, out, _ = run("diff", str(traces / "g.json"), str(traces / "g2.json"))
    assert status == 0
    assert "classes whose wait or lock type changed (1):" in out
    assert "sl     wait 3:3  wait 2:2" in out
    assert "1 class retyped" in out
    status, out, _ = run("diff", "--format", "json", str(traces / "g.json"), str(traces / "g2.json"))
    assert json.loads(out)["classes"] == {"retyped": [{"class": "sl", "base": {"wait": "3:3"},
                                                       "new": {"wait": "2:2"}}]}
    # the same graph twice: nothing retyped, and the JSON has no `classes` key
    status, out, _ = run("diff", "--format", "json", str(traces / "g.json"), str(traces / "g.json"))
    assert "classes" not in json.loads(out)


def test_diff_says_when_a_lock_type_became_normal(traces: Path) -> None:
    """A class saved with its properties and no `type` is a normal lock: a `local_lock_t` made a
    `spinlock_t` is retyped, though a normal type is not written into the graph."""
    (traces / "p.lt").write_text("T1 acquire P wait=3:3 type=percpu\nT1 release P\n")
    (traces / "q.lt").write_text("T1 acquire P wait=3:3\nT1 release P\n")
    run("graph", str(traces / "p.lt"), "-o", str(traces / "gp.json"))
    run("graph", str(traces / "q.lt"), "-o", str(traces / "gq.json"))
    for base, new in (("gp.json", "gq.json"), ("gq.json", "gp.json")):
        status, out, _ = run("diff", "--format", "json", str(traces / base), str(traces / new))
        [retyped] = json.loads(out)["classes"]["retyped"]
        assert retyped["class"] == "P" and {retyped["base"]["type"], retyped["new"]["type"]} == {"percpu", "normal"}


def test_old_graph_files_still_load(traces: Path) -> None:
    old = traces / "old.json"
    old.write_text(json.dumps(OLD_GRAPH))
    graph = load_graph(str(old))
    assert set(graph.nx.nodes) == {"A", "B"} and "wait" not in graph.nx.nodes["A"]
    assert run("check", "--baseline", str(old), str(traces / "b.lt"))[0] == 0
    assert run("diff", str(old), str(traces / "b.lt"))[0] == 0
    # a GraphML file written before: no `wait`/`type` keys at all
    run("graph", str(traces / "b.lt"), "-o", str(traces / "old.graphml"))
    text = (traces / "old.graphml").read_text()
    assert "wait" not in text and 'attr.name="type"' not in text
    assert run("check", "--baseline", str(traces / "old.graphml"), str(traces / "b.lt"))[0] == 0


@pytest.mark.parametrize("value, message", [
    ('"9:9"', "wait must be INNER or OUTER:INNER"),
    ("3", "expected a string"),
])
def test_a_bad_wait_type_is_refused_with_its_place(traces: Path, value: str, message: str) -> None:
    bad = traces / "bad.json"
    bad.write_text('{"lockcheck-graph": 1, "classes": [\n {"name": "A", "wait": %s}]}\n' % value)
    status, _, err = run("check", "--baseline", str(bad), str(traces / "b.lt"))
    assert status == 2
    assert "bad.json:2:" in err and "classes[0].wait" in err and message in err


def test_bad_lock_type_is_refused(traces: Path) -> None:
    bad = traces / "bad.json"
    bad.write_text('{"lockcheck-graph": 1, "classes": [{"name": "A", "type": "rt"}]}\n')
    status, _, err = run("check", "--baseline", str(bad), str(traces / "b.lt"))
    assert status == 2 and "classes[0].type: type must be one of" in err


def test_dot_prints_the_wait_types_after_the_class(traces: Path) -> None:
    run("graph", str(traces / "a.lt"), "-o", str(traces / "g.dot"))
    text = (traces / "g.dot").read_text()
    assert '"sl" [label="sl-{3:3}"]' in text and '"raw" [label="raw-{2:2}"]' in text
