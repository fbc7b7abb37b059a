"""`lockcheck stat`: contention and hold-time statistics per lock class, as /proc/lock_stat shows them.

The kernel's CONFIG_LOCK_STAT counts, per class: contentions (a
`lock_contended` event) and the wait until `lock_acquired`, acquisitions and
how long each hold lasted, and "bounces" (the lock was last taken on another
CPU).  A trace carries the same events (`contended`, `acquired`, `acquire`,
`release`, with `ts=` and `cpu=`), so the same table can be drawn offline.
Times are printed in microseconds, as lock_stat does.

Memory: one entry per held or contended lock (bounded by what tasks hold
at once) plus the last CPU of recently used lock objects, capped at
`MAX_TRACKED_OBJECTS` (the oldest are forgotten; a bounce is then missed).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Optional, TextIO

from lockcheck.events import ACQUIRE, ACQUIRED, CONTENDED, RELEASE, Event, class_name

MAX_TRACKED_OBJECTS = 1 << 20


@dataclass
class TimeStat:
    """min/max/total/count of durations in seconds."""

    count: int = 0
    min: float = 0.0
    max: float = 0.0
    total: float = 0.0

    def add(self, seconds: float) -> None:
        if self.count == 0 or seconds < self.min:
            self.min = seconds
        if seconds > self.max:
            self.max = seconds
        self.total += seconds
        self.count += 1

    @property
    def avg(self) -> float:
        return self.total / self.count if self.count else 0.0

    def to_json(self) -> dict:
        return {"count": self.count, "min_us": _us(self.min), "max_us": _us(self.max),
                "total_us": _us(self.total), "avg_us": _us(self.avg)}


@dataclass
class ClassStat:
    """lock_stat's row for one class, and the sites where it was contended."""

    name: str
    contentions: int = 0
    con_bounces: int = 0
    acquisitions: int = 0
    acq_bounces: int = 0
    wait: TimeStat = field(default_factory=TimeStat)
    hold: TimeStat = field(default_factory=TimeStat)
    contention_sites: Counter = field(default_factory=Counter)

    def to_json(self) -> dict:
        return {
            "class": self.name, "contentions": self.contentions, "con_bounces": self.con_bounces,
            "acquisitions": self.acquisitions, "acq_bounces": self.acq_bounces,
            "waittime": self.wait.to_json(), "holdtime": self.hold.to_json(),
            "contention_sites": dict(self.contention_sites.most_common()),
        }


class LockStats:
    """Feed events in trace order; read `classes` at the end."""

    def __init__(self) -> None:
        self.classes: dict[str, ClassStat] = {}
        self.events = 0
        self.timed = 0
        self._holds: dict[tuple, list] = {}  # (task, lock, instance) -> [(class, ts), ...]
        self._waits: dict[tuple, Optional[float]] = {}  # (task, lock, instance) -> contended ts
        self._last_cpu: dict[tuple, int] = {}  # (lock, instance) -> cpu of the last acquisition

    def _class(self, name: str) -> ClassStat:
        stat = self.classes.get(name)
        if stat is None:
            stat = self.classes[name] = ClassStat(name)
        return stat

    def feed(self, ev: Event) -> None:
        self.events += 1
        if ev.ts is not None:
            self.timed += 1
        op = ev.op
        if op == ACQUIRE:
            self._acquire(ev)
        elif op == RELEASE:
            self._release(ev)
        elif op == CONTENDED:
            stat = self._class(class_name(ev.lock, ev.subclass))
            stat.contentions += 1
            if ev.at:
                stat.contention_sites[ev.at] += 1
            if self._bounced(ev, remember=False):
                stat.con_bounces += 1
            self._waits[(ev.task, ev.lock, ev.instance)] = ev.ts
        elif op == ACQUIRED:
            started = self._waits.pop((ev.task, ev.lock, ev.instance), None)
            if started is not None and ev.ts is not None:
                self._class(class_name(ev.lock, ev.subclass)).wait.add(max(0.0, ev.ts - started))

    def _acquire(self, ev: Event) -> None:
        name = class_name(ev.lock, ev.subclass)
        stat = self._class(name)
        stat.acquisitions += 1
        if self._bounced(ev, remember=True):
            stat.acq_bounces += 1
        self._holds.setdefault((ev.task, ev.lock, ev.instance), []).append((name, ev.ts))

    def _release(self, ev: Event) -> None:
        key = (ev.task, ev.lock, ev.instance)
        stack = self._holds.get(key)
        if not stack:
            return
        name, started = stack.pop()
        if not stack:
            del self._holds[key]
        if started is not None and ev.ts is not None:
            self.classes[name].hold.add(max(0.0, ev.ts - started))

    def _bounced(self, ev: Event, remember: bool) -> bool:
        """The lock object was last acquired on another CPU."""
        if ev.cpu is None:
            return False
        key = (ev.lock, ev.instance)
        last = self._last_cpu.get(key)
        if remember:
            if last is None and len(self._last_cpu) >= MAX_TRACKED_OBJECTS:
                del self._last_cpu[next(iter(self._last_cpu))]
            self._last_cpu[key] = ev.cpu
        return last is not None and last != ev.cpu

    def rows(self) -> list[ClassStat]:
        """Most contended first, then most acquired (lock_stat sorts by contentions)."""
        return sorted(self.classes.values(), key=lambda s: (-s.contentions, -s.acquisitions, s.name))


def collect(events: Iterable[Event]) -> LockStats:
    stats = LockStats()
    for ev in events:
        stats.feed(ev)
    return stats


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 2)


_COLUMNS = ("con-bounces", "contentions", "waittime-min", "waittime-max", "waittime-total", "waittime-avg",
            "acq-bounces", "acquisitions", "holdtime-min", "holdtime-max", "holdtime-total", "holdtime-avg")


def render_text(stats: LockStats, out: TextIO, top: Optional[int] = None) -> None:
    """The /proc/lock_stat layout: a header, then one block per class with its contention sites."""
    width = 40 + 15 * len(_COLUMNS)
    out.write("lock_stat version 0.4 (lockcheck)\n")
    out.write("-" * width + "\n")
    out.write(f"{'class name':>40}" + "".join(f"{c:>15}" for c in _COLUMNS) + "\n")
    out.write("-" * width + "\n")
    rows = stats.rows()
    for stat in rows[:top] if top else rows:
        values = (stat.con_bounces, stat.contentions, _us(stat.wait.min), _us(stat.wait.max),
                  _us(stat.wait.total), _us(stat.wait.avg), stat.acq_bounces, stat.acquisitions,
                  _us(stat.hold.min), _us(stat.hold.max), _us(stat.hold.total), _us(stat.hold.avg))
        cells = "".join(f"{v:>15}" if isinstance(v, int) else f"{v:>15.2f}" for v in values)
        out.write(f"\n{stat.name + ':':>40}{cells}\n")
        if stat.contention_sites:
            rule = " " * (40 - len(stat.name)) + "-" * len(stat.name)
            out.write(rule + "\n")
            for site, count in stat.contention_sites.most_common(4):
                out.write(f"{stat.name:>40}{count:>15}          {site}\n")
        out.write("\n" + "." * width + "\n")
    if stats.events and not stats.timed:
        out.write("\nlockcheck: the trace has no ts= timestamps: wait and hold times are 0\n")


def render_json(stats: LockStats, out: TextIO) -> None:
    doc = {"version": 1, "events": stats.events, "classes": [row.to_json() for row in stats.rows()]}
    json.dump(doc, out, indent=2)
    out.write("\n")
