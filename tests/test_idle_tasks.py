"""A capture's idle tasks forget their recent locks, and nothing a report cites goes with them.

A capture shows no task exit, so without this every task it ever showed
keeps up to 4096 recent locks (`RecentLocks`), and a long capture of
short-lived tasks grows with its length (`Checker.forget_recent_locks`).
These tests shrink the idle time to a few events and hold the findings to
those of a run that forgets nothing.
"""

from __future__ import annotations

import io
import json

import pytest

from lockcheck.lockdep import trace_runs
from lockcheck.lockdep import findings as F
from lockcheck.lockdep.checker import Checker
from lockcheck.commands.cli import main
from lockcheck.events import Event

from testdata import CAPTURES


def capture_checker(forget: bool, after: int = 8) -> Checker:
    """A checker reading a capture (mid-flight rules), forgetting after AFTER idle events or never."""
    checker = Checker()
    checker.open_trace(capture=True, forget_idle=forget)
    if forget:
        checker.forget_after = after
    return checker


def feed_all(checker: Checker, events: list[Event]) -> list:
    found = []
    for ev in events:
        found.extend(checker.feed(ev))
    return found


def acquire(task: str, lock: str, line: int, instance: str = "0x1") -> Event:
    return Event(task, "acquire", lock, instance, file="t.ftrace", line=line, comm=f"c/{task}")


def release(task: str, lock: str, line: int, instance: str = "0x1") -> Event:
    return Event(task, "release", lock, instance, file="t.ftrace", line=line, comm=f"c/{task}")


def filler(first_line: int, tasks: int) -> list[Event]:
    """Short-lived tasks that take and release one lock each: time passes, new tasks appear."""
    out = []
    for i in range(tasks):
        task = f"9{i:03d}"
        out += [acquire(task, "F", first_line + 2 * i, "0xf"), release(task, "F", first_line + 2 * i + 1, "0xf")]
    return out


def test_an_idle_task_forgets_its_recent_locks_and_a_busy_one_keeps_them():
    checker = capture_checker(True)
    feed_all(checker, [acquire("1", "A", 1), release("1", "A", 2), acquire("2", "B", 3, "0x2")])
    feed_all(checker, filler(10, 20))
    idle, busy = checker.tasks["1"], checker.tasks["2"]
    assert checker.stats.forgotten >= 1
    assert len(idle.acquired_ever) == 0  # holds nothing, took nothing lately
    assert ("B", "0x2") in busy.acquired_ever and [h.cls for h in busy.held] == ["B"]  # holds B: kept


def test_a_release_after_forgetting_is_counted_as_one_from_before_the_capture():
    """The one thing forgetting changes, on purpose: as for a lock `RecentLocks` no longer remembers."""
    events = [acquire("1", "A", 1), release("1", "A", 2)] + filler(10, 20) + [release("1", "A", 100)]
    kept = capture_checker(False)
    assert [f.kind for f in feed_all(kept, events)] == [F.UNLOCK_IMBALANCE]
    forgot = capture_checker(True)
    before = forgot.stats.unknown_releases
    assert feed_all(forgot, events) == []
    assert forgot.stats.unknown_releases == before + 1


def test_a_double_release_soon_after_is_still_reported():
    checker = capture_checker(True)
    events = [acquire("1", "A", 1), release("1", "A", 2), release("1", "A", 3)] + filler(10, 20)
    assert [f.kind for f in feed_all(checker, events)] == [F.UNLOCK_IMBALANCE]


def irq_story() -> list[Event]:
    """Task 1 uses L in a hardirq, goes idle while others run, then takes L with irqs on."""
    def ev(op: str, line: int, lock=None) -> Event:
        return Event("1", op, lock, "0x1" if lock else None, file="t.ftrace", line=line, comm="c/1", at=f"f{line}")

    first = [ev("irqs-off", 1), ev("hardirq-enter", 2), ev("acquire", 3, "L"), ev("release", 4, "L"),
             ev("hardirq-exit", 5), ev("irqs-on", 6), acquire("1", "M", 7, "0x7"), release("1", "M", 8, "0x7")]
    later = [acquire("2", "N", 200, "0x9"), acquire("1", "K", 201, "0x5"), acquire("1", "L", 202),
             acquire("1", "N", 203, "0x9")]
    return first + filler(20, 30) + later


def test_findings_after_forgetting_cite_the_same_task_state():
    """Irq-event stamps and sites, held locks, names: a report about a task that forgot reads the same."""
    kept = feed_all(capture_checker(False), irq_story())
    forgetting = capture_checker(True)
    forgot = feed_all(forgetting, irq_story())
    assert forgetting.stats.forgotten >= 1
    assert any(f.kind.startswith("inconsistent") or "irq" in f.kind for f in kept), [f.kind for f in kept]
    assert [f.to_json() for f in forgot] == [f.to_json() for f in kept]
    irq_events = [f.details.get("irq_events") for f in kept if f.details.get("irq_events")]
    # the stamp and sites of before the idle time, kept: irqs last enabled at line 6
    assert irq_events and irq_events[0]["stamp"] == 2 and irq_events[0]["hardirqs_enabled"][1].line == 6


def capture_json(boot: str, monkeypatch, idle: int) -> dict:
    monkeypatch.setattr(trace_runs, "IDLE_EVENTS", idle)
    out, err = io.StringIO(), io.StringIO()
    status = main(["check", "--format", "json", "--no-progress", "--no-config",
                   str(CAPTURES / boot / "trace.ftrace.xz")], stdout=out, stderr=err)
    assert status == 1, err.getvalue()
    return json.loads(out.getvalue())


@pytest.mark.parametrize("boot", ["clean"])
def test_a_real_capture_reports_the_same_when_tasks_forget_after_a_few_events(boot, monkeypatch):
    """Without the kernel's state the captures report findings: forgetting after 64 idle events
    (instead of a million) changes none of them, in any field."""
    forgetting = capture_json(boot, monkeypatch, 64)
    kept = capture_json(boot, monkeypatch, 1 << 40)
    assert forgetting["findings"] and forgetting["findings"] == kept["findings"]
    assert forgetting["stats"] == kept["stats"]
