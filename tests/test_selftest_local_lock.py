"""lib/locking-selftest.c's local_lock rows (`local_lock_tests()`) and lockdep's `usage_skip()`,
and the class comparison function (`lock_set_cmp_fn()`, `cmp=instance`), through every path.

The kernel's expected results: `local_lock inversion 2` and `3A` SUCCESS (a `local_lock_t` is
per CPU: the irq-usage searches pass over it, `usage_skip()`), `3B` FAILURE (the lock_A ->
lock_B dependency itself is HARDIRQ-safe -> HARDIRQ-unsafe).  The selftest's HARDIRQ_ENTER()
calls lockdep_hardirq_threaded(), and local_lock_t is {0:CONFIG}, LD_LOCK_PERCPU.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lockcheck.lockdep.checker import check_events
from lockcheck.readers.lt import parse

from test_wait_context import agreed, every_path

_LOCAL = "wait=config type=percpu"


def _local_lock(lines: list[str], local: str = _LOCAL) -> str:
    """The selftest body as a trace; the first acquisition of local_A carries its class keys."""
    out, keyed = [], False
    for line in lines:
        if line == "acquire local_A" and not keyed:
            line, keyed = f"{line} {local}", True
        elif line.startswith("acquire lock_"):
            line += " wait=config:config"
        out.append(f"T1 {line}")
    return "#lockcheck-trace v1\n" + "\n".join(out) + "\n"


_IN_IRQ = ["irqs-off", "hardirq-enter threaded", "acquire lock_A", "release lock_A", "hardirq-exit", "irqs-on"]
_CYCLE = ["irqs-off", "acquire lock_A", "acquire local_A", "release local_A", "release lock_A", "irqs-on"]
ROWS = {
    "local_lock_2": (["acquire local_A", "release local_A", *_IN_IRQ, *_CYCLE], []),
    "local_lock_3A": (["acquire local_A", "acquire lock_B", "release lock_B", "release local_A", *_IN_IRQ,
                       *_CYCLE], []),
    "local_lock_3B": (["acquire local_A", "acquire lock_B", "release lock_B", "release local_A", *_IN_IRQ,
                       *_CYCLE, "irqs-off", "acquire lock_A", "acquire lock_B", "release lock_B",
                       "release lock_A", "irqs-on"], ["irq-lock-inversion"]),
}


@pytest.mark.parametrize("row", list(ROWS))
def test_local_lock_selftest_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, row: str) -> None:
    lines, expected = ROWS[row]
    assert agreed(every_path(tmp_path, _local_lock(lines), monkeypatch)) == expected


@pytest.mark.parametrize("row", ["local_lock_2", "local_lock_3A"])
def test_without_type_percpu_the_local_lock_is_an_inversion(row: str) -> None:
    """The annotation is what keeps lockdep quiet: without it, the false finding is back."""
    found, _ = check_events(parse(_local_lock(ROWS[row][0], local="wait=config").splitlines()))
    assert [f.kind for f in found] == ["irq-lock-inversion"]


def test_a_percpu_class_below_config_is_lockdeps_warning_and_searched() -> None:
    """usage_skip(): DEBUG_LOCKS_WARN_ON(wait_type_inner < LD_WAIT_CONFIG), and the class is not skipped."""
    found, _ = check_events(parse(_local_lock(ROWS["local_lock_2"][0], local="wait=spin type=percpu").splitlines()))
    kinds = sorted(f.kind for f in found)
    assert kinds == ["irq-lock-inversion", "lockdep-warning"]
    warning = next(f for f in found if f.kind == "lockdep-warning")
    assert warning.message == "DEBUG_LOCKS_WARN_ON(entry->class->wait_type_inner < LD_WAIT_CONFIG)"
    assert warning.lock == "local_A"


def test_an_override_class_is_skipped_too() -> None:
    found, _ = check_events(parse(_local_lock(ROWS["local_lock_2"][0], local="type=override").splitlines()))
    assert found == []


# -- cmp=instance (`lock_set_cmp_fn()`: pipe, af_unix, per-netns RTNL, xfs double locking) --------------

def _double(first: str, second: str, keys: str = " cmp=instance") -> str:
    return ("#lockcheck-trace v1\n"
            f"T1 acquire &pipe->mutex@{first}{keys}\nT1 acquire &pipe->mutex@{second}\n"
            f"T1 release &pipe->mutex@{second}\nT1 release &pipe->mutex@{first}\n")


def test_cmp_instance_in_order_is_no_recursion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert agreed(every_path(tmp_path, _double("0xff10", "0xff20"), monkeypatch)) == []


@pytest.mark.parametrize("first, second, keys", [
    ("0xff20", "0xff10", " cmp=instance"),  # out of order: cmp_fn(prev, next) > 0
    ("0x10", "0x10", " cmp=instance"),  # the same instance: cmp_fn == 0
    ("0xff10", "0xff20", ""),  # no cmp_fn: lockdep's usual rule
])
def test_cmp_instance_otherwise_recursive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first: str,
                                          second: str, keys: str) -> None:
    assert agreed(every_path(tmp_path, _double(first, second, keys), monkeypatch)) == ["recursive-locking"]


def test_cmp_instance_numbers_before_text_and_no_dependency() -> None:
    # 9 < 0x10 as numbers (not as text); the ordered pair adds no A -> A dependency (check_prev_add's return 2)
    found, checker = check_events(parse(_double("9", "0x10").splitlines()))
    assert found == [] and "&pipe->mutex" not in checker.graph.successors("&pipe->mutex")
    found, _ = check_events(parse(_double("0x10", "a").splitlines()))
    assert found == []


def test_cmp_fn_is_the_subclass_0_class_only() -> None:
    text = ("T1 acquire A@1 cmp=instance subclass=1\nT1 acquire A@2 subclass=1\n")
    found, _ = check_events(parse(text.splitlines()))
    assert [f.kind for f in found] == ["recursive-locking"]


# -- lockdep_set_subclass_name_test(): "compare name before and after", SUCCESS -------------------------
# the kernel's test re-initialises rwsem_X1 with subclass 1 and checks the map keeps its name (the
# class is `NAME/1`, no new name); the trace's counterpart is set-subclass on the held rwsem

def test_set_subclass_keeps_the_class_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = ("#lockcheck-trace v1\nT1 acquire &rwsem_X1 write\nT1 set-subclass &rwsem_X1 subclass=1\n"
            "T1 acquire &rwsem_X2 write\nT1 release &rwsem_X2\nT1 release &rwsem_X1\n")
    assert agreed(every_path(tmp_path, text, monkeypatch)) == []
    _, checker = check_events(parse(text.splitlines()))
    assert "&rwsem_X1/1" in checker.graph.nx and "&rwsem_X2" in checker.graph.successors("&rwsem_X1/1")
