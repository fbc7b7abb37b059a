"""Baselines and `lockcheck diff`: the cross-run cycle of issue 6's "Done when"."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from lockcheck.commands.cli import main
from lockcheck.commands.diff import Side, diff_graphs
from lockcheck.store.replay import replay_events
from lockcheck.lockdep.findings import Evidence
from lockcheck.lockdep.graph import DEP_EN, DEP_SR, DepGraph
from lockcheck.store.graphfile import load_graph

MAIN = """#lockcheck-trace v1
T1 acquire &mm->mmap_sem at=mm/mmap.c:10
T1 acquire &inode->i_rwsem at=fs/inode.c:20
T1 release &inode->i_rwsem
T1 release &mm->mmap_sem
"""
PR = """#lockcheck-trace v1
T2 acquire &inode->i_rwsem at=fs/read_write.c:30
T2 acquire &mm->mmap_sem at=mm/gup.c:40
T2 release &mm->mmap_sem
T2 release &inode->i_rwsem
"""


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def traces(tmp_path: Path) -> tuple[Path, Path]:
    main_lt, pr_lt = tmp_path / "main.lt", tmp_path / "pr.lt"
    main_lt.write_text(MAIN)
    pr_lt.write_text(PR)
    return main_lt, pr_lt


def test_done_when_cross_run_cycle_from_two_clean_graphs(tmp_path: Path, traces):
    main_lt, pr_lt = traces
    main_json, pr_json = tmp_path / "main.json", tmp_path / "pr.json"
    # each trace is clean on its own
    assert run("check", str(main_lt), "--save-graph", str(main_json), "--no-config")[0] == 0
    code, _, err = run("graph", str(pr_lt), "-o", str(pr_json), "--no-config")
    assert code == 0, err
    assert load_graph(str(pr_json)).nx.has_edge("&inode->i_rwsem", "&mm->mmap_sem")

    # check --baseline: the cycle, with a chain whose links come from both runs
    code, out, _ = run("check", str(pr_lt), "--baseline", str(main_json), "--format", "json", "--no-config")
    assert code == 1
    (finding,) = json.loads(out)["findings"]
    assert finding["kind"] == "circular-dependency"
    files = {link["evidence"]["file"] for link in finding["chain"]}
    assert files == {str(main_lt), str(pr_lt)}

    # diff of the two saved graphs finds the same cycle, marked as cross-run
    code, out, _ = run("diff", str(main_json), str(pr_json), "--format", "json", "--no-config")
    assert code == 1
    doc = json.loads(out)
    (finding,) = doc["findings"]
    assert finding["kind"] == "circular-dependency" and finding["only_with_base"] is True
    assert sorted(link["side"] for link in finding["chain"]) == ["base", "new"]
    assert {link["evidence"]["file"] for link in finding["chain"]} == {str(main_lt), str(pr_lt)}
    assert [(d["from"], d["to"]) for d in doc["dependencies"]["added"]] == [("&inode->i_rwsem", "&mm->mmap_sem")]
    assert [(d["from"], d["to"]) for d in doc["dependencies"]["removed"]] == [("&mm->mmap_sem", "&inode->i_rwsem")]


def test_diff_graph_base_trace_new_text_table(tmp_path: Path, traces):
    main_lt, pr_lt = traces
    main_json = tmp_path / "main.json"
    run("graph", str(main_lt), "-o", str(main_json), "--no-config")
    code, out, _ = run("diff", str(main_json), str(pr_lt), "--no-config")
    assert code == 1
    assert "dependencies NEW adds (1):" in out
    assert "circular-dependency" in out and "only with BASE's dependencies" in out
    assert f"{main_lt}:3 (T1, fs/inode.c:20)  [base]" in out
    assert out.rstrip().endswith("1 new finding")


def test_diff_of_identical_runs_is_clean(traces):
    main_lt, _ = traces
    code, out, _ = run("diff", str(main_lt), str(main_lt), "--no-config")
    assert code == 0
    assert "0 new findings" in out


def test_findings_base_already_had_are_not_new(tmp_path: Path, traces):
    main_lt, pr_lt = traces
    both = tmp_path / "both.lt"
    both.write_text(MAIN + PR.replace("#lockcheck-trace v1\n", ""))
    saved = tmp_path / "both.json"
    assert run("graph", str(both), "-o", str(saved), "--no-config")[0] == 0  # though the base has a cycle itself
    assert run("diff", str(saved), str(pr_lt), "--no-config")[0] == 0
    assert run("diff", str(both), str(pr_lt), "--no-config")[0] == 0


def test_diff_sarif_and_github_render_only_new_findings(traces):
    main_lt, pr_lt = traces
    code, out, _ = run("diff", str(main_lt), str(pr_lt), "--format", "github", "--no-config")
    assert code == 1
    assert out.startswith("::error file=mm/gup.c,line=40,")
    code, out, _ = run("diff", str(main_lt), str(pr_lt), "--format", "sarif", "--no-config")
    assert json.loads(out)["runs"][0]["results"][0]["ruleId"] == "circular-dependency"


def test_diff_missing_input_is_exit_2(tmp_path: Path, traces):
    main_lt, _ = traces
    code, _, err = run("diff", str(main_lt), str(tmp_path / "nope.lt"), "--no-config")
    assert code == 2 and "nope.lt" in err and "Traceback" not in err


def test_replay_reproduces_every_dependency_type():
    g = DepGraph()
    g.add_dependency("A", "B", DEP_EN | DEP_SR, Evidence("x.lt", 4, "T1", "f.c:9"), held=Evidence("x.lt", 3, "T1"))
    from lockcheck.lockdep.checker import Checker

    checker = Checker()
    assert list(checker.run(replay_events(g))) == []
    attrs = checker.graph.nx.edges["A", "B"]
    assert attrs["dep"] == DEP_EN | DEP_SR
    assert attrs["evidence"] == Evidence("x.lt", 4, "T1", "f.c:9")
    assert attrs["held"] == Evidence("x.lt", 3, "T1")


def test_three_class_cycle_across_runs():
    base = DepGraph()
    base.add_dependency("A", "B", DEP_EN, Evidence("m1.lt", 1, "T1"))
    base.add_dependency("B", "C", DEP_EN, Evidence("m2.lt", 1, "T2"))
    new = DepGraph()
    new.add_dependency("C", "A", DEP_EN, Evidence("pr.lt", 5, "T3"))
    result = diff_graphs(Side("base.json", base), Side("new.json", new))
    (finding,) = result.findings
    assert sorted(finding.cycle) == ["A", "B", "C"]
    assert {link.evidence.file for link in finding.chain} == {"m1.lt", "m2.lt", "pr.lt"}


IRQ_BASE = """T1 irqs-off
T1 acquire A at=a.c:1
T1 acquire B at=b.c:2
T1 release B
T1 release A
T1 irqs-on
"""
IRQ_NEW = """T2 irqs-off
T2 hardirq-enter
T2 acquire A at=irq.c:7
T2 release A
T2 hardirq-exit
T2 irqs-on
T3 acquire B at=b.c:9
T3 release B
"""


@pytest.mark.parametrize("new_as", ["trace", "graph"])
def test_irq_inversion_across_runs_from_a_saved_graph_too(tmp_path: Path, new_as: str):
    """BASE orders A -> B with irqs off; NEW makes A hardirq-safe and B hardirq-unsafe. Each is
    clean alone; joined they are an irq inversion -- also when NEW comes as a saved graph, whose
    usage bits are replayed where they were first seen."""
    (tmp_path / "base.lt").write_text(IRQ_BASE)
    (tmp_path / "new.lt").write_text(IRQ_NEW)
    for name in ("base", "new"):
        code, _, err = run("graph", str(tmp_path / f"{name}.lt"), "-o", str(tmp_path / f"{name}.json"), "--no-config")
        assert code == 0, err
    new = tmp_path / ("new.lt" if new_as == "trace" else "new.json")
    code, out, err = run("diff", str(tmp_path / "base.json"), str(new), "--format", "json", "--no-config")
    assert code == 1, err
    kinds = [f["kind"] for f in json.loads(out)["findings"]]
    assert kinds == ["irq-lock-inversion"], kinds
    assert "irq.c:7" in out  # where A became hardirq-safe, from NEW's evidence


def test_diff_of_captures_follows_capture_rules(tmp_path: Path):
    """A capture's releases of locks taken before it began are not imbalances in diff either."""
    root = Path(__file__).resolve().parents[1]
    sample = (root / "traces" / "sample.ftrace").read_text()
    # a release of a lock acquired before the capture began, first thing in the file
    midflight = sample.replace(
        "     kworker/0:1-18 ",
        "            demo-101     [000] ...1.     9.999000: lock_release: ffff888003c1e999 &old->lock\n"
        "     kworker/0:1-18 ", 1)
    (tmp_path / "new.ftrace").write_text(midflight)
    (tmp_path / "base.lt").write_text("T9 acquire Z\nT9 release Z\n")
    code, out, err = run("diff", str(tmp_path / "base.lt"), str(tmp_path / "new.ftrace"), "--format", "json",
                         "--no-config")
    kinds = [f["kind"] for f in json.loads(out)["findings"]]
    assert "unlock-imbalance" not in kinds, kinds
    assert kinds == ["circular-dependency"] and code == 1


def test_diff_of_saved_graphs_reports_the_new_sides_own_cycle(tmp_path: Path) -> None:
    """A cycle's closing dependency is refused, so pr.json's graph alone holds no cycle: the
    finding saved with it is what tells `diff base.json pr.json` that the PR made one."""
    (tmp_path / "base.lt").write_text("T1 acquire A\nT1 release A\n")
    (tmp_path / "pr.lt").write_text("T1 acquire A\nT1 acquire B\nT1 release B\nT1 release A\n"
                                    "T2 acquire B\nT2 acquire A\nT2 release A\nT2 release B\n")
    for name in ("base", "pr"):
        assert main(["graph", str(tmp_path / f"{name}.lt"), "-o", str(tmp_path / f"{name}.json"), "--quiet"]) == 0
    out = io.StringIO()
    status = main(["diff", str(tmp_path / "base.json"), str(tmp_path / "pr.json"), "--format", "json"], stdout=out)
    doc = json.loads(out.getvalue())
    assert status == 1
    assert [(f["kind"], sorted(f["cycle"])) for f in doc["findings"]] == [("circular-dependency", ["A", "B"])]
    # the same graph on both sides adds nothing
    assert main(["diff", str(tmp_path / "pr.json"), str(tmp_path / "pr.json")], stdout=io.StringIO()) == 0
