"""The compiled capture filter's release of a lock below the top of the held stack
(lockcheck/engine/_capturecore_below.h) against the Python loop and the plain path.

`rcu_read_unlock` under a spinlock taken inside the read section, `d_lock` released before the
lock taken under it: lockdep takes every lock above the released one again (`reacquire_held_locks`).
The filter applies that when each re-acquisition lands on a cached chain and marks no usage bit (the
`.lt` core's rule, fast_held.release_out_of_order); every other such release -- a new chain, another
irq context or irq state above it, a lock not held -- is the Python loop's.
"""

from __future__ import annotations

import pytest

from lockcheck.engine import capture_filter
from test_capturepath import filter_counts

pytestmark = pytest.mark.skipif(not capture_filter.compiled(), reason="the compiled filter is not built")

T = "           bash-12 [000]"
PI = "00000000a1 &p->pi_lock"
RQ = "00000000b2 &rq->__lock"
RQ_ALONE = [f"{T} d..2.  4.1: lock_acquire: {RQ}", f"{T} d..2.  4.2: lock_release: {RQ}"]


def _rounds(*middle: str, warm: bool = True, released: str = PI) -> list[str]:
    """PI, then RQ under it, then MIDDLE, PI released below RQ's top, then RQ (three rounds: the chains
    cached by the first; WARM: RQ's chain alone cached first)."""
    one = [f"{T} ...1.  5.1: lock_acquire: {PI}", f"{T} d..2.  5.2: lock_acquire: {RQ}", *middle,
           f"{T} d..2.  5.3: lock_release: {released}", f"{T} d..2.  5.4: lock_release: {RQ}"]
    return (RQ_ALONE * 2 if warm else []) + one * 3


CASES = {
    "below": _rounds(),
    "below-unnamed": _rounds(released="00000000a1 "),
    "new-chain": _rounds(warm=False),  # (the first round's re-acquisition makes a chain: Python)
    # (RQ above taken with hardirqs off, PI released with them on: the re-acquisition's irq state differs)
    "other-irq-state": [line.replace("d..2.  5.3", "...2.  5.3") for line in _rounds()],
    # (two locks above it, the upper one unchecked)
    "two-above": _rounds(f"{T} d..2.  5.25: lock_acquire: 00000000c3 read rcu_read_lock"),
    "not-held": _rounds(released="00000000e9 &x->other"),
    # (released from a hardirq: find_held_lock does not cross into the task's own context)
    "from-hardirq": [line.replace("d..2.  5.3", "d.h2.  5.3") for line in _rounds()],
    # (RQ taken in a hardirq above PI: releasing PI there, find_held_lock stops at the context's edge)
    "across-contexts": [line.replace("d..2.  5.", "d.h2.  5.") for line in _rounds()],
}


def _run(lines: list[str], with_state: bool) -> dict:
    return filter_counts(lines, with_state)[1]


@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_release_below_the_top_checks_as_the_plain_path(name, with_state) -> None:
    _run(CASES[name], with_state)


#: lines the filter takes when every release below the top goes to Python (the warm-up, the second and
#: third rounds' acquisitions and innermost releases, those after a lock the filter does not know)
WITHOUT = {"below": 10, "below-unnamed": 10, "new-chain": 7, "two-above": 4,
           "other-irq-state": 10, "not-held": 6, "from-hardirq": 10, "across-contexts": 8}


@pytest.mark.parametrize("name", ["below", "below-unnamed", "new-chain", "two-above"])
def test_a_release_below_the_top_onto_cached_chains_is_taken(name) -> None:
    assert _run(CASES[name], True)["taken"] > WITHOUT[name]


@pytest.mark.parametrize("name", ["other-irq-state", "not-held", "from-hardirq", "across-contexts"])
def test_what_lockdep_reads_otherwise_goes_to_python(name) -> None:
    assert _run(CASES[name], True)["taken"] == WITHOUT[name]
