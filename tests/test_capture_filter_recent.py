"""The compiled capture filter's deferred moves of a task's recent locks (lockcheck/engine/_capturecore_recent.h)
against the Python loop.

The filter keeps the last few `(lock, instance)` pairs each task's `RecentLocks` moved to its end in a
ring and makes the moves, in the order of their last moves, when the ring is full, before a new lock
is added, and before Python code runs.  The order (and `last`) must be what the moves one by one
make: more distinct locks than a ring holds, in a changing order, new addresses (added, and at a
small limit forgetting the oldest), lines handed to Python between, two tasks.
"""

from __future__ import annotations

import random
from unittest import mock

import pytest

from lockcheck.engine import capture_filter
from lockcheck.lockdep.tasks import RecentLocks
from test_capturepath import _filter, _filters_made, _outcome

pytestmark = pytest.mark.skipif(not capture_filter.compiled(), reason="the compiled filter is not built")

NAMES = ["&p->pi_lock", "&rq->__lock", "&mm->mmap_lock", "&x->a", "&x->b", "&x->c"]


def _churn(rounds: int = 12, locks: int = 13, seed: int = 5) -> list[str]:
    """Two tasks taking `locks` pairs (one at a time) in a new order each round, a new address now and then,
    and a comment line (handed to the Python loop) every few rounds."""
    rng = random.Random(seed)
    lines, stamp = [], 0
    pairs = [(f"00000000{i + 16:x}", NAMES[i % len(NAMES)]) for i in range(locks)]
    for r in range(rounds):
        for task in ("bash-12", "init-1"):
            order = pairs[:]
            rng.shuffle(order)
            order += rng.sample(pairs, 4)  # (some taken twice in a round)
            if r % 3 == 2:
                order.insert(rng.randrange(len(order)), (f"000000{r:02d}ff", NAMES[r % len(NAMES)]))
            for address, name in order:
                for event in ("lock_acquire", "lock_release"):
                    stamp += 1
                    lines.append(f"{task:>16} [000] ...1.  5.{stamp:06d}: {event}: {address} {name}")
            if r % 4 == 3:
                lines.append("# a comment line")
    return lines


@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("limit", [RecentLocks.LIMIT, 9], ids=["limit", "small-limit"])
def test_deferred_moves_leave_the_order_the_python_loop_leaves(with_state, limit) -> None:
    lines = _churn()
    with mock.patch.object(RecentLocks.__init__, "__defaults__", (limit,)):
        with _filter(False):
            loop = _outcome(lines, True, with_state)
        made: list = []
        with _filters_made(made):
            assert _outcome(lines, True, with_state) == loop == _outcome(lines, False, with_state)
    assert made and made[0].counts()["taken"] > len(lines) // 2  # (the filter took the pairs itself)
    orders = [recent for recent in (task[3] for task in loop["tasks"].values()) if recent]
    assert orders and all(len(order) <= limit for order in orders)
    assert limit == RecentLocks.LIMIT or any(len(order) == limit for order in orders)
