"""Findings written as they are found (issue 30): a renderer as a writer with `add` and `close`.

`lockcheck check` hands each finding to `open_writer(...).add` as the
checker raises it and calls `close(summary)` once the run is over, so a
trace with hundreds of thousands of findings needs memory for its graph,
not for its findings: `json` writes each finding at once
(`report.json.JsonStream`), `sarif` spools its results to a temporary
file until the rules are known (`report.sarif.SarifStream`), `text` groups circular findings by strongly
connected set past a threshold (`report.text_groups`).  The other formats
(`Buffered`) keep the findings and call their `render` at the end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TextIO

from lockcheck.lockdep.findings import Finding

if TYPE_CHECKING:
    from lockcheck.report import Summary


class FindingWriter(Protocol):
    """What `open_writer` returns: `count` is how many findings were added."""

    count: int

    def add(self, finding: Finding) -> None: ...

    def close(self, summary: "Summary") -> None: ...


class Buffered:
    """A renderer that needs every finding at once: they are kept, and rendered at `close`."""

    def __init__(self, renderer, out: TextIO) -> None:
        self.renderer = renderer
        self.out = out
        self.findings: list[Finding] = []

    @property
    def count(self) -> int:
        return len(self.findings)

    def add(self, finding: Finding) -> None:
        self.findings.append(finding)

    def close(self, summary: "Summary") -> None:
        self.renderer.render(self.findings, summary, self.out)


def open_writer(fmt: str, out: TextIO, max_per_group: int) -> FindingWriter:
    """The writer of `--format fmt` (a name of `report.RENDERERS`, checked by the caller)."""
    from lockcheck.report import RENDERERS

    if fmt == "json":
        from lockcheck.report.json import JsonStream

        return JsonStream(out)
    if fmt == "sarif":
        from lockcheck.report.sarif import SarifStream

        return SarifStream(out)
    if fmt == "text":
        from lockcheck.report.text_groups import GroupedText

        return GroupedText(out, max_per_group)
    return Buffered(RENDERERS[fmt], out)
