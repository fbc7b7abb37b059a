"""What else a boot leaves behind: /proc/lockdep_stats, the kernel log, kprobe_profile.

`lockcheck.kernel.state` reads the kernel's classes and chains; this module reads
the facts that say how far they can be trusted and what the capture missed:

- `/proc/lockdep_stats` (`parse_stats`): `debug_locks: 0` means lockdep
  turned itself off -- after its first report, or a capacity overflow -- and
  recorded nothing after that;
- the boot's kernel log (`first_report`): the first lockdep report that
  turned lockdep off, with its dmesg timestamp, task and lock, so the state
  is used only for what happened before it;
- `kprobe_profile` (`parse_kprobe_profile`): hits and *missed* hits of the
  `lock_acquire` probe of a `lockcheck capture`; a missed hit is an
  acquisition whose arguments the capture lacks.

This is deliberately a small detector, not a reader of lockdep splats (the
`kernel-log` input format reads those in full): a banner line and the
`comm/pid` and `(class)` lines after it are all the state needs.

>>> report = find_report(["[   12.5] =====", "[   12.5] WARNING: possible recursive locking detected",
...                        "[   12.5] 6.1.0 #1 Not tainted", "[   12.5] demo/72 is trying to acquire lock:",
...                        "[   12.5] ffff8880 (&x->lock){+.+.}-{3:3}, at: f+0x1/0x2"], "dmesg")
>>> (report.title, report.ts, report.comm, report.pid, report.lock, report.line)
('possible recursive locking detected', 12.5, 'demo', 72, '&x->lock', 2)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Optional

from lockcheck.util import numbers

#: a dmesg line's `[    4.841479]` stamp and optional `[  T123]` caller id
_STAMP = re.compile(r"^\s*\[\s*([0-9]+\.[0-9]+)\]\s?(?:\[\s*[TC][0-9]+\]\s?)?", re.ASCII)

#: banners of lockdep reports after which lockdep is off (each calls debug_locks_off());
#: "WARNING: suspicious RCU usage" is not among them: lockdep_rcu_suspicious() leaves it on
_BANNER = re.compile(
    r"(?:WARNING|BUG|INFO): ("
    r"possible circular locking dependency detected"
    r"|possible recursive locking detected"
    r"|inconsistent lock state"
    r"|possible irq lock inversion dependency detected"
    r"|\S+-safe -> \S+-unsafe lock order detected"
    r"|bad unlock balance detected!"
    r"|bad contention detected!"
    r"|held lock freed!"
    r"|lock held when returning to user space!"
    r"|[Nn]ested lock was not taken"
    r"|.+/\d+ still has locks held!"
    r"|MAX_\w+ too low!"
    r"|trying to register non-static key\."
    r")"
    r"|(DEBUG_LOCKS_WARN_ON\(.*\))"
)
#: `comm/pid is trying to acquire lock:`, `comm/pid [HC0[0]:...] takes:`, ...
_TASK = re.compile(r"^(.+)/([0-9]+)(?: |:|$)")
#: `ffff888003a0c0a8 (&x->lock){+.+.}-{3:3}, at: ...` or `... release lock (&x->lock) at:`
_LOCK = re.compile(r"^\s*(?:[0-9a-f]{8,}\s+)?\((.+)\)\{[^}]*\}|lock \((.+)\) at:")
#: how many lines after the banner may name the task and the lock
_REPORT_HEAD = 12


@dataclass(frozen=True)
class KernelReport:
    """The first lockdep report of a boot's kernel log (the one that turned lockdep off)."""

    file: str
    line: int  #: the banner's line
    title: str  #: the banner without `WARNING: `
    ts: Optional[float] = None  #: its dmesg timestamp, when the log has them
    comm: Optional[str] = None
    pid: Optional[int] = None
    lock: Optional[str] = None  #: the class as printed (`#N`, `/S` included)

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def task(self) -> Optional[str]:
        return f"{self.comm}/{self.pid}" if self.comm is not None else None


def strip_stamp(line: str, file: str = "<dmesg>", lineno: Optional[int] = None) -> tuple[Optional[float], str]:
    """(timestamp, text) of a dmesg line; None when it has no `[ seconds]` stamp."""
    match = _STAMP.match(line)
    if match is None:
        return None, line.strip()
    return (numbers.seconds(match.group(1), file, lineno, match.start(1) + 1, "timestamp"),
            line[match.end():].strip())


@dataclass(frozen=True)
class LogScan:
    """What the state needs of a boot's kernel log: its first lockdep report, and whether the
    log goes back to the boot (a ring buffer that wrapped has lost its first lines, and with
    them maybe the report)."""

    report: Optional[KernelReport]
    from_boot: bool


#: the kernel's first line (`Linux version 6.1.0 ...`, printed at 0.000000)
BOOT_BANNER = "Linux version "


def scan_log(lines: Iterable[str], file: str = "<dmesg>") -> LogScan:
    """`find_report`, and whether the log starts at the boot (its `Linux version` banner).

    >>> scan_log(["[    0.000000] Linux version 6.1.0", "[    1.0] Run /init"], "dmesg")
    LogScan(report=None, from_boot=True)
    >>> scan_log(["[ 4711.5] usb 1-1: new device"], "dmesg").from_boot
    False
    """
    banner = [False]

    def watched() -> Iterable[str]:
        for number, line in enumerate(lines):
            if number < _BANNER_LINES and not banner[0] and BOOT_BANNER in line:
                banner[0] = True
            yield line

    report = find_report(watched(), file)
    return LogScan(report, banner[0])


#: how far into a log its boot banner may come (a serial console opens with firmware output)
_BANNER_LINES = 200


def find_report(lines: Iterable[str], file: str = "<dmesg>") -> Optional[KernelReport]:
    """The first lockdep report in a kernel log, or None."""
    found: Optional[dict] = None
    seen = 0
    for lineno, raw in enumerate(lines, 1):
        ts, text = strip_stamp(raw, file, lineno)
        if found is None:
            match = _BANNER.search(text)
            if match is None:
                continue
            found = {"file": file, "line": lineno, "title": match.group(1) or match.group(2), "ts": ts}
            continue
        seen += 1
        if "comm" not in found:
            task = _TASK.match(text)
            if task is not None and not text.startswith(("-", "=")):
                found["comm"] = task.group(1)
                found["pid"] = numbers.count(task.group(2), file, lineno, None, "pid")
        lock = _LOCK.search(text)
        if lock is not None:
            found["lock"] = lock.group(1) or lock.group(2)
            break
        if seen >= _REPORT_HEAD:
            break
    return KernelReport(**found) if found is not None else None


def first_report(path: str) -> Optional[KernelReport]:
    """`find_report` of a kernel log file (compressed or not)."""
    from lockcheck.readers.source import open_lines

    name, lines = open_lines(path)
    try:
        return find_report(lines, name)
    finally:
        close = getattr(lines, "close", None)
        if close is not None:
            close()


def looks_like_kernel_log(lines: list[str]) -> bool:
    """Whether these first lines are a kernel log (dmesg stamps, or the `Linux version` banner)."""
    stamped = sum(1 for line in lines if _STAMP.match(line))
    return bool(lines) and (stamped * 2 >= len(lines) or any("Linux version" in line for line in lines[:3]))


# -- /proc/lockdep_stats -----------------------------------------------------------------

STATS_FIRST_FIELD = "lock-classes"


def parse_stats(lines: Iterable[str], file: str = "<lockdep_stats>") -> dict[str, int]:
    """`/proc/lockdep_stats` as {field: value}: ` lock-classes:  392 [max: 8192]` -> 392.

    >>> parse_stats([" lock-classes:     392 [max: 8192]", " debug_locks:  0"])
    {'lock-classes': 392, 'debug_locks': 0}
    """
    stats: dict[str, int] = {}
    for lineno, line in enumerate(lines, 1):
        name, sep, rest = line.partition(":")
        value = rest.split()
        if sep and value and numbers.looks_numeric(value[0]):
            col = numbers.column_of(line, value[0], len(name) + 1)
            stats[name.strip()] = numbers.count(value[0], file, lineno, col, name.strip())
    return stats


def is_stats(lines: list[str]) -> bool:
    """Whether these first lines are /proc/lockdep_stats."""
    return any(line.strip().startswith(STATS_FIRST_FIELD + ":") for line in lines[:3])


# -- kprobe_profile ---------------------------------------------------------------------


@dataclass(frozen=True)
class ProbeProfile:
    """One line of `/sys/kernel/tracing/kprobe_profile`: `EVENT  HITS  MISSES`."""

    event: str
    hits: int
    misses: int


def parse_kprobe_profile(lines: Iterable[str], file: str = "<kprobe_profile>") -> list[ProbeProfile]:
    """The probes of a kprobe_profile: its own file, or the `--- kprobe_profile` section of a meta.txt.

    The kernel prints `"  %-44s %15lu %15lu\\n"` (event name, hits, missed
    hits); in a meta.txt only the lines after `--- kprobe_profile` (up to the
    next `--- ` heading) are read.

    >>> parse_kprobe_profile(["  lock_acquire_args     1000     3"])
    [ProbeProfile(event='lock_acquire_args', hits=1000, misses=3)]
    """
    numbered = list(enumerate(lines, 1))
    if any(line.startswith("--- ") for _, line in numbered):
        section, inside = [], False
        for lineno, line in numbered:
            if line.startswith("--- "):
                inside = line.split()[1:2] == ["kprobe_profile"]
            elif inside:
                section.append((lineno, line))
        numbered = section
    found = []
    for lineno, line in numbered:
        parts = line.split()
        if len(parts) == 3 and numbers.looks_numeric(parts[1]) and numbers.looks_numeric(parts[2]):
            hits = numbers.count(parts[1], file, lineno, numbers.column_of(line, parts[1], len(parts[0])), "hits")
            end = line.find(parts[1], len(parts[0])) + len(parts[1])
            misses = numbers.count(parts[2], file, lineno, numbers.column_of(line, parts[2], end), "missed hits")
            found.append(ProbeProfile(parts[0], hits, misses))
    return found
