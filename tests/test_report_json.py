"""The JSON renderer: the document of docs/cli.md."""

from __future__ import annotations

import io
import json

from lockcheck.lockdep import findings as F
from lockcheck.lockdep.findings import ChainLink, Evidence, Finding, LockSnapshot
from lockcheck.report import RENDERERS, Summary
from lockcheck.report import json as json_report


def render(findings: list[Finding], summary: Summary) -> str:
    out = io.StringIO()
    json_report.render(findings, summary, out)
    return out.getvalue()


def abba() -> Finding:
    return Finding(
        kind=F.CIRCULAR, task="T2", lock="A", held="B", cycle=["A", "B"], location="abba.lt:7",
        next=LockSnapshot("A", None, "+.+.", "g.c:21"),
        prev=LockSnapshot("B", None, "+.+.", "g.c:20", acquired=Evidence("abba.lt", 6, "T2", "g.c:20")),
        chain=[
            ChainLink(1, "B", "+.+.", Evidence("abba.lt", 4, "T1", "f.c:11")),
            ChainLink(0, "A", "+.+.", Evidence("abba.lt", 7, "T2", "g.c:21")),
        ],
        site="g.c:21",
    )


def test_contract_example() -> None:
    """The example document of cli.md, field for field."""
    summary = Summary(events=8, tasks=2, classes=2, dependencies=2)
    doc = json.loads(render([abba()], summary))
    assert doc["version"] == 1
    assert doc["stats"] == {"events": 8, "tasks": 2, "classes": 2, "dependencies": 2}
    (finding,) = doc["findings"]
    assert {k: finding[k] for k in ("kind", "task", "lock", "held", "cycle", "location", "message")} == {
        "kind": "circular-dependency",
        "task": "T2",
        "lock": "A",
        "held": "B",
        "cycle": ["A", "B"],
        "location": "abba.lt:7",
        "message": "possible circular locking dependency detected",
    }
    assert finding["chain"][0] == {
        "class": "B", "depth": 1, "evidence": {"file": "abba.lt", "line": 4, "task": "T1", "at": "f.c:11"},
    }
    assert "notes" not in doc and "suppressed" not in doc


def test_indent_two_and_trailing_newline() -> None:
    text = render([], Summary(events=1, tasks=1, classes=1, dependencies=0))
    assert text.endswith("}\n") and not text.endswith("\n\n")
    assert text.splitlines()[1].startswith('  "version": 1')
    assert json.loads(text) == {
        "version": 1, "findings": [], "stats": {"events": 1, "tasks": 1, "classes": 1, "dependencies": 0},
    }


def test_notes_and_suppressed_when_present() -> None:
    summary = Summary(events=3, notes=["3 releases of locks never seen acquired"], suppressed=2)
    doc = json.loads(render([], summary))
    assert doc["notes"] == ["3 releases of locks never seen acquired"]
    assert doc["suppressed"] == 2


def test_irq_details_are_encoded() -> None:
    """`details` passed through by Finding.to_json may hold Evidence/ChainLink/LockSnapshot objects."""
    evidence = Evidence("irq.lt", 3, "T1", "f.c:11")
    finding = Finding(
        kind=F.IRQ_INVERSION, task="T1", lock="A", held="B", location="irq.lt:9",
        details={
            "irqclass": "HARDIRQ",
            "forwards": True,
            "usage_traces": {"HARDIRQ-ON-W": evidence},
            "path": [ChainLink(1, "B", "+.+.", evidence)],
            "irq_events": {"stamp": 4, "hardirqs_enabled": [1, evidence], "softirqs_enabled": None},
        },
    )
    doc = json.loads(render([finding], Summary()))
    (finding_doc,) = doc["findings"]
    out = finding_doc["details"]  # kind-specific extras are nested, the contract keys stay on top
    assert "usage_traces" not in finding_doc
    assert out["usage_traces"] == {"HARDIRQ-ON-W": {"file": "irq.lt", "line": 3, "task": "T1", "at": "f.c:11"}}
    assert out["path"][0]["class"] == "B" and out["path"][0]["evidence"]["line"] == 3
    assert out["irq_events"]["hardirqs_enabled"] == [1, {"file": "irq.lt", "line": 3, "task": "T1", "at": "f.c:11"}]


def test_registered() -> None:
    assert RENDERERS["json"] is json_report
