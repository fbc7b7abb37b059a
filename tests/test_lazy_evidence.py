"""Evidence the checker keeps unbuilt until a report asks: the report reads exactly as if built at once.

An irq-state transition keeps the fields of its `Evidence` (`irq._irq_event`),
not the object; `print_usage_bug` builds it.  These tests hold the built
evidence to what the line said (file, line, task, call site, time stamp),
the text report to the kernel's `print_irqtrace_events` lines, and a split
check (`--jobs 2`, where the task's irq record travels between processes
as plain rows) to the sequential one.
"""

from __future__ import annotations

import io
from pathlib import Path

from lockcheck.lockdep import findings as F
from lockcheck.lockdep.checker import check_events
from lockcheck.commands.cli import main
from lockcheck.lockdep.findings import Evidence
from lockcheck.readers import lt
from test_jobs import _check, _same, _tasks_of_both_parts

TRACE = """\
T1 irqs-off at=local_irq_disable+0x1/0x2 ts=1.5
T1 irqs-on at=local_irq_enable+0x3/0x4 ts=2.25 cpu=1
T1 softirqs-off at=local_bh_disable+0x5/0x6
T1 softirqs-on ts=3.0
T1 irqs-off
T1 hardirq-enter
T1 acquire A at=handler+0x7/0x8
T1 release A
T1 hardirq-exit
T1 irqs-on ts=4.5
T1 acquire A at=process+0x9/0xa
"""


def test_irq_transitions_are_cited_as_the_lines_said() -> None:
    found, _ = check_events(lt.parse(TRACE.splitlines(), "irq.lt"))
    assert [f.kind for f in found] == [F.INCONSISTENT]
    events = found[0].details["irq_events"]
    assert events["stamp"] == 6
    assert events["hardirqs_enabled"] == [6, Evidence("irq.lt", 10, "T1", None, 4.5)]
    assert events["hardirqs_disabled"] == [5, Evidence("irq.lt", 5, "T1", None, None)]
    assert events["softirqs_enabled"] == [4, Evidence("irq.lt", 4, "T1", None, 3.0)]
    assert events["softirqs_disabled"] == [3, Evidence("irq.lt", 3, "T1", "local_bh_disable+0x5/0x6", None)]


def test_irq_transitions_in_the_text_report(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "irq.lt"
    path.write_text(TRACE)
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    assert main(["check", "--no-config", "irq.lt"]) == 1
    lines = [line.strip() for line in out.getvalue().splitlines()]
    start = lines.index("irq event stamp: 6")
    assert lines[start:start + 5] == [
        "irq event stamp: 6",
        "hardirqs last  enabled at (6): irq.lt:10",
        "hardirqs last disabled at (5): irq.lt:5",
        "softirqs last  enabled at (4): irq.lt:4",
        "softirqs last disabled at (3): local_bh_disable+0x5/0x6 (irq.lt:3)",
    ]


def test_irq_transitions_travel_between_processes(tmp_path: Path, monkeypatch) -> None:
    """The task whose usage breaks is checked in another process than the handler's: its irq
    record comes to the merge as rows, and the report cites it as the sequential run does."""
    (h0, _), (p1, _) = _tasks_of_both_parts()
    lines = [f"{h0} hardirq-enter", f"{h0} acquire L at=irq:1", f"{h0} release L", f"{h0} hardirq-exit",
             f"{p1} irqs-off at=off:1 ts=1.25", f"{p1} irqs-on at=on:1 ts=2.5 cpu=3",
             f"{p1} softirqs-off ts=3.75", f"{p1} acquire L at=proc:1", f"{p1} release L"]
    path = tmp_path / "t.lt"
    path.write_text("\n".join(lines) + "\n")
    _same([str(path)], monkeypatch)
    _, doc, *_ = _check([str(path)], 2)
    [finding] = doc["findings"]
    assert finding["kind"] == F.INCONSISTENT
    events = finding["details"]["irq_events"]
    assert events["stamp"] == 3
    assert events["hardirqs_enabled"] == [2, {"file": str(path), "line": 6, "task": p1, "at": "on:1", "ts": 2.5}]
    assert events["softirqs_disabled"] == [3, {"file": str(path), "line": 7, "task": p1, "ts": 3.75}]


def test_evidence_is_a_frozen_value() -> None:
    """`Evidence` sets its fields without the dataclass's own `__init__` (a cost of every new
    dependency): still a frozen value, equal by fields, hashable, pickled and replaced alike."""
    import dataclasses
    import pickle

    import pytest

    evidence = Evidence("t.lt", 3, "T1", "f+0x1/0x2", 1.5)
    assert evidence == Evidence("t.lt", 3, "T1", at="f+0x1/0x2", ts=1.5)
    assert hash(evidence) == hash(Evidence("t.lt", 3, "T1", "f+0x1/0x2", 1.5))
    assert evidence != Evidence("t.lt", 4, "T1", "f+0x1/0x2", 1.5)
    assert (evidence.file, evidence.line, evidence.task, evidence.at, evidence.ts, evidence.stack) == \
        ("t.lt", 3, "T1", "f+0x1/0x2", 1.5, None)
    assert repr(evidence) == "Evidence(file='t.lt', line=3, task='T1', at='f+0x1/0x2', ts=1.5)"
    assert pickle.loads(pickle.dumps(evidence)) == evidence
    assert dataclasses.replace(evidence, line=9) == Evidence("t.lt", 9, "T1", "f+0x1/0x2", 1.5)
    assert dataclasses.asdict(evidence)["ts"] == 1.5
    with pytest.raises(dataclasses.FrozenInstanceError):
        evidence.line = 4  # type: ignore[misc]
