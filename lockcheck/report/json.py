"""`--format json`: the JSON document of docs/cli.md.

    {"version": 1, "findings": [...], "stats": {"events", "tasks", "classes", "dependencies"}}

plus `"notes"` and `"suppressed"` when the run has any, and `stats.annotations` when a
capture (ftrace, perf) was read: how many of its acquisitions took their annotations
from the capture, the kernel's state, a rule, or none (`Annotators.source_counts`).  Each finding is
`Finding.to_json()`, which turns kind-specific `details` into plain data.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, TextIO

from lockcheck.lockdep.findings import Finding

if TYPE_CHECKING:
    from lockcheck.report import Summary

#: the `version` of the document's layout (not lockcheck's version)
FORMAT_VERSION = 1


def render(findings: list[Finding], summary: "Summary", out: TextIO) -> None:
    """Write the whole document, indented by 2, with a trailing newline."""
    json.dump(document(findings, summary), out, indent=2, allow_nan=False)
    out.write("\n")


def document(findings: list[Finding], summary: "Summary") -> dict[str, Any]:
    """The document as Python objects (what `render` dumps)."""
    doc: dict[str, Any] = {
        "version": FORMAT_VERSION,
        "findings": [finding.to_json() for finding in findings],
        "stats": {
            "events": summary.events,
            "tasks": summary.tasks,
            "classes": summary.classes,
            "dependencies": summary.dependencies,
        },
    }
    if summary.annotations:  # a capture was read: where its acquisitions' annotations came from
        doc["stats"]["annotations"] = dict(summary.annotations)
    if summary.notes:
        doc["notes"] = list(summary.notes)
    if summary.suppressed:
        doc["suppressed"] = summary.suppressed
    if summary.errors:
        doc["errors"] = list(summary.errors)
    return doc



class JsonStream:
    """The same document as `render`, byte for byte, each finding written as it comes (issue 30).

    A run with hundreds of thousands of findings must not hold them: each is
    turned into JSON and written, then dropped.  The findings come before
    `stats` in the document, so only what follows them waits for the end.
    """

    _HEAD = '{\n  "version": %d,\n  "findings": [' % FORMAT_VERSION

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.count = 0

    def add(self, finding: Finding) -> None:
        """Write one finding (the document's head first, before the first one)."""
        text = indented(finding.to_json(), 2)
        self.out.write(("%s\n    " % self._HEAD if not self.count else ",\n    ") + text)
        self.count += 1

    def close(self, summary: "Summary") -> None:
        """Close the findings and write the rest of the document."""
        rest = json.dumps(document([], summary), indent=2, allow_nan=False)
        head, marker, tail = rest.partition('"findings": []')
        assert marker and head.endswith('"version": %d,\n  ' % FORMAT_VERSION)
        self.out.write((self._HEAD + "]" if not self.count else "\n  ]") + tail + "\n")


def indented(value: Any, level: int = 0) -> str:
    """`json.dumps(value, indent=2)` as if `value` sat `level` deep in a document, without reference cycles.

    The findings are written while the fast path (`engine.fast_lt`) has the
    cyclic garbage collector off; `json.dumps` with an indent builds its
    encoder from closures that refer to each other, so each call left a cycle
    that only a full collection frees: 499,500 findings grew the JSON run by
    hundreds of MB.  Here the scalars go through the C encoder, which makes
    none, and the nesting is plain recursion.
    """
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        if not value:
            return "{}"
        pad = "\n" + "  " * (level + 1)
        items = [pad + json.dumps(key) + ": " + indented(item, level + 1) for key, item in value.items()]
        return "{" + ",".join(items) + "\n" + "  " * level + "}"
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        pad = "\n" + "  " * (level + 1)
        return "[" + ",".join(pad + indented(item, level + 1) for item in value) + "\n" + "  " * level + "]"
    if isinstance(value, (dict, float)) or value is None or isinstance(value, (str, int)):
        text = json.dumps(value, allow_nan=False)
        if isinstance(value, dict):  # keys json turns into strings: its own layout, indented here
            text = json.dumps(value, indent=2, allow_nan=False).replace("\n", "\n" + "  " * level)
        return text
    return json.dumps(value, indent=2, allow_nan=False).replace("\n", "\n" + "  " * level)
