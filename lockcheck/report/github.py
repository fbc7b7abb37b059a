"""`--format github`: GitHub Actions workflow commands, so findings show inline in review.

One `::error file=F,line=L,title=T::MESSAGE` per finding (`::warning` for
an uncertain one) at the `at=` site when it is `FILE:LINE`, else at the
trace location; run notes become `::notice` lines; a plain summary line
ends the output.  Escaping follows the runner's rules (actions/toolkit
`command.ts`): in the message `%`, CR and LF become `%25`, `%0D`, `%0A`;
in property values `:` and `,` also become `%3A` and `%2C`.

GitHub shows at most 10 error annotations per step (50 per job); every
finding is still printed to the log, and the summary says so when the
limit is passed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence, TextIO, Union

from lockcheck.util.escape import visible, workflow_data, workflow_property
from lockcheck.lockdep.findings import Finding
from lockcheck.util.wording import count
from lockcheck.report.sarif import _FILE_LINE, message_text

if TYPE_CHECKING:
    from lockcheck.report import Summary

#: annotations of one level GitHub displays per step
ANNOTATIONS_PER_STEP = 10


def escape_data(text: str) -> str:
    """A workflow command's message (see `lockcheck.util.escape.workflow_data`)."""
    return workflow_data(text)


def escape_property(text: str) -> str:
    """A workflow command's property value (`file=`, `title=`...)."""
    return workflow_property(text)


def command(level: str, message: Union[str, Sequence[str]], **props: Optional[object]) -> str:
    """`::LEVEL k=v,...::MESSAGE` with everything escaped; None properties are left out.

    `message` is one line, or a list of lines.  Each line, and each
    property, is first made visible (`lockcheck.util.escape.visible`: a name's
    own newline or escape sequence is shown, not obeyed); the lines are then
    joined by the encoded line breaks the runner expects.
    """
    parts = ",".join(f"{key}={workflow_property(visible(str(value)))}" for key, value in props.items()
                     if value is not None)
    lines = [message] if isinstance(message, str) else list(message)
    text = "\n".join(visible(line) for line in lines)
    return f"::{level}{' ' + parts if parts else ''}::{workflow_data(text)}"


def where(finding: Finding) -> tuple[str, Optional[int], Optional[int]]:
    """The file, line and column to annotate: the `at=` site if it is `FILE:LINE`, else the trace location."""
    if finding.site:
        match = _FILE_LINE.match(finding.site)
        if match is not None:
            col = match.group("col")
            return match.group("file"), int(match.group("line")), int(col) if col else None
    file, sep, line = finding.location.rpartition(":")
    if sep and line.isdigit():
        return file, int(line), None
    return finding.location, None, None


def render(findings: list[Finding], summary: "Summary", out: TextIO) -> None:
    for finding in findings:
        file, line, col = where(finding)
        lines = [message_text(finding)]
        for link in finding.chain:
            ev = link.evidence
            lines.append(f"-> #{link.depth} ({link.cls}): first seen at {ev.location} by {ev.task}"
                         + (f", {ev.at}" if ev.at else ""))
        if finding.site and (file, line) != where_trace(finding):
            lines.append(f"trace: {finding.location}")
        level = "warning" if finding.uncertain else "error"
        out.write(command(level, lines, file=file, line=line, col=col,
                          title=f"lockcheck: {finding.message}") + "\n")
    for error in summary.errors:
        out.write(command("error", error, title="lockcheck: input not read") + "\n")
    for note in summary.notes:
        out.write(command("notice", note, title="lockcheck") + "\n")
    text = f"lockcheck: {count(len(findings), 'finding')} in {count(summary.events, 'event')}"
    if summary.suppressed:
        text += f" ({summary.suppressed} suppressed)"
    if summary.errors:
        text += f"; incomplete: {count(len(summary.errors), 'input')} could not be read"
    n = len(findings)
    if n > ANNOTATIONS_PER_STEP:
        text += f"; GitHub shows only the first {ANNOTATIONS_PER_STEP} annotations of a step, all are listed above"
    out.write(visible(text) + "\n")


def where_trace(finding: Finding) -> tuple[str, Optional[int]]:
    file, sep, line = finding.location.rpartition(":")
    return (file, int(line)) if sep and line.isdigit() else (finding.location, None)
