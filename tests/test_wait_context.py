"""The wait-context check (`check_wait_context()`, CONFIG_PROVE_RAW_LOCK_NESTING) on the rows of the
kernel's own selftests (lib/locking-selftest.c, `wait_context_tests()`), through every path.

The kernel's table (o: inner allowed in outer, x: reported), PREEMPT_RT considered:

    outer \\ inner  | RCU | RAW_SPIN | SPIN | MUTEX
    HARDIRQ        |  o  |    o     |  o   |  x      (the selftest's HARDIRQ_ENTER is threaded)
    NOTTHREADED_IRQ|  o  |    o     |  x   |  x
    SOFTIRQ        |  o  |    o     |  o   |  x
    RCU            |  o  |    o     |  o   |  x
    RCU_BH         |  o  |    o     |  o   |  x
    RCU_SCHED      |  o  |    o     |  x   |  x
    RAW_SPIN       |  o  |    o     |  x   |  x
    SPIN           |  o  |    o     |  o   |  x
    MUTEX          |  o  |    o     |  o   |  o
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from lockcheck.commands.cli import main
from lockcheck.lockdep.checker import check_events
from lockcheck.readers import jsonl
from lockcheck.readers.lt import parse

# the maps as the kernel initialises them: rcu_lock_map and rcu_bh_lock_map {FREE:CONFIG},
# rcu_sched_lock_map {FREE:SPIN}, taken with check=0 and read=2 (rcu_lock_acquire)
_INNER = {
    "rcu": ["acquire rcu_read_lock_B rread nocheck wait=free:config", "release rcu_read_lock_B"],
    "raw": ["acquire raw_lock_B wait=spin:spin", "release raw_lock_B"],
    "spin": ["acquire lock_B wait=config:config", "release lock_B"],
    "mutex": ["acquire mutex_B wait=sleep:sleep", "release mutex_B"],
}
_OUTER = {
    "HARDIRQ": (["irqs-off", "hardirq-enter threaded"], ["hardirq-exit", "irqs-on"]),
    "NOTTHREADED_HARDIRQ": (["irqs-off", "hardirq-enter"], ["hardirq-exit", "irqs-on"]),
    "SOFTIRQ": (["softirq-enter"], ["softirq-exit"]),
    "RCU": (["acquire rcu_read_lock rread nocheck wait=1:3"], ["release rcu_read_lock"]),
    "RCU_BH": (["softirqs-off", "acquire rcu_read_lock_bh rread nocheck wait=1:3"],
               ["release rcu_read_lock_bh", "softirqs-on"]),
    "RCU_SCHED": (["acquire rcu_read_lock_sched rread nocheck wait=1:2"], ["release rcu_read_lock_sched"]),
    "raw_spinlock": (["acquire raw_lock_A wait=2:2"], ["release raw_lock_A"]),
    "spinlock": (["acquire lock_A wait=3:3"], ["release lock_A"]),
    "mutex": (["acquire mutex_A wait=4:4"], ["release mutex_A"]),
}
#: the kernel's expected result per outer, in the order rcu, raw, spin, mutex (True: reported)
_EXPECTED = {
    "HARDIRQ": (False, False, False, True),
    "NOTTHREADED_HARDIRQ": (False, False, True, True),
    "SOFTIRQ": (False, False, False, True),
    "RCU": (False, False, False, True),
    "RCU_BH": (False, False, False, True),
    "RCU_SCHED": (False, False, True, True),
    "raw_spinlock": (False, False, True, True),
    "spinlock": (False, False, False, True),
    "mutex": (False, False, False, False),
}


def row_trace(outer: str, inner: str) -> str:
    """`inner##_in_##outer`, after a warm-up that caches both chains in process context (so an
    acquisition in the test is a chain-cache hit for a path that ignores wait types), twice."""
    enter, leave = _OUTER[outer]
    body = [*enter, *_INNER[inner], *leave]
    # (with irqs off: the same locks taken with irqs on and then in a hardirq are another report)
    warm = ["irqs-off", *(line for line in body if line.startswith(("acquire", "release"))), "irqs-on"]
    lines = [f"T0 {line}" for line in warm] + [f"T1 {line}" for line in body + body]
    return "#lockcheck-trace v1\n" + "\n".join(lines) + "\n"


def every_path(tmp_path: Path, text: str, monkeypatch: pytest.MonkeyPatch) -> dict:
    """Finding kinds of `text` from the checker alone and from the command, for `.lt` (pure and
    compiled) and JSON Lines, in one process and with `--jobs 2`."""
    events = list(parse(text.splitlines()))
    found = {"checker": sorted(f.kind for f in check_events(events)[0])}
    (tmp_path / "t.lt").write_text(text)
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(jsonl.to_json(e)) + "\n" for e in events))
    for name in ("t.lt", "t.jsonl"):
        for jobs in ([], ["--jobs", "2"]):
            for pure in ("1", "0"):
                monkeypatch.setenv("LOCKCHECK_PURE", pure)
                out, err = io.StringIO(), io.StringIO()
                status = main(["check", "--format", "json", *jobs, str(tmp_path / name)], stdout=out, stderr=err)
                assert status in (0, 1), err.getvalue()
                found[f"{name}{jobs}{pure}"] = sorted(f["kind"] for f in json.loads(out.getvalue())["findings"])
    return found


def agreed(found: dict) -> list[str]:
    kinds = {tuple(v) for v in found.values()}
    assert len(kinds) == 1, f"the paths disagree: {found}"
    return list(kinds.pop())


@pytest.mark.parametrize("outer", list(_OUTER))
def test_wait_context_selftest_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, outer: str) -> None:
    for inner, reported in zip(_INNER, _EXPECTED[outer]):
        kinds = agreed(every_path(tmp_path, row_trace(outer, inner), monkeypatch))
        assert kinds == (["invalid-wait-context"] if reported else []), (outer, inner)


def test_without_wait_types_nothing_is_checked() -> None:
    text = row_trace("raw_spinlock", "mutex")
    plain = "\n".join(line.split(" wait=")[0] for line in text.splitlines())
    assert check_events(parse(plain.splitlines()))[0] == []


def test_trylocks_are_not_checked() -> None:
    text = "T1 acquire raw wait=2:2\nT1 acquire m wait=4:4 try\n"
    assert check_events(parse(text.splitlines()))[0] == []


def test_a_class_takes_its_wait_types_from_the_first_acquisition_that_carries_them() -> None:
    # the class is taken without wait types first (its chain cached), then gains them: later
    # acquisitions without `wait=` are checked
    text = ("T1 acquire m\nT1 release m\nT2 acquire m wait=4:4\nT2 release m\n"
            "T3 acquire raw wait=2:2\nT3 acquire m\nT3 release m\nT3 release raw\n"
            "T4 acquire m wait=2:2\nT4 release m\n")
    found, checker = check_events(parse(text.splitlines()))
    assert [f.kind for f in found] == ["invalid-wait-context"]
    assert found[0].details["context"] == "5:5"
    assert found[0].next.waits == "4:4" and found[0].held_locks[0].waits == "2:2"
    assert any("differs from the class's first" in note for note in checker.stats.notes)


def test_the_report_reads_as_the_kernels(tmp_path: Path) -> None:
    path = tmp_path / "t.lt"
    path.write_text("T1 acquire raw wait=2:2\nT1 hardirq-enter\nT1 acquire &port->lock wait=3:3 at=uart_write+0x44/0x1c0\n")
    out = io.StringIO()
    assert main(["check", str(path)], stdout=out, stderr=io.StringIO()) == 1
    text = out.getvalue()
    order = ["[ BUG: Invalid wait context ]", "T1 is trying to lock:", "(&port->lock){", "}-{3:3}, at: uart_write",
             "other info that might help us debug this:", "context-{2:2}", "1 lock held by T1:", "(raw){", "}-{2:2}"]
    at = 0
    for fragment in order:
        at = text.index(fragment, at)


def test_an_override_map_resets_the_context() -> None:
    # DEFINE_WAIT_OVERRIDE_MAP(name, LD_WAIT_SLEEP), taken with lock_map_acquire_try() under a raw
    # spinlock: a mutex inside is allowed
    text = "T1 acquire raw wait=2:2\nT1 acquire ovr wait=4 type=override try\nT1 acquire m wait=4:4\n"
    assert check_events(parse(text.splitlines()))[0] == []
