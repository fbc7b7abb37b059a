"""What /proc/lock_stat keeps per lock class, and how the kernel prints a time.

`LockTime` is the kernel's `struct lock_time` and `ClassStats` its `struct
lock_class_stats` (include/linux/lockdep_types.h), kept in integer
nanoseconds as `lockstat_clock()` measures them, so that adding, averaging
and rounding give the digits the kernel prints:

- `lock_time_inc()` (`LockTime.add`) keeps min, max, total and the count;
  `lock_time_add()` (`LockTime.merge`) sums per-CPU copies, as
  `lock_stats()` does before printing;
- the average is `div64_u64(total, nr)`: integer division of nanoseconds;
- `snprint_time()` (`format_us`) prints nanoseconds as microseconds with
  two decimals, rounding half up on the 10 ns digit.

A class has separate read and write times (the `-R` and `-W` rows) and four
bounce counters indexed like the kernel's `enum bounce_type`.  Contention
points (where waiters called `lock_contended`) and contending points (where
the holder they waited for had taken the lock) are counted per site; the
kernel keeps the first `LOCKSTAT_POINTS` sites of each and prints them
in the order it first saw them; a trace's table keeps up to `MAX_POINTS`
and prints the `LOCKSTAT_POINTS` most frequent (the top contention
sites), the first seen first among equals.  A dump's sites keep the
dump's order.
"""

from __future__ import annotations

from typing import Iterable, Iterator, Optional

#: sites printed per class and kind, as the kernel's fixed arrays hold
LOCKSTAT_POINTS = 4
#: sites counted per class and kind (a bound; later new sites are not counted, as in the kernel)
MAX_POINTS = 16

#: `enum bounce_type`: index into `ClassStats.bounces` (add 1 for the read variant)
BOUNCE_ACQUIRED, BOUNCE_CONTENDED = 0, 2

#: the columns of /proc/lock_stat after `class name`, in order
COLUMNS = (
    "con-bounces", "contentions", "waittime-min", "waittime-max", "waittime-total", "waittime-avg",
    "acq-bounces", "acquisitions", "holdtime-min", "holdtime-max", "holdtime-total", "holdtime-avg",
)
#: columns that are times (printed and exported in microseconds)
TIME_COLUMNS = frozenset(c for c in COLUMNS if "time" in c)

#: a site: (ip as printed between `[<` and `>]`, or "" when unknown; symbol or trace `at=`)
Site = tuple[str, str]


def format_us(ns: int) -> str:
    """Nanoseconds as lock_stat prints them (`snprint_time`): microseconds, two decimals.

    >>> format_us(1_234_567), format_us(4), format_us(5), format_us(0)
    ('1234.57', '0.00', '0.01', '0.00')
    """
    div, rem = divmod(ns + 5, 1000)
    if div < 0 and rem:  # div_s64_rem truncates toward zero
        div, rem = div + 1, rem - 1000
    return f"{div}.{abs(rem) // 10:02d}"


def us(ns: int) -> float:
    """The printed microseconds as a number (what JSON carries, so it equals the text)."""
    return float(format_us(ns))


class LockTime:
    """`struct lock_time`: min/max/total/count of durations in nanoseconds."""

    __slots__ = ("min", "max", "total", "nr", "printed_avg")

    def __init__(self) -> None:
        self.min = self.max = self.total = self.nr = 0
        #: the average a dump printed (its total is rounded, so recomputing may differ by 10 ns)
        self.printed_avg: Optional[int] = None

    def add(self, ns: int) -> None:
        """`lock_time_inc()`."""
        if ns > self.max:
            self.max = ns
        if ns < self.min or not self.nr:
            self.min = ns
        self.total += ns
        self.nr += 1

    def merge(self, other: "LockTime") -> None:
        """`lock_time_add()`: fold another copy in."""
        if not other.nr:
            return
        if other.max > self.max:
            self.max = other.max
        if other.min < self.min or not self.nr:
            self.min = other.min
        self.total += other.total
        self.nr += other.nr
        self.printed_avg = None

    @property
    def avg(self) -> int:
        if self.printed_avg is not None:
            return self.printed_avg
        return self.total // self.nr if self.nr else 0

    def copy(self) -> "LockTime":
        new = LockTime()
        new.min, new.max, new.total, new.nr, new.printed_avg = self.min, self.max, self.total, self.nr, self.printed_avg
        return new


class Row:
    """One printed line of a class: its twelve column values (times in ns)."""

    __slots__ = ("con_bounces", "wait", "acq_bounces", "hold")

    def __init__(self, con_bounces: int, wait: LockTime, acq_bounces: int, hold: LockTime) -> None:
        self.con_bounces = con_bounces
        self.wait = wait
        self.acq_bounces = acq_bounces
        self.hold = hold

    def values(self) -> tuple:
        """The twelve columns in order: counts as ints, times as nanoseconds."""
        w, h = self.wait, self.hold
        return (self.con_bounces, w.nr, w.min, w.max, w.total, w.avg,
                self.acq_bounces, h.nr, h.min, h.max, h.total, h.avg)

    def columns(self) -> dict:
        """Column name -> value, times in printed microseconds (the JSON form)."""
        return {name: us(value) if name in TIME_COLUMNS else value
                for name, value in zip(COLUMNS, self.values())}

    def value(self, column: str):
        """One column by name (times in nanoseconds, for sorting)."""
        return self.values()[COLUMNS.index(column)]


class ClassStats:
    """`struct lock_class_stats` of one class, under the name lock_stat prints."""

    __slots__ = ("name", "read_waittime", "write_waittime", "read_holdtime", "write_holdtime",
                 "bounces", "contention_points", "contending_points", "hidden_waits")

    def __init__(self, name: str) -> None:
        self.name = name
        self.read_waittime = LockTime()
        self.write_waittime = LockTime()
        self.read_holdtime = LockTime()
        self.write_holdtime = LockTime()
        self.bounces = [0, 0, 0, 0]
        self.contention_points: dict[Site, int] = {}
        self.contending_points: dict[Site, int] = {}
        #: a dump printed contention points under no row: the kernel had waits (and no hold) it did not print
        self.hidden_waits = False

    # -- the printed rows ------------------------------------------------------
    @property
    def contentions(self) -> int:
        """What the kernel sorts by (`lock_stat_cmp`)."""
        return self.read_waittime.nr + self.write_waittime.nr

    @property
    def has_write(self) -> bool:
        return bool(self.write_holdtime.nr or self.write_waittime.nr)

    @property
    def has_read(self) -> bool:
        return bool(self.read_holdtime.nr or self.read_waittime.nr)

    def write_row(self) -> Row:
        return Row(self.bounces[BOUNCE_CONTENDED], self.write_waittime,
                   self.bounces[BOUNCE_ACQUIRED], self.write_holdtime)

    def read_row(self) -> Row:
        return Row(self.bounces[BOUNCE_CONTENDED + 1], self.read_waittime,
                   self.bounces[BOUNCE_ACQUIRED + 1], self.read_holdtime)

    def total_row(self) -> Row:
        """Reads and writes together: what a class-level comparison or sort uses."""
        wait = _combined(self.write_waittime, self.read_waittime)
        hold = _combined(self.write_holdtime, self.read_holdtime)
        b = self.bounces
        return Row(b[BOUNCE_CONTENDED] + b[BOUNCE_CONTENDED + 1], wait, b[BOUNCE_ACQUIRED] + b[BOUNCE_ACQUIRED + 1], hold)

    @property
    def has_data(self) -> bool:
        """Anything to show: a hold or a wait counted, or (a dump's) contention points under no row."""
        return self.has_write or self.has_read or self.hidden_waits

    def rows(self) -> list[tuple[str, Row]]:
        """The rows lock_stat prints for this class, with their suffix (`-W`, `-R` or none).

        `seq_stats` prints a write row when there are write hold times and a
        read row when there are read hold times, `-W`/`-R` when there are
        both, `-R` alone for reads only: which rows come out depends on hold
        times only (a read wait of a class held only for write is counted,
        in `contentions` and in the sort, but not printed).  A class with
        waits and no hold at all (its lock taken within the window and not
        yet released at its end) gets the kernel's points only; here it
        gets its wait rows too, by which waits it has, so that the
        contention shows when a trace has no sites.
        """
        w, r = self.write_holdtime.nr, self.read_holdtime.nr
        if not w and not r:
            w, r = self.write_waittime.nr, self.read_waittime.nr
        if w and r:
            return [("-W", self.write_row()), ("-R", self.read_row())]
        if r:
            return [("-R", self.read_row())]
        if w:
            return [("", self.write_row())]
        return []

    # -- combining ---------------------------------------------------------------
    def merge(self, other: "ClassStats") -> None:
        """Add another copy of the same class (another run, another file, a folded name)."""
        self.read_waittime.merge(other.read_waittime)
        self.write_waittime.merge(other.write_waittime)
        self.read_holdtime.merge(other.read_holdtime)
        self.write_holdtime.merge(other.write_holdtime)
        for i, count in enumerate(other.bounces):
            self.bounces[i] += count
        _merge_points(self.contention_points, other.contention_points)
        _merge_points(self.contending_points, other.contending_points)
        self.hidden_waits = self.hidden_waits or other.hidden_waits


def _combined(a: LockTime, b: LockTime) -> LockTime:
    """Two times as one (a side without entries is left out, keeping a dump's printed average)."""
    if not b.nr:
        return a
    if not a.nr:
        return b
    out = a.copy()
    out.merge(b)
    return out


def count_point(points: dict[Site, int], site: Site) -> None:
    """Count one contention at SITE (`lock_point()`: new sites only while there is room)."""
    if site in points:
        points[site] += 1
    elif len(points) < MAX_POINTS:
        points[site] = 1


def _merge_points(into: dict[Site, int], other: dict[Site, int]) -> None:
    if not other:
        return
    for site, count in other.items():
        if site in into or len(into) < MAX_POINTS:
            into[site] = into.get(site, 0) + count
    ordered = sorted(into.items(), key=lambda item: -item[1])
    into.clear()
    into.update(ordered)


def printed_points(points: dict[Site, int]) -> Iterator[tuple[Site, int]]:
    """The sites lock_stat shows: the first LOCKSTAT_POINTS, in the order kept."""
    for i, item in enumerate(points.items()):
        if i >= LOCKSTAT_POINTS:
            return
        yield item


def merge_all(stats: Iterable[ClassStats], name: str) -> ClassStats:
    """One class from several (folded names, several inputs)."""
    out = ClassStats(name)
    for one in stats:
        out.merge(one)
    return out
