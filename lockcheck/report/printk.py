"""The kernel's printing building blocks for lockdep reports: `printk` for one report (`_Out`), the
report frame, `print_lock()`, the held-lock list and `stack backtrace:`.

Split from `lockcheck.report.text` so that the layouts of every kind --
`text` for the classic reports, `lockcheck.report.kernel_reports` for the
reports and warnings a kernel log holds that a trace does not make -- share
them without importing each other (`text` imports both; neither imports
`text`).  Each function keeps the name of the kernel function it mirrors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, TextIO

from lockcheck.lockdep.findings import Evidence, Finding, LockSnapshot
from lockcheck.util.escape import visible
from lockcheck.util.wording import wrap_note

if TYPE_CHECKING:
    from lockcheck.report import Summary


class _Out:
    """`printk` for one report: every call writes whole lines to `out`.

    Also the extension points of a renderer for live programs
    (`lockcheck.python.report` subclasses it): where the kernel prints a
    stack trace or its nesting-notation hint, these say what to print
    instead; here they keep the kernel's layout.
    """

    def __init__(self, out: TextIO) -> None:
        self._out = out

    def __call__(self, *lines: str) -> None:
        for line in lines:  # names from the trace may hold newlines or escape sequences
            self._out.write(visible(line) + "\n")

    def wrapped(self, prefix: str, text: str) -> None:
        """A note wrapped to the page: escaped first, so the wrap's line breaks are the only ones."""
        self._out.write(wrap_note(prefix, visible(text)) + "\n")

    def frames(self, evidence: Evidence, indent: str) -> bool:
        """Print `evidence` as frames of a program's stack; False: print it as a trace location."""
        return False

    def backtrace(self, finding: Finding) -> bool:
        """Print the reported event's stack after `stack backtrace:`; False: the trace location."""
        return False

    def nesting_notation(self) -> None:
        """The hint after a recursive-locking scenario."""
        self(" May be due to missing lock nesting notation", "")

    def verb(self, name: str, verb: str, held: bool) -> str:
        """A scenario line's verb for class `name` (`held`: taken first, held across the next line)."""
        return verb


# -- building blocks (lockdep.md §1.0) -----------------------------------------


def print_header(pr: _Out, title: str, finding: Finding, summary: "Summary") -> None:
    """The frame every report opens with: blank line, `=` rule, title, ident, `-` rule."""
    pr("", "=" * len(title), title)
    print_kernel_ident(pr, finding, summary)
    pr("-" * len(title))
    if finding.uncertain:
        pr.wrapped("NOTE: uncertain: ", finding.uncertain)
    print_lockdep_off(pr, finding)
    print_report_origin(pr, finding)


def print_lockdep_off(pr: _Out, finding: Finding) -> None:
    """A cycle closed after the kernel's own report, kept certain: why the kernel did not report
    it (`lockcheck.kernel.after_report`: lockdep was off), as JSON `details.lockdep_off` says."""
    off = finding.details.get("lockdep_off")
    if isinstance(off, str) and off:
        pr.wrapped("NOTE: ", off)


def print_report_origin(pr: _Out, finding: Finding) -> None:
    """For a finding read from a kernel report: which kernel printed it, how often, first and last."""
    origin = finding.report
    if origin is None:
        return
    kernel = f" ({origin.kernel})" if origin.kernel else ""
    # wrapped like every other NOTE line (`NOTE: uncertain:`, the closing notes)
    if origin.count == 1:
        pr.wrapped("NOTE: ", f"read from a kernel report{kernel}, seen once: {_when(origin.first)}")
    else:
        pr.wrapped("NOTE: ", f"read from a kernel report{kernel}, seen {origin.count} times: "
                             f"first {_when(origin.first)}, last {_when(origin.last)}")
    for note in origin.notes:
        pr.wrapped("NOTE: ", note)


def print_kernel_ident(pr: _Out, finding: Finding, summary: "Summary") -> None:
    """`print_kernel_ident()`: release and taint become lockcheck's version and the trace file."""
    pr(f"lockcheck {summary.version}  {_file_of(finding.location)}")


def print_lock_name(name: str, usage: str, waits: Optional[str] = None) -> str:
    """`print_lock_name()`: ` (CLASS){USAGE}`, and `-{OUTER:INNER}` where the wait types are known
    (a kernel report read from a log, a trace with `wait=`)."""
    return f" ({name}){{{usage}}}-{{{waits}}}" if waits else f" ({name}){{{usage}}}"


def print_lock(lock: LockSnapshot, where: Optional[str] = None) -> str:
    """`print_lock()`: `INSTANCE (CLASS){USAGE}, at: SITE`.

    A lock without an instance prints with the leading blank of OLD kernels;
    without a site, where in the trace it was taken (`acquired`, else `where`,
    the current event, for a lock being acquired); with neither, no `at:`
    (the kernel would print a 0x0 address; a trace has none to show).
    """
    site = lock.at
    if site is None:
        site = lock.acquired.location if lock.acquired is not None else where
    text = f"{lock.instance or ''}{print_lock_name(lock.name, lock.usage, lock.waits)}"
    return f"{text}, at: {site}" if site else text


def print_lock_trace(pr: _Out, evidence: Optional[Evidence], spaces: int) -> None:
    """`print_lock_trace(trace, spaces)`: frames indented by spaces+1 blanks.

    The "frames" are where in the trace it happened, with the task, then the site.
    """
    if evidence is None:
        return
    indent = " " * (spaces + 1)
    if pr.frames(evidence, indent):
        return
    pr(f"{indent}{evidence.location} ({evidence.task})")
    if evidence.at is not None and evidence.at != evidence.location:
        pr(f"{indent}{evidence.at}")


def dump_stack(pr: _Out, finding: Finding, title: str = "stack backtrace:") -> None:
    """`"\\nstack backtrace:\\n"` + `dump_stack()`: the reported event, as one-blank frames (a WARN's
    `__warn()` titles the same frames `Call Trace:`)."""
    pr("", title)
    if pr.backtrace(finding):
        return
    if finding.report is not None and finding.report.backtrace:  # the kernel's own dump, as it printed it
        for line in finding.report.backtrace:
            pr(line)
        return
    pr(f" {finding.location} ({finding.task})")
    stack = finding.details.get("stack")
    if stack:  # a program's own stack (a trace the pytest plugin recorded: lockcheck.commands.plugin_replay)
        for frame in stack:
            pr(f" {frame}")
        return
    site = _site(finding)
    if site is not None and site != finding.location:
        pr(f" {site}")


def lockdep_print_held_locks(pr: _Out, finding: Finding) -> None:
    """`lockdep_print_held_locks()`: `N lock(s) held by TASK:` and one ` #i: ` line per entry."""
    held = finding.held_locks
    if not held and _missing(finding, "held_locks"):
        pr(f"locks held by {finding.task}:{NOT_IN_LOG}")
        return
    if not held:
        pr(f"no locks held by {finding.task}.")
        return
    pr(f"{len(held)} lock{'s' if len(held) > 1 else ''} held by {finding.task}:")
    for i, lock in enumerate(held):
        pr(f" #{i}: {print_lock(lock)}")


# -- helpers -----------------------------------------------------------------------


#: what stands where a report read from a log lacks a part (`ReportOrigin.missing`): nothing made up
NOT_IN_LOG = " (not in the log)"


def _file_of(location: str) -> str:
    """`FILE` of a `FILE:LINE` location."""
    file, sep, line = location.rpartition(":")
    return file if sep and line.isdigit() else location


def _missing(finding: Finding, part: str) -> bool:
    """Whether the kernel report a finding was read from lacks PART (a log cut mid-report)."""
    return finding.report is not None and part in finding.report.missing


def _site(finding: Finding) -> Optional[str]:
    if finding.site is not None:
        return finding.site
    return finding.next.at if finding.next is not None else None


def _when(evidence: Evidence) -> str:
    """Where a report was read: `FILE:LINE`, and the log's time stamp when it had one."""
    return f"{evidence.location} [{evidence.ts:.6f}]" if evidence.ts is not None else evidence.location


# -- what several report layouts read of a finding -------------------------------------
#: the scenario's CPU1 column: 31 blanks
CPU1 = " " * 31




def _held_line(finding: Finding, prv: LockSnapshot) -> str:
    """The held lock's `print_lock()` line, or NOT_IN_LOG when its report lost it."""
    return NOT_IN_LOG if _missing(finding, "held") else print_lock(prv, finding.location)


def _next(finding: Finding) -> LockSnapshot:
    return finding.next or LockSnapshot(finding.lock, None, "", finding.site)


def _prev(finding: Finding) -> LockSnapshot:
    return finding.prev or LockSnapshot(finding.held or finding.lock, None, "", None)


def _verb(lock: LockSnapshot) -> str:
    """The scenario verb: `rlock` when the kernel's `hlock->read` is non-zero."""
    return "rlock" if lock.mode else "lock"


def _task_irq(finding: Finding) -> str:
    state = finding.details.get("irq_state")
    return f"{finding.task} {state}" if state else finding.task


def _where(evidence: Evidence) -> str:
    """An Evidence on one line: `SITE (FILE:LINE)` or `FILE:LINE`."""
    return f"{evidence.at} ({evidence.location})" if evidence.at else evidence.location
