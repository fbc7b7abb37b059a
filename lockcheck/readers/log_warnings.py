"""Lockdep's warnings that are not framed reports: `DEBUG_LOCKS_WARN_ON(...)`, a `WARNING:` raised in
lockdep.c, the capacity BUGs (`BUG: MAX_LOCKDEP_ENTRIES too low!`...), each as one `lockdep-warning`.

The kernel prints them through `WARN()` or `print_lockdep_off()`, not through
a report function, so they have no `=====` frame and no held-lock list: a
`DEBUG_LOCKS_WARN_ON(COND)` line (since 4.15 before the `WARNING: CPU: N
PID: N at FILE:LINE FUNC` line `__warn()` prints, after it before), and the
`CPU: N PID: N Comm: COMM ...` line of the dump that follows.  Every one of
them turned lockdep off (`debug_locks_off()`), so a log holding one was not
checked past it: a finding (docs/cli.md: "the condition as its message").

`WarningWatcher` sees every line outside a report (`lockcheck.readers.kernel_log`
feeds it) and joins the lines of one warning: the condition, the lockdep.c
`WARNING:` line within a few lines of it, and the task from the dump.
"""

from __future__ import annotations

import re
from typing import Optional

from lockcheck.lockdep import findings as F
from lockcheck.readers.splat import Splat

#: `DEBUG_LOCKS_WARN_ON(hlock->class_idx == 0)`, as WARN() prints it
_DEBUG_WARN = re.compile(r"^(DEBUG_LOCKS_WARN_ON\(.*\))\s*$")
#: `__warn()`'s line for a WARN in lockdep's own code: `WARNING: CPU: 0 PID: 1 at
#: kernel/locking/lockdep.c:232 hlock_class+0x60/0x80` (before 4.9: `WARNING: at kernel/lockdep.c:...`)
_LOCKDEP_WARN = re.compile(r"^WARNING: (?:CPU: \d+ PID: (?P<pid>\d+) )?at (?P<where>kernel/(?:locking/)?lockdep\S*"
                           r"(?: \S+)?)")
#: the dump's first line: `CPU: 0 PID: 1 Comm: swapper/0 Not tainted 6.8.0 #1` (`UID: 0` since 6.11)
_COMM = re.compile(r"^CPU: \d+ (?:UID: \d+ )?PID: (?P<pid>\d+) Comm: (?P<comm>.+?) (?P<taint>Not tainted|Tainted:(?: +[A-Z])*)"
                   r"(?: +(?P<release>\d\S*)(?: (?P<build>#\S+))?)?(?: |$)")
#: where a warning's first line may start inside a line (behind a console's own prefix: `junk_prefix`)
WARNING_AT = re.compile(r"DEBUG_LOCKS_WARN_ON\(|WARNING: (?:CPU: \d+ PID: \d+ )?at kernel/")


def starts_warning(body: str) -> bool:
    """Whether this line (its log prefix off) is one that starts a lockdep warning: the
    `DEBUG_LOCKS_WARN_ON(...)` condition or `__warn()`'s line for lockdep's own code."""
    text = body.strip()
    return _DEBUG_WARN.match(text) is not None or _LOCKDEP_WARN.match(text) is not None


#: lines within which the parts of one warning are looked for
_SPAN = 12


def may_hold(text: str) -> bool:
    """Cheap test: can this line be part of a warning?  (The walk's `_may_start` for warnings.)"""
    return "DEBUG_LOCKS_WARN_ON(" in text or "lockdep" in text or text.startswith("CPU: ")


class WarningWatcher:
    """Joins the lines of lockdep's warnings into `Splat`s of kind lockdep-warning."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.pending: Optional[Splat] = None

    def start(self, message: str, lineno: int, ts: Optional[float]) -> Optional[Splat]:
        """A capacity BUG or another line that turned lockdep off: a new warning; the one before is done."""
        done = self.flush()
        self.pending = Splat(kind=F.LOCKDEP_WARNING, file=self.file, line=lineno, title=message, ts=ts,
                             end=lineno, details={"message": message})
        return done

    def line(self, body: str, lineno: int, ts: Optional[float]) -> Optional[Splat]:
        """One line outside any report; a finished warning when this line ends one (or is past it)."""
        done: Optional[Splat] = None
        if self.pending is not None and lineno - self.pending.line > _SPAN:
            done = self.flush()  # no dump followed: the task stays unknown
        pending = self.pending
        text = body.strip()
        match = _DEBUG_WARN.match(text)
        if match is not None:
            if pending is not None and "warned_at" in pending.details and "DEBUG_LOCKS" not in pending.title:
                pending.title = pending.details["message"] = match.group(1)  # the WARNING line came first
                return done
            return self.start(match.group(1), lineno, ts) or done
        match = _LOCKDEP_WARN.match(text)
        if match is not None:
            if pending is None or "warned_at" in pending.details:
                done = self.start(f"WARNING at {match.group('where')}", lineno, ts) or done
                pending = self.pending
            if pending is not None:
                pending.details["warned_at"] = match.group("where")
            return done
        match = _COMM.match(text)
        if match is not None and pending is not None:
            pending.task = f"{match.group('comm')}/{match.group('pid')}"
            if match.group("release"):  # the kernel as a report's ident line gives it: release, #N, taint
                pending.kernel = " ".join(part.strip() for part in match.group("release", "build", "taint") if part)
            pending.end = lineno
            self.pending = None
            return pending
        return done

    def flush(self) -> Optional[Splat]:
        """The warning being read, if any, as it stands (the log ended, or a report starts)."""
        pending, self.pending = self.pending, None
        return pending
