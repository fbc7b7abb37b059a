"""Reading a /proc/lock_stat dump back into `ClassStats`.

A dump is recognised by its first non-blank line, `lock_stat version 0.4`
(`seq_header`).  Each class line is a name ending in `:` (`-W:`/`-R:` for
the write and read rows of one class) and the twelve columns; under a
contended class come its contention points, a rule, and its contending
points (`COUNT [<IP>] SYMBOL`); a class that waited but holds its lock
still (no hold time) has its points printed under no row.  Rules, dotted lines and blank lines carry
nothing.  Names are as the kernel printed them: cut to 37 characters plus
`#N`/`/N` (`render.display_name`).

Times are read back to nanoseconds (the dump's 10 ns resolution); the
average is kept as printed, so rendering the classes again gives the dump
back, row order and point order included.
"""

from __future__ import annotations

import re
from typing import Iterable, Iterator, Optional

from lockcheck.errors import TraceError
from lockcheck.stat.model import BOUNCE_ACQUIRED, BOUNCE_CONTENDED, COLUMNS, ClassStats, LockTime

TITLE = "lock_stat version"
WARNING_PREFIX = "*WARNING*"

_NUMBER = r"-?\d+(?:\.\d+)?"
_ROW = re.compile(r"^\s*(?P<name>.*?)(?P<kind>-[WR])?:(?P<numbers>(?:\s+" + _NUMBER + r"){12})\s*$")
_POINT = re.compile(r"^\s*(?P<name>.+?)\s+(?P<count>\d+)\s+(?:\[<(?P<ip>[^>\s]*)>\])?\s*(?P<symbol>\S.*?)\s*$")
_RULE = re.compile(r"^\s*(-+|\.+)\s*$")
#: most digits a count or time may have: the kernel prints 64-bit values (20 digits), and Python
#: refuses to convert numbers of thousands of digits
MAX_DIGITS = 24
#: the columns of a row that are counts (con-bounces, contentions, acq-bounces, acquisitions): the
#: others are times, printed with two decimals
_COUNTS = (0, 1, 6, 7)


def is_lock_stat(first_line: Optional[str]) -> bool:
    """Whether a file's first non-blank line is /proc/lock_stat's title."""
    return first_line is not None and first_line.strip().startswith(TITLE)


def _ns(text: str) -> int:
    whole, _, frac = text.partition(".")
    sign = -1 if whole.startswith("-") else 1
    return sign * (abs(int(whole)) * 1000 + int((frac + "000")[:3]))


def _time(values: list[str]) -> LockTime:
    """`nr min max total avg` as printed -> a LockTime (the printed average kept)."""
    lt = LockTime()
    lt.nr = int(values[0])
    lt.min, lt.max, lt.total = (_ns(v) for v in values[1:4])
    lt.printed_avg = _ns(values[4])
    return lt


class DumpReader:
    """Classes of one /proc/lock_stat dump, in the dump's order; `warning` if lockdep was off."""

    def __init__(self, file: str = "<lock_stat>") -> None:
        self.file = file
        self.warning = False
        self.version: Optional[str] = None

    def parse(self, lines: Iterable[str]) -> Iterator[ClassStats]:
        current: Optional[ClassStats] = None
        rules = 0  # rules seen since the class's rows: 1 = contention points, 2 = contending points
        header_seen = False
        header_closed = False
        has_write = False  # the current class had a `-W` row (so a `-R` row of that name is its own)
        for lineno, line in enumerate(lines, 1):
            text = line.strip()
            if not text:
                continue
            if self.version is None:
                if not text.startswith(TITLE):
                    raise TraceError(self.file, lineno, 1, f"not a /proc/lock_stat dump (expected {TITLE!r})")
                self.version = text[len(TITLE):].strip()
                continue
            if text.startswith(WARNING_PREFIX):
                self.warning = True
                continue
            if _RULE.match(line):
                if text[0] == "-" and header_seen and not header_closed:
                    header_closed = True  # the rule under the column titles
                elif text[0] == "-" and header_seen:
                    rules += 1  # before the first class or after a dotted line: a class of points only
                elif text[0] == ".":
                    if current is not None:
                        yield current
                    current, rules = None, 0
                continue
            if not header_seen:
                titles = text.split()
                if titles[:2] != ["class", "name"] or tuple(titles[2:]) != COLUMNS:
                    raise TraceError(self.file, lineno, 1, "expected the column titles 'class name con-bounces "
                                                           "contentions ... holdtime-avg'")
                header_seen = True
                continue
            row = _ROW.match(line)
            if row is not None:
                name, kind = row.group("name"), row.group("kind")
                second = kind == "-R" and current is not None and current.name == name and not rules and has_write
                if not second:
                    if current is not None:
                        yield current
                    current, rules = ClassStats(name), 0
                has_write = kind == "-W"
                self._bounded(line, lineno, row.start("numbers"), row.group("numbers"), _COUNTS)
                self._row(current, kind, row.group("numbers").split())
                continue
            point = _POINT.match(line) if rules else None
            if point is None:
                column = len(line) - len(line.lstrip()) + 1
                raise TraceError(self.file, lineno, column, "expected a lock_stat class line "
                                 "('NAME: 12 numbers') or a contention point ('NAME COUNT [<IP>] SYMBOL')")
            if current is None or point.group("name") != current.name:
                # `seq_stats` prints the points of a class that waited but was never released (no
                # hold time, so no row): a class of its own, its waits not shown
                if current is not None:
                    yield current
                current, rules = ClassStats(point.group("name")), 1
                current.hidden_waits = True
            self._bounded(line, lineno, point.start("count"), point.group("count"))
            site = (point.group("ip") or "", point.group("symbol"))
            points = current.contention_points if rules == 1 else current.contending_points
            points[site] = points.get(site, 0) + int(point.group("count"))
        if self.version is None:
            raise TraceError(self.file, None, None, "empty file: not a /proc/lock_stat dump")
        if current is not None:
            yield current

    def _bounded(self, line: str, lineno: int, start: int, numbers: str, whole: tuple[int, ...] = ()) -> None:
        """A number longer than any the kernel prints, or a time where a count must be (the columns
        `whole`), is an error at its column, not a ValueError."""
        for i, number in enumerate(re.finditer(r"\S+", numbers)):
            digits = sum(ch.isdigit() for ch in number.group())
            if digits > MAX_DIGITS:
                raise TraceError(self.file, lineno, start + number.start() + 1,
                                 f"number too long ({digits} digits)", source=line)
            if i in whole and not number.group().lstrip("-").isdigit():
                raise TraceError(self.file, lineno, start + number.start() + 1,
                                 f"expected a whole number in column {COLUMNS[i]!r} (a count), "
                                 f"not {number.group()!r}", source=line)

    @staticmethod
    def _row(stats: ClassStats, kind: Optional[str], numbers: list[str]) -> None:
        read = kind == "-R"
        stats.bounces[BOUNCE_CONTENDED + read] = int(numbers[0])
        stats.bounces[BOUNCE_ACQUIRED + read] = int(numbers[6])
        wait, hold = _time(numbers[1:6]), _time(numbers[7:12])
        if read:
            stats.read_waittime, stats.read_holdtime = wait, hold
        else:
            stats.write_waittime, stats.write_holdtime = wait, hold


def parse(lines: Iterable[str], file: str = "<lock_stat>") -> Iterator[ClassStats]:
    """The classes of a /proc/lock_stat dump (see `DumpReader`)."""
    return DumpReader(file).parse(lines)
