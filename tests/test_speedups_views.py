"""The compiled core sees each view the Python side sets or drops through `set_view` / `drop_view`.

Why: the core keeps the view each task key found (`find_view`, `_lt_views.h`) while the views
dict is as it last saw it.  The Python loop used to change the dict directly after each event it
applied, which made the core look every task's view up again (~45,000 dict look-ups a million
lines of the benchmark trace); it now tells the core which task's view changed, and the core
updates that one slot.  A slot left as it was would be a stale view: a task whose irq state the
checker changed applied with its old one (a usage bit never marked: a finding missed), a task
dropped from the fast path (a pin) applied in C all the same, a new task never applied in C.
"""

from __future__ import annotations

import pytest

from lockcheck.engine import fast_lt as hotpath
from tests.test_hotpath import CORES, fast, plain
from tests.test_speedups_overlay import _passed_on

pytestmark = pytest.mark.skipif(not hotpath.compiled(), reason="the compiled core is not built here")

#: T1's `irqs-on` while it holds A is the checker's (it marks A); T1's view then says irqs on, so
#: its next `acquire C` (a cached chain) needs HARDIRQ-ON on C and is the checker's too: with the
#: old view (irqs off) the core would apply it, C would never be marked, and T2's use of C in a
#: hardirq (line 13) would find no inconsistent lock state
IRQ_STATE = ["T2 irqs-on", "T1 irqs-off", "T1 acquire C", "T1 release C", "T1 acquire C", "T1 release C",
             "T1 acquire A", "T1 irqs-on", "T1 release A", "T1 acquire C", "T1 release C",
             "T2 hardirq-enter", "T2 acquire C", "T2 release C", "T2 hardirq-exit"]

#: while T1 holds A pinned its view is dropped (a pinned task's lines are all the checker's):
#: T1's lines 7, 9 and 11 go to the checker, T2's 8 and 10 (the same class, chain) stay the core's
PINNED = ["T1 acquire A", "T1 acquire B", "T1 release B", "T2 acquire B", "T2 release B", "T1 pin A",
          "T1 acquire B", "T2 acquire B", "T1 release B", "T2 release B", "T1 unpin A", "T1 release A"]


#: task keys of 8 bytes and more (task_hash reads their first and last 8 bytes), alike but for one
LONG = {"T1": "kworker/u8:7/40454", "T2": "kworker/u8:7/40455"}


def _named(lines: list[str], names: dict) -> list[str]:
    return [" ".join([names.get(word, word) for word in line.split(" ")]) for line in lines]


@pytest.mark.parametrize("names", [{}, LONG], ids=["short", "long"])
def test_a_view_set_by_the_python_side_is_the_one_the_core_reads(names, monkeypatch) -> None:
    lines = _named(IRQ_STATE, names)
    # 1, 2: each task's first line; 3, 7: new classes; 8: irqs-on marking A; 10: C's first
    # acquisition with irqs on (marks C); 12, 13, 15: the hardirq; the rest the core's (4-6, 9, 11,
    # 14: a stale view of "none" would pass them on too)
    assert _passed_on(lines, True, monkeypatch)[0] == [1, 2, 3, 7, 8, 10, 12, 13, 15]
    expected = plain(lines)
    assert [finding.kind for finding in expected["findings"]] == ["inconsistent-lock-state"]
    for core in CORES:
        assert fast(lines, False, core) == expected, core


@pytest.mark.parametrize("names", [{}, LONG], ids=["short", "long"])
def test_a_view_dropped_by_the_python_side_is_not_read_again(names, monkeypatch) -> None:
    lines = _named(PINNED, names)
    passed = _passed_on(lines, True, monkeypatch)[0]
    assert {7, 9, 11} <= set(passed)  # T1's lines after the pin: the checker's
    assert 8 not in passed and 10 not in passed  # T2's: still the core's
    expected = plain(lines)
    for core in CORES:
        assert fast(lines, False, core) == expected, core
