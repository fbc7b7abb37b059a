"""The declared lock order file (grammars/annotations.lark) and `check --order`."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from lockcheck.commands.cli import main
from lockcheck.errors import TraceError
from lockcheck.lockdep.graph import DepGraph
from lockcheck.lockdep.order import OrderChecker, parse_order

ORDER = """\
# the mm locks, outermost first
&mm->mmap_sem < &anon_vma->rwsem < &mapping->i_mmap_mutex
group FS = &sb->s_umount, "sb writers"
pseudo MEMORY
FS < MEMORY                      # FS locks are taken before anything under MEMORY
MEMORY < &zone->lock, sb_writers#3
nestable &rq->lock by address
nest &ei->i_data_sem under &inode->i_rwsem
subclass &rq->lock by address order
recursive-read rcu_read_lock
"""


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_parse_everything():
    order = parse_order(ORDER, "lockcheck.order")
    assert order.before("&mm->mmap_sem", "&mapping->i_mmap_mutex")
    assert not order.before("&mapping->i_mmap_mutex", "&mm->mmap_sem")
    assert order.groups["FS"] == ("&sb->s_umount", "sb writers")
    assert ("&sb->s_umount", "&zone->lock", 5) in order.declared_pairs()
    assert ("sb writers", "sb_writers#3", 5) in order.declared_pairs()
    assert all("MEMORY" not in pair[:2] for pair in order.declared_pairs())
    assert order.nestable == {"&rq->lock": 7}
    assert order.nest_under == [("&ei->i_data_sem", "&inode->i_rwsem", 8)]
    assert order.subclass_by_address == {"&rq->lock": 9}
    assert order.recursive_read == {"rcu_read_lock": 10}
    assert order.before("&mm->mmap_sem/1", "&anon_vma->rwsem")  # a subclass is its class


def test_seed_adds_declared_dependencies_with_evidence():
    order = parse_order(ORDER, "lockcheck.order")
    graph = DepGraph()
    assert order.seed(graph) == len(order.declared_pairs())
    attrs = graph.nx.edges["&mm->mmap_sem", "&anon_vma->rwsem"]
    assert attrs["evidence"].location == "lockcheck.order:2"
    assert attrs["origin"] == "declared:lockcheck.order"


@pytest.mark.parametrize("text, line, col, message", [
    ("A < B\nB < C\nC < A\n", 3, None, "the declared order is circular: "),
    ("A <\n", 1, 4, "unexpected end of line"),
    ("nestable X by adress\n", 1, 15, "unexpected"),
    ("A < A\n", 1, None, "A is declared before itself"),
    ('"unterminated < B\n', 1, 1, "unexpected character"),
    ("group G = A\ngroup G = B\n", 2, 7, "group G is defined twice"),
])
def test_errors_name_file_line_col(text: str, line: int, col, message: str):
    with pytest.raises(TraceError) as info:
        parse_order(text, "x.order")
    assert (info.value.file, info.value.line, info.value.col) == ("x.order", line, col)
    assert message in info.value.message


@pytest.fixture
def files(tmp_path: Path):
    order = tmp_path / "lockcheck.order"
    order.write_text("A < B\n")
    return tmp_path, order


def test_inversion_alone_gives_order_violation_and_circular(files):
    """Done when: the declared direction never occurs in the trace, one inversion is reported twice over."""
    tmp, order = files
    trace = tmp / "inv.lt"
    trace.write_text("T1 acquire B at=b.c:1\nT1 acquire A at=a.c:2\nT1 release A\nT1 release B\n")
    assert run("check", str(trace), "--no-config")[0] == 0
    code, out, _ = run("check", str(trace), "--order", str(order), "--format", "json", "--no-config")
    assert code == 1
    kinds = {f["kind"]: f for f in json.loads(out)["findings"]}
    assert set(kinds) == {"order-violation", "circular-dependency"}
    violation = kinds["order-violation"]
    assert (violation["lock"], violation["held"]) == ("A", "B")
    assert violation["details"]["declared"] == ["A", "B"] and violation["details"]["declared_at"] == f"{order}:1"
    circ = kinds["circular-dependency"]
    assert sorted(circ["cycle"]) == ["A", "B"]
    assert f"{order}:1" in {f"{link['evidence']['file']}:{link['evidence']['line']}" for link in circ["chain"]}


def test_order_violation_text_report(files):
    tmp, order = files
    trace = tmp / "inv.lt"
    trace.write_text("T1 acquire B\nT1 acquire A\n")
    code, out, _ = run("check", str(trace), "--order", str(order), "--no-config")
    assert code == 1
    assert "WARNING: lock order violates the declared order" in out
    assert "  A --> B" in out


def test_following_the_order_is_clean(files):
    tmp, order = files
    trace = tmp / "ok.lt"
    trace.write_text("T1 acquire A\nT1 acquire B\nT1 release B\nT1 release A\n")
    assert run("check", str(trace), "--order", str(order), "--no-config")[0] == 0


def test_transitive_and_pseudo_inversions(tmp_path: Path):
    order = tmp_path / "o.order"
    order.write_text("pseudo P\nA < P\nP < C\n")
    trace = tmp_path / "t.lt"
    trace.write_text("T1 acquire C\nT1 acquire A\n")
    code, out, _ = run("check", str(trace), "--order", str(order), "--format", "json", "--no-config")
    assert code == 1
    violation = next(f for f in json.loads(out)["findings"] if f["kind"] == "order-violation")
    assert violation["details"]["declared"] == ["A", "P", "C"]


def test_nestable_by_address(tmp_path: Path):
    order = tmp_path / "o.order"
    order.write_text("nestable rq by address\n")
    good = tmp_path / "good.lt"
    good.write_text("T1 acquire rq@0x10\nT1 acquire rq@0x20\nT1 release rq@0x20\nT1 release rq@0x10\n")
    bad = tmp_path / "bad.lt"
    bad.write_text("T1 acquire rq@0x20\nT1 acquire rq@0x10\nT1 release rq@0x10\nT1 release rq@0x20\n")
    assert run("check", str(good), "--no-config")[0] == 1  # lockdep: recursive locking
    assert run("check", str(good), "--order", str(order), "--no-config")[0] == 0
    code, out, _ = run("check", str(bad), "--order", str(order), "--format", "json", "--no-config")
    assert code == 1
    (finding,) = json.loads(out)["findings"]
    assert finding["kind"] == "order-violation" and finding["details"]["declared"] == ["rq@0x10", "rq@0x20"]
    same = tmp_path / "same.lt"
    same.write_text("T1 acquire rq@0x10\nT1 acquire rq@0x10\n")
    code, out, _ = run("check", str(same), "--order", str(order), "--format", "json", "--no-config")
    assert json.loads(out)["findings"][0]["kind"] == "recursive-locking"


def test_order_from_pyproject(tmp_path: Path, monkeypatch):
    (tmp_path / "lockcheck.order").write_text("A < B\n")
    (tmp_path / "pyproject.toml").write_text('[tool.lockcheck]\norder = "lockcheck.order"\n')
    (tmp_path / "t.lt").write_text("T1 acquire B\nT1 acquire A\n")
    monkeypatch.chdir(tmp_path)
    assert run("check", "t.lt")[0] == 1
    assert run("check", "t.lt", "--no-config")[0] == 0


def test_order_checker_api():
    from lockcheck.events import Event

    order = parse_order("A < B\n", "o")
    graph = DepGraph()
    order.seed(graph)
    checker = OrderChecker(order, graph)
    found = list(checker.run([Event("T", "acquire", "B"), Event("T", "acquire", "A")]))
    assert [f.kind for f in found] == ["order-violation", "circular-dependency"]


def test_bad_order_file_on_command_line(tmp_path: Path):
    trace = tmp_path / "t.lt"
    trace.write_text("T1 acquire A\n")
    order = tmp_path / "o.order"
    order.write_text("A < B < A\n")
    code, _, err = run("check", str(trace), "--order", str(order), "--no-config")
    assert code == 2 and err.startswith(f"{order}:1") and "Traceback" not in err


def test_address_order_is_checked_on_cached_chains_too(tmp_path):
    """The chain key does not see instances: a later wrong-address nesting with a cached chain is found."""
    from lockcheck.lockdep.order import OrderChecker, load_order
    from lockcheck.readers.lt import parse

    path = tmp_path / "lockcheck.order"
    path.write_text("nestable &rq->lock by address\n")
    order = load_order(str(path))
    checker = OrderChecker(order)
    lines = ["T1 acquire &rq->lock@0x1", "T1 acquire &rq->lock@0x2", "T1 release &rq->lock@0x2",
             "T1 release &rq->lock@0x1", "T1 acquire &rq->lock@0x4", "T1 acquire &rq->lock@0x3"]
    found = list(checker.run(parse(lines, "t.lt")))
    assert [f.kind for f in found] == ["order-violation"] and found[0].location == "t.lt:6"
