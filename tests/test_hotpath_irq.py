"""The fast path's irq-state changes, exits and out-of-order releases against the plain pipeline.

`lockcheck.engine.fast_lt` (and its compiled core) applies an `irqs-on`/`-off`,
`softirqs-on`/`-off` or a handler's enter/exit itself when it marks no
usage bit and notes nothing, and an `exit` of a task holding nothing;
the irq event's evidence is read back from its line only when a report
cites it (`tasks.irq_event`).  Everything a user or a later event can see
-- findings (the irq-event stamps and sites of an inconsistent-lock-state
report included), graph, statistics, each task's irq state -- must be what
the plain pipeline leaves, and the fast path must really have taken the
lines it can take.
"""

from __future__ import annotations

import os

import pytest

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from lockcheck.engine import fast_lt as hotpath
from lockcheck.lockdep.checker import Checker
from lockcheck.readers import lt
from lockcheck.lockdep.tasks import irq_event
from test_hotpath import CORES, _outcome, as_read
from test_jobs import _same

_IRQ_OPS = ("irqs-on", "irqs-off", "softirqs-on", "softirqs-off")
_HANDLER_OPS = ("hardirq-enter", "hardirq-exit", "softirq-enter", "softirq-exit")


def _irq_state(checker: Checker) -> dict:
    """Each task's irq state as a report or a later event sees it (deferred evidence read back)."""
    state = {}
    for key, task in checker.tasks.items():
        events = {op: irq_event(task, op) for op in task.irq_events if op != "stamp"}
        state[key] = (task.hardirqs_enabled, task.softirqs_enabled, task.hardirq_depth, task.softirq_depth,
                      task.usage_need, task.cpu, task.irq_events.get("stamp"), events)
    return state


def _run(lines: list[str], core: str) -> tuple[dict, list[tuple[str, int]]]:
    """A check of `lines` (`core`: "plain", or a fast-path core of `test_hotpath.CORES`): what it
    leaves, and the op and line number of each line that went to the full checker as an event."""
    checker = Checker()
    checker.open_trace(False)
    fed: list[tuple[str, int]] = []
    if core == "plain":
        events = lt.parse(lines, "gen.lt")
    else:
        with pytest.MonkeyPatch.context() as env:
            if core == "pure":
                env.setenv("LOCKCHECK_PURE", "1")
            events = list(_fed(checker, hotpath.lt_events(checker, as_read(lines) if core == "blocks" else lines,
                                                          "gen.lt"), fed))
    outcome = _outcome(checker, checker.run(events) if core == "plain" else iter(events))
    outcome["irq"] = _irq_state(checker)
    return outcome, fed


def _fed(checker: Checker, events, fed: list[tuple[str, int]]):
    """Feed each event as `Checker.run` does (before the next line is read), noting it."""
    for ev in events:
        fed.append((ev.op, ev.line))
        yield from checker.feed(ev)


def _same_everywhere(lines: list[str], numbered: bool = False) -> dict[str, list]:
    """Plain, pure fast path and compiled core leave the same; the ops each fast core fed (with
    their line numbers: `numbered`)."""
    expected, _ = _run(lines, "plain")
    fed = {}
    for core in CORES:
        outcome, fed[core] = _run(lines, core)
        assert outcome == expected, core
        if not numbered:
            fed[core] = [op for op, _ in fed[core]]
    return fed


def test_irq_changes_without_held_locks_are_all_fast() -> None:
    lines = ["T1 acquire A", "T1 release A"] + [f"T1 {op} at=f+0x{i:x}/0x80 ts={i}.5" for i, op in enumerate(
        ["irqs-off", "irqs-off", "softirqs-off", "irqs-on", "softirqs-on", "softirqs-on", "irqs-on"])] + [
        f"T1 {op} cpu={i}" for i, op in enumerate(_HANDLER_OPS)] + ["T1 exit"]
    # twice: the compiled core takes a text the Python loop has read once (hotpath's `tails`)
    for core, ops in _same_everywhere(lines * 2).items():
        assert ops == ["acquire"], core  # the first acquisition only: T1 and class A were new


def test_irqs_on_with_held_locks_is_fast_once_their_classes_have_the_bits() -> None:
    """The first `irqs-on` with A (write) and B (read) held marks ENABLED_HARDIRQ(_READ) and
    ENABLED_SOFTIRQ(_READ): the full checker; the same later marks nothing: the fast path.
    (A task's first line goes to the full checker: it makes the task.)"""
    once = ["T1 irqs-off", "T1 acquire A", "T1 acquire B read", "T1 irqs-on", "T1 release B", "T1 release A"]
    for core, ops in _same_everywhere(once * 3).items():
        assert ops == ["irqs-off", "acquire", "acquire", "irqs-on"], core
    # softirqs off: `irqs-on` marks ENABLED_HARDIRQ alone, so the second time it is fast ...
    soft_off = ["T2 softirqs-off", "T2 irqs-off", "T2 acquire C", "T2 irqs-on", "T2 release C", "T2 softirqs-on"]
    for core, ops in _same_everywhere(soft_off * 3).items():
        assert ops == ["softirqs-off", "acquire", "irqs-on"], core
    # ... and `softirqs-on` while C is held marks ENABLED_SOFTIRQ: the full checker, once
    held_soft = soft_off[:3] + ["T2 irqs-on", "T2 softirqs-on", "T2 release C"]
    for core, ops in _same_everywhere(held_soft * 3).items():
        assert ops == ["softirqs-off", "acquire", "irqs-on", "softirqs-on"], core


def test_a_report_cites_irq_events_taken_on_the_fast_path() -> None:
    """The inconsistent-lock-state report prints the task's last irq transitions (stamp, line,
    site): here all taken on the fast path, their evidence read back from their lines."""
    lines = [
        "T1 acquire B", "T1 release B",                          # T1 and B known
        "T2 acquire A at=proc+0x1/0x10", "T2 release A",         # A: ENABLED_HARDIRQ
        "T1 irqs-off at=irq_disable_site+0x2/0x20 ts=5.5",       # line 5, stamp 1 (fast)
        "T1 softirqs-off at=bh_disable_site+0x3/0x30",           # line 6, stamp 2 (fast)
        "T1 irqs-on at=irq_enable_site+0x4/0x40 cpu=1",          # line 7, stamp 3 (fast)
        "T1 irqs-off at=irq_disable_again+0x5/0x50",             # line 8, stamp 4 (fast)
        "T1 hardirq-enter",                                      # fast
        "T1 acquire A at=handler+0x6/0x60",                      # USED_IN_HARDIRQ on A: the report
    ]
    fed = _same_everywhere(lines)
    for core, ops in fed.items():
        assert ops == ["acquire", "acquire", "acquire"], (core, ops)
    checker = Checker()
    checker.open_trace(False)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("LOCKCHECK_PURE", "1")
        findings = list(checker.run(hotpath.lt_events(checker, lines, "gen.lt")))
    assert [f.kind for f in findings] == ["inconsistent-lock-state"]
    events = findings[0].details["irq_events"]
    assert events["stamp"] == 4
    assert events["hardirqs_disabled"][0] == 4 and events["hardirqs_disabled"][1].line == 8
    assert events["hardirqs_disabled"][1].at == "irq_disable_again+0x5/0x50"
    assert events["hardirqs_enabled"][0] == 3 and events["hardirqs_enabled"][1].at == "irq_enable_site+0x4/0x40"
    assert events["softirqs_disabled"][1].line == 6 and events["softirqs_disabled"][1].task == "T1"
    assert events["softirqs_enabled"] is None


def test_what_the_fast_path_leaves_to_the_full_checker() -> None:
    """an exit without its enter leaves notes; irqs-on inside a handler (lockdep's WARN) and an
    exit holding a lock are findings: all the full checker's, and alike."""
    lines = ["T1 acquire A", "T1 release A", "T1 irqs-off", "T1 hardirq-enter", "T1 irqs-on", "T1 hardirq-exit",
             "T1 hardirq-exit", "T1 softirq-exit", "T1 acquire A", "T1 exit", "T1 release A", "T1 exit"]
    for core, ops in _same_everywhere(lines).items():
        assert ops == ["acquire", "irqs-on", "hardirq-exit", "softirq-exit", "exit"], (core, ops)
    expected, _ = _run(lines, "plain")
    assert [f.kind for f in expected["findings"]] == ["lockdep-warning", "held-at-exit"]


def test_out_of_order_releases_are_the_plain_path() -> None:
    """A release below the top re-acquires the locks above it (`reacquire_held_locks`): on the
    fast path when every new chain is cached and marks nothing -- a trylock above, a chain that
    starts afresh in a handler above a process-context lock included; a nest lock above is the
    full checker's."""
    lines = ["T1 acquire A", "T1 acquire B read", "T1 acquire D try", "T1 acquire C", "T1 release A",
             "T1 release C", "T1 release D", "T1 release B",
             "T1 irqs-off", "T1 acquire A", "T1 acquire B", "T1 release A", "T1 irqs-on", "T1 release B",
             "T1 acquire A", "T1 softirqs-off", "T1 softirq-enter", "T1 acquire B", "T1 acquire C", "T1 release B",
             "T1 release C", "T1 softirq-exit", "T1 softirqs-on", "T1 release A",
             "T1 acquire N", "T1 acquire A", "T1 acquire B@1 nest=N", "T1 release A", "T1 release B@1",
             "T1 release N"]
    nest_release = len(lines) - 2  # `T1 release A` under `T1 acquire B@1 nest=N`
    for core, fed in _same_everywhere(lines * 3, numbered=True).items():
        # the third pass finds every chain and usage bit known: only the nest case is fed
        assert [(op, line) for op, line in fed if line > 2 * len(lines)] == [
            ("release", nest_release + 2 * len(lines))], core
        assert sum(op == "release" for op, line in fed if line <= len(lines)) >= 3, core  # the first: new chains


def test_the_split_reads_deferred_irq_events(tmp_path, monkeypatch) -> None:
    """`--jobs 2` sends the tasks' irq events to the merge: deferred ones are read back first."""
    lines = ["T1 acquire B", "T1 release B", "T2 acquire A at=proc+0x1/0x10", "T2 release A",
             "T1 irqs-off at=irq_disable_site+0x2/0x20", "T1 hardirq-enter", "T1 acquire A at=handler+0x6/0x60",
             "T1 release A", "T1 hardirq-exit", "T1 irqs-on", "T2 acquire A", "T2 release A"]
    path = tmp_path / "t.lt"
    path.write_text("\n".join(lines) + "\n")
    _same([str(path)], monkeypatch)


@st.composite
def irq_traces(draw) -> list[str]:
    """Few tasks and classes, many irq-state changes, handlers, exits and out-of-order releases."""
    held: dict = {}
    lines = []
    for _ in range(draw(st.integers(1, 40))):
        task = draw(st.sampled_from(["T1", "T2"]))
        stack = held.setdefault(task, [])
        kind = draw(st.sampled_from(["acquire"] * 4 + ["release"] * 4 + ["irq"] * 4 + ["handler", "exit"]))
        stamp = draw(st.sampled_from(["", " ts=1.5", " at=f+0x1/0x2", " at=g+0x3/0x4 ts=2 cpu=1", " cpu=0"]))
        if kind == "acquire":
            lock = draw(st.sampled_from(["A", "B", "C", "A@1", "A@2"]))
            mode = draw(st.sampled_from(["", "", " read", " rread", " try"]))
            stack.append(lock)
            lines.append(f"{task} acquire {lock}{mode}{stamp}")
        elif kind == "release" and stack:
            index = draw(st.integers(0, len(stack) - 1))  # any held lock: often not the innermost
            lines.append(f"{task} release {stack.pop(index)}{stamp.replace(' at=', ' at=r')}")
        elif kind == "irq":
            lines.append(f"{task} {draw(st.sampled_from(_IRQ_OPS))}{stamp}")
        elif kind == "handler":
            lines.append(f"{task} {draw(st.sampled_from(_HANDLER_OPS))}{stamp.split(' at=')[0]}")
        elif kind == "exit":
            lines.append(f"{task} exit")
            if draw(st.booleans()):
                stack.clear()
    return lines


@settings(max_examples=int(os.environ.get("LOCKCHECK_EXAMPLES", "120")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(irq_traces())
@example(["T1 acquire A read", "T1 irqs-on", "T1 softirqs-off", "T1 irqs-off", "T1 irqs-on", "T1 release A"])
def test_irq_traces_are_the_plain_path(lines) -> None:
    # three times through one checker: the later passes find chains and usage bits known
    _same_everywhere(lines * 3)
