"""The compiled capture filter's own memo tables (lockcheck/engine/_capcache.h) against the Python loop.

The filter remembers, in C, what it read of a line's pieces, of a task (its view, irq context, name)
and of a class (its node and usage, the annotator's rules), and forgets the tasks and classes when
Python code runs.  Those memos must never make it apply a line otherwise than the Python loop: not
when the loop clears its own caches and views (tiny limits here), not across lines the loop handles
between two the filter takes, not across many tasks and irq-context changes.
"""

from __future__ import annotations

import contextlib
import os
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lockcheck.engine import capture_filter, fast_capture as capturepath
from test_capturepath import LOCKS, _filter, _filters_made, _outcome, captures

pytestmark = pytest.mark.skipif(not capture_filter.compiled(), reason="the compiled filter is not built")

FLAGS = ["...1.", "d..2.", "d.h2.", "..s1.", "...2."]


def _many_tasks(rounds: int = 4, tasks: int = 9) -> list[str]:
    """Tasks taking two locks in turn, on two CPUs, their flags changing between lines, new lock
    addresses each round, and a comment line (which the filter hands to the Python loop) now and then."""
    lines = []
    stamp = 0
    for r in range(rounds):
        for pid in range(100, 100 + tasks):
            (outer, a), (inner, b) = LOCKS[pid % 3], LOCKS[3 + pid % 2]
            head = f"          t{pid}-{pid}   [00{pid % 2}]"
            flags = FLAGS[(pid + r) % len(FLAGS)], FLAGS[(pid + r + 1) % len(FLAGS)]
            inner_address = f"{b}{r}"  # (a body never seen whose shape is known)
            for flag, event, address, name in ((flags[0], "lock_acquire", a, outer),
                                               (flags[1], "lock_acquire", inner_address, inner),
                                               (flags[1], "lock_acquired", inner_address, inner),
                                               (flags[1], "lock_release", inner_address, inner),
                                               (flags[0], "lock_release", a, outer)):
                stamp += 1
                lines.append(f"{head} {flag}  5.{stamp:06d}: {event}: {address} {name}")
            if pid % 4 == r % 4:
                lines.append("# a comment line")
    return lines


def _tiny_limits():
    """The Python loop's caches and views limited to two entries (cleared on almost every line it reads)."""
    return mock.patch.multiple(capturepath, _VIEW_LIMIT=2, _CACHE_LIMIT=2, _HEAD_CACHE_LIMIT=2)


@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("tiny", [False, True], ids=["limits", "tiny-limits"])
def test_the_filter_with_its_memos_is_the_python_loop(with_state, tiny) -> None:
    lines = _many_tasks()
    with _tiny_limits() if tiny else contextlib.nullcontext():
        with _filter(False):
            loop = _outcome(lines, True, with_state)
        made: list = []
        with _filters_made(made):
            fast = _outcome(lines, True, with_state)
    assert fast == loop == _outcome(lines, False, with_state)
    # (the filter took most lines itself: its memos were used, not stepped around)
    assert made and made[0].counts()["taken"] > len(lines) // 2


@settings(max_examples=int(os.environ.get("LOCKCHECK_FILTER_EXAMPLES", "40")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(captures(), st.booleans())
def test_generated_captures_with_tiny_limits(lines, with_state) -> None:
    """Generated captures (test_capturepath's), the Python loop's caches and views cleared all the time."""
    with _tiny_limits():
        with _filter(False):
            loop = _outcome(lines, True, with_state)
        assert _outcome(lines, True, with_state) == loop == _outcome(lines, False, with_state)
