"""The compiled capture filter's nested pending acquisitions (lockcheck/engine/_capturecore_pending.h)
against the Python loop and the plain path.

An acquisition of the task whose acquisitions are pending goes on top of them, pending too: the
filter reads the task's held stack as its held lists and then the pending ones (the depth, the top's
irq context, the annotator's classes and contexts), and releases the innermost pending one without
ever making either.  Each capture here nests acquisitions and then brings what must see them made,
or read them as held: releases in and out of order, the same lock instance again, more than the
filter keeps pending, another task, an irq-context change, a name read back, the end of the file.
"""

from __future__ import annotations

import pytest

from lockcheck.engine import capture_filter
from test_capturepath import filter_counts

pytestmark = pytest.mark.skipif(not capture_filter.compiled(), reason="the compiled filter is not built")

BASH = "           bash-12 [000] ...1."
BASH_IRQ = "           bash-12 [000] d.h1."
INIT = "           init-1  [001] ...1."
#: a chain the kernel's state has (so the filter takes it under the state too)
CHAIN = ["cpu_add_remove_lock", "cpu_hotplug_lock", "rcu_state.exp_mutex", "rcu_state.exp_wake_mutex", "rcu_node_0"]


def _lock(i: int) -> str:
    return f"00000000c{i} {CHAIN[i]}" if i < len(CHAIN) else f"00000000d{i} &x->deep{i}"


def _rounds(body: list[str], tail: tuple = ()) -> list[str]:
    """BODY three times (the chains cached after the first: the filter takes the later rounds), then TAIL."""
    return [line.replace("@", f"{r}") for r in range(3) for line in body] + list(tail)


def acq(i: int, who: str = BASH) -> str:
    return f"{who}  5.@{i}1: lock_acquire: {_lock(i)}"


def rel(i: int, who: str = BASH, unnamed: bool = False) -> str:
    return f"{who}  5.@{i}2: lock_release: " + (_lock(i).split()[0] + " " if unnamed else _lock(i))


CASES = {
    "in-order": _rounds([acq(0), acq(1), acq(2), acq(3), acq(4), rel(4), rel(3), rel(2), rel(1), rel(0)]),
    "outer-released-first": _rounds([acq(0), acq(1), acq(2), rel(0), rel(2), rel(1)]),
    "middle-released": _rounds([acq(0), acq(1), acq(2), acq(3), rel(1), rel(3), rel(2), rel(0)]),
    # (the same instance again: a recursive locking the checker reports, the line numbers cited)
    "same-instance": _rounds([acq(0), acq(1), acq(1), rel(1), rel(1), rel(0)]),
    # (one instance under two names: the reader's entry for it renamed by the second, then read back)
    "same-instance-renamed": _rounds([acq(0), f"{BASH}  5.@3: lock_acquire: 00000000c0 {CHAIN[1]}",
                                      f"{BASH}  5.@4: lock_acquired: 00000000c0 ",
                                      f"{BASH}  5.@5: lock_release: 00000000c0 {CHAIN[1]}", rel(0, unnamed=True)]),
    # (deeper than the filter keeps pending: the classes not in the state, the filter's without it)
    "deeper-than-pending": _rounds([acq(i) for i in range(12)] + [rel(i) for i in reversed(range(12))]),
    "other-task-between": _rounds([acq(0), acq(1), acq(0, INIT), rel(0, INIT), acq(2), rel(2), rel(1), rel(0)]),
    "released-by-other-task": _rounds([acq(0), acq(1), rel(1, INIT), rel(1), rel(0)]),
    "irq-change-between": _rounds([acq(0), acq(1), acq(2, BASH_IRQ), rel(2, BASH_IRQ), rel(1), rel(0)]),
    "released-unnamed": _rounds([acq(0), acq(1), acq(2), rel(2, unnamed=True), rel(1, unnamed=True), rel(0)]),
    "contention-between": _rounds([acq(0), acq(1), f"{BASH}  5.@5: lock_acquired: {_lock(1)}",
                                   f"{BASH}  5.@6: lock_contended: {_lock(0).split()[0]} ", rel(1), rel(0)]),
    "held-at-end": _rounds([acq(0), acq(1), acq(2), rel(2), rel(1), rel(0)], tail=(acq(0), acq(1), acq(2))),
}


@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("name", sorted(CASES))
def test_nested_pending_acquisitions_check_as_the_plain_path(name, with_state) -> None:
    filter_counts(CASES[name], with_state)


@pytest.mark.parametrize("name, elided", [("in-order", 10), ("deeper-than-pending", 8)])
def test_nested_acquisitions_released_innermost_first_are_never_made(name, elided) -> None:
    _, counts = filter_counts(CASES[name], False)
    # (the later two rounds: every pair released innermost first while pending)
    assert counts["elided"] >= elided
