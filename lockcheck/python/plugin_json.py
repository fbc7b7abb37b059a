"""`--lockcheck-report=FILE.json`: every finding of the session, for tools (a dashboard, a bot).

One document per session, written at its end by the process that reports (under xdist the
controller, with every worker's findings: each worker sends its entries, made here, in its
`workeroutput`).  Its shape is `lockcheck/python/report_schema.json` (JSON Schema), version
`VERSION`; a field added keeps the version, a field changed or removed bumps it.

Each finding says its kind, the tests that made it (for a cycle, the test of each
dependency), its classes, the application's frames (paths relative to pytest's rootdir),
whether a suppression accepted it or the test's marker expected it, and `confirmed`: null
until something confirms the finding (`confirmation` is the one place that fills it).
"""

from __future__ import annotations

import json
import os
from typing import Any, Optional

from lockcheck.lockdep.findings import Finding, Frame
from lockcheck.python.report import split_task
from lockcheck.python.stacks import is_folded

VERSION = 1
SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "report_schema.json")


def confirmation(finding: Finding) -> Optional[Any]:
    """The finding's `confirmed` value: None (JSON null) unless a confirmation step has put one in
    `finding.details["confirmed"]` (e.g. True when a replay made the deadlock happen)."""
    return finding.details.get("confirmed")


def _frames(stack: Optional[tuple[Frame, ...]], rootdir: str) -> list[dict[str, Any]]:
    out = []
    for frame in stack or ():
        if is_folded(frame):
            continue
        path = os.path.abspath(frame.file)
        rel = os.path.relpath(path, rootdir)
        out.append({"file": path if rel.startswith("..") else rel, "line": frame.line, "function": frame.function})
    return out


def entry(finding: Finding, context: Optional[str], rootdir: str, suppressed: bool = False,
          expected: bool = False) -> dict[str, Any]:
    """One finding as the report's JSON object."""
    tests = [context] if context else []
    edges = []
    chain = finding.chain
    for i, link in enumerate(chain):
        last = i == len(chain) - 1
        task = finding.task if last else link.evidence.task
        stack = link.evidence.stack or (finding.details.get("stack") if last else None)
        test = split_task(task)[1]
        if test and test not in tests:
            tests.append(test)
        edges.append({"from": chain[i - 1].cls, "to": link.cls, "test": test, "frames": _frames(stack, rootdir)})
    classes = list(dict.fromkeys(finding.cycle or [c for c in (finding.held, finding.lock) if c]))
    return {
        "kind": finding.kind,
        "message": finding.message,
        "tests": tests,
        "classes": classes,
        "task": split_task(finding.task)[0],
        "frames": _frames(finding.details.get("stack"), rootdir),
        "held_frames": _frames(finding.details.get("held_stack"), rootdir),
        "edges": edges,
        "suppressed": suppressed,
        "expected": expected,
        "confirmed": confirmation(finding),
    }


def document(entries: list[dict[str, Any]]) -> dict[str, Any]:
    from lockcheck import __version__

    return {"version": VERSION, "tool": f"lockcheck {__version__}", "findings": entries}


def write(path: str, entries: list[dict[str, Any]]) -> None:
    """The report, written whole (a temporary file renamed: a reader never sees half of one)."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as out:
        json.dump(document(entries), out, indent=2)
        out.write("\n")
    os.replace(tmp, path)


__all__ = ["VERSION", "SCHEMA", "confirmation", "entry", "document", "write"]
