"""The wait-for graph on its own: `lockcheck.python.waitfor.find_cycle` over hand-made waits."""

from __future__ import annotations

from typing import Iterator, Optional

import pytest

from lockcheck.python import waitfor


class FakeLock:
    """What `waitfor.holder` reads of a tracked lock: its holder's task key."""

    def __init__(self, holder: Optional[str]) -> None:
        self._holder = holder
        self._cls, self._inst = "L", "0x1"


@pytest.fixture
def waits() -> Iterator[dict]:
    saved = dict(waitfor.waits)
    waitfor.waits.clear()
    yield waitfor.waits
    waitfor.waits.clear()
    waitfor.waits.update(saved)


def wait(waits: dict, task: str, lock: FakeLock) -> waitfor.Wait:
    waits[task] = waitfor.Wait(task, task, lock, "t.py:1")
    return waits[task]


def test_three_contexts_close_a_cycle(waits: dict) -> None:
    a, b, c = FakeLock("T1"), FakeLock("T2"), FakeLock("T3")
    w2 = wait(waits, "T2", c)  # T2 waits for c (T3's)
    w3 = wait(waits, "T3", a)  # T3 waits for a (T1's)
    w1 = wait(waits, "T1", b)  # T1 waits for b (T2's): the cycle closes
    assert waitfor.find_cycle("T1", b) == [w1, w2, w3]


def test_a_holder_that_runs_is_no_cycle(waits: dict) -> None:
    b = FakeLock("T2")
    wait(waits, "T1", b)  # T2 holds b but waits for nothing
    assert waitfor.find_cycle("T1", b) is None
    assert waitfor.find_cycle("T1", FakeLock(None)) is None  # a free lock


def test_a_cycle_of_others_is_not_ours(waits: dict) -> None:
    """T1 waits behind a cycle of T2 and T3: it is stuck, but the cycle is theirs to report."""
    b, c = FakeLock("T2"), FakeLock("T3")
    wait(waits, "T2", c)
    wait(waits, "T3", b)
    wait(waits, "T1", b)
    assert waitfor.find_cycle("T1", b) is None
    assert waitfor.find_cycle("T2", c) is not None


def test_a_stale_chain_is_not_still_standing(waits: dict) -> None:
    a, b = FakeLock("T1"), FakeLock("T2")
    wait(waits, "T2", a)
    wait(waits, "T1", b)
    chain = waitfor.find_cycle("T1", b)
    assert chain is not None and waitfor._still(chain)
    a._holder = None  # T1 let a go (another thread released it): T2 may go on
    assert not waitfor._still(chain)
