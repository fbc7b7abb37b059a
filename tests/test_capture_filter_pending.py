"""The compiled capture filter's pending acquisition (lockcheck/engine/_capturecore_pending.h) against the
Python loop and the plain path.

The filter makes an acquisition's Python objects (the HeldLock, its event, the annotator's entry, the
reader's entry) only when something may look at them, and never when the next lock line releases it.
Each capture here leaves an acquisition pending and then brings what must see it made (or must not
take it as released): an acquisition, a release of another lock or by another task, an irq-context
change, a name read back from the reader's entries, a line handed to Python (lost events: every
held stack forgotten), the end of the file.
"""

from __future__ import annotations

import pytest

from lockcheck.engine import capture_filter
from test_capturepath import _filter, _filters_made, _outcome

pytestmark = pytest.mark.skipif(not capture_filter.compiled(), reason="the compiled filter is not built")

BASH = "           bash-12 [000]"
INIT = "           init-1  [001]"
PI = "00000000a1 &p->pi_lock"
RQ = "00000000b2 &rq->__lock"
PAIR = [f"{BASH} ...1.  5.{i}: lock_{op}: {PI}" for i, op in ((1, "acquire"), (2, "acquired"), (3, "release"))]
OTHER = "00000000e5 &x->other"  # (a class the kernel's state does not have: the plain way)


def _case(*tail: str) -> list[str]:
    """Pairs the filter takes (the chains cached the second time; a second task's too), then the same
    pair twice with TAIL between its acquisition and its release (a line numbered by its place: a report
    cites it)."""
    lines = PAIR * 3 + [f"{BASH} d..2.  5.5: lock_acquire: {RQ}", f"{BASH} d..2.  5.6: lock_release: {RQ}"] * 2
    lines += [f"{INIT} ...1.  5.7: lock_acquire: {PI}", f"{INIT} ...1.  5.8: lock_release: {PI}"] * 2
    lines += [f"{BASH} ...1.  6.1: lock_acquire: {PI}", *tail, f"{BASH} ...1.  6.9: lock_release: {PI}"]
    return lines * 2


CASES = {
    "released-next": _case(),
    "across-contention": _case(f"{BASH} ...1.  6.2: lock_acquired: {PI}",
                               f"{BASH} ...1.  6.3: contention_begin: 00000000a1 (flags=SPIN)"),
    "name-read-back": _case(f"{BASH} ...1.  6.2: lock_acquired: 00000000a1 "),
    "nested": _case(f"{BASH} d..2.  6.2: lock_acquire: {RQ}", f"{BASH} d..2.  6.3: lock_release: {RQ}"),
    "other-lock-released": _case(f"{BASH} ...1.  6.2: lock_release: {RQ}"),
    "other-task": _case(f"{INIT} ...1.  6.2: lock_acquire: {PI}", f"{INIT} ...1.  6.3: lock_release: {PI}"),
    "released-by-other-task": _case(f"{INIT} ...1.  6.2: lock_release: {PI}"),
    "irq-context-change": _case(f"{BASH} d.h1.  6.2: lock_acquired: {PI}"),
    "handed-to-python": _case("# a comment line", f"{BASH} ...1.  6.3: lock_acquire: {OTHER}",
                              f"{BASH} ...1.  6.4: lock_release: {OTHER}"),
    "lost-events": _case("CPU:0 [LOST 12 EVENTS]"),
    "released-unnamed": _case(f"{BASH} ...1.  6.8: lock_release: 00000000a1 "),
    "end-of-file": _case()[:-1],
}


@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_pending_acquisition_is_made_before_anything_looks(name, with_state) -> None:
    lines = CASES[name]
    with _filter(False):
        loop = _outcome(lines, True, with_state)
    made: list = []
    with _filters_made(made):
        assert _outcome(lines, True, with_state) == loop == _outcome(lines, False, with_state)
    # (the filter took the pairs itself, most of them never made into objects)
    assert made and made[0].counts()["elided"] >= 4
