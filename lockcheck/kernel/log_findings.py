"""What a run does with the kernel reports its logs hold: grouped findings, dependencies, notes.

`lockcheck.readers.kernel_log` sends each report it reads to a
`ReportCollector`, which

- turns it into its finding (`splats.to_finding`), and counts it into the
  finding of its problem when an earlier report already had that problem
  (`grouping.Groups`): one finding per problem, with how many reports and
  the first and last of them;
- puts its dependencies and usage bits into the checker's graph
  (`splat_graph.add_splat`), reporting the cycles that only appear once
  several reports (or a report and a trace, or a baseline) are joined --
  unless one of the reports already is that problem;
- keeps the log's notes (reports cut short, capacity warnings, lines of
  other output skipped) for the closing notes.

`found` is shared with the caller (the session's findings list), so findings
come out in the order the inputs were read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from lockcheck.kernel.grouping import Groups
from lockcheck.lockdep import findings as F
from lockcheck.lockdep.findings import Finding, class_key, group_key
from lockcheck.readers.kernel_log import LogStats, ReportSink
from lockcheck.kernel.splat_deps import add_splat
from lockcheck.readers.splat import Splat, to_finding

if TYPE_CHECKING:
    from lockcheck.lockdep.checker import Checker


class ReportCollector(ReportSink):
    """The session's sink for kernel reports."""

    def __init__(self, checker: Optional["Checker"], found: Optional[list[Finding]] = None) -> None:
        self.checker = checker
        self.found: list[Finding] = found if found is not None else []
        self.groups = Groups()
        self.stats = LogStats()
        self.derived: set = set()  #: group keys of cycles found by joining reports
        #: class name without its per-boot `#N` -> the spelling first read: one class in counts and graphs
        self.spellings: dict[str, str] = {}

    def report(self, splat: Splat) -> None:
        finding = to_finding(splat)
        warning = splat.kind == F.LOCKDEP_WARNING  # a condition, no lock: nothing for the graph
        lockless = not warning and splat.lock is None and not splat.held_locks  # nothing for the graph
        if lockless and splat.held_count != 0:  # not "no locks held": the report lost its lock lines
            self.stats.notes.append(f"{splat.location}: a {splat.kind} report cut short before its locks "
                                    f"were printed: reported by its title alone")
        if self.groups.add(finding):
            self.found.append(finding)
        if self.checker is None or warning or lockless:  # still a finding: a gate on the log fails
            return
        for joined in add_splat(splat, self.checker, self.spelling):
            key = group_key(joined)
            if key in self.groups or key in self.derived:
                continue
            self.derived.add(key)
            self.found.append(joined)

    def spelling(self, name: str) -> str:
        """The one spelling of a class across reports: `X#14` and `X#7` of two boots are the first read.

        Within one boot the numbers tell apart classes of one name with
        different keys; across boots they are registration order, which
        changes, so reports are joined by the name without them (as they
        are grouped, `grouping`).
        """
        return self.spellings.setdefault(class_key(name), name)

    def log_done(self, file: str, stats: LogStats) -> None:
        self.stats.merge(stats)

    def notes(self) -> list[str]:
        """The closing notes: how many reports, from how many logs, and what else was seen."""
        stats = self.stats
        if not stats.files:
            return []
        problems = len(self.groups.findings)
        read = (f"{_count(stats.reports, 'lockdep report')} ({_count(problems, 'distinct problem')})"
                if stats.reports else "no lockdep report")
        lost = ""
        if stats.headless:  # the rest of a report whose title the log lost (see each one's note)
            lost = (f", and {_count(stats.headless, 'part')} of {'a report' if stats.headless == 1 else 'reports'}"
                    " whose start is not in the log")
        out = [f"read {read} from {_count(stats.files, 'kernel log')}{lost}; "
               f"skipped {_count(stats.other_lines, 'line')} of other output"]
        if stats.truncated:
            out.append(f"{_count(stats.truncated, 'report')} cut short or with lines lost: "
                       f"they give what they printed (see their notes)")
        out.extend(stats.notes)
        return out


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
