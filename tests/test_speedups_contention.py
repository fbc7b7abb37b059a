"""The compiled core and the pure loop apply `contended`/`acquired` of a held lock themselves, and
nothing else of them.

Why: they were always handed to the Python checker, which made HeldLocks of the task's whole
stack (`fast_lt.materialize`) for a line that changes nothing but the task's cpu: two thirds of
the lines the core passed on in a 1M-event trace.  `MoreOps.lock_contended` reports a lock not
held (bad contention) or an empty stack (`DEBUG_LOCKS_WARN_ON(!depth)`): those lines must still
reach the checker, and every run must end as the plain pipeline's.
"""

from __future__ import annotations

import pytest

from lockcheck.engine import fast_lt as hotpath
from lockcheck.lockdep.checker import Checker
from tests.test_hotpath import fast, plain

pytestmark = pytest.mark.skipif(not hotpath.compiled(), reason="the compiled core is not built here")

WARM = ["T1 acquire A@1", "T1 acquire B", "T1 release B", "T1 release A@1"] * 2
LINES = WARM + [
    "T1 acquire A@1", "T1 contended A@1 at=f+0x1/0x2 ts=3.5 cpu=2", "T1 acquired A@1 ts=3.6 cpu=3",
    "T1 acquire B", "T1 contended A@1", "T1 acquired B",  # below the top, in the same irq context
    "T1 contended C@1",  # not held: bad contention
    "T1 release B", "T1 release A@1",
    "T1 acquired A@1",  # nothing held: DEBUG_LOCKS_WARN_ON(!depth)
]


def _passed_on(lines: list[str], capture: bool = False) -> list[str]:
    """The (op, lock) of each event the fast path hands to the checker, with the compiled core."""
    checker = Checker()
    checker.open_trace(capture)
    passed = []
    for ev in hotpath.lt_events(checker, lines, "gen.lt"):
        if ev.op in ("contended", "acquired"):
            passed.append((ev.op, ev.lock, ev.cpu))
        checker.feed(ev)
    return passed


@pytest.mark.parametrize("pure", ["0", "1"])
def test_held_contention_is_applied_fast_and_the_rest_passed_on(pure, monkeypatch) -> None:
    monkeypatch.setenv("LOCKCHECK_PURE", pure)
    assert _passed_on(LINES) == [("contended", "C", None), ("acquired", "A", None)]
    # a capture's task may hold a lock taken before it began: its contention is the checker's
    assert len(_passed_on(LINES, capture=True)) == sum(line.split()[1] in ("contended", "acquired") for line in LINES)


@pytest.mark.parametrize("capture", [False, True])
def test_contention_checks_as_the_plain_pipeline(capture) -> None:
    expected = plain(LINES, capture)
    assert capture or "bad-contention" in [f.kind for f in expected["findings"]]
    for core in ("pure", "compiled", "blocks"):
        assert fast(LINES, capture, core) == expected, core
