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
  that wrapped, a paste of a report's middle) gives nothing to read, but
  where a sentence only lockdep prints (`*** DEADLOCK ***`...) shows it, a
  note says so, so that such a log does not pass unremarked;
- lockdep's own capacity warnings (`BUG: MAX_LOCKDEP_KEYS too low!` and the
  like) and reports of kinds lockcheck does not check (`[ BUG: Invalid wait
  context ]`) become notes;
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

import functools
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Optional

from lockcheck.lockdep import findings as F
from lockcheck.events import Event
from lockcheck.util.grammar import grammar_text
from lockcheck.readers.splat import Splat, SplatLink, SplatLock
from lockcheck.util.wording import count

NAME = "kernel-log"
#: parse() takes stats= and reports= (see lockcheck.readers)
TAKES_STATS = True
TAKES_REPORTS = True
#: the reports go to a sink in this process: never parsed in a worker process
PARALLEL = False

# -- the log prefix -------------------------------------------------------------------

_PREFIX = re.compile(
    r"(?:<\d>)?"
    r"(?:(?:(?:[A-Z][a-z]{2} )?[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d(?: \d{4})?"
    r"|\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)"
    r" \S+ kernel: )?"
    r"(?:\[ *(?P<ts>\d+\.\d+)\]|\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}\])?"
    r"(?:\[ *(?P<caller>[TC]\d+)\])?"
)


#: what a mail or a commit message puts before a pasted log: `> ` quote marks (nested too), and
#: blanks or tabs before a time stamp or printk level (a log indented as a block)
_QUOTE = re.compile(r"(?:[ \t]*>)+ ?")
_INDENTED_STAMP = re.compile(r"[ \t]+(?=<\d>|\[ *\d+\.\d+\])")


def unquote(line: str) -> str:
    """A log line as pasted into a mail or commit message, without what the paste added.

    `> ` quote marks go (lockdep starts no line with `>`), and so do blanks
    before a time stamp; a leading tab becomes eight blanks, as a terminal
    shows it (lockdep prints no tabs).  A line the paste left alone is
    returned as it is.

    >>> unquote("> >    -> #4 (&gpu->active_lock){+.+.}-{3:3}:")
    '   -> #4 (&gpu->active_lock){+.+.}-{3:3}:'
    >>> unquote("  [   19.690212] WARNING: possible circular locking dependency detected")
    '[   19.690212] WARNING: possible circular locking dependency detected'
    """
    if line[:1] in (">", " ", "\t"):
        match = _QUOTE.match(line)
        if match is not None:
            line = line[match.end():]
        match = _INDENTED_STAMP.match(line)
        if match is not None:
            line = line[match.end():]
    if line.startswith("\t"):
        body = line.lstrip("\t")
        line = " " * (8 * (len(line) - len(body))) + body
    return line


def split_prefix(line: str) -> tuple[Optional[float], Optional[str], str, int]:
    """(time stamp, caller id, the text printk was given, width of the prefix) of one log line.

    The line is `unquote`d first: a log pasted into a mail (`> `) or indented
    as a block reads as the log itself; the width is then that of the prefix
    after the quote marks.

    >>> split_prefix("[ 2718.379077][ T3699] WARNING: possible circular locking dependency detected")
    (2718.379077, 'T3699', 'WARNING: possible circular locking dependency detected', 23)
    >>> split_prefix("[    0.702481]  Possible unsafe locking scenario:")[2]
    ' Possible unsafe locking scenario:'
    >>> split_prefix("Jun 11 11:02:51 host kernel: sdcard/149325 is trying to acquire lock:")[2:]
    ('sdcard/149325 is trying to acquire lock:', 29)
    """
    line = unquote(line)
    match = _PREFIX.match(line)
    end = match.end()
    if not end:
        return None, None, line, 0
    if line.startswith(" ", end) and (match.group("ts") or match.group("caller") or line[end - 1] == "]"):
        end += 1
    ts = match.group("ts")
    return (float(ts) if ts else None), match.group("caller"), line[end:], end


# -- the grammar ------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _parser():
    from lark import Lark

    return Lark(grammar_text("kernel_log.lark"), parser="lalr", lexer="contextual", start=["line", "ident"],
                maybe_placeholders=False)


@dataclass
class Parsed:
    """One body line as the grammar reads it: the rule's name and its values."""

    tag: str
    indent: int = 0
    tokens: dict[str, list[str]] = field(default_factory=dict)
    locks: list[SplatLock] = field(default_factory=list)
    text: str = ""


#: tags of lines the grammar could not read, or read as a bare frame without indent
FOREIGN, FRAME = "foreign", "frame"


def classify(body: str, lineno: int = 0) -> Parsed:
    """What one body line (prefix taken off) is, by the grammar; `foreign` when it is none of its lines.

    >>> p = classify("ffff88805ffdce80 (&wg->static_identity.lock){++++}-{3:3}, at: wg_set_device+0xfb7/0x1490")
    >>> p.tag, p.locks[0].name, p.locks[0].usage, p.locks[0].waits, p.locks[0].at
    ('lock_line', '&wg->static_identity.lock', '++++', '3:3', 'wg_set_device+0xfb7/0x1490')
    >>> classify("-> #1 ((work_completion)(&peer->transmit_handshake_work)){+.+.}:").locks[0].name
    '(work_completion)(&peer->transmit_handshake_work)'
    >>> classify("loop5: detected capacity change from 0 to 4096").tag
    'foreign'
    """
    tag, indent, text, tokens, locks = _classify(body.rstrip())
    parsed = Parsed(tag, indent, {key: list(values) for key, values in tokens}, text=text)
    parsed.locks = [SplatLock(name, usage, instance, at, waits, lineno) for name, usage, instance, at, waits in locks]
    return parsed


@functools.lru_cache(maxsize=16384)
def _classify(text: str) -> tuple:
    """`classify` as plain immutable data, cached: a log repeats its frames and its reports."""
    from lark import Token, Tree
    from lark.exceptions import LarkError

    indent = len(text) - len(text.lstrip(" "))
    try:
        tree = _parser().parse(text, start="line")
    except LarkError:
        return (FRAME if indent else FOREIGN), indent, text.strip(), (), ()
    item = tree.children[-1]
    if item.data == "title":  # the title's own rule names the kind
        item = next(child for child in item.children if isinstance(child, Tree))
    tag = str(item.data)
    if tag == FRAME and not indent:
        tag = FOREIGN
    tokens: dict[str, list[str]] = {}
    for tok in item.scan_values(lambda v: isinstance(v, Token)):
        tokens.setdefault(tok.type, []).append(tok.value)
    locks = [_lockname(node) for node in item.iter_subtrees_topdown() if node.data == "lockname"]
    if locks and "SITE" in tokens and tag in ("lock_line", "held_entry"):
        locks[0][3] = _strip_ip(tokens["SITE"][0])
    if locks and "INSTANCE" in tokens:
        locks[0][2] = tokens["INSTANCE"][0]
    return (tag, indent, text.strip(), tuple((key, tuple(values)) for key, values in tokens.items()),
            tuple(tuple(lock) for lock in locks))


def _lockname(node: Any) -> list:
    """[class, usage, instance, site, waits] of a `lockname` subtree (instance and site filled later)."""
    values = {tok.type: tok.value for tok in node.children if hasattr(tok, "type")}
    waits = values.get("WAITS")
    return [values["CLASS"], values["USAGE"], None, None, waits[2:-1] if waits else None]


_IP_SYM = re.compile(r"^\[<[0-9a-fA-Fx]+>\] (?:\? )?")


def _strip_ip(site: str) -> str:
    """`[<ffffffff8115fc46>] vm_mmap_pgoff+0x66/0xb0` -> `vm_mmap_pgoff+0x66/0xb0` (print_ip_sym)."""
    return _IP_SYM.sub("", site.strip())


def kernel_ident(body: str) -> str:
    """The `print_kernel_ident()` line as printed (release, `#N`, taint), checked by the grammar's `ident`."""
    from lark.exceptions import LarkError

    text = body.strip()
    try:
        _parser().parse(text, start="ident")
    except LarkError:
        pass
    return text


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
}
#: report titles lockcheck reads but has no kind for: a note each
_OTHER_TITLES = {"bad_contention": "bad contention detected!", "invalid_wait": "[ BUG: Invalid wait context ]"}
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


class _Builder:
    """Fills one Splat from its lines, in the order lockdep prints them."""

    def __init__(self, splat: Splat, parsed: Parsed) -> None:
        self.splat = splat
        self.expect: Optional[str] = None  # what the next lock line fills
        self.frames: Optional[list[str]] = None  # where frames go
        self.path: Optional[list] = None  # the `-> (CLASS){..} {` blocks being read
        self.ident_next = True
        self.complete = False
        self.backtraces = 0
        self.idle = 0
        self.last_lock: Optional[SplatLock] = None
        self.advanced = splat.line  #: the last line that added to the report
        self._title(parsed)

    def _title(self, parsed: Parsed) -> None:
        splat, tag = self.splat, parsed.tag
        if tag == "bad_irq_dependency":
            splat.details["irqclass"] = parsed.tokens["IRQCLASS"][0]
        elif tag == "task_exit":
            splat.task = parsed.tokens["TASK"][0]
            splat.details["task_exit"] = True
        elif tag == "task_exit_old":
            splat.details["task_exit"] = True
        elif tag == "too_low":
            self.ident_next = False

    # the lines ------------------------------------------------------------------------
    def feed(self, parsed: Parsed, lineno: int) -> None:
        splat = self.splat
        splat.end = lineno
        tag = parsed.tag
        if self.ident_next:
            self.ident_next = False
            if tag not in ("rule_dash", "rule_eq"):
                splat.kernel = kernel_ident(parsed.text)
                return
        if tag in (FRAME, FOREIGN):
            self.idle = 0 if self._bare_line(parsed) else self.idle + 1
            return
        handler = getattr(self, f"_on_{tag}", None)
        if handler is None:
            self.idle += 1
            return
        self.idle = 0
        if handler(parsed, lineno) is False:
            self.idle += 1

    def _set_expect(self, what: Optional[str]) -> None:
        self.expect, self.frames = what, None

    def _on_rule_eq(self, parsed: Parsed, lineno: int) -> None:
        pass

    def _on_rule_dash(self, parsed: Parsed, lineno: int) -> None:
        pass

    def _task(self, parsed: Parsed) -> None:
        if "TASK" in parsed.tokens:
            self.splat.task = parsed.tokens["TASK"][0]
        if "IRQSTATE" in parsed.tokens:
            self.splat.details["irq_state"] = parsed.tokens["IRQSTATE"][0].strip()

    def _on_acquire_head(self, parsed: Parsed, lineno: int) -> None:
        self._task(parsed)
        self._set_expect("lock")

    _on_acquire_irq_head = _on_takes_head = _on_changed_head = _on_lock_head = _on_acquire_head

    def _on_freeing_head(self, parsed: Parsed, lineno: int) -> None:
        self._task(parsed)
        start, _, end = parsed.tokens["RANGE"][0].partition("-")
        self.splat.details["mem_from"], self.splat.details["mem_to"] = start, end or start
        self._set_expect("lock")

    def _on_release_head(self, parsed: Parsed, lineno: int) -> None:
        self._task(parsed)
        self.splat.lock = SplatLock(parsed.tokens["RELEASED_NAME"][0], line=lineno)
        self._set_expect("site")

    def _on_leaving_head(self, parsed: Parsed, lineno: int) -> None:
        self._task(parsed)
        self._set_expect(None)

    _on_exiting_head = _on_leaving_head

    def _on_holding(self, parsed: Parsed, lineno: int) -> None:
        self._set_expect("held")

    _on_also_holding = _on_holding

    def _on_not_holding(self, parsed: Parsed, lineno: int) -> None:
        self._set_expect("nest")

    def _bare_line(self, parsed: Parsed) -> bool:
        """A frame, or the bare line a head announced (`print_ip_sym`, the nest lock's name); False: not ours."""
        if self.expect in ("site", "nest"):
            key = self.expect
            self.splat.details[key] = _strip_ip(parsed.text) if key == "site" else parsed.text
            self._set_expect(None)
            return True
        if parsed.tag == FRAME and self.frames is not None:
            self.frames.append(parsed.text)
            return True
        return False

    def _on_lock_line(self, parsed: Parsed, lineno: int) -> Optional[bool]:
        lock = parsed.locks[0]
        last = self.last_lock
        if self.expect is None and last is not None and (last.name, last.instance) == (lock.name, lock.instance):
            last.at = lock.at  # syzbot prints the line once more per inlined frame: the last is the function
            return None
        splat, what = self.splat, self.expect
        if what == "lock":
            splat.lock = lock
        elif what == "held":
            splat.held = lock
        elif what in ("safe", "unsafe", "other"):
            splat.details[what] = lock
        else:
            return False
        self.last_lock = lock
        self._set_expect(None)
        return None

    def _on_new_dependency(self, parsed: Parsed, lineno: int) -> None:
        prev, nxt = parsed.locks
        self.splat.details["dependency"] = (prev, nxt)

    def _on_chain_head(self, parsed: Parsed, lineno: int) -> None:
        self._set_expect(None)

    def _on_chain_entry(self, parsed: Parsed, lineno: int) -> None:
        link = SplatLink(int(parsed.tokens["INT"][0]), parsed.locks[0])
        self.splat.chain.append(link)
        self.expect, self.frames = None, link.frames

    def _on_other_info(self, parsed: Parsed, lineno: int) -> None:
        self._set_expect(None)

    def _on_chain_exists(self, parsed: Parsed, lineno: int) -> None:
        self._set_expect(None)

    def _on_chain_names(self, parsed: Parsed, lineno: int) -> None:
        self.splat.chain_exists = parsed.tokens["CHAIN_FIRST"] + parsed.tokens.get("CHAIN_NEXT", [])

    def _on_scenario_lock(self, parsed: Parsed, lineno: int) -> None:
        self.splat.scenario.append((parsed.tokens["LOCK_VERB"][0], parsed.tokens["SCENARIO_CLASS"][0],
                                    parsed.indent > 20))

    def _on_held_head(self, parsed: Parsed, lineno: int) -> None:
        self.splat.held_count = int(parsed.tokens["HELD_COUNT"][0].split()[0])
        self._task_end(parsed)
        self._set_expect(None)
        self._held_done()

    def _on_no_locks_held(self, parsed: Parsed, lineno: int) -> None:
        self.splat.held_count = 0
        self._task_end(parsed)
        self._set_expect(None)
        self._held_done()

    def _task_end(self, parsed: Parsed) -> None:
        if self.splat.task is None and "TASK_END" in parsed.tokens:
            self.splat.task = parsed.tokens["TASK_END"][0]

    def _on_held_entry(self, parsed: Parsed, lineno: int) -> None:
        index = int(parsed.tokens["INT"][0])
        held = self.splat.held_locks
        lock = parsed.locks[0] if parsed.locks else SplatLock("<RELEASED>", line=lineno)
        if index == len(held) - 1 and (held[-1].name, held[-1].instance) == (lock.name, lock.instance):
            held[-1].at = lock.at  # an inlined frame's line again
            return
        held.append(lock)
        self._held_done()

    def _held_done(self) -> None:
        """`lock held when returning to user space!` (and MAX_LOCK_DEPTH) end with the held list."""
        splat = self.splat
        if splat.held_count is not None and len(splat.held_locks) >= splat.held_count:
            if (splat.kind == F.HELD_AT_EXIT and not splat.details.get("task_exit")) or splat.kind == F.MAX_DEPTH:
                self.complete = True

    def _on_backtrace(self, parsed: Parsed, lineno: int) -> None:
        self.backtraces += 1
        if self.splat.kind == F.NEST_NOT_HELD and self.backtraces == 1:
            self._set_expect(None)
            return
        self.complete = True

    def _on_call_trace(self, parsed: Parsed, lineno: int) -> None:
        """`Call Trace:` after the whole held-lock list: the dump_stack() of a report whose
        `stack backtrace:` line was left out of a paste (a commit message, a mail)."""
        splat = self.splat
        if splat.held_count is not None and len(splat.held_locks) >= splat.held_count:
            self.complete = True

    # print_usage_bug
    def _on_usage_change(self, parsed: Parsed, lineno: int) -> None:
        self.splat.details["prev_bit"], self.splat.details["new_bit"] = parsed.tokens["USAGE_BIT"][:2]

    def _on_registered_at(self, parsed: Parsed, lineno: int) -> None:
        frames: list[str] = []
        self.splat.details["registered"] = (lineno, frames)
        self.expect, self.frames = None, frames

    def _on_irq_stamp(self, parsed: Parsed, lineno: int) -> None:
        self.splat.details.setdefault("irq_events", {})["stamp"] = int(parsed.tokens["INT"][0])
        self._set_expect(None)

    def _on_irq_event(self, parsed: Parsed, lineno: int) -> None:
        words = parsed.tokens["IRQ_EVENT"][0].split()  # hardirqs last enabled
        key = f"{words[0]}_{words[-1]}"
        site = _strip_ip(parsed.tokens["SITE"][0])
        self.splat.details.setdefault("irq_events", {})[key] = (int(parsed.tokens["INT"][0]), lineno, site)

    # print_irq_inversion_bug / print_bad_irq_dependency
    def _on_took_unsafe(self, parsed: Parsed, lineno: int) -> None:
        self.splat.details["forwards"] = True
        self.splat.details["irqclass"] = parsed.tokens["IRQCLASS"][0]
        self._set_expect("other")

    def _on_taken_by_safe(self, parsed: Parsed, lineno: int) -> None:
        self._on_took_unsafe(parsed, lineno)
        self.splat.details["forwards"] = False

    def _on_connects_safe(self, parsed: Parsed, lineno: int) -> None:
        self._set_expect("safe")

    def _on_to_unsafe(self, parsed: Parsed, lineno: int) -> None:
        self._set_expect("unsafe")

    def _on_became_safe(self, parsed: Parsed, lineno: int) -> None:
        frames: list[str] = []
        self.splat.details["safe_at"] = (lineno, frames)
        self.expect, self.frames = None, frames

    def _on_became_unsafe(self, parsed: Parsed, lineno: int) -> None:
        frames: list[str] = []
        self.splat.details["unsafe_at"] = (lineno, frames)
        self.expect, self.frames = None, frames

    def _on_ellipsis(self, parsed: Parsed, lineno: int) -> None:
        pass

    def _paths(self, key: str) -> None:
        self.path = self.splat.details.setdefault(key, [])
        self._set_expect(None)

    def _on_shortest_deps(self, parsed: Parsed, lineno: int) -> None:
        self._paths("path")

    def _on_safe_deps(self, parsed: Parsed, lineno: int) -> None:
        self._paths("safe_path")

    def _on_unsafe_deps(self, parsed: Parsed, lineno: int) -> None:
        self._paths("unsafe_path")

    def _on_safe_deps_tail(self, parsed: Parsed, lineno: int) -> None:
        pass

    _on_unsafe_deps_tail = _on_safe_deps_tail

    def _on_class_open(self, parsed: Parsed, lineno: int) -> None:
        if self.path is not None:
            self.path.append((parsed.locks[0], []))
        self._set_expect(None)

    def _on_usage_at(self, parsed: Parsed, lineno: int) -> None:
        self.frames = []  # the usage traces of a class block are read, not kept

    def _on_acquired_at(self, parsed: Parsed, lineno: int) -> None:
        self.frames = self.path[-1][1] if self.path else None

    def _on_class_close(self, parsed: Parsed, lineno: int) -> None:
        self.frames = None

    _on_key_at = _on_class_close

    # MAX_LOCK_DEPTH
    def _on_depth(self, parsed: Parsed, lineno: int) -> None:
        depth, limit = parsed.tokens["INT"][:2]
        self.splat.details["depth"], self.splat.details["max"] = int(depth), int(limit)

    # lines that carry nothing lockcheck keeps
    def _ignore(self, parsed: Parsed, lineno: int) -> None:
        pass

    _on_depends = _on_cmp_fn = _on_scenario_head = _on_deadlock = _on_nesting_hint = _on_cpu_columns = _ignore
    _on_scenario_irq_disable = _on_scenario_interrupt = _on_no_more_locks = _on_would_create = _ignore
    _on_inverse_ordering = _on_turning_off = _on_turned_off = _on_wait_context = _on_lockdep_internal = _ignore
    _on_no_locks = _ignore

    # the end ---------------------------------------------------------------------------
    def finish(self, why: Optional[str]) -> Splat:
        """The report as read; `why` says what cut it short (None: it ended as printed)."""
        splat = self.splat
        if not self.complete and why is not None:
            splat.notes.append(f"cut short at {splat.file}:{splat.end} ({why}): "
                               f"it gives what it printed before")
        if splat.kind == F.CIRCULAR:
            depths = sorted(link.depth for link in splat.chain)
            expected = set(range((max(depths) + 1) if depths else 0))
            missing = sorted(expected - set(depths))
            if missing:
                splat.notes.append("lost lines: chain entries " + ", ".join(f"-> #{d}" for d in missing)
                                   + " are missing")
            elif not depths and self.complete:
                splat.notes.append("lost lines: no dependency chain")
        if splat.held_count is not None and len(splat.held_locks) < splat.held_count and self.complete:
            splat.notes.append(f"lost lines: {len(splat.held_locks)} of {count(splat.held_count, 'held lock')} printed")
        return splat


# -- the reader ------------------------------------------------------------------------------

#: lines of a report that advance nothing before it is taken as cut short
_MAX_IDLE = 200


class _LogReader:
    """Walks one log: prefixes, callers, titles, one `_Builder` per report in progress."""

    def __init__(self, file: str, stats: LogStats) -> None:
        self.file = file
        self.stats = stats
        self.open: dict[Optional[str], _Builder] = {}
        self.width: dict[Optional[str], int] = {}
        self.last_caller: Optional[str] = None
        self.last_ts: Optional[float] = None
        #: line of the last report-only sentence met outside a report (one note per headless part)
        self.headless_at: Optional[int] = None

    def lines(self, lines: Iterable[str]) -> Iterator[Splat]:
        stats = self.stats
        for lineno, raw in enumerate(lines, 1):
            stats.lines += 1
            line = raw.rstrip("\r\n")
            if not self.open and not _may_start(line):
                if line.strip():
                    stats.other_lines += 1
                    self._headless(line, lineno)
                continue
            yield from self._line(line, lineno)
            if self.open:
                yield from self._abandoned(lineno)
        for caller in list(self.open):
            yield self._close(caller, "the log ends there")

    def _abandoned(self, lineno: int) -> Iterator[Splat]:
        """Reports whose caller printed nothing of them for _MAX_IDLE lines: the rest was lost."""
        for caller, builder in list(self.open.items()):
            if lineno - builder.advanced >= _MAX_IDLE:
                yield self._close(caller, f"nothing more of it in the {_MAX_IDLE} lines that follow")

    def _line(self, line: str, lineno: int) -> Iterator[Splat]:
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
        if builder.complete:
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
        self.stats.notes.append(f"{self.file}:{lineno}: part of a lockdep report whose start is not in the log "
                                f"({sentence!r}: the log begins, or lost lines, inside it); nothing read from it")

    def _start(self, parsed: Parsed, caller: Optional[str], ts: Optional[float], lineno: int) -> Iterator[Splat]:
        self.headless_at = None
        tag = parsed.tag
        where = f"{self.file}:{lineno}"
        if tag in _OTHER_TITLES:
            self.stats.notes.append(f"{where}: a lockdep report lockcheck does not read: {_OTHER_TITLES[tag]}")
            return
        if tag == "too_low" and parsed.tokens["LIMIT"][0] == "MAX_LOCK_DEPTH":
            kind = F.MAX_DEPTH
        elif tag in _CAPACITY:
            self.stats.notes.append(f"{where}: lockdep turned itself off: {parsed.text}")
            return
        else:
            kind = _TITLE_KINDS[tag]
        splat = Splat(kind=kind, file=self.file, line=lineno, title=parsed.text, ts=ts, end=lineno)
        self.open[caller] = _Builder(splat, parsed)
        return
        yield  # pragma: no cover - a generator

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
_LOG_LINE = re.compile(r"^(?:<\d>)?(?:\[ *\d+\.\d+\]|\[[A-Z][a-z]{2} [A-Z][a-z]{2} |\S.* \S+ kernel: )")
#: how the kernel's own reports open (a syzbot report of another bug, a log pasted without stamps):
#: among the first lines of a file, they make it a kernel log (`lockcheck.readers.inputs.looks_like` too)
KERNEL_LOG_WORDS = ("Linux version ", "Kernel command line:", "Command line:", "BUG: ", "WARNING: ", "Call Trace:")


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
        if _may_start(body) and classify(body).tag in _TITLE_KINDS:
            return True
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
