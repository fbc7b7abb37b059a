"""Start-up: what a plain `lockcheck check` of a `.lt` trace imports, and what it leaves for later.

networkx (the graph as users see it), lark (the grammars), the renderers of
other formats and the other commands' modules are imported only where they
are used: a check of a clean `.lt` trace needs none of them.  These tests run
the command in a child process and look at `sys.modules` when it is done, so
an import that creeps back onto the common path fails here, not only in the
benchmark.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

from lockcheck.kernel.annotation_file import BUILTIN_RULES, AnnotationRules
from lockcheck.kernel.annotations import Annotator
from lockcheck.kernel.per_boot import AnnotationOptions
from lockcheck.lockdep.findings import Evidence
from lockcheck.lockdep.graph import DEP_EN, DepGraph
from lockcheck.lockdep.topo_order import _topological_sort

ROOT = Path(__file__).resolve().parent.parent
ABBA = ROOT / "traces" / "abba.lt"

#: modules a plain check must not import
LAZY = ("networkx", "lark", "lockcheck.order", "lockcheck.report.sarif", "lockcheck.report.github",
        "lockcheck.commands.diff", "lockcheck.stat.compare", "lockcheck.stat.inputs", "lockcheck.store.graphfile")

_CHILD = """
import json, sys
from lockcheck.entry import run
sys.argv = ["lockcheck"] + sys.argv[1:]
try:
    run()
except SystemExit as stop:
    code = stop.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def _modules_after(*args: str) -> tuple[int, set[str]]:
    """Run `lockcheck ARGS` in a child process: its exit code and the modules it had imported."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", _CHILD, *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, check=False)
    result = json.loads(done.stderr.strip().splitlines()[-1])
    return result["code"], set(result["modules"])


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_plain_check_imports_no_graph_library_grammar_or_other_renderer(fmt: str) -> None:
    code, modules = _modules_after("check", "--format", fmt, "--no-config", str(ABBA))
    assert code == 1  # abba.lt has a cycle: the check ran through to its report
    assert f"lockcheck.report.{fmt}" in modules
    assert "lockcheck.lockdep.checker" in modules
    assert sorted(modules & set(LAZY)) == []


def test_the_lazy_modules_come_when_asked_for(tmp_path: Path) -> None:
    """Saving the graph needs networkx, SARIF its renderer: they are imported then."""
    out = tmp_path / "g.json"
    code, modules = _modules_after("check", "--format", "sarif", "--no-config", "--save-graph", str(out),
                                   str(ABBA))
    assert code == 1
    assert {"networkx", "lockcheck.report.sarif", "lockcheck.store.graphfile"} <= modules
    assert json.loads(out.read_text())


def test_the_builtin_rules_are_no_check_rules_only() -> None:
    """What `BUILTIN_RULES` stands for until read: rules that are `empty` (no-check rules concern
    captures only) and declare nothing else; a rule of another kind added to
    lockcheck/kernel/kernel.annotations would have to be read for every trace."""
    rules = AnnotationRules.builtin()
    assert rules.empty and rules.other_statements == 0
    assert rules.no_check or rules.no_check_like


def test_an_annotator_reads_the_builtin_rules_when_first_asked() -> None:
    annotator = AnnotationOptions().annotator()
    assert annotator._rules is BUILTIN_RULES
    assert annotator.notes() == []
    assert annotator._rules is BUILTIN_RULES  # the notes did not need them
    assert annotator.rules.unchecked("rcu_read_lock") is not None
    assert isinstance(annotator._rules, AnnotationRules)
    assert Annotator().rules.empty


def test_the_networkx_view_shares_the_graphs_dicts() -> None:
    g = DepGraph()
    g.add_dependency("A", "B", DEP_EN, Evidence("t.lt", 1, "T1"))
    view = g.nx
    assert isinstance(view, nx.DiGraph) and g.nx is view
    assert list(view.edges) == [("A", "B")] and view.nodes["A"]["usage"] == 0
    g.add_dependency("B", "C", DEP_EN, Evidence("t.lt", 2, "T1"))
    assert list(view.successors("B")) == ["C"]  # a change through the DepGraph is seen by networkx
    view.add_edge("C", "D", dep=DEP_EN, distance=1, evidence=Evidence("t.lt", 3, "T1"))
    assert g.successors("C").keys() == {"D"} and g.n_dependencies == 3 and g.n_classes == 4
    assert nx.is_directed_acyclic_graph(view)
    loaded = DepGraph(view)
    assert loaded.nx is view and loaded._succ is view._succ


@pytest.mark.parametrize("seed", range(20))
def test_the_topological_sort_is_networkxs(seed: int) -> None:
    """The order the graph starts its incremental order from: networkx's own (self-loops left
    out), or None for a graph with a cycle."""
    rng = random.Random(seed)
    g = nx.DiGraph()
    nodes = [f"c{i}" for i in range(rng.randint(1, 40))]
    rng.shuffle(nodes)
    g.add_nodes_from(nodes)
    rank = {name: rng.random() for name in nodes}
    for _ in range(rng.randint(0, 80)):
        u, v = rng.choice(nodes), rng.choice(nodes)
        if u == v or rank[u] < rank[v] or seed % 4 == 0:  # every fourth graph may have cycles
            g.add_edge(u, v)
    try:
        loops = list(nx.selfloop_edges(g))
        expected = list(nx.topological_sort(nx.restricted_view(g, [], loops) if loops else g))
    except nx.NetworkXUnfeasible:
        expected = None
    assert _topological_sort(g._succ, g._pred) == expected
