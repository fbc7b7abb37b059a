"""`set-class` / `set-subclass` (`__lock_set_class()`), `downgrade` (`__lock_downgrade()`), the asserts
and `task-exit`, as the kernel has them, on every path."""

from __future__ import annotations

from pathlib import Path

import pytest

from lockcheck.lockdep.checker import check_events
from lockcheck.readers.lt import parse
from test_wait_context import agreed, every_path

# the scheduler's double_lock_balance()/double_unlock_balance() (kernel/sched/sched.h): this_rq
# re-taken nested under busiest, made subclass 0 again by lock_set_subclass()
BALANCE = """T1 acquire &rq->__lock@cpu3
T1 release &rq->__lock@cpu3
T1 acquire &rq->__lock@cpu1
T1 acquire &rq->__lock@cpu3 subclass=1
T1 release &rq->__lock@cpu1
{annotation}T1 acquire &rq->__lock@cpu2 subclass=1
T1 release &rq->__lock@cpu2
T1 release &rq->__lock@cpu3
"""


def kinds(text: str) -> list[str]:
    return sorted(f.kind for f in check_events(parse(text.splitlines()))[0])


def test_set_subclass_keeps_double_unlock_balance_quiet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    annotated = BALANCE.format(annotation="T1 set-subclass &rq->__lock@cpu3 subclass=0\n")
    assert agreed(every_path(tmp_path, annotated * 2, monkeypatch)) == []
    # without the annotation, lockdep's recursive report
    assert agreed(every_path(tmp_path, BALANCE.format(annotation="") * 2, monkeypatch)) == ["recursive-locking"]


def test_set_class_renames_the_held_lock_and_revalidates_what_is_above() -> None:
    text = ("T1 acquire A@1\nT1 acquire B\nT1 set-class A@1 C\nT1 release B\nT1 release C@1\n"
            "T2 acquire B\nT2 acquire C\nT2 release C\nT2 release B\n")
    found, checker = check_events(parse(text.splitlines()))
    assert [f.kind for f in found] == ["circular-dependency"]  # C -> B (re-acquired) against B -> C
    assert "A" in checker.graph.nx and "B" in checker.graph.successors("C")


def test_set_class_of_a_lock_not_held_is_an_unlock_imbalance() -> None:
    assert kinds("T1 acquire A\nT1 set-subclass B subclass=1\n") == ["unlock-imbalance"]


def test_downgrade() -> None:
    # a write lock downgraded becomes a reader: a recursive read of it is then... still a
    # non-recursive reader under lockdep's rules; the downgraded lock reads as held for reading
    assert kinds("T1 acquire S\nT1 downgrade S\nT1 assert-held S read\nT1 release S\n") == []
    assert kinds("T1 acquire S read\nT1 downgrade S\nT1 release S\n") == ["bad-downgrade"]
    assert kinds("T1 downgrade S\n") == ["unlock-imbalance"]


def test_asserts() -> None:
    assert kinds("T1 acquire A\nT1 assert-held A\nT1 assert-held A write\nT1 assert-not-held B\n"
                 "T1 assert-irqs-on\nT1 irqs-off\nT1 assert-irqs-off\n") == []
    assert kinds("T1 assert-held A\n") == ["assertion-failed"]
    assert kinds("T1 acquire A\nT1 assert-not-held A\n") == ["assertion-failed"]
    assert kinds("T1 acquire A read\nT1 assert-held A write\n") == ["assertion-failed"]
    assert kinds("T1 hardirq-enter\nT1 assert-irqs-on\n") == ["assertion-failed"]


def test_task_exit_holding_a_lock() -> None:
    found = check_events(parse("T1 acquire A\nT1 task-exit\n".splitlines()))[0]
    assert [f.kind for f in found] == ["held-at-exit"] and found[0].message == "T1 still has locks held!"
