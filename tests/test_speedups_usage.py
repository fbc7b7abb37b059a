"""The compiled core reads a class's usage again once the checker has marked a new bit on it.

Why: the core keeps each class's `usage` with the version of its graph node's dict
(`node_usage` in `_speedups.c`), to skip the dict look-up on every acquisition.  A value kept
past a change would send every later acquisition needing the new bit to the checker (a
slower run, and a stale answer were usage ever to shrink): here an acquisition in a hardirq,
after the first one in a hardirq marked USED_IN_HARDIRQ, must be applied by the core.
"""

from __future__ import annotations

import pytest

from lockcheck.engine import fast_lt as hotpath
from tests.test_hotpath import CORES, fast, plain
from tests.test_speedups_overlay import _passed_on as overlay_passed_on

pytestmark = pytest.mark.skipif(not hotpath.compiled(), reason="the compiled core is not built here")

IN_IRQ = ["T1 hardirq-enter", "T1 acquire A", "T1 release A", "T1 hardirq-exit"]
LINES = ["T1 irqs-off", "T1 acquire A", "T1 release A", "T1 acquire A", "T1 release A"] + IN_IRQ * 3


def _passed_on(lines: list[str], monkeypatch) -> list[int]:
    """The numbers of the lines the compiled core (its overlay on) passes on to the Python loop."""
    return overlay_passed_on(lines, True, monkeypatch)[0]


def test_usage_marked_by_the_checker_is_seen_by_the_core(monkeypatch) -> None:
    # line 1: the task's first line; 2: a new class; 6, 7, 9: the first hardirq, 7 marking
    # USED_IN_HARDIRQ on a new chain; the acquisitions in the later hardirqs (lines 11, 15) are
    # cached chains marking nothing new: the core's
    assert _passed_on(LINES, monkeypatch) == [1, 2, 6, 7, 9]


def test_usage_runs_as_the_plain_pipeline() -> None:
    expected = plain(LINES)
    for core in CORES:
        assert fast(LINES, False, core) == expected, core
