"""The perf script reader: default layout, -F field lists, errors, the sample."""

from __future__ import annotations

from pathlib import Path

import pytest

from lockcheck.errors import TraceError
from lockcheck.events import ACQUIRE, READ, RELEASE, RREAD, WRITE
from lockcheck.readers import ftrace, perf

REPO = Path(__file__).resolve().parents[1]


def read(lines, **kwargs):
    return list(perf.parse(lines, "t.perf", **kwargs))


def test_default_layout():
    (event,) = read(["            bash    1234 [002]   123.456789: lock:lock_acquire: 0xffff88810a2b3c40 &mm->mmap_lock"])
    assert (event.task, event.op, event.lock, event.instance, event.cpu, event.ts, event.comm, event.line) == (
        "1234", ACQUIRE, "&mm->mmap_lock", "0xffff88810a2b3c40", 2, 123.456789, "bash/1234", 1)


@pytest.mark.parametrize(("line", "task", "comm", "cpu", "ts"), [
    (" Web Content  1234/1235 [002]   1.5: lock:lock_release: 0xff A", "1235", "Web Content/1235", 2, 1.5),
    ("bash lock:lock_release: 0xff A", "bash", "bash", None, None),
    ("   1234 lock:lock_release: 0xff A", "1234", "1234", None, None),
    ("kworker/u16:3-ev  1234 [002] 1.5: lock:lock_release:   0xff A", "1234", "kworker/u16:3-ev/1234", 2, 1.5),
    ("         swapper     0 [001]    10.0: lock:lock_release: 0xff A", "0/1", "swapper/1/0", 1, 10.0),
])
def test_field_lists(line, task, comm, cpu, ts):
    (event,) = read([line])
    assert (event.task, event.op, event.lock, event.comm, event.cpu, event.ts) == (task, RELEASE, "A", comm, cpu, ts)


def test_flags_policy_and_other_events():
    stats = ftrace.ReaderStats()
    events = read([
        "  cat  7 [000] 1.0: lock:lock_acquire: 0x01 try read &mm->mmap_lock",
        "  cat  7 [000] 1.1: lock:lock_acquire: 0x02 read rcu_read_lock",
        "  cat  7 [000] 1.2: sched:sched_switch: prev_comm=cat",
        "  cat  7 [000] 1.3: lock:lock_acquire: 0x03 &a",
    ], stats=stats)
    assert [(e.lock, e.trylock, e.mode) for e in events] == [
        ("&mm->mmap_lock", True, READ), ("rcu_read_lock", False, RREAD), ("&a", False, WRITE)]
    assert stats.skipped == {"sched:sched_switch": 1}
    assert stats.events == 3


@pytest.mark.parametrize(("line", "col"), [
    ("  cat  7 [000] 1.0: lock:lock_acquire: zz A", 40),
    ("  cat  7 [000] 1.0: lock:lock_acquire:", 39),
    ("no event here", 1),
])
def test_errors(line, col):
    with pytest.raises(TraceError) as info:
        read([line])
    assert (info.value.line, info.value.col) == (1, col)
    assert info.value.format().startswith(f"t.perf:1:{col}: ")


def test_sniff():
    assert perf.sniff(["", "            bash    1234 [002]   123.456789: lock:lock_acquire: 0xff A"])
    assert not perf.sniff(["            bash-1234    [002] .....   123.456789: lock_acquire: 000000005b4e2a1c A"])
    assert not perf.sniff(["T1 acquire A"])
    assert not perf.sniff(['{"task": "T1", "op": "acquire", "lock": "A"}'])


def test_sample_matches_the_ftrace_sample():
    """The perf and ftrace samples carry the same lock events (perf has no irq context)."""
    perf_events = read((REPO / "traces" / "sample.perf").read_text().splitlines())
    ftrace_events = list(ftrace.parse((REPO / "traces" / "sample.ftrace").read_text().splitlines()))

    def key(e):
        return (e.task, e.op, e.lock, e.instance, e.mode, e.trylock, e.ts)

    lock_ops = ("acquire", "release", "contended", "acquired")
    assert [key(e) for e in perf_events] == [key(e) for e in ftrace_events
                                             if e.op in lock_ops and not (e.task == "102" and "hrtimer" in e.lock)
                                             and "seqcount" not in e.lock]
