"""`--format sarif`: SARIF 2.1.0, for code-scanning uploads and review tools.

One run; one rule per kind (`ruleId` is the JSON `kind`); one result per
finding:

- `message`: the kernel title, the classes, the task;
- `locations`: the `at=` site when it looks like `FILE:LINE` (`f.py:12`,
  `fs/inode.c:1234:5`), else the trace location (`trace.lt:7`); a kernel
  site (`mm_take_all_locks+0x146/0x190`) becomes a logical location (the
  function) next to the trace location;
- `relatedLocations`: the trace location when the primary is a site;
- `codeFlows`: a circular finding's chain as one thread flow, one step per
  dependency (`-> #N`), each at the place that dependency was first seen;
- `partialFingerprints["lockcheckKey/v1"]`: a hash of `Finding.key()` (kind
  and classes, never addresses or line numbers), so the same problem
  matches across runs;
- `level`: `error`, or `warning` for an uncertain finding.

Run notes (stale suppressions, lenient-start counts) are
`toolExecutionNotifications`; counts go to `run.properties`.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import TYPE_CHECKING, Any, Optional, TextIO
from urllib.parse import quote

from lockcheck.lockdep.findings import MESSAGES, Evidence, Finding
from lockcheck.report.kernel_reports import brief

if TYPE_CHECKING:
    from lockcheck.report import Summary

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://pypi.org/project/pylockdep/"

#: FILE:LINE or FILE:LINE:COL, where FILE has no blanks and is not a `func+0x..` symbol
#: (numbers of at most 9 digits: a longer one is no line number, and Python would refuse it)
_FILE_LINE = re.compile(r"^(?P<file>[^\s:+][^\s:]*?):(?P<line>[0-9]{1,9})(?::(?P<col>[0-9]{1,9}))?$")


def render(findings: list[Finding], summary: "Summary", out: TextIO) -> None:
    json.dump(document(findings, summary), out, indent=2, allow_nan=False)
    out.write("\n")


def document(findings: list[Finding], summary: "Summary") -> dict[str, Any]:
    kinds = sorted({f.kind for f in findings})
    rule_index = {kind: i for i, kind in enumerate(kinds)}
    return _document(kinds, [_result(f, rule_index[f.kind]) for f in findings], summary)


def _document(kinds: list[str], results: list[dict[str, Any]], summary: "Summary") -> dict[str, Any]:
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "lockcheck",
                "version": summary.version,
                "semanticVersion": summary.version,
                "informationUri": INFORMATION_URI,
                "rules": [_rule(kind) for kind in kinds],
            }
        },
        "results": results,
        "columnKind": "unicodeCodePoints",
        "properties": {
            "events": summary.events,
            "tasks": summary.tasks,
            "classes": summary.classes,
            "dependencies": summary.dependencies,
            "suppressed": summary.suppressed,
            "traces": list(summary.files),
        },
    }
    invocation: dict[str, Any] = {"executionSuccessful": not summary.errors}
    notifications = [{"level": "error", "message": {"text": error}} for error in summary.errors]
    notifications += [{"level": "note", "message": {"text": note}} for note in summary.notes]
    if notifications:
        invocation["toolExecutionNotifications"] = notifications
    run["invocations"] = [invocation]
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}


def _rule(kind: str) -> dict[str, Any]:
    title = MESSAGES.get(kind, kind)
    return {
        "id": kind,
        "name": "".join(part.capitalize() for part in kind.split("-")),
        "shortDescription": {"text": title},
        "fullDescription": {"text": f"lockdep: {title}"},
        "defaultConfiguration": {"level": "error"},
        "helpUri": INFORMATION_URI,
    }


def _result(finding: Finding, index: int) -> dict[str, Any]:
    result: dict[str, Any] = {
        "ruleId": finding.kind,
        "ruleIndex": index,
        "level": "warning" if finding.uncertain else "error",
        "message": {"text": message_text(finding)},
        "partialFingerprints": {"lockcheckKey/v1": fingerprint(finding)},
        "properties": {"task": finding.task, "lock": finding.lock, "held": finding.held,
                       "traceLocation": finding.location},
    }
    if finding.cycle:
        result["properties"]["cycle"] = list(finding.cycle)
    if finding.uncertain:
        result["properties"]["uncertain"] = finding.uncertain
    if finding.report is not None:  # the kernel's own report, read from a log
        origin = finding.report
        result["properties"].update({"fromReport": True, "count": origin.count,
                                     "firstReport": origin.first.location, "lastReport": origin.last.location})
        if origin.kernel:
            result["properties"]["kernel"] = origin.kernel
    primary, related = locate(finding.site, finding.location)
    result["locations"] = [primary]
    if related is not None:
        related["id"] = 1
        related["message"] = {"text": "where in the trace the problem was revealed"}
        result["relatedLocations"] = [related]
    if finding.chain:
        result["codeFlows"] = [_code_flow(finding)]
    return result


def message_text(finding: Finding) -> str:
    """One paragraph: title, classes, task; the chain's first sightings for a cycle."""
    text = finding.message
    detail = brief(finding)
    if detail is not None:
        text += f": {detail}"
    elif finding.cycle:
        text += ": " + " -> ".join(finding.cycle + finding.cycle[:1])
    elif finding.held and finding.held != finding.lock:
        text += f": {finding.lock} while holding {finding.held}"
    else:
        text += f": {finding.lock}"
    text += f" (task {finding.task}, {finding.location})"
    if finding.report is not None:
        origin = finding.report
        # worded as the text report's NOTE line: "seen once", "seen 3 times"
        text += (f"; the kernel's own report, seen {'once' if origin.count == 1 else f'{origin.count} times'}"
                 + (f", last at {origin.last.location}" if origin.count > 1 else ""))
    declared = finding.details.get("declared")
    if declared:
        text += f"; declared order: {' < '.join(declared)}"
        if finding.details.get("declared_at"):
            text += f" ({finding.details['declared_at']})"
    return text


def fingerprint(finding: Finding) -> str:
    """A stable hash of the finding's identity (kind and classes, cycles up to rotation)."""
    key = json.dumps(finding.key(), default=str)
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def locate(site: Optional[str], trace_location: str) -> tuple[dict[str, Any], Optional[dict[str, Any]]]:
    """(primary location, related trace location or None) for a site and a `FILE:LINE` trace location."""
    trace = _physical(trace_location)
    if site:
        match = _FILE_LINE.match(site)
        if match is not None:
            return _location(match.group("file"), int(match.group("line")), match.group("col")), trace
        trace = dict(trace)
        trace["logicalLocations"] = [{"name": site, "kind": "function"}]
    return trace, None


def _physical(location: str) -> dict[str, Any]:
    file, sep, line = location.rpartition(":")
    if sep and line.isdigit():
        return _location(file, int(line))
    return _location(location, 0)


def _location(file: str, line: int, col: Optional[str] = None) -> dict[str, Any]:
    physical: dict[str, Any] = {"artifactLocation": {"uri": to_uri(file)}}
    if line >= 1:
        region: dict[str, Any] = {"startLine": line}
        if col is not None and int(col) >= 1:
            region["startColumn"] = int(col)
        physical["region"] = region
    return {"physicalLocation": physical}


def to_uri(path: str) -> str:
    """A relative or `file://` URI reference for a path (blanks and `%` escaped)."""
    path = path.replace("\\", "/")
    if path.startswith("/"):
        return "file://" + quote(path)
    return quote(path)


def _code_flow(finding: Finding) -> dict[str, Any]:
    steps = []
    for i, link in enumerate(finding.chain):
        ev: Evidence = link.evidence
        location, _ = locate(ev.at, ev.location)
        if i + 1 < len(finding.chain):
            what = f"-> #{link.depth} ({link.cls}): taken while holding {finding.chain[i + 1].cls}"
        else:
            what = f"-> #{link.depth} ({link.cls}): being acquired by {finding.task}"
        location["message"] = {"text": f"{what}; first seen at {ev.location} by {ev.task}"}
        steps.append({"location": location, "nestingLevel": 0, "executionOrder": i + 1})
    return {
        "message": {"text": "the existing dependency chain (in reverse order)"},
        "threadFlows": [{"locations": steps}],
    }


class SarifStream:
    """The same document as `render`, byte for byte, without the findings in memory (issue 30).

    The rules (one per kind, sorted) come before the results and each result
    names its rule's index, so the results wait in a temporary file, one
    compact JSON line each, until the kinds are all known; `close` writes
    the document around them.
    """

    def __init__(self, out: TextIO) -> None:
        import tempfile

        self.out = out
        self.count = 0
        self.kinds: set[str] = set()
        self._spool = tempfile.TemporaryFile("w+", encoding="utf-8")

    def add(self, finding: Finding) -> None:
        self.kinds.add(finding.kind)
        self._spool.write(json.dumps(_result(finding, -1), allow_nan=False) + "\n")
        self.count += 1

    def close(self, summary: "Summary") -> None:
        kinds = sorted(self.kinds)
        rule_index = {kind: i for i, kind in enumerate(kinds)}
        text = json.dumps(_document(kinds, [], summary), indent=2, allow_nan=False)
        head, marker, tail = text.partition('"results": []')
        assert marker
        out = self.out
        out.write(head + '"results": [')
        spool = self._spool
        spool.seek(0)
        for i, line in enumerate(spool):
            result = json.loads(line)
            result["ruleIndex"] = rule_index[result["ruleId"]]
            out.write(("\n        " if not i else ",\n        ")
                      + json.dumps(result, indent=2, allow_nan=False).replace("\n", "\n        "))
        spool.close()
        out.write(("\n      ]" if self.count else "]") + tail + "\n")
