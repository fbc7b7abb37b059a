"""`--format html`: one self-contained page a reviewer opens in a browser.

No script, no stylesheet or font from elsewhere, nothing fetched at view time: the file can be
attached to a CI run or mailed and still shows everything.  It holds a summary table (findings
per kind), then each finding with its kernel-layout report, its dependency chain with where
each link was first seen, and, for a cycle, a drawing of it made here as inline SVG (no
graphviz needed).  Every string that came from a trace -- class, task and file names, sites --
goes through `lockcheck.util.escape.html_text`, so a crafted name cannot add markup.
"""

from __future__ import annotations

import io
import math
from collections import Counter
from typing import TYPE_CHECKING, Optional, TextIO

from lockcheck.lockdep.findings import CIRCULAR, Finding
from lockcheck.util.escape import html_text as h
from lockcheck.util.wording import count

if TYPE_CHECKING:
    from lockcheck.report import Summary

_STYLE = """
body { font-family: sans-serif; margin: 2em; max-width: 70em; color: #222; }
table { border-collapse: collapse; } td, th { border: 1px solid #bbb; padding: .2em .6em; text-align: left; }
pre { background: #f6f6f6; padding: .8em; overflow-x: auto; font-size: 90%; }
.finding { border-top: 2px solid #c33; margin-top: 2em; }
.kind { font-family: monospace; color: #c33; }
code, .cls { font-family: monospace; }
svg text { font-family: monospace; font-size: 12px; }
"""


def render(findings: list[Finding], summary: "Summary", out: TextIO) -> None:
    """Write the whole page."""
    from lockcheck.report import text

    out.write("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
    title = "lockcheck: " + (count(len(findings), "finding") if findings else "no problems found")
    out.write(f"<title>{h(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n")
    out.write(f"<h1>{h(title)}</h1>\n")
    line = io.StringIO()
    text.print_summary(findings, summary, line)
    out.write(f"<p id=\"summary\">{h(line.getvalue().splitlines()[0])}</p>\n")
    _summary_table(findings, summary, out)
    for number, finding in enumerate(findings, 1):
        _finding(number, finding, summary, out)
    if summary.notes or summary.errors:
        out.write("<h2>Notes</h2>\n<ul>\n")
        for note in [*summary.errors, *summary.notes]:
            out.write(f"<li>{h(note)}</li>\n")
        out.write("</ul>\n")
    out.write(f"<p><small>{h('lockcheck ' + summary.version)}</small></p>\n</body>\n</html>\n")


def _summary_table(findings: list[Finding], summary: "Summary", out: TextIO) -> None:
    kinds = Counter(finding.kind for finding in findings)
    out.write("<table id=\"kinds\">\n<tr><th>kind</th><th>findings</th></tr>\n")
    for kind in sorted(kinds):
        first = next(i for i, f in enumerate(findings, 1) if f.kind == kind)
        out.write(f"<tr><td><a href=\"#finding-{first}\" class=\"kind\">{h(kind)}</a></td>"
                  f"<td>{kinds[kind]}</td></tr>\n")
    out.write("</table>\n<table id=\"stats\">\n")
    for label, value in (("events", summary.events), ("tasks", summary.tasks), ("lock classes", summary.classes),
                         ("dependencies", summary.dependencies), ("inputs", len(summary.files))):
        out.write(f"<tr><th>{label}</th><td>{value}</td></tr>\n")
    out.write("</table>\n")


def _finding(number: int, finding: Finding, summary: "Summary", out: TextIO) -> None:
    from lockcheck.report import text

    out.write(f"<section class=\"finding\" id=\"finding-{number}\">\n")
    out.write(f"<h2>{number}. {h(finding.message)} <span class=\"kind\">{h(finding.kind)}</span></h2>\n")
    out.write(f"<p>Task <code>{h(finding.task)}</code> at <code>{h(finding.location)}</code>: "
              f"lock <span class=\"cls\">{h(finding.lock)}</span>")
    if finding.held is not None:
        out.write(f", holding <span class=\"cls\">{h(finding.held)}</span>")
    out.write("</p>\n")
    if finding.kind == CIRCULAR and finding.cycle:
        out.write(cycle_svg(list(finding.cycle), f"arrow-{number}"))
    if finding.chain:
        out.write("<ol class=\"chain\" reversed>\n")
        for link in finding.chain:
            ev = link.evidence
            site = f" {ev.at}" if ev.at else ""
            out.write(f"<li><span class=\"cls\">{h(link.cls)}</span> first taken at "
                      f"<code>{h(f'{ev.file}:{ev.line}')}</code> by <code>{h(ev.task)}</code>"
                      f"<code>{h(site)}</code>{_frames(ev)}</li>\n")
        out.write("</ol>\n")
    report = io.StringIO()
    text.print_finding(finding, summary, report)
    shown = "\n".join(h(line) for line in report.getvalue().splitlines())
    out.write(f"<details open><summary>the kernel-layout report</summary>\n<pre>{shown}</pre>\n"
              "</details>\n</section>\n")


def _frames(evidence: object) -> str:
    """The program's call stack where a live program took the lock (the pytest plugin's)."""
    stack = getattr(evidence, "stack", None)
    if not stack:
        return ""
    rows = "".join(f"<li><code>{h(str(frame))}</code></li>" for frame in stack)
    return f"<ul class=\"frames\">{rows}</ul>"


def cycle_svg(cycle: list[str], marker: str = "arrow", closing: Optional[tuple[str, str]] = None) -> str:
    """The classes of a cycle on a circle, an arrow per dependency in the cycle's order; the
    last one, the dependency the finding refused to add (`closing`, by default from the last
    class back to the first), dashed red.  `marker` is the arrow head's id, unique in the page."""
    n = len(cycle)
    closing = closing or (cycle[-1], cycle[0])
    radius = 0 if n == 1 else max(90, 30 * n)
    width = max(2 * radius + 360, 400)
    height = 2 * radius + 80
    cx, cy = width / 2, height / 2
    points = [(cx + radius * math.cos(2 * math.pi * i / n - math.pi / 2),
               cy + radius * math.sin(2 * math.pi * i / n - math.pi / 2)) for i in range(n)]
    parts = [f"<svg class=\"cycle\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0f}\" "
             f"height=\"{height:.0f}\" viewBox=\"0 0 {width:.0f} {height:.0f}\" role=\"img\">",
             f"<defs><marker id=\"{marker}\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"8\" "
             "markerHeight=\"8\" orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\"/></marker></defs>"]
    for i in range(n):
        src, dst = cycle[i], cycle[(i + 1) % n]
        (x1, y1), (x2, y2) = points[i], points[(i + 1) % n]
        refused = (src, dst) == closing
        # stop short of the boxes so the arrow heads show
        dx, dy = x2 - x1, y2 - y1
        length = math.hypot(dx, dy) or 1.0
        trim = min(22.0, length / 3)
        # and to the right of the way they go, so the two arrows of a 2-class cycle do not overlap
        ox, oy = -dy / length * 6, dx / length * 6
        x1, y1 = x1 + dx / length * trim + ox, y1 + dy / length * trim + oy
        x2, y2 = x2 - dx / length * trim + ox, y2 - dy / length * trim + oy
        style = "stroke=\"#c33\" stroke-dasharray=\"6 4\"" if refused else "stroke=\"#333\""
        title = f"{src} -> {dst}" + (" (refused: closes the cycle)" if refused else "")
        parts.append(f"<line x1=\"{x1:.1f}\" y1=\"{y1:.1f}\" x2=\"{x2:.1f}\" y2=\"{y2:.1f}\" {style} "
                     f"stroke-width=\"2\" marker-end=\"url(#{marker})\"><title>{h(title)}</title></line>")
    for name, (x, y) in zip(cycle, points):
        parts.append(f"<text x=\"{x:.1f}\" y=\"{y + 4:.1f}\" text-anchor=\"middle\">{h(name)}</text>")
    parts.append("</svg>\n")
    return "\n".join(parts)
