"""Kernel logs (dmesg, serial consoles, syzbot reports): the lockdep reports in them, as `Splat`s.

The lines of a report are defined by `grammars/kernel_log.lark`; this module
takes each line's log prefix off (`split_prefix`: printk level, syslog
header, dmesg time stamp, `[  T123]` / `[    C1]` caller id, after what a
paste into a mail or a commit message added: `> ` quote marks, an indent,
`unquote`) and walks the reports with a small state machine, one line at a
time, streaming:

- a report starts at its title line (`WARNING: possible circular locking
  dependency detected`, or the `[ INFO: ... ]` / `[ BUG: ... ]` titles of
  kernels before 4.14) and ends at its `stack backtrace:` (after the held-lock
  list of `lock held when returning to user space!`, which has none; at the
  `Call Trace:` after a complete held-lock list when a paste left the
  `stack backtrace:` line out);
- lines of other output inside a report (a console interleaves every CPU's
  messages) are skipped; with caller ids, each caller's lines go to its own
  report, so interleaved output never reaches it;
- a report the log cut short (it ends, or another report starts, before the
  `stack backtrace:`), or one that lost lines (a gap in `-> #N`, fewer held
  locks than `N locks held by` said), still gives what it holds, with a note;
- the rest of a report whose title the log does not hold (a ring buffer
  that wrapped, a paste of a report's middle) gives the dependencies of the
  circular chain entries (`-> #N (CLASS){..}:`) it holds, as a report
  flagged `partial`; without any, it gives nothing to read, but where a
  sentence only lockdep prints (`*** DEADLOCK ***`...) shows it, a note says
  so, so that such a log does not pass unremarked;
- lockdep's own capacity BUGs (`BUG: MAX_LOCKDEP_KEYS too low!` and the
  like), `DEBUG_LOCKS_WARN_ON(...)` and the other WARNs raised in lockdep.c
  are `lockdep-warning` reports (`lockcheck.readers.log_warnings`);
- everything else, around and between reports, is skipped and counted.

Only lines that may start a report are parsed outside one (a substring test,
`_may_start`, held to the grammar by a property test); inside a report every
line goes through the grammar.

Readers yield events; this one yields none.  Its reports go to the
`ReportSink` the caller passes (`reports=`, see `lockcheck.readers`): the
session turns them into findings and dependencies (`lockcheck.kernel.log_findings`),
so the checker never learns that logs exist.

A log without any lockdep report is a kernel log with nothing to report, not
an error: `sniff` accepts dmesg-shaped text (time-stamped or syslog lines)
whether or not it holds a report.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Optional

from lockcheck.lockdep import findings as F
from lockcheck.events import Event
from lockcheck.readers.log_builder import ReportBuilder
from lockcheck.readers.log_lines import Parsed, classify, junk_prefix, split_prefix, unquote
from lockcheck.readers.log_warnings import WARNING_AT, WarningWatcher, may_hold, starts_warning
from lockcheck.readers.splat import Splat

__all__ = ["LogStats", "ReportSink", "classify", "read_splats", "sniff", "parse", "split_prefix", "unquote",
           "KERNEL_LOG_WORDS"]

NAME = "kernel-log"
#: parse() takes stats= and reports= (see lockcheck.readers)
TAKES_STATS = True
TAKES_REPORTS = True
#: the reports go to a sink in this process: never parsed in a worker process
PARALLEL = False

# -- titles -------------------------------------------------------------------------------

#: title rule -> the finding kind it reports
_TITLE_KINDS = {
    "recursive": F.RECURSIVE,
    "circular": F.CIRCULAR,
    "inconsistent": F.INCONSISTENT,
    "inversion": F.IRQ_INVERSION,
    "bad_irq_dependency": F.IRQ_INVERSION,
    "unlock_imbalance": F.UNLOCK_IMBALANCE,
    "nest_not_held": F.NEST_NOT_HELD,
    "held_freed": F.HELD_FREED,
    "task_exit": F.HELD_AT_EXIT,
    "task_exit_old": F.HELD_AT_EXIT,
    "user_return": F.HELD_AT_EXIT,
    "invalid_wait": F.INVALID_WAIT,
    "bad_contention": F.BAD_CONTENTION,
    "rcu_usage": F.RCU_USAGE,
    "chain_key_collision": F.LOCKDEP_WARNING,
}
#: report titles lockcheck reads but has no kind for: a note each (none left: every lockdep report has its kind)
_OTHER_TITLES: dict[str, str] = {}
#: lines that turn lockdep off without a report of its own: a note each
_CAPACITY = ("too_low", "invalid_subclass", "non_static_key", "unregistered_key")

#: sentences only a lockdep report prints (grammar tag -> text): met outside any report, they are
#: the rest of one whose title the log does not hold (a dmesg ring buffer that wrapped, a paste
#: of the middle of a report) -- a note, never silence
_REPORT_ONLY = {
    "deadlock": "*** DEADLOCK ***",
    "nesting_hint": "May be due to missing lock nesting notation",
    "chain_head": "the existing dependency chain (in reverse order) is:",
    "depends": "which lock already depends on the new lock.",
    "no_more_locks": "but there are no more locks to release!",
}


def _report_only(text: str) -> Optional[str]:
    """The sentence of `_REPORT_ONLY` this line is (by the grammar), or None; a substring test first."""
    if not any(sentence in text for sentence in _REPORT_ONLY.values()):
        return None
    return _REPORT_ONLY.get(classify(split_prefix(text)[2]).tag)


def _split_warning(text: str) -> bool:
    """A lockdep warning's first line, prefix and all (`junk_prefix`, as `_is_title`)."""
    return starts_warning(split_prefix(text)[2])


def _is_title(text: str) -> bool:
    """A report's title line, prefix and all (`junk_prefix` asks where one starts inside a line)."""
    return classify(split_prefix(text)[2]).tag in _TITLE_KINDS


#: lines that open a circular report's chain: met outside a report, they start a partial one
_CHAIN_TAGS = ("chain_entry", "chain_head")


def _may_chain(text: str) -> bool:
    """Cheap test: can this line be a chain entry or the chain's heading?"""
    return "-> #" in text or "existing dependency chain" in text


def _may_start(text: str) -> bool:
    """Cheap test: can this line be a title or capacity line?  (Held to the grammar by a test.)

    Every title and capacity line holds `WARNING: `, `BUG: ` (`[ BUG: `
    too) or `INFO: ` (`[ INFO: `, `INFO: trying to register...`).
    """
    return "WARNING: " in text or "BUG: " in text or "INFO: " in text


# -- statistics ----------------------------------------------------------------------------


@dataclass
class LogStats:
    """What reading kernel logs found besides the reports: for the closing notes."""

    files: int = 0
    lines: int = 0
    reports: int = 0
    other_lines: int = 0  #: lines around, between and inside reports that were not theirs
    truncated: int = 0  #: reports cut short or with lines lost
    headless: int = 0  #: parts of reports whose title is not in the log
    notes: list[str] = field(default_factory=list)

    def merge(self, other: "LogStats") -> None:
        for name in ("files", "lines", "reports", "other_lines", "truncated", "headless"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.notes.extend(other.notes)


class ReportSink:
    """Where `parse` sends what it reads; the session's `logreports.ReportCollector` is one."""

    def report(self, splat: Splat) -> None:
        """One lockdep report, complete or not (its `notes` say)."""

    def log_done(self, file: str, stats: LogStats) -> None:
        """A log was read to its end."""


# -- one report being read -----------------------------------------------------------------


# -- the reader ------------------------------------------------------------------------------

#: lines of a report that advance nothing before it is taken as cut short
_MAX_IDLE = 200


class _LogReader:
    """Walks one log: prefixes, callers, titles, one `ReportBuilder` per report in progress."""

    def __init__(self, file: str, stats: LogStats) -> None:
        self.file = file
        self.stats = stats
        self.open: dict[Optional[str], ReportBuilder] = {}
        self.width: dict[Optional[str], int] = {}
        self.last_caller: Optional[str] = None
        self.last_ts: Optional[float] = None
        #: the console's own prefix before each line of the open reports (`junk_prefix`), if any
        self.junk: Optional[re.Pattern[str]] = None
        #: line of the last report-only sentence met outside a report (one note per headless part)
        self.headless_at: Optional[int] = None
        self._noted_headless: Optional[str] = None  #: that part's note, taken back if its chain is read
        #: lockdep's WARNs and capacity BUGs, read outside reports (lockcheck.readers.log_warnings)
        self.warnings = WarningWatcher(file)

    def lines(self, lines: Iterable[str]) -> Iterator[Splat]:
        try:
            yield from self._walk(lines)
        except Exception:
            # the input failed (a bad byte...): a report read to its `stack backtrace:` is whole though
            # its dump was still being read, as it was given before dumps were kept
            for caller, builder in list(self.open.items()):
                if builder.complete:
                    del self.open[caller]
                    yield builder.finish(None)
            raise
        for caller in list(self.open):
            yield self._close(caller, "the log ends there")
        done = self.warnings.flush()
        if done is not None:
            yield done

    def _walk(self, lines: Iterable[str]) -> Iterator[Splat]:
        stats = self.stats
        for lineno, raw in enumerate(lines, 1):
            stats.lines += 1
            line = raw.rstrip("\r\n")
            if (not self.open and not _may_start(line) and self.warnings.pending is None and not may_hold(line)
                    and not _may_chain(line)):
                if line.strip():
                    stats.other_lines += 1
                    self._headless(line, lineno)
                continue
            yield from self._line(line, lineno)
            if self.open:
                yield from self._abandoned(lineno)

    def _abandoned(self, lineno: int) -> Iterator[Splat]:
        """Reports whose caller printed nothing of them for _MAX_IDLE lines: the rest was lost."""
        for caller, builder in list(self.open.items()):
            if lineno - builder.advanced >= _MAX_IDLE:
                yield self._close(caller, f"nothing more of it in the {_MAX_IDLE} lines that follow")

    def _line(self, line: str, lineno: int) -> Iterator[Splat]:
        if not self.open:
            # a console's own prefix, seen before a report's title or a lockdep warning's first line,
            # is taken off that report's (or warning's: until its dump's `CPU:` line) other lines
            pending = self.warnings.pending is not None
            if not pending:
                self.junk = None
            if _may_start(line):
                junk = junk_prefix(line, _is_title)
                if junk is not None or not pending:
                    self.junk = junk
            if self.junk is None and may_hold(line):
                self.junk = junk_prefix(line, _split_warning, WARNING_AT)
        if self.junk is not None:
            text = unquote(line)
            match = self.junk.match(text)
            if match is not None:
                line = text[match.end():]
        ts, caller, body, width = split_prefix(line)
        if width:
            self.width[caller] = width
            self.last_caller, self.last_ts = caller, ts
        else:
            caller = self.last_caller
            ts = self.last_ts
            indent = self.width.get(caller, 0)
            if indent and body.startswith(" " * indent):
                body = body[indent:]  # a record's next line, indented by the prefix's width
        while body.startswith("#012"):  # rsyslog's escape of a record's leading newline
            body = body[4:]
        if not body.strip():
            return
        builder = self.open.get(caller)
        if builder is not None and builder.dumping:
            taken = builder.dump_line(body, lineno)
            if taken and builder.dumping:
                return
            del self.open[caller]
            yield builder.finish(None)
            if taken:
                return  # `</TASK>`: the dump's last line
            builder = None
        if builder is None:
            done = self.warnings.line(body, lineno, ts)
            if done is not None:
                yield done
        if builder is None and _may_chain(body):
            parsed = classify(body, lineno)
            if parsed.tag in _CHAIN_TAGS:
                self._start_headless(parsed, caller, ts, lineno)
                return
        if builder is None and not _may_start(body):
            self.stats.other_lines += 1
            self._headless(body, lineno)
            return
        parsed = classify(body, lineno)
        if parsed.tag in _TITLE_KINDS or parsed.tag in _OTHER_TITLES or parsed.tag in _CAPACITY:
            if builder is not None:
                yield self._close(caller, f"another report starts at line {lineno}")
            yield from self._start(parsed, caller, ts, lineno)
            return
        if builder is None:
            self.stats.other_lines += 1
            return
        before = builder.idle
        builder.feed(parsed, lineno)
        if builder.idle > before:
            self.stats.other_lines += 1
        else:
            builder.advanced = lineno
        if builder.complete and not builder.dumping:
            del self.open[caller]
            yield builder.finish(None)
        elif builder.idle >= _MAX_IDLE:
            yield self._close(caller, f"{_MAX_IDLE} lines of other output follow it")

    def _headless(self, text: str, lineno: int) -> None:
        """A sentence only a lockdep report prints, outside any report: its title is not in the log.

        One note per such part (sentences within `_MAX_IDLE` lines of each
        other are one report); nothing is read from it, as its kind, task and
        locks came before it.
        """
        sentence = _report_only(text)
        if sentence is None:
            return
        last, self.headless_at = self.headless_at, lineno
        if last is not None and lineno - last < _MAX_IDLE:
            return
        self.stats.headless += 1
        self._noted_headless = (f"{self.file}:{lineno}: part of a lockdep report whose start is not in the log "
                                f"({sentence!r}: the log begins, or lost lines, inside it); nothing read from it")
        self.stats.notes.append(self._noted_headless)

    def _start(self, parsed: Parsed, caller: Optional[str], ts: Optional[float], lineno: int) -> Iterator[Splat]:
        self.headless_at = None
        tag = parsed.tag
        where = f"{self.file}:{lineno}"
        if tag in _OTHER_TITLES:
            self.stats.notes.append(f"{where}: a lockdep report lockcheck does not read: {_OTHER_TITLES[tag]}")
            return
        if tag == "too_low" and parsed.tokens["LIMIT"][0] == "MAX_LOCK_DEPTH":
            kind = F.MAX_DEPTH
        elif tag in _CAPACITY:  # print_lockdep_off() and friends: lockdep-warning, its task from the dump
            done = self.warnings.start(parsed.text, lineno, ts)
            if done is not None:
                yield done
            return
        else:
            kind = _TITLE_KINDS[tag]
        done = self.warnings.flush()
        if done is not None:
            yield done
        splat = Splat(kind=kind, file=self.file, line=lineno, title=parsed.text, ts=ts, end=lineno)
        self.open[caller] = ReportBuilder(splat, parsed)
        return
        yield  # pragma: no cover - a generator

    def _start_headless(self, parsed: Parsed, caller: Optional[str], ts: Optional[float], lineno: int) -> None:
        """A circular report's chain whose title the log does not hold (it starts, or lost lines, inside it).

        The `-> #N (CLASS){..}:` entries still name the dependencies lockdep
        had recorded, so they are read, as a circular report flagged
        `partial`: its title, task and the two locks of the header are not
        in the log (`ReportBuilder.finish` takes the lock being acquired from
        `-> #0`, and the held one from the first entry when the chain's
        heading line shows the chain is whole).
        """
        last, self.headless_at = self.headless_at, None
        if last is not None and lineno - last < _MAX_IDLE and self.stats.headless and self._noted_headless:
            # a sentence of this report met before its chain: noted as unread, but it is read now
            self.stats.headless -= 1
            self.stats.notes.remove(self._noted_headless)
        self._noted_headless = None
        splat = Splat(kind=F.CIRCULAR, file=self.file, line=lineno, title="", ts=ts, end=lineno,
                      details={"partial": True})
        builder = ReportBuilder(splat, parsed)
        builder.ident_next = False
        self.open[caller] = builder
        builder.feed(parsed, lineno)

    def _close(self, caller: Optional[str], why: str) -> Splat:
        builder = self.open.pop(caller)
        return builder.finish(why)


def read_splats(lines: Iterable[str], file: str = "<log>", stats: Optional[LogStats] = None) -> Iterator[Splat]:
    """Every lockdep report in a log, in the order they end, with what each lost in `notes`.

    >>> log = ["[    0.702419] WARNING: possible recursive locking detected",
    ...        "[    0.702426] 6.13.1 #1 Not tainted",
    ...        "[    0.702436] init/1 is trying to acquire lock:",
    ...        "[    0.702441] ffff8881001f1cb0 (&p->lock){+.+.}-{3:3}, at: f+0xcc/0x210",
    ...        "[    0.702458] ",
    ...        "               but task is already holding lock:",
    ...        "[    0.702463] ffffffff83012730 (&p->lock){+.+.}-{3:3}, at: g+0x245/0x520",
    ...        "[    0.702481] stack backtrace:"]
    >>> [(s.kind, s.task, s.lock.name, s.held.at, s.ts, s.notes) for s in read_splats(log, "dmesg")]
    [('recursive-locking', 'init/1', '&p->lock', 'g+0x245/0x520', 0.702419, [])]
    """
    stats = stats if stats is not None else LogStats()
    stats.files += 1
    for splat in _LogReader(file, stats).lines(lines):
        stats.reports += 1
        if splat.notes:
            stats.truncated += 1
        yield splat


# -- the readers' protocol (lockcheck.readers) -------------------------------------------

#: a dmesg time stamp or a syslog `kernel:` header at the start of a line
_LOG_LINE = re.compile(r"^(?:<\d> ?)?(?:\[ *\d+\.\d+\]|\[[A-Z][a-z]{2} [A-Z][a-z]{2} |\S.* \S+ kernel: |kernel: )")
#: how the kernel's own reports open (a syzbot report of another bug, a log pasted without stamps):
#: among the first lines of a file, they make it a kernel log (`lockcheck.readers.inputs.looks_like` too)
KERNEL_LOG_WORDS = ("Linux version ", "Kernel command line:", "Command line:", "BUG: ", "WARNING: ", "Call Trace:",
                    "DEBUG_LOCKS_WARN_ON(", "------------[ cut here ]------------")


def sniff(lines: list[str]) -> bool:
    """A kernel log: a lockdep title among the first lines, a dmesg / syslog-kernel line, or
    one of the first three lines opening as the kernel's reports do (`KERNEL_LOG_WORDS`).

    One such line is enough: a serial console opens with firmware output
    (SeaBIOS, the boot loader) before the kernel's first time-stamped line,
    and the formats tried before this one have claimed their own inputs.
    Whatever `not a trace (looks like a kernel log)` would have said of an
    input, this reader takes: a kernel log without lockdep reports is a clean
    one, not an error.
    """
    for i, line in enumerate(lines):
        text = unquote(line)
        if _LOG_LINE.match(text) or (i < 3 and text.startswith(KERNEL_LOG_WORDS)):
            return True
        body = split_prefix(line)[2]
        if _may_start(body) and (classify(body).tag in _TITLE_KINDS or junk_prefix(line, _is_title) is not None):
            return True
        if may_hold(line) and (starts_warning(body) or junk_prefix(line, _split_warning, WARNING_AT) is not None):
            return True  # a lockdep warning's first line: a WARN has no title of its own
    return False


def parse(lines: Iterable[str], file: str, stats: Any = None, reports: Optional[ReportSink] = None) -> Iterator[Event]:
    """Read the reports of a log into `reports` (a ReportSink); yields no events.

    `stats` is the readers' shared statistics object; a kernel log keeps its
    own (`LogStats`), handed to `reports.log_done` at the end.
    """
    log_stats = LogStats()
    for splat in read_splats(lines, file, log_stats):
        if reports is not None:
            reports.report(splat)
    if reports is not None:
        reports.log_done(file, log_stats)
    return
    yield  # pragma: no cover - a generator of no events
