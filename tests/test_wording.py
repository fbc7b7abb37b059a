"""What lockcheck prints reads right: nouns agree with their counts, notes fit
80 columns, and no `0x` address is printed where the trace has none."""

from __future__ import annotations

import io
import json

import pytest

from lockcheck.commands.cli import main
from lockcheck.lockdep.findings import Finding
from lockcheck.report import Summary
from lockcheck.report import text
from lockcheck.util.wording import WIDTH, count, wrap_note

from testdata import EXAMPLES, TRACES


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main([*args, "--no-config", "--no-progress"], stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("n, words", [(0, "0 dependencies"), (1, "1 dependency"), (2, "2 dependencies")])
def test_count(n, words):
    assert count(n, "dependency", "dependencies") == words


def test_summary_of_one_of_each():
    summary = Summary(events=1, tasks=1, classes=1, dependencies=1, version="0.1.0")
    out = io.StringIO()
    text.render([], summary, out)
    assert out.getvalue() == "lockcheck: no problems found in 1 event, 1 task, 1 lock class, 1 dependency\n"


def test_graph_and_diff_lines_agree_with_their_numbers(tmp_path):
    trace = tmp_path / "ab.lt"
    trace.write_text("T1 acquire A\nT1 acquire B\nT1 release B\nT1 release A\n")
    assert run("graph", str(trace), "-o", str(tmp_path / "g.json"))[2] == \
        f"lockcheck: {tmp_path / 'g.json'}: 2 lock classes, 1 dependency\n"
    out = io.StringIO()
    status = main(["diff", "--no-config", str(tmp_path / "g.json"), str(trace)], stdout=out, stderr=io.StringIO())
    out = out.getvalue()
    assert status == 0 and "lockcheck diff: 0 dependencies added, 0 widened, 0 no longer seen; 0 new findings" in out


def test_reader_notes_agree_with_their_numbers(tmp_path):
    ftrace = tmp_path / "t.ftrace"
    ftrace.write_text("# tracer: nop\n#\n"
                      "            demo-101     [000] .....    10.001000: lock_acquire: 0xff01 &a->lock\n"
                      "            demo-101     [000] .....    10.001100: sched_switch: prev=demo\n"
                      "            demo-101     [000] .....    10.002000: lock_release: 0xff01 &a->lock\n")
    status, doc = run("check", "--format", "json", str(ftrace))[:2]
    assert status == 0
    notes = json.loads(doc)["notes"]
    assert any(note.startswith("skipped 1 line of other events") for note in notes), notes


def test_long_notes_wrap_at_80_columns():
    reason = ("the capture cannot show subclass or nest_lock annotations, and &anon_vma->rwsem was taken "
              "again while held: give --lockdep-state or an annotation file to say which it is " * 3)
    finding = Finding(kind="recursive-locking", task="T1", lock="A", held="A", location="t.lt:3", uncertain=reason)
    summary = Summary(events=3, tasks=1, classes=1, dependencies=0, version="0.1.0", notes=[reason])
    out = io.StringIO()
    text.render([finding], summary, out)
    lines = out.getvalue().splitlines()
    note = [i for i, line in enumerate(lines) if line.startswith("NOTE: uncertain: ")]
    assert note and lines[note[0] + 1].startswith("    ")
    assert max(len(line) for line in lines if "NOTE" in line or line.startswith(("    ", "lockcheck: note"))) <= WIDTH
    assert " ".join(line.strip() for line in wrap_note("x: ", reason).splitlines()) == "x: " + reason.strip()


def test_a_word_longer_than_a_line_is_not_broken():
    path = "/very/long/" + "d" * 100 + "/trace.ftrace"
    assert path in wrap_note("lockcheck: note: ", f"{path}: not a trace (looks like a kernel log)")


@pytest.mark.parametrize("trace", [EXAMPLES / "irq-inconsistent.lt", EXAMPLES / "abba.lt",
                                   TRACES / "mm_take_all_locks.lt"])
def test_no_address_where_the_trace_has_none(trace):
    status, out, _ = run("check", str(trace))
    assert status == 1
    addresses = {word for word in out.replace("(", " ").split() if word.startswith("0x")}
    assert addresses <= set(trace.read_text().replace("@", " ").replace("=", " ").split()), addresses
